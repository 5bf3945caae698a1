"""Agent Auth v1: browser authorizations, agent sessions and the refresh-token rotation ledger.

Secrets (authorization codes, access and refresh tokens) are stored only as SHA-256 hex digests; the
plaintext exists once, in the response that hands it out."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agent_runtime.models.clients import Client
from bailing.api.limits import SHORT_TEXT_MAX_CHARS


class AgentAuthorization(models.Model):
    """One browser authorization request of Agent Auth v1 (docs/protocol.md "Agent sign-in and consent").

    ``pending`` → ``approved`` → ``consumed``, or ``pending`` → ``denied`` / ``expired``. The
    one-time code exists only as ``code_hash``.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        CONSUMED = "consumed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_authorizations")
    redirect_uri = models.CharField(max_length=2048)
    state_value = models.TextField()
    requested_routes = models.JSONField(default=list)
    device_label = models.CharField(max_length=128)
    code_challenge = models.CharField(max_length=43)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    principal = models.JSONField(null=True, blank=True)
    on_behalf_of = models.CharField(max_length=SHORT_TEXT_MAX_CHARS, blank=True, default="")
    allowed_routes = models.JSONField(null=True, blank=True)
    subject_display = models.JSONField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    code_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    code_expires_at = models.DateTimeField(null=True, blank=True)
    session = models.OneToOneField(
        "AgentSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="authorization"
    )
    created_ip = models.GenericIPAddressField(null=True, blank=True)
    # The OAuth client (standard MCP sign-in) that started this sign-in, or None for an Agent Auth v1
    # sign-in. Its code and refresh tokens work only for that OAuth client. RESTRICT, not SET_NULL
    # (clearing it would turn a bound sign-in into an unbound one that the v1 front door accepts)
    # and not CASCADE (deleting a registration would delete sessions with their runs and tool-call
    # journals): a registration with sign-ins cannot be deleted on its own, only with its Client.
    oauth_client = models.ForeignKey(
        "OAuthClient", null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    # A standard OAuth sign-in's granted scopes (agent_runtime.identity.SCOPES, closed over what they
    # imply) and its RFC 8707 resource (the ``<public URL>/mcp/<route>`` its token is for); None and ""
    # for an Agent Auth v1 sign-in, whose session has the whole agent surface and no audience.
    scopes = models.JSONField(null=True, blank=True)
    resource = models.CharField(max_length=2048, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["client", "created_ip", "created_at"], name="agent_authz_throttle_idx")
        ]
        permissions = [("consent_agentauthorization", "Can approve an agent sign-in for themselves")]

    def __str__(self) -> str:
        return f"authorization {self.id} ({self.status})"


class AgentSession(models.Model):
    """A signed-in local agent (docs/protocol.md "Tokens and lifetimes").

    Only the current access token is valid (``access_token_hash``). ``refresh_expires_at`` is fixed
    at login: refreshing never extends the session's absolute lifetime.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_sessions")
    device_label = models.CharField(max_length=128)
    principal = models.JSONField(default=dict)
    on_behalf_of = models.CharField(max_length=SHORT_TEXT_MAX_CHARS)
    allowed_routes = models.JSONField(default=list)
    subject_display = models.JSONField(null=True, blank=True)
    access_token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    access_expires_at = models.DateTimeField()
    refresh_expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=200, blank=True, default="")
    revoke_reason = models.CharField(max_length=64, blank=True, default="")
    # See AgentAuthorization.oauth_client: copied from the authorization at the code exchange.
    oauth_client = models.ForeignKey(
        "OAuthClient", null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    # See AgentAuthorization.scopes and .resource: copied at the code exchange, never changed after
    # (a refresh keeps them; docs/protocol.md "Scopes" and "Audience").
    scopes = models.JSONField(null=True, blank=True)
    resource = models.CharField(max_length=2048, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"agent session {self.id}"

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.refresh_expires_at <= timezone.now():
            return "expired"
        return "active"


class AgentRefreshToken(models.Model):
    """Refresh-token rotation ledger (docs/protocol.md "Refresh replay"); at most one ``active`` token
    per session."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        USED = "used"
        REPLAYED = "replayed"
        REVOKED = "revoked"

    token_hash = models.CharField(max_length=64, primary_key=True)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="refresh_tokens")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session"], condition=Q(status="active"), name="one_active_refresh_per_session"
            )
        ]

    def __str__(self) -> str:
        return f"refresh token of {self.session_id} ({self.status})"
