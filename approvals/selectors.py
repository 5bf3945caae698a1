"""Reads of the operators' app: the approvals inbox, tool-call traces, the audit history and their
counts. Nothing here writes; the console checks the model permissions before it calls these."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from agent_runtime.models import (
    AgentSession,
    ApprovalNotification,
    Client,
    ToolApproval,
    ToolCallJournal,
    ToolInvocation,
)
from bailing.api.timefmt import utc_iso
from bailing.audit.models import AuditEvent
from bailing.db.queries import filter_by

APPROVAL_STATE_SCHEMA = "bailing.approval-state.v1"


def approvals_pending_count() -> int:
    return ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).count()


def approvals_pending_oldest(limit: int) -> list[ToolApproval]:
    """The ``limit`` pending approvals that have waited longest (oldest request first)."""
    return list(
        ToolApproval.objects.filter(status=ToolApproval.Status.PENDING)
        .select_related("invocation__client")
        .only(
            "id",
            "tool",
            "route_key",
            "summary",
            "method",
            "path",
            "subject",
            "created_at",
            "expires_at",
            "invocation__client__app_id",
        )
        .order_by("created_at", "id")[:limit]
    )


def approvals_inbox(*, filters: Mapping[str, Any] | None = None) -> QuerySet[ToolApproval]:
    """Approvals, pending first, newest first within each group. ``filters``: ``status``, ``route``
    (route key) and ``tool``."""
    pending_first = Case(
        When(status=ToolApproval.Status.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
    )
    return filter_by(
        ToolApproval.objects.select_related("invocation__client", "invocation__session")
        .annotate(pending_first=pending_first)
        .order_by("pending_first", "-created_at", "-id"),
        filters,
        {"status": "status", "route": "route_key", "tool": "tool"},
    )


def approval_status_counts() -> dict[str, int]:
    """How many approvals are in each status (every status, zero included), in one query."""
    counts = {status: 0 for status in ToolApproval.Status.values}
    counts.update(
        ToolApproval.objects.order_by().values("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    return counts


def approval_get(*, approval_id: int) -> ToolApproval | None:
    """One approval with its invocation's client, agent session and run."""
    return (
        ToolApproval.objects.select_related("invocation__client", "invocation__session", "invocation__run")
        .filter(pk=approval_id)
        .first()
    )


def approval_owner_client(*, approval_id: int) -> Client | None:
    """The client whose invocation asked for approval ``approval_id`` (it holds the token a business
    system signs with), or None for an unknown approval."""
    approval = ToolApproval.objects.select_related("invocation__client").filter(pk=approval_id).first()
    return approval.invocation.client if approval is not None else None


def _decision_source(stored: str) -> str | None:
    """``console`` or ``business`` (how the business authenticated stays the hub's: the ledger has it)."""
    return stored.partition(":")[0] or None


def approval_state_get(*, approval_id: int, client_id: int) -> dict[str, Any] | None:
    """Where approval ``approval_id`` of one of ``client_id``'s invocations stands, as
    ``GET /approvals/<id>`` answers it (``bailing.approval-state.v1``, docs/protocol.md "Approval
    state"), or None when there is no such approval for that client.

    A pending approval past its expiry reads as ``expired`` (what a decision or a resume would find);
    nothing is written here. Only identifiers, the status and who decided where and when: never the
    arguments, the comment or anything the business system did not already receive."""
    approval = (
        ToolApproval.objects.filter(pk=approval_id, invocation__client_id=client_id)
        .only(
            "id",
            "job_id",
            "request_id",
            "args_hash",
            "status",
            "decision_id",
            "decided_by",
            "decision_source",
            "decided_at",
            "expires_at",
        )
        .first()
    )
    if approval is None:
        return None
    status = ToolApproval.Status.EXPIRED if approval.is_due(timezone.now()) else approval.status
    decided = status in (ToolApproval.Status.APPROVED, ToolApproval.Status.DENIED)
    return {
        "schema_version": APPROVAL_STATE_SCHEMA,
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
        "status": str(status),
        "decided_by": (approval.decided_by or None) if decided else None,
        "decided_at": utc_iso(approval.decided_at) if decided else None,
        "decision_source": _decision_source(approval.decision_source) if decided else None,
        "decision_id": approval.decision_id if decided else None,
        "expires_at": utc_iso(approval.expires_at),
    }


