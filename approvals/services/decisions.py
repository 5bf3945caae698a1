"""Decisions on approvals, from the business approver (``POST /approvals/:id/decision``) or an approver
in the hub console (docs/protocol.md "Decisions").

A decision only records ``approved`` or ``denied`` on the pending approval: nothing is executed. The
agent continues by resuming its original invocation, which then dispatches exactly the approved,
frozen arguments once.

Idempotency and races: the approval row is locked (``select_for_update``) and re-read, so of two
concurrent decisions exactly one is written; the other is a replay (the same ``decision_id`` and
decision: ``idempotent: true``) or 409 ``approval_conflict``. ``decision_id`` is unique across all
approvals (a business key used for a second approval is 409 too).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent_runtime.models import ToolApproval
from approvals.errors import ApprovalConflict
from bailing.api.errors import InvalidRequest, NotFound
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

DECISIONS = ("approved", "denied")


@dataclass(frozen=True)
class DecisionOutcome:
    approval: ToolApproval
    idempotent: bool

    def body(self) -> dict:
        """The decision endpoint's answer (``rerun`` is always false: nothing runs by itself)."""
        return {
            "ok": True,
            "id": self.approval.pk,
            "status": self.approval.status,
            "decision_id": self.approval.decision_id,
            "idempotent": self.idempotent,
            "rerun": False,
        }


def approval_decide(
    *,
    approval_id: int,
    decision: str,
    decision_id: str,
    approver: str,
    comment: str,
    source: str,
    actor: Actor,
    client_id: int | None = None,
    match: dict[str, str] | None = None,
    user=None,
) -> DecisionOutcome:
    """Record ``decision`` on the pending approval ``approval_id``.

    ``client_id`` restricts the lookup to approvals of that client's invocations (a business system
    decides only on its own); ``match`` (``job_id``, ``request_id``, ``args_hash``) must equal the
    approval's, else 400 ``invalid_request`` naming the field. 404 ``not_found`` for an unknown or
    foreign approval, 409 ``approval_conflict`` for a conflicting decision.
    """
    if decision not in DECISIONS:
        raise InvalidRequest(field="decision")
    with transaction.atomic():
        approvals = ToolApproval.objects.select_for_update(of=("self",)).select_related("invocation")
        if client_id is not None:
            approvals = approvals.filter(invocation__client_id=client_id)
        approval = approvals.filter(pk=approval_id).first()
        if approval is None:
            raise NotFound("Unknown approval.")
        for name, value in (match or {}).items():
            expected = str(approval.job_id) if name == "job_id" else getattr(approval, name)
            if value != expected:
                raise InvalidRequest("The decision does not match the approval's frozen call.", field=name)
        now = timezone.now()
        if approval.is_due(now):
            approval.status = ToolApproval.Status.EXPIRED
            approval.save(update_fields=["status"])
        if approval.status != ToolApproval.Status.PENDING:
            if approval.decision_id == decision_id and approval.status == decision:
                return DecisionOutcome(approval, idempotent=True)
            raise ApprovalConflict()
        approval.status = decision
        approval.decision_id = decision_id
        approval.decided_by = approver
        approval.decided_by_user = user
        approval.decision_source = source
        approval.decision_comment = comment
        approval.decided_at = now
        try:
            with transaction.atomic():
                approval.save(
                    update_fields=[
                        "status",
                        "decision_id",
                        "decided_by",
                        "decided_by_user",
                        "decision_source",
                        "decision_comment",
                        "decided_at",
                    ]
                )
        except IntegrityError:
            raise ApprovalConflict("The decision_id is already used by another approval.") from None
        audit_record(
            actor=actor,
            action=f"approvals.request.{decision}",
            route_key=approval.route_key,
            target_type="tool_approval",
            target_id=str(approval.pk),
            data={
                "approval_id": approval.pk,
                "invocation_id": approval.invocation.invocation_id,
                "tool": approval.tool,
                "decision": decision,
                "decision_id": decision_id,
                "source": source,
                "has_comment": bool(comment),
            },
        )
    return DecisionOutcome(approval, idempotent=False)
