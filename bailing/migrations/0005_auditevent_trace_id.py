"""The OpenTelemetry trace id an audit event was recorded in: a plain column outside the content hash,
so every event (and every export) verifies as before. Adding it fires no row trigger; its database
default keeps inserts that do not name it (raw SQL, older code) valid."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bailing', '0004_auditevent_sealer'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='trace_id',
            field=models.CharField(blank=True, db_default='', default='', max_length=32),
        ),
    ]
