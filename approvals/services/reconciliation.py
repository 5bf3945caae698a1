"""An operator resolves an unknown outcome after checking the business system.

The hub never sends a call with an unknown outcome again. An operator who looked the call up in the
business system records what happened (``executed``, with the business evidence, or ``not_executed``)
on its journal; the agent's next resume of the original invocation replays that resolution. Resolving
is allowed once, only for a journal in ``uncertain`` (or one left ``dispatching`` by a request that no
longer holds the invocation).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agent_runtime.models import ToolCallJournal, ToolInvocation
from agent_runtime.services.invocations import invocation_lock_free
from approvals.errors import ReconciliationNotNeeded
from bailing.api.errors import InvalidRequest
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

EVIDENCE_MAX_CHARS = 1000


def journal_resolve(
    *, invocation: ToolInvocation, resolution: str, evidence: str, actor: Actor
) -> ToolCallJournal:
    """Record ``resolution`` (``executed`` | ``not_executed``) with ``evidence`` on the journal of
    ``invocation``; 409 ``reconciliation_not_needed`` when there is nothing unresolved."""
    if resolution not in ToolCallJournal.Resolution.values:
        raise InvalidRequest(field="resolution")
    if len(evidence) > EVIDENCE_MAX_CHARS:
        raise InvalidRequest(field="evidence")
    if resolution == ToolCallJournal.Resolution.EXECUTED and not evidence.strip():
        raise InvalidRequest("Say what the business system shows.", field="evidence")
    if invocation.status == ToolInvocation.Status.DISPATCHING and not invocation_lock_free(
        invocation.session_id, invocation.invocation_id
    ):
        raise ReconciliationNotNeeded("The call is still in flight.")
    with transaction.atomic():
        journal = ToolCallJournal.objects.select_for_update().filter(invocation=invocation).first()
        unresolved = (
            journal is not None
            and not journal.resolution
            and journal.state
            in (
                ToolCallJournal.State.UNCERTAIN,
                ToolCallJournal.State.EVIDENCE_DEGRADED,
                ToolCallJournal.State.DISPATCHING,
            )
        )
        if not unresolved:
            raise ReconciliationNotNeeded()
        journal.resolution = resolution
        journal.resolution_evidence = evidence
        journal.resolved_by = actor.name
        journal.resolved_at = timezone.now()
        journal.save(update_fields=["resolution", "resolution_evidence", "resolved_by", "resolved_at"])
        audit_record(
            actor=actor,
            action="approvals.reconciliation.resolved",
            **invocation.audit_target(),
            data={
                "invocation_id": invocation.invocation_id,
                "tool": invocation.tool,
                "resolution": resolution,
            },
        )
    return journal
