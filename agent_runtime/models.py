"""Shared ORM models: clients, routes (workspaces), Agent Auth v1 authorizations, sessions, tokens.

``knowledge`` and ``approvals`` reference these by foreign key but keep their own logic. Secrets
(Client Tokens, authorization codes, access and refresh tokens) are stored only as SHA-256 hex
digests; the plaintext exists once, in the response that hands it out.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Client(models.Model):
    """A caller (接入方): a business system or an agent host identified by ``app_id``.

    An agent host signs in through Agent Auth v1 when it has a business consent page
    (``agent_authorize_url``) or when ``hub_consent`` lets a signed-in hub user approve on the hub's
    own consent page. ``allowed_routes`` may contain ``"*"`` for every route.
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
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    token_prefix = models.CharField(max_length=16, blank=True, default="", editable=False)
    token_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["app_id"]

    def __str__(self) -> str:
        return self.app_id

    def allows_route(self, route_key: str) -> bool:
        return "*" in self.allowed_routes or route_key in self.allowed_routes

    @property
    def is_agent_client(self) -> bool:
        return bool(self.agent_authorize_url) or self.hub_consent


class Route(models.Model):
    """A route; for agents, a workspace (research §A.2.7).

    The JSON blocks are stored as validated by ``agent_runtime.config`` (defaults are applied when
    read, see ``agent_runtime.config.route_effective``). ``run_config`` keeps the ``/run``-only
    fields of the upstream route schema so exported configs round-trip; agent surfaces never read it.
    """

    class Permission(models.TextChoices):
        READONLY = "readonly"
        READWRITE = "readwrite"
        FULL = "full"

    route_key = models.CharField(max_length=128, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    target = models.CharField(max_length=64, default="llm")
    target_config = models.JSONField(default=dict, blank=True)
    permission = models.CharField(max_length=16, choices=Permission.choices, null=True, blank=True)
    audience = models.JSONField(default=dict, blank=True)
    memory = models.JSONField(default=dict, blank=True)
    knowledge = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=dict, blank=True)
    agent_client = models.JSONField(default=dict, blank=True)
    run_config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["route_key"]

    def __str__(self) -> str:
        return self.route_key


class AgentAuthorization(models.Model):
    """One browser authorization request of Agent Auth v1 (research §A.2.4, §B.1).

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
    on_behalf_of = models.CharField(max_length=191, blank=True, default="")
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
    """A signed-in local agent (research §A.2.5).

    Only the current access token is valid (``access_token_hash``). ``refresh_expires_at`` is fixed
    at login: refreshing never extends the session's absolute lifetime.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_sessions")
    device_label = models.CharField(max_length=128)
    principal = models.JSONField(default=dict)
    on_behalf_of = models.CharField(max_length=191)
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
    """Refresh-token rotation ledger (research §A.2.6); at most one ``active`` token per session."""

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


