"""Clients (business systems and agent hosts) and their shared per-minute rate bucket."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Client(models.Model):
    """A caller (接入方): a business system or an agent host identified by ``app_id``.

    An agent host signs in through Agent Auth v1 when it has a business consent page
    (``agent_authorize_url``) or when ``hub_consent`` lets a signed-in hub user approve on the hub's
    own consent page. ``allowed_routes`` may contain ``"*"`` for every route.

    ``mcp_sign_in`` marks the one agent client that generic MCP clients registering through the
    hub's standard OAuth endpoints sign in as (docs/protocol.md "Standard OAuth sign-in for MCP
    clients"); at most one client has it, and only an agent client may.
    """

    app_id = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    allowed_routes = models.JSONField(default=list, blank=True)
    allowed_channels = models.JSONField(default=list, blank=True)
    rate_limit_per_min = models.PositiveIntegerField(default=60)
    budget = models.JSONField(null=True, blank=True)
    agent_authorize_url = models.CharField(max_length=2048, blank=True, default="")
    hub_consent = models.BooleanField(default=False)
    mcp_sign_in = models.BooleanField(
        default=False,
        help_text="Generic MCP clients that register dynamically sign in as this client.",
    )
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    token_prefix = models.CharField(max_length=16, blank=True, default="", editable=False)
    # A sealed copy (AES-256-GCM, see agent_runtime.secrets_box) beside the hash: the hub must sign
    # approval webhooks and verify signed decisions with the very token the business system holds.
    token_sealed = models.TextField(blank=True, default="", editable=False)
    token_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["app_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["mcp_sign_in"], condition=Q(mcp_sign_in=True), name="one_mcp_sign_in_client"
            ),
            models.CheckConstraint(
                condition=Q(mcp_sign_in=False) | Q(hub_consent=True) | ~Q(agent_authorize_url=""),
                name="mcp_sign_in_agent_client",
            ),
        ]

    def __str__(self) -> str:
        return self.app_id

    def allows_route(self, route_key: str) -> bool:
        return "*" in self.allowed_routes or route_key in self.allowed_routes

    @property
    def is_agent_client(self) -> bool:
        return bool(self.agent_authorize_url) or self.hub_consent


class ClientRateWindow(models.Model):
    """Requests a client made in one fixed minute (its shared ``rate_limit_per_min`` bucket).

    One row per (client, window start), incremented with a single ``INSERT … ON CONFLICT DO UPDATE …
    RETURNING`` so every process and every worker shares one exact count. Old windows are deleted
    opportunistically (see ``agent_runtime.services.rate_limits``).
    """

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="+")
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["client", "window_start"], name="client_rate_window_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.client_id}@{self.window_start:%H:%M}: {self.count}"
