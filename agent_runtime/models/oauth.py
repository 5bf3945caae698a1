"""OAuth clients: generic MCP clients registered dynamically (RFC 7591) through the hub's standard OAuth
endpoints (docs/protocol.md "Standard OAuth sign-in for MCP clients").

An OAuth client is only a public identity for the browser sign-in: it signs in *as* the hub's
``mcp_sign_in`` client, through ordinary Agent Auth v1 authorizations and sessions, which remember
the OAuth client that started them so that its code and refresh tokens work for it alone.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from agent_runtime.models.clients import Client

OAUTH_CLIENT_NAME_MAX = 128
OAUTH_REDIRECT_URIS_MAX = 10


class OAuthClient(models.Model):
    """One dynamic registration. ``client_id`` (``bhm_`` + 43 random base64url characters) is public;
    there is no client secret (public clients only, PKCE S256 always)."""

    client_id = models.CharField(max_length=64, unique=True, editable=False)
    # The hub client it signs in as (the ``mcp_sign_in`` client when it registered). Not named
    # ``client``: its column would clash with the OAuth ``client_id`` above.
    hub_client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="oauth_clients")
    client_name = models.CharField(max_length=OAUTH_CLIENT_NAME_MAX)
    redirect_uris = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_ip = models.GenericIPAddressField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # When a sign-in of this client first completed: a user approved it on the consent page and the
    # client exchanged the code. Until then its https redirect URIs are only self-asserted, so the
    # authorize endpoint does not send a browser to them with an error (RFC 9700 §4.11.2).
    signed_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["created_ip", "created_at"], name="oauth_client_throttle_idx")]

    def __str__(self) -> str:
        return f"oauth client {self.client_id} ({self.client_name})"
