"""Turn memory: the recent visible messages of a conversation, within the route's memory budgets.

BailingHub's behaviour is kept (docs/protocol.md "Memory"): take the newest ``recent_messages``
visible messages that precede the current turn, walk them newest first, cut each to
``per_message_chars``, stop at the first message that would overflow ``recent_budget_chars``, and
return what was kept in chronological order as ``{role, content, created_at}``. Characters are
UTF-16 code units (docs/protocol.md "Counting characters") and a cut never splits a surrogate pair.

Additions of this hub, all additive to BailingHub's entry shape:

* ``truncated``: ``true`` when ``content`` was cut to ``per_message_chars``, so an agent can tell a
  cut message from a short one (BailingHub cuts silently; docs/compatibility.md "Memory marks cut
  messages").
* ``execution_summary`` on assistant entries whose stored content carries a valid
  ``bailing.authorization-execution-summary.v1`` marker (see :mod:`agent_runtime.execution_summary`).
  The block is removed from ``content`` and re-projected with fixed provenance. Its compact JSON
  counts against both budgets, and it is fitted before the surrounding text because the facts
  matter more than the prose: whole invocation records are omitted (with counts) until it fits
  ``min(per_message_chars, remaining budget)``; the text gets what is left. When not even an empty
  projection fits, the entry carries the fixed omission notice instead. That notice is exempt from
  ``per_message_chars`` (the smallest allowed value, 50, is shorter than the notice's fixed
  provenance fields) but not from ``recent_budget_chars``.

Rolling summaries are not implemented: ``summary`` is always ``null``, also with ``summary_enabled``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agent_runtime.execution_summary import omission_notice, summary_chars, summary_parse, summary_project
from bailing.api.limits import cut_utf16, utf16_length
from bailing.api.timefmt import utc_iso


def memory_recent(
    rows: Iterable[tuple[str, str, datetime]], *, per_message_chars: int, recent_budget_chars: int
) -> list[dict[str, Any]]:
    """Memory entries from ``rows`` = ``(direction, content, created_at)``, **newest first**."""
    kept: list[dict[str, Any]] = []
    used = 0
    for direction, content, created_at in rows:
        remaining = recent_budget_chars - used
        role = "user" if direction == "in" else "assistant"
        summary = summary_parse(content) if direction == "out" else None
        extra: dict[str, Any] = {}
        if summary is None:
            text, truncated = cut_utf16(content, per_message_chars)
            cost = utf16_length(text)
        else:
            fitted = summary_project(summary, max_chars=min(per_message_chars, remaining))
            if fitted is None:
                projection = omission_notice(summary.total_invocations)
                summary_cost = summary_chars(projection)
            else:
                projection, summary_cost = fitted
            text, truncated = cut_utf16(summary.text, per_message_chars - summary_cost)
            cost = utf16_length(text) + summary_cost
            extra["execution_summary"] = projection
        if cost > remaining:
            break
        used += cost
        kept.append(
            {
                "role": role,
                "content": text,
                "created_at": utc_iso(created_at),
                "truncated": truncated,
                **extra,
            }
        )
    kept.reverse()
    return kept
