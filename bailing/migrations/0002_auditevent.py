"""The audit ledger moves from the ``approvals`` app to the plumbing (``bailing.audit``), where every app
can record into it. The table, its rows, its append-only trigger and its permissions are kept: the
table and trigger are renamed, and the content type is relabelled so existing permission grants
follow the model."""

import django.utils.timezone
from django.db import migrations, models

RENAME = """
ALTER TABLE approvals_auditevent RENAME TO bailing_auditevent;
ALTER FUNCTION approvals_auditevent_append_only() RENAME TO bailing_auditevent_append_only;
ALTER TRIGGER approvals_auditevent_append_only ON bailing_auditevent RENAME TO bailing_auditevent_append_only;
"""

RENAME_BACK = """
ALTER TRIGGER bailing_auditevent_append_only ON bailing_auditevent RENAME TO approvals_auditevent_append_only;
ALTER FUNCTION bailing_auditevent_append_only() RENAME TO approvals_auditevent_append_only;
ALTER TABLE bailing_auditevent RENAME TO approvals_auditevent;
"""


def relabel_content_type(apps, schema_editor, *, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label=old, model="auditevent").update(app_label=new)


def forwards(apps, schema_editor):
    relabel_content_type(apps, schema_editor, old="approvals", new="bailing")


def backwards(apps, schema_editor):
    relabel_content_type(apps, schema_editor, old="bailing", new="approvals")


class Migration(migrations.Migration):
    dependencies = [
        ("bailing", "0001_vector_extension"),
        ("approvals", "0002_auditevent_append_only"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(RENAME, reverse_sql=RENAME_BACK)],
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("created_at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        (
                            "actor_type",
                            models.CharField(
                                choices=[
                                    ("user", "User"),
                                    ("agent", "Agent"),
                                    ("client", "Client"),
                                    ("system", "System"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("actor", models.CharField(max_length=200)),
                        ("action", models.CharField(db_index=True, max_length=100)),
                        ("client_app_id", models.CharField(blank=True, db_index=True, default="", max_length=64)),
                        ("session_id", models.UUIDField(blank=True, db_index=True, null=True)),
                        ("route_key", models.CharField(blank=True, db_index=True, default="", max_length=128)),
                        ("target_type", models.CharField(blank=True, default="", max_length=64)),
                        ("target_id", models.CharField(blank=True, default="", max_length=200)),
                        ("data", models.JSONField(blank=True, default=dict)),
                        ("prev_hash", models.CharField(max_length=64)),
                        ("content_hash", models.CharField(max_length=64)),
                        ("chain_hash", models.CharField(max_length=64, unique=True)),
                    ],
                    options={
                        "ordering": ["-id"],
                        "permissions": [("verify_auditevent", "Can verify the audit chain")],
                    },
                ),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
