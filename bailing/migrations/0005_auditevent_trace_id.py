"""The OpenTelemetry trace id an audit event was recorded in: a plain column outside the content hash,
so every event (and every export) verifies as before. Adding it fires no row trigger."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('bailing', '0004_auditevent_sealer'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditevent',
            name='trace_id',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
    ]
