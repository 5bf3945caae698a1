"""Writing what became of an invocation: its audit milestones and the states it ends in without a
business answer (refused before dispatch, awaiting approval, denied, unknown, reconciled). Each
writer owns its transaction and records its audit events in it."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent_runtime import errors
from agent_runtime.identity import AgentIdentity
from agent_runtime.invocation_results import TEXT_UNKNOWN
from agent_runtime.models import ToolCallJournal, ToolInvocation
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.services.approval_requests import approval_request_create
from agent_runtime.services.invocations.arguments import ToolArguments
from agent_runtime.services.invocations.context import ToolContext
from agent_runtime.services.invocations.results import (
    TEXT_RECONCILED_EXECUTED,
    TEXT_RECONCILED_NOT_EXECUTED,
    awaiting_result,
    result_for,
)
from agent_runtime.tools.approval import ApprovalPolicyOutcome
from bailing.api.timefmt import utc_iso
from bailing.audit.ledger import AuditEntry, audit_record_many


def audit_entry(invocation: ToolInvocation, identity: AgentIdentity, action: str, **data: Any) -> AuditEntry:
    """An invocation milestone: coordinates, tool and argument *key names* — never values or bodies."""
    return AuditEntry(
        actor=identity.actor,
        action=f"agent_runtime.invocation.{action}",
        **invocation.audit_target(),
        data={
            "invocation_id": invocation.invocation_id,
            "tool": invocation.tool,
            "provider": invocation.provider,
            **data,
        },
    )


def audit(invocation: ToolInvocation, identity: AgentIdentity, action: str, **data: Any) -> None:
    audit_record_many([audit_entry(invocation, identity, action, **data)])


def _run_id(invocation: ToolInvocation) -> str | None:
    return str(invocation.run_id) if invocation.run_id else None


def created_entry(invocation: ToolInvocation, identity: AgentIdentity) -> AuditEntry:
    return audit_entry(
        invocation, identity, "created", argument_keys=invocation.argument_keys, run_id=_run_id(invocation)
    )


def invocation_insert(invocation: ToolInvocation) -> None:
    """Insert a new invocation, first thing in the caller's transaction; the unique (session,
    invocation id) backs up the advisory lock. No savepoint: a violation rolls the whole transaction
    back, and nothing was done in it before."""
    try:
        with transaction.atomic(savepoint=False):
            invocation.save(force_insert=True)
    except IntegrityError:
        raise errors.InvocationConflict() from None


def store_rejected(
    identity: AgentIdentity, invocation: ToolInvocation, code: str, text: str
) -> dict[str, Any]:
    """A new invocation refused before dispatch: inserted in its final state."""
    invocation.status = ToolInvocation.Status.REJECTED_BEFORE_DISPATCH
    invocation.reason_code = code
    invocation.result = result_for(invocation, "rejected_before_dispatch", text)
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        invocation_insert(invocation)
        audit_record_many(
            [
                created_entry(invocation, identity),
                audit_entry(invocation, identity, "outcome", state="rejected_before_dispatch", reason=code),
            ]
        )
    return invocation.result


def store_awaiting(
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: ToolContext,
    invocation: ToolInvocation,
    arguments: ToolArguments,
    outcome: ApprovalPolicyOutcome,
) -> dict[str, Any]:
    """A new invocation that needs approval: inserted with its pending approval (and notification)."""
    invocation.status = ToolInvocation.Status.AWAITING_APPROVAL
    with transaction.atomic():
        invocation_insert(invocation)
        audit_record_many([created_entry(invocation, identity)])
        approval = approval_request_create(
            invocation=invocation,
            access=access,
            compiled=ctx.compiled,
            arguments=arguments.value,
            args_bytes=arguments.size,
            outcome=outcome,
        )
        # The saved result says what the agent was told; the approval's own state moves on separately.
        invocation.result = awaiting_result(invocation, approval)
        invocation.save(update_fields=["result", "updated_at"])
        audit(invocation, identity, "approval_requested", approval_id=approval.pk, policy=approval.policy)
    return invocation.result


def finish_without_dispatch(
    identity: AgentIdentity, invocation: ToolInvocation, status: str, reason: str, text: str, **kwargs: Any
) -> dict[str, Any]:
    """An existing invocation ends without being sent (denied, expired, refused after approval)."""
    state = "denied" if status == ToolInvocation.Status.DENIED else "rejected_before_dispatch"
    invocation.status = status
    invocation.reason_code = reason
    invocation.result = result_for(invocation, state, text, **kwargs)
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        invocation.save(update_fields=["status", "reason_code", "result", "completed_at", "updated_at"])
        audit(invocation, identity, "outcome", state=state, reason=reason)
    return invocation.result


def mark_uncertain(
    identity: AgentIdentity,
    invocation: ToolInvocation,
    reason: str,
    *,
    journal: ToolCallJournal | None = None,
    duration_ms: int | None = None,
) -> dict[str, Any]:
    """The call was sent (or may have been) and no complete answer is known: ``reconciliation_required``,
    never sent again."""
    journal = journal or ToolCallJournal.objects.filter(invocation=invocation).first()
    key = journal.idempotency_key if journal is not None else ""
    result = result_for(
        invocation, "reconciliation_required", TEXT_UNKNOWN.format(reason=reason, key=key or "n/a")
    )
    with transaction.atomic():
        if journal is not None:
            ToolCallJournal.objects.filter(pk=journal.pk).exclude(
                state=ToolCallJournal.State.COMPLETED
            ).update(state=ToolCallJournal.State.UNCERTAIN, error=reason, duration_ms=duration_ms)
        invocation.status = ToolInvocation.Status.RECONCILIATION_REQUIRED
        invocation.reason_code = reason
        invocation.result = result
        invocation.save(update_fields=["status", "reason_code", "result", "updated_at"])
        audit(invocation, identity, "reconciliation_required", reason=reason)
    return result


def reconciled_or_unknown(identity: AgentIdentity, invocation: ToolInvocation) -> dict[str, Any]:
    """An unknown outcome stays unknown until an operator resolved it; then the resolution, once."""
    journal = ToolCallJournal.objects.filter(invocation=invocation).first()
    if journal is None or not journal.resolution:
        return invocation.result
    if journal.resolution == ToolCallJournal.Resolution.EXECUTED:
        status, state, ok = ToolInvocation.Status.EXECUTED, "executed", True
        text = TEXT_RECONCILED_EXECUTED + (
            f" Evidence: {journal.resolution_evidence}" if journal.resolution_evidence else ""
        )
    else:
        status, state, ok = ToolInvocation.Status.REJECTED_BEFORE_DISPATCH, "rejected_before_dispatch", False
        text = TEXT_RECONCILED_NOT_EXECUTED + (
            f" Evidence: {journal.resolution_evidence}" if journal.resolution_evidence else ""
        )
    result = result_for(
        invocation,
        state,
        text,
        ok=ok,
        reconciliation={"resolution": journal.resolution, "resolved_at": utc_iso(journal.resolved_at)},
    )
    invocation.status = status
    invocation.result = result
    invocation.reason_code = f"reconciled_{journal.resolution}"
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        invocation.save(update_fields=["status", "result", "reason_code", "completed_at", "updated_at"])
        audit(invocation, identity, "outcome", state=state, reason=invocation.reason_code)
    return result
