from django.db import migrations, models

# What an MCP sign-in could do before scopes existed: everything (it was told "knowledge:read" yet
# listed and called business tools). Existing OAuth sign-ins keep exactly that; they have no
# recorded resource, so no audience beyond their one allowed route (docs/protocol.md "Audience").
_BEFORE_SCOPES = ["knowledge:read", "tools:read", "tools:call"]


def backfill(apps, schema_editor):
    for name in ("AgentAuthorization", "AgentSession"):
        model = apps.get_model("agent_runtime", name)
        model.objects.filter(oauth_client__isnull=False, scopes__isnull=True).update(scopes=_BEFORE_SCOPES)


class Migration(migrations.Migration):
    dependencies = [
        ("agent_runtime", "0012_approval_withdrawn"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentauthorization",
            name="scopes",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="agentauthorization",
            name="resource",
            field=models.CharField(blank=True, default="", max_length=2048),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="scopes",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="agentsession",
            name="resource",
            field=models.CharField(blank=True, default="", max_length=2048),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
