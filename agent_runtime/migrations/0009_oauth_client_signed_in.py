"""``OAuthClient.signed_in_at``: when a sign-in of the client first completed (consent approved, code
exchanged). Registrations that already did are marked from their first consumed authorization, so an
upgrade does not take error redirects away from clients that have proved their redirect URIs in use.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def mark_signed_in(apps, schema_editor):
    OAuthClient = apps.get_model("agent_runtime", "OAuthClient")
    AgentAuthorization = apps.get_model("agent_runtime", "AgentAuthorization")
    first_consumed = (
        AgentAuthorization.objects.filter(
            oauth_client=OuterRef("pk"), status="consumed", consumed_at__isnull=False
        )
        .order_by("consumed_at")
        .values("consumed_at")[:1]
    )
    OAuthClient.objects.filter(signed_in_at__isnull=True).update(signed_in_at=Subquery(first_consumed))


class Migration(migrations.Migration):

    dependencies = [
        ("agent_runtime", "0008_row_versions"),
    ]

    operations = [
        migrations.AddField(
            model_name="oauthclient",
            name="signed_in_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(mark_signed_in, migrations.RunPython.noop),
    ]
