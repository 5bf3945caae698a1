"""The business answer at rest under a data policy (docs/data-policy.md "At rest").

When the route's data policy applies to tool results, the answer of a dispatched call is stored in
two forms: the journal's ``text`` and the invocation's ``result`` hold it as the policy released it
(redacted, withheld or flagged), and the raw answer — the very text the journal kept in clear before
— is sealed on the journal (``ToolCallJournal.text_sealed``): AES-256-GCM through
:mod:`agent_runtime.secrets_box`, bound to the invocation's ``job_id``, as its frozen arguments are.
Only an administrator's audited reveal in the console opens it (``approvals.services.answers``).
Without such a policy nothing is sealed and both hold the raw answer, as before.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from agent_runtime.budgets import RESULT_TEXT_MAX_CHARS
from agent_runtime.data_policy import TOOL_RESULTS
from agent_runtime.models import Route, ToolCallJournal
from agent_runtime.secrets_box import SealedKind, SealedSecretError
from agent_runtime.selectors.routes import route_data_policy

# The raw answer is a result's ``text``: at most 8,192 UTF-16 units, each at most 3 UTF-8 bytes (a
# character outside the BMP is 2 units and 4 bytes).
RAW_ANSWER = SealedKind("tool_call_journal.text", max_plaintext_bytes=RESULT_TEXT_MAX_CHARS * 3)


@dataclass(frozen=True)
class StoredAnswer:
    """What the outcome writes: the invocation's ``result``, the journal's ``text``, ``text_sealed``
    (empty when nothing is sealed) and ``data_policy`` (the counts, or None)."""

    result: dict[str, Any]
    text: str
    sealed: str = ""
    data_policy: dict[str, Any] | None = None


def seals_answers(route: Route) -> bool:
    """Does ``route``'s data policy apply to tool results (so its answers are stored sealed)?"""
    policy = route_data_policy(route)
    return policy is not None and policy.applies_to(TOOL_RESULTS)


def answer_stored(
    *, route: Route, job_id: uuid.UUID, result: dict[str, Any], released: dict[str, Any], answered: bool
) -> StoredAnswer:
    """The stored forms of an outcome: ``result`` is what the business system answered (its
    ``text`` the raw answer), ``released`` what the agent gets. An answered call under a policy for
    tool results stores the released form and seals the raw text; anything else is stored as before."""
    if not answered or not seals_answers(route):
        return StoredAnswer(result=result, text=result["text"])
    return StoredAnswer(
        result=released,
        text=released["text"],
        sealed=RAW_ANSWER.seal(result["text"], context=str(job_id)),
        data_policy=released.get("data_policy"),
    )


def journal_answer_sealed(journal: ToolCallJournal | None) -> bool:
    return journal is not None and bool(journal.text_sealed)


def journal_answer_open(*, journal: ToolCallJournal, job_id: uuid.UUID) -> str | None:
    """The raw answer sealed on ``journal`` (of the invocation ``job_id``), or None when it does not
    open: nothing sealed, a changed ``SECRET_KEY``, an altered value, one copied from another call."""
    try:
        return RAW_ANSWER.open(journal.text_sealed, context=str(job_id))
    except SealedSecretError:
        return None