class ToolProvider(models.Model):
    """A business system whose OpenAPI + ACC spec the hub compiles into tools (research §A.2.9).

    The spec comes from a URL on the provider (``spec_source="url"``, fetched with a signed GET and,
    under ``signed_required``, negative probes) or inline from config. ``spec_json`` always holds the
    last spec that compiled: a failed refresh records why in ``last_refresh_*`` and keeps it. The HMAC
    secret is stored only encrypted (``secret_encrypted``, see ``agent_runtime.secrets_box``).
    """

    class SpecSource(models.TextChoices):
        URL = "url"
        INLINE = "inline"

    class AccessPolicy(models.TextChoices):
        SIGNED_REQUIRED = "signed_required"
        PUBLIC_ALLOWED = "public_allowed"

    name = models.CharField(max_length=64, unique=True)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    base_url = models.CharField(max_length=2048)
    spec_source = models.CharField(max_length=8, choices=SpecSource.choices, default=SpecSource.URL)
    spec_url = models.CharField(max_length=2048, blank=True, default="/.well-known/bailing/tools.json")
    spec_inline = models.JSONField(null=True, blank=True)
    spec_access_policy = models.CharField(
        max_length=16, choices=AccessPolicy.choices, default=AccessPolicy.SIGNED_REQUIRED
    )
    secret_encrypted = models.TextField(blank=True, default="", editable=False)
    secret_set_at = models.DateTimeField(null=True, blank=True, editable=False)
    timeout_ms = models.PositiveIntegerField(default=10000)
    rate_limit_per_min = models.PositiveIntegerField(default=120)
    auto_refresh_min = models.PositiveIntegerField(default=0)
    # Last good spec and what compiling it said.
    spec_json = models.JSONField(null=True, blank=True, editable=False)
    spec_sha256 = models.CharField(max_length=64, blank=True, default="", editable=False)
    spec_refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    compile_warnings = models.JSONField(default=list, blank=True, editable=False)
    # The most recent refresh attempt, successful or not.
    last_refresh_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_refresh_status = models.CharField(max_length=16, default="never", editable=False)
    last_refresh_error = models.CharField(max_length=500, blank=True, default="", editable=False)
    access_probe = models.JSONField(default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProviderTool(models.Model):
    """One compiled tool of a provider's last good spec.

    ``compiled`` is ``CompiledTool.as_dict()``; the projection, guidance, fingerprint and material
    digest are derived from it when the spec is stored, so reads never recompile. Rows are replaced
    as a set whenever a refresh succeeds.
    """

    provider = models.ForeignKey(ToolProvider, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    scope = models.CharField(max_length=191)
    risk = models.CharField(max_length=8)
    readonly = models.BooleanField()
    idempotent = models.BooleanField()
    approval_required = models.BooleanField()
    requires_subject = models.BooleanField()
    compiled = models.JSONField()
    projection = models.JSONField()
    usage_guidance = models.JSONField()
    execution_fingerprint = models.CharField(max_length=64)
    material_digest = models.CharField(max_length=64)
    warnings = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["provider_id", "name"]
        constraints = [models.UniqueConstraint(fields=["provider", "name"], name="provider_tool_unique_name")]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.name}"


# --- Agent Client Runtime v1: conversations, runs and the visible ledger (research §A.2.12) ----------


class AgentConversation(models.Model):
    """Maps a local agent's ``client_conversation_id`` to the hub's own conversation thread.

    The agent names its conversations; the hub keys them per (session, route) so two sessions, or
    one session in two workspaces, can never read each other's memory even with the same local id.
    The row is the anchor of the visible ledger (:class:`VisibleMessage`) from which turn memory is
    assembled; its UUID is what ``memory_refs[].thread_id`` exposes.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="conversations")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_conversations")
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="agent_conversations")
    client_conversation_id = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "route", "client_conversation_id"], name="agent_conversation_unique_key"
            )
        ]

    def __str__(self) -> str:
        return f"conversation {self.client_conversation_id} ({self.id})"


class AgentRun(models.Model):
    """One agent turn: the frozen context the hub handed out, then the agent's completion.

    ``preparing`` → ``context_ready`` (``context_body`` frozen) → ``completed`` / ``failed`` /
    ``cancelled``. A turn is prepared inside one transaction, so a ``preparing`` row is never visible
    to another request. ``context_body`` keeps the exact response bytes: an idempotent replay returns
    them unchanged, even after the route's instructions or tools changed. The three unique keys make
    idempotency hold in the database under concurrency (turn key, user message id, assistant
    message id); ``request_hash`` and ``completion_hash`` tell a replay from a conflicting reuse.
    """

    class Status(models.TextChoices):
        PREPARING = "preparing"
        CONTEXT_READY = "context_ready"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    run_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="runs")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="agent_runs")
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="agent_runs")
    conversation = models.ForeignKey(AgentConversation, on_delete=models.CASCADE, related_name="runs")
    client_turn_id = models.CharField(max_length=128)
    user_message_id = models.CharField(max_length=128)
    request_hash = models.CharField(max_length=64)
    user_input = models.TextField()
    knowledge_delivery = models.CharField(max_length=16, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PREPARING)
    context_body = models.TextField(blank=True, default="")
    profile_revision = models.CharField(max_length=64, blank=True, default="")
    capability_revision = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    context_ready_at = models.DateTimeField(null=True, blank=True)
    # Completion: written once, under the run's row lock; immutable afterwards.
    assistant_message_id = models.CharField(max_length=128, null=True, blank=True)
    completion_hash = models.CharField(max_length=64, blank=True, default="")
    final_content = models.TextField(null=True, blank=True)
    model = models.CharField(max_length=191, null=True, blank=True)
    runtime = models.CharField(max_length=191, null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "route", "conversation", "client_turn_id"], name="agent_run_unique_turn"
            ),
            models.UniqueConstraint(
                fields=["session", "route", "user_message_id"], name="agent_run_unique_user_message"
            ),
            models.UniqueConstraint(
                fields=["session", "route", "assistant_message_id"],
                condition=Q(assistant_message_id__isnull=False),
                name="agent_run_unique_assistant_message",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} ({self.status})"


class VisibleMessage(models.Model):
    """A message both sides saw: the user's input (``in``) or the agent's final answer (``out``).

    This is the conversation ledger memory is built from. The user message is appended when the
    turn's context is frozen (after memory was read, so a message never appears in its own memory);
    the assistant message when the run completes. Hidden reasoning never reaches this table. One
    message per run and direction keeps a replayed turn or completion from duplicating history.
    """

    class Direction(models.TextChoices):
        IN = "in"
        OUT = "out"

    conversation = models.ForeignKey(AgentConversation, on_delete=models.CASCADE, related_name="messages")
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="messages")
    direction = models.CharField(max_length=3, choices=Direction.choices)
    external_message_id = models.CharField(max_length=128)
    content = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["conversation_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "direction"], name="visible_message_one_per_direction")
        ]
        indexes = [
            models.Index(fields=["conversation", "-created_at", "-id"], name="visible_message_recent_idx")
        ]

    def __str__(self) -> str:
        return f"{self.direction} message {self.external_message_id}"


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
