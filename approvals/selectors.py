"""Reads of the operators' app: the approvals inbox, tool-call traces and their counts."""

from __future__ import annotations

from django.db.models import Case, IntegerField, QuerySet, Value, When

from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from bailing.audit.models import AuditEvent


def approvals_pending_count() -> int:
    return ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).count()


def approvals_pending_oldest(limit: int) -> list[ToolApproval]:
    """The ``limit`` pending approvals that have waited longest (oldest request first)."""
    return list(
        ToolApproval.objects.filter(status=ToolApproval.Status.PENDING)
        .select_related("invocation__client")
        .only("id", "tool", "route_key", "subject", "created_at", "expires_at", "invocation__client__app_id")
        .order_by("created_at", "id")[:limit]
    )


def approvals_inbox() -> QuerySet[ToolApproval]:
    """Every approval, pending first, newest first within each group."""
    pending_first = Case(
        When(status=ToolApproval.Status.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
    )
    return (
        ToolApproval.objects.select_related("invocation__client", "invocation__session")
        .annotate(pending_first=pending_first)
        .order_by("pending_first", "-created_at", "-id")
    )


def invocations_unresolved_count() -> int:
    """Calls whose outcome is unknown and no operator resolved yet."""
    return (
        ToolInvocation.objects.filter(status=ToolInvocation.Status.RECONCILIATION_REQUIRED)
        .exclude(journal__resolution__in=ToolCallJournal.Resolution.values)
        .count()
    )


def invocations_list() -> QuerySet[ToolInvocation]:
    return ToolInvocation.objects.select_related("client", "journal", "approval").order_by(
        "-created_at", "-id"
    )


def invocation_trace_events(invocation: ToolInvocation) -> QuerySet[AuditEvent]:
    """The ledger's milestones of one call: the invocation's own and its approval's, in order."""
    approval_id = ToolApproval.objects.filter(invocation=invocation).values_list("pk", flat=True).first()
    events = AuditEvent.objects.filter(target_type="tool_invocation", target_id=str(invocation.job_id))
    if approval_id is not None:
        events = events | AuditEvent.objects.filter(target_type="tool_approval", target_id=str(approval_id))
    return events.order_by("id")