def approval_notifications(*, approval: ToolApproval) -> list[ApprovalNotification]:
    """The approval's notifications, oldest first."""
    return list(approval.notifications.order_by("created_at", "id"))


def approval_notification_get(*, approval_id: int, notification_id: int) -> ApprovalNotification | None:
    """One notification of the approval ``approval_id`` (None when it belongs to another one)."""
    return ApprovalNotification.objects.filter(pk=notification_id, approval_id=approval_id).first()


def invocations_unresolved_count() -> int:
    """Calls whose outcome is unknown and no operator resolved yet."""
    return (
        ToolInvocation.objects.filter(status=ToolInvocation.Status.RECONCILIATION_REQUIRED)
        .exclude(journal__resolution__in=ToolCallJournal.Resolution.values)
        .count()
    )


def invocations_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[ToolInvocation]:
    """Tool calls with their client, journal and approval, newest first. ``filters``: ``state``,
    ``route`` (route key), ``tool``, ``session`` and ``run`` (ids)."""
    return filter_by(
        ToolInvocation.objects.select_related("client", "journal", "approval").order_by("-created_at", "-id"),
        filters,
        {"state": "status", "route": "route_key", "tool": "tool", "session": "session_id", "run": "run_id"},
    )


def invocation_get(*, job_id: uuid.UUID) -> ToolInvocation | None:
    """One tool call with its client, agent session, run, journal and approval (its trace page)."""
    return (
        ToolInvocation.objects.select_related("client", "session", "run", "journal", "approval")
        .filter(job_id=job_id)
        .first()
    )


def invocation_trace_events(invocation: ToolInvocation) -> QuerySet[AuditEvent]:
    """The ledger's milestones of one call: the invocation's own and its approval's, in order."""
    approval_id = ToolApproval.objects.filter(invocation=invocation).values_list("pk", flat=True).first()
    events = AuditEvent.objects.filter(target_type="tool_invocation", target_id=str(invocation.job_id))
    if approval_id is not None:
        events = events | AuditEvent.objects.filter(target_type="tool_approval", target_id=str(approval_id))
    return events.order_by("id")


# --- audit history --------------------------------------------------------------------------------------
AUDIT_FILTERS = {
    "actor": "actor",
    "action": "action__startswith",
    "session": "session_id",
    "route": "route_key",
    "since": "created_at__gte",
    "until": "created_at__lte",
}


def audit_event_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[AuditEvent]:
    """Audit events, newest first. ``filters``: ``actor``, ``action`` (prefix), ``session``,
    ``route``, ``since`` / ``until`` (times) and ``client`` (App ID): the same client the console's
    Client column shows (:func:`audit_event_clients`), so following its link lists every row that
    showed it."""
    filters = filters or {}
    queryset = filter_by(AuditEvent.objects.order_by("-id"), filters, AUDIT_FILTERS)
    app_id = filters.get("client")
    if app_id:
        queryset = queryset.filter(
            Q(client_app_id=app_id)
            | Q(client_app_id="", target_type="client", target_id=app_id)
            | Q(
                client_app_id="",
                session_id__in=AgentSession.objects.filter(client__app_id=app_id).values("id"),
            )
        )
    return queryset


def audit_event_get(*, event_id: int) -> AuditEvent | None:
    return AuditEvent.objects.filter(pk=event_id).first()


def audit_event_clients(events: Iterable[AuditEvent]) -> dict[int, str]:
    """Event id → the App ID of the client the event concerns, for every event that has one: its
    recorded ``client_app_id``, else the client it targets, else the client of its agent session
    (events written by a user or the system about a session name the session, not always its
    client). The sessions of one page are read in one query."""
    events = list(events)
    session_ids = {event.session_id for event in events if event.session_id and not event.client_app_id}
    session_clients = dict(
        AgentSession.objects.filter(pk__in=session_ids).values_list("id", "client__app_id")
        if session_ids
        else []
    )
    found = {}
    for event in events:
        app_id = event.client_app_id
        if not app_id and event.target_type == "client":
            app_id = event.target_id
        if not app_id and event.session_id:
            app_id = session_clients.get(event.session_id, "")
        if app_id:
            found[event.id] = app_id
    return found


def audit_events_since_count(*, since: datetime) -> int:
    return AuditEvent.objects.filter(created_at__gte=since).count()
