"""The calling agent withdraws a call that waits for approval (an MCP ``tasks/cancel``).

A call can be withdrawn as long as nothing was sent: its approval is ``pending``, or ``approved`` but
not yet consumed by a dispatch. The approval row is locked (``select_for_update``) and re-read, the
same lock a decision (``approvals.services.decisions``) and the dispatch's consumption of the
approval take, so of a withdrawal racing a decision or a dispatch exactly one wins: a decision that
comes second is 409 ``approval_conflict``, a dispatch that comes second sends nothing, and a
withdrawal that comes second changes nothing. A withdrawn approval acts as denied; the approver sees
it as ``withdrawn`` (console and ``GET /approvals/<id>``).

The invocation ends ``rejected_before_dispatch`` (reason ``approval_withdrawn``) in the same
transaction when this request holds its lock; if another request is working on it at that moment,
that request (or the next resume) records the end when it reads the withdrawn approval.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agent_runtime import errors
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import ToolApproval, ToolInvocation
from agent_runtime.services.invocations.locks import invocation_lock
from agent_runtime.services.invocations.records import finish_without_dispatch
from agent_runtime.services.invocations.results import TEXT_WITHDRAWN
from bailing.audit.ledger import audit_record

REASON_WITHDRAWN = "approval_withdrawn"
WITHDRAWABLE = (ToolApproval.Status.PENDING, ToolApproval.Status.APPROVED)


@dataclass(frozen=True)
class Withdrawal:
    """What a withdrawal did: ``withdrawn`` (now or before) or not (``status`` says where it stands)."""

    withdrawn: bool
    status: str


def invocation_withdraw_finish(identity: AgentIdentity, invocation: ToolInvocation, approval_id: int) -> dict:
    """End an invocation whose approval was withdrawn (the caller holds the invocation lock)."""
    return finish_without_dispatch(
        identity,
        invocation,
        ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
        REASON_WITHDRAWN,
        TEXT_WITHDRAWN.format(approval_id=approval_id),
        approval_id=approval_id,
    )


def invocation_withdraw(*, identity: AgentIdentity, invocation_id: str) -> Withdrawal:
    """Withdraw the caller's invocation ``invocation_id`` while nothing was sent.

    404 ``invocation_not_found`` for an unknown id or another session's. An invocation without an
    approval, or whose approval was denied, expired or consumed by a dispatch, is not withdrawn
    (``withdrawn: false``); withdrawing twice is a no-op that reports ``withdrawn: true``.
    """
    known = ToolInvocation.objects.filter(session_id=identity.session.pk, invocation_id=invocation_id).first()
    if known is None:
        raise errors.InvocationNotFound()
    with invocation_lock(identity.session.pk, invocation_id) as held, transaction.atomic():
        approval = ToolApproval.objects.select_for_update(of=("self",)).filter(invocation_id=known.pk).first()
        if approval is None:
            return Withdrawal(False, known.status)
        now = timezone.now()
        if approval.is_due(now):
            approval.status = ToolApproval.Status.EXPIRED
            approval.save(update_fields=["status"])
        if approval.status == ToolApproval.Status.WITHDRAWN:
            return Withdrawal(True, approval.status)
        if approval.status not in WITHDRAWABLE or approval.consumed_at is not None:
            return Withdrawal(False, approval.status)
        before = approval.status
        approval.status = ToolApproval.Status.WITHDRAWN
        approval.withdrawn_at = now
        approval.save(update_fields=["status", "withdrawn_at"])
        audit_record(
            actor=identity.actor,
            action="agent_runtime.approval.withdrawn",
            route_key=approval.route_key,
            target_type="tool_approval",
            target_id=str(approval.pk),
            data={
                "approval_id": approval.pk,
                "invocation_id": known.invocation_id,
                "tool": approval.tool,
                "previous_status": before,
            },
        )
        if held:
            invocation = ToolInvocation.objects.get(pk=known.pk)
            if invocation.status == ToolInvocation.Status.AWAITING_APPROVAL:
                invocation_withdraw_finish(identity, invocation, approval.pk)
    return Withdrawal(True, ToolApproval.Status.WITHDRAWN)
