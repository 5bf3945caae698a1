"""The audit ledger now belongs to the plumbing app (``bailing`` 0002 renames its table): only the
model state leaves this app; no table is dropped."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0002_auditevent_append_only"),
        ("bailing", "0002_auditevent"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="AuditEvent")],
        ),
    ]
