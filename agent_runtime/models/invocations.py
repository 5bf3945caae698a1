"""Governed tool invocations: the invocation an agent asked for, its execution journal, the human
approval it may wait for, the approval's notifications, and the rate buckets that pace dispatch.

The invocation is the unit of idempotency (one per agent session and ``invocation_id``); the journal
row is written and committed *before* a business request leaves the hub, so an attempt whose outcome
never came back is visible as such forever (docs/protocol.md "Execution journal"); the approval binds
a human decision to the exact arguments by their ``args_hash``.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from agent_runtime.models.auth import AgentSession
from agent_runtime.models.clients import Client
from agent_runtime.models.routes import Route
from agent_runtime.models.runs import AgentRun
from bailing.api.limits import SHORT_TEXT_MAX_CHARS


class ToolInvocation(models.Model):
    """One governed call of a business tool by an agent session (``bailing.agent-tool-invocation.v1``).

    ``status`` follows the result states an agent sees, plus ``dispatching`` while (or if) a business
    request is in flight. ``result`` is the stable public result, returned verbatim on replay. The
    arguments are kept sealed (AES-256-GCM, bound to ``job_id``) so an approved call can be sent later
    exactly as it was frozen; ``args_hash`` pins them, ``argument_keys`` is what audit and lists show.
    """

    class Status(models.TextChoices):
        AWAITING_APPROVAL = "awaiting_approval"
        DISPATCHING = "dispatching"
        EXECUTED = "executed"
        BUSINESS_REJECTED = "business_rejected"
        RECONCILIATION_REQUIRED = "reconciliation_required"
        DENIED = "denied"
        REJECTED_BEFORE_DISPATCH = "rejected_before_dispatch"

    job_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    request_id = models.CharField(max_length=128, unique=True)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="invocations")
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="invocations")
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="invocations")
    route_key = models.CharField(max_length=128)
    run = models.ForeignKey(
        AgentRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="invocations"
    )
    invocation_id = models.CharField(max_length=64)
    tool = models.CharField(max_length=64)
    provider = models.CharField(max_length=64)
    scope = models.CharField(max_length=SHORT_TEXT_MAX_CHARS)
    risk = models.CharField(max_length=8)
    readonly = models.BooleanField()
    idempotent = models.BooleanField()
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    request_hash = models.CharField(max_length=64)
    args_hash = models.CharField(max_length=64)
    arguments_sealed = models.TextField(editable=False)
    argument_keys = models.JSONField(default=list)
    capability_revision = models.CharField(max_length=64)
    execution_fingerprint = models.CharField(max_length=64)
    on_behalf_of = models.CharField(max_length=SHORT_TEXT_MAX_CHARS, blank=True, default="")
    status = models.CharField(max_length=32, choices=Status.choices)
    reason_code = models.CharField(max_length=64, blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    business_status = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["session", "invocation_id"], name="tool_invocation_unique_id"),
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="tool_invocation_run_idx"),
            models.Index(fields=["session", "route_key", "status"], name="tool_invocation_session_idx"),
            models.Index(fields=["status", "-created_at"], name="tool_invocation_status_idx"),
        ]

    def __str__(self) -> str:
        return f"invocation {self.invocation_id[:12]} {self.tool} ({self.status})"

    def audit_target(self) -> dict[str, str]:
        """The ``route_key``, ``target_type`` and ``target_id`` of every audit event about this
        invocation: the runtime's milestones and an operator's reconciliation alike."""
        return {
            "route_key": self.route_key,
            "target_type": "tool_invocation",
            "target_id": str(self.job_id),
        }


class ToolCallJournal(models.Model):
    """The execution journal of one invocation's business request (docs/protocol.md "Execution journal").

    ``dispatching`` is committed before the request leaves; ``response_recorded`` once a complete
    response is stored; ``completed`` once the invocation's result is final. ``uncertain`` marks an
    attempt whose outcome is unknown (timeout, lost connection, unreadable body, a worker that died
    mid-call): it is never sent again. An operator may resolve it after checking the business system
    (``resolution`` executed / not_executed, with evidence); the agent's next resume replays that.

    Under a workspace data policy that applies to tool results (docs/data-policy.md "At rest"),
    ``text`` holds the answer as the policy released it and ``text_sealed`` the raw answer, sealed
    (AES-256-GCM, bound to the invocation's ``job_id``); ``data_policy`` is the policy's
    ``{"action", "findings"}`` counts of that answer (None when nothing was found). Without a
    policy ``text`` is the raw answer and ``text_sealed`` is empty, as before.
    """

    class State(models.TextChoices):
        DISPATCHING = "dispatching"
        RESPONSE_RECORDED = "response_recorded"
        COMPLETED = "completed"
        UNCERTAIN = "uncertain"
        EVIDENCE_DEGRADED = "evidence_degraded"

    class Resolution(models.TextChoices):
        EXECUTED = "executed"
        NOT_EXECUTED = "not_executed"

    invocation = models.OneToOneField(ToolInvocation, on_delete=models.CASCADE, related_name="journal")
    state = models.CharField(max_length=24, choices=State.choices, default=State.DISPATCHING)
    idempotency_key = models.CharField(max_length=64)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    ok = models.BooleanField(null=True, blank=True)
    text = models.TextField(blank=True, default="")
    text_sealed = models.TextField(blank=True, default="", editable=False)
    data_policy = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=64, blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    response_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=16, choices=Resolution.choices, blank=True, default="")
    resolution_evidence = models.TextField(blank=True, default="")
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        permissions = [
            ("resolve_toolcalljournal", "Can resolve an uncertain tool call"),
            ("reveal_toolcalljournal", "Can reveal a business answer sealed by the data policy"),
        ]

    def __str__(self) -> str:
        return f"journal of {self.invocation_id} ({self.state})"


class ToolApproval(models.Model):
    """A human decision bound to one invocation's exact arguments (``args_hash``).

    ``intent`` is the complete ``bailing.approval-intent.v1`` snapshot the approver saw; ``args`` the
    complete argument snapshot. ``pending`` → ``approved`` | ``denied`` (| ``expired`` when an
    approval lifetime is configured; expired acts as denied); ``pending`` or ``approved`` (not yet
    consumed) → ``withdrawn`` when the calling agent withdraws the call (``withdrawn_at``; an MCP
    ``tasks/cancel``), which also acts as denied. ``consumed_at`` is set, atomically and
    once, when the approved arguments are dispatched. The id is a positive integer: business systems
    match ``\\d+`` and send numbers.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        EXPIRED = "expired"
        WITHDRAWN = "withdrawn"

    invocation = models.OneToOneField(ToolInvocation, on_delete=models.CASCADE, related_name="approval")
    job_id = models.UUIDField()
    request_id = models.CharField(max_length=128)
    route_key = models.CharField(max_length=128)
    provider = models.CharField(max_length=64)
    tool = models.CharField(max_length=64)
    scope = models.CharField(max_length=SHORT_TEXT_MAX_CHARS)
    risk = models.CharField(max_length=8)
    policy = models.CharField(max_length=32)
    reason = models.CharField(max_length=500)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=2048)
    summary = models.TextField(blank=True, default="")
    subject = models.CharField(max_length=SHORT_TEXT_MAX_CHARS, blank=True, default="")
    args = models.JSONField()
    args_hash = models.CharField(max_length=64)
    args_bytes = models.PositiveIntegerField()
    intent = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    decision_id = models.CharField(max_length=128, unique=True, null=True, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    decided_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_source = models.CharField(max_length=32, blank=True, default="")
    decision_comment = models.TextField(blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    consumed_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "-created_at"], name="tool_approval_status_idx")]
        permissions = [("decide_toolapproval", "Can approve or deny a tool call")]

    def __str__(self) -> str:
        return f"approval #{self.pk} {self.tool} ({self.status})"

    def is_due(self, now: datetime | None = None) -> bool:
        """Pending past its expiry (``BAILING_APPROVAL_TTL_SECONDS``): it acts as expired."""
        return (
            self.status == self.Status.PENDING
            and self.expires_at is not None
            and self.expires_at <= (now or timezone.now())
        )


class ApprovalNotification(models.Model):
    """One notification of a new approval to the route's approval channel (a business webhook).

    Delivery happens after the approval committed, outside any transaction, with retries; its
    outcome is recorded here so the console shows a failed notification. It never blocks the call.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"
        SKIPPED = "skipped"

    approval = models.ForeignKey(ToolApproval, on_delete=models.CASCADE, related_name="notifications")
    channel = models.CharField(max_length=64)
    url = models.CharField(max_length=2048, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_http_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=64, blank=True, default="")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"notification of approval #{self.approval_id} ({self.status})"


class RateBucket(models.Model):
    """Requests counted in one fixed window under a key (``tool:<provider>:<tool>:<window>``,
    ``provider:<name>``): one atomic upsert per check, shared by every worker and host."""

    key = models.CharField(max_length=200)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window_start"], name="rate_bucket_unique")]
        indexes = [models.Index(fields=["window_start"], name="rate_bucket_window_idx")]

    def __str__(self) -> str:
        return f"{self.key}@{self.window_start:%H:%M:%S}: {self.count}"
