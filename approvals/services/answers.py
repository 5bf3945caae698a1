"""An administrator reveals the raw business answer behind a data policy (docs/data-policy.md
"Revealing a raw answer").

Under a data policy for tool results the journal keeps the answer as the agent got it and the raw
answer sealed (``agent_runtime.services.invocations.answers``). Opening it is a deliberate act: the
console asks for a confirmation first, and every reveal is an audit event naming who, which call and
the policy's counts — never the answer or any value in it.
"""

from __future__ import annotations

from django.db import transaction

from agent_runtime.models import ToolCallJournal, ToolInvocation
from agent_runtime.services.invocations.answers import journal_answer_open, journal_answer_sealed
from approvals.errors import AnswerNotSealed, AnswerUnavailable
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

REVEALED_ACTION = "approvals.answer.revealed"


def invocation_answer_reveal(*, invocation: ToolInvocation, actor: Actor) -> str:
    """The raw answer sealed on ``invocation``'s journal, once the reveal is recorded in the ledger.

    404 ``answer_not_sealed`` when nothing is sealed (no journal, or no data policy when it arrived);
    409 ``answer_unavailable`` when the seal does not open. The audit event commits before the answer
    is returned: a reveal the ledger cannot record shows nothing.
    """
    journal = ToolCallJournal.objects.filter(invocation=invocation).first()
    if not journal_answer_sealed(journal):
        raise AnswerNotSealed()
    raw = journal_answer_open(journal=journal, job_id=invocation.job_id)
    if raw is None:
        raise AnswerUnavailable()
    with transaction.atomic():
        audit_record(
            actor=actor,
            action=REVEALED_ACTION,
            **invocation.audit_target(),
            data={
                "invocation_id": invocation.invocation_id,
                "tool": invocation.tool,
                "provider": invocation.provider,
                "journal_state": journal.state,
                "data_policy": journal.data_policy,
                "chars": len(raw),
            },
        )
    return raw
