"""OAuth clients: generic MCP clients registered dynamically (RFC 7591) through the hub's standard OAuth
endpoints, or known by their Client ID Metadata Document (an https URL as ``client_id``; docs/protocol.md
"Standard OAuth sign-in for MCP clients").

An OAuth client is only a public identity for the browser sign-in: it signs in *as* the hub's
``mcp_sign_in`` client, through ordinary Agent Auth v1 authorizations and sessions, which remember
the OAuth client that started them so that its code and refresh tokens work for it alone.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import models
from django.utils import timezone

from agent_runtime.models.clients import Client

OAUTH_CLIENT_NAME_MAX = 128
OAUTH_REDIRECT_URIS_MAX = 10
# The longest client metadata document URL accepted as a client_id.
# (The audit ledger's target_id holds 200 characters.)
OAUTH_METADATA_URL_MAX = 200


class OAuthClient(models.Model):
    """One dynamic registration, or one client metadata document. A registration's ``client_id``
    (``bhm_`` + 43 random base64url characters) is public; a metadata document client's is the https
    URL of its document (``metadata_document``), whose name and redirect URIs are copied here each
    time the document is fetched. There is no client secret (public clients only, PKCE S256 always)."""

    client_id = models.CharField(max_length=OAUTH_METADATA_URL_MAX, unique=True, editable=False)
    metadata_document = models.BooleanField(default=False, editable=False)
    # The hub client it signs in as (the ``mcp_sign_in`` client when it registered). Not named
    # ``client``: its column would clash with the OAuth ``client_id`` above.
    hub_client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="oauth_clients")
    client_name = models.CharField(max_length=OAUTH_CLIENT_NAME_MAX)
    redirect_uris = models.JSONField(default=list)
    # "web" or "native" as the client declared it (OpenID Connect Dynamic Client Registration §2);
    # empty when it declared none.
    application_type = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_ip = models.GenericIPAddressField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # When a sign-in of this client first completed: a user approved it on the consent page and the
    # client exchanged the code. Until then its https redirect URIs are only self-asserted, so the
    # authorize endpoint does not send a browser to them with an error (RFC 9700 §4.11.2).
    signed_in_at = models.DateTimeField(null=True, blank=True)
    # When the metadata document was last fetched and found valid (metadata document clients only).
    metadata_fetched_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["created_ip", "created_at"], name="oauth_client_throttle_idx"),
            models.Index(
                fields=["created_at"],
                condition=models.Q(signed_in_at__isnull=True),
                name="oauth_client_pending_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"oauth client {self.client_id} ({self.client_name})"

    @property
    def metadata_host(self) -> str:
        """The host (and port) a metadata document client's document is fetched from; empty otherwise."""
        return urlsplit(self.client_id).netloc if self.metadata_document else ""
