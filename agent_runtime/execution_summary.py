"""The ``bailing.authorization-execution-summary.v1`` marker in assistant completions (spec "Complete").

A local agent may end a completion with a summary of the governed tool calls of its turn, so that a
later turn remembers which original invocations exist and which still need inspecting. The hub
neither trusts nor verifies it: when memory is assembled the marker is recognised **only in outbound
(assistant) messages**, parsed strictly and re-projected from scratch with fixed provenance
(``kind``/``source``/``trust``), keeping only the allowed fact fields. A user message containing the
same text stays plain text, so a user cannot give a claim execution provenance.

Embedding format (this hub's decision, as BailingHub publishes none: docs/compatibility.md "Execution
summary format"): one fenced block whose info string is the schema id, on its own lines, anywhere in
``content``::

    ```bailing.authorization-execution-summary.v1
    {"schema_version": "bailing.authorization-execution-summary.v1",
     "invocations": [{"invocation_id": "<64 lowercase hex>", "tool": "order_update",
                      "state": "reconciliation_required", "next_action": "inspect_original"}],
     "total_invocations": 3, "omitted_invocations": 2}
    ```

Rules: exactly one such block, closed by a line of three backticks; the JSON is one object with no
duplicate keys; ``invocation_id`` is 64 lowercase hex and unique within the block; ``tool`` matches
the tool-name pattern; ``state`` is an invocation result state; ``next_action``, when present, is
``"inspect_original"`` and only on an unresolved state (the projection sets it for every unresolved
record anyway); ``total_invocations = len(invocations) + omitted_invocations``. Any other key is
ignored and never projected (older summaries carried business result text). If any rule fails the
message is treated as plain text. Completion bodies are stored unchanged; only memory re-projects.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bailing.api.errors import ApiError
from bailing.api.limits import utf16_length
from bailing.api.parsers import parse_json_bytes

SUMMARY_SCHEMA = "bailing.authorization-execution-summary.v1"
SUMMARY_KIND = "authorization_execution_summary"
SUMMARY_SOURCE = "agent_client"
SUMMARY_TRUST = "reference_only"
NEXT_ACTION = "inspect_original"
OMISSION_NOTICE = "omitted_by_memory_limits"

# Result states of ``bailing.agent-tool-invocation.v1`` (docs/protocol.md "Execution summary
# projection"). Unresolved states are those whose outcome the agent must still inspect on the
# original invocation, never re-issue.
UNRESOLVED_STATES = frozenset({"in_progress", "awaiting_approval", "reconciliation_required"})
RESOLVED_STATES = frozenset({"denied", "rejected_before_dispatch", "executed", "business_rejected"})
STATES = UNRESOLVED_STATES | RESOLVED_STATES

_INVOCATION_ID = re.compile(r"[0-9a-f]{64}")
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_OPEN_FENCE = "```" + SUMMARY_SCHEMA
_BLOCK = re.compile(
    r"^```" + re.escape(SUMMARY_SCHEMA) + r"[ \t]*\r?\n(?P<body>.*?)\r?\n```[ \t]*\r?$",
    re.MULTILINE | re.DOTALL,
)
_OPEN_LINE = re.compile(r"^```" + re.escape(SUMMARY_SCHEMA) + r"[ \t]*\r?$", re.MULTILINE)


@dataclass(frozen=True)
class ExecutionSummary:
    """A parsed marker: the allowed facts only, plus the text around the block."""

    invocations: tuple[dict[str, str], ...]
    total_invocations: int
    text: str


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _record(raw: Any) -> dict[str, str] | None:
    if not isinstance(raw, dict):
        return None
    invocation_id, tool, state = raw.get("invocation_id"), raw.get("tool"), raw.get("state")
    if not isinstance(invocation_id, str) or not _INVOCATION_ID.fullmatch(invocation_id):
        return None
    if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
        return None
    if state not in STATES:
        return None
    if "next_action" in raw and (raw["next_action"] != NEXT_ACTION or state not in UNRESOLVED_STATES):
        return None
    record = {"invocation_id": invocation_id, "tool": tool, "state": state}
    if state in UNRESOLVED_STATES:
        record["next_action"] = NEXT_ACTION
    return record


def _parse_body(body: str) -> tuple[tuple[dict[str, str], ...], int] | None:
    try:
        value = parse_json_bytes(body.encode("utf-8"))
    except ApiError:
        return None
    if not isinstance(value, dict) or value.get("schema_version") != SUMMARY_SCHEMA:
        return None
    raw_records = value.get("invocations")
    total = _count(value.get("total_invocations"))
    omitted = _count(value.get("omitted_invocations"))
    if not isinstance(raw_records, list) or total is None or omitted is None:
        return None
    records = []
    seen: set[str] = set()
    for raw in raw_records:
        record = _record(raw)
        if record is None or record["invocation_id"] in seen:
            return None
        seen.add(record["invocation_id"])
        records.append(record)
    if total != len(records) + omitted:
        return None
    return tuple(records), total


def summary_parse(content: str) -> ExecutionSummary | None:
    """The marker of an assistant message, or ``None`` if it has none or it breaks a rule."""
    if _OPEN_FENCE not in content or len(_OPEN_LINE.findall(content)) != 1:
        return None
    match = _BLOCK.search(content)
    if match is None:
        return None
    parsed = _parse_body(match.group("body"))
    if parsed is None:
        return None
    records, total = parsed
    before, after = content[: match.start()].rstrip(), content[match.end() :].lstrip()
    text = f"{before}\n\n{after}" if before and after else before or after
    return ExecutionSummary(invocations=records, total_invocations=total, text=text)


def _chars(value: Any) -> int:
    """Memory budgets count characters as UTF-16 units of the compact JSON text."""
    return utf16_length(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _projection(records: list[dict[str, str]], total: int) -> dict[str, Any]:
    return {
        "kind": SUMMARY_KIND,
        "source": SUMMARY_SOURCE,
        "trust": SUMMARY_TRUST,
        "schema_version": SUMMARY_SCHEMA,
        "invocations": records,
        "total_invocations": total,
        "omitted_invocations": total - len(records),
    }


def omission_notice(total: int) -> dict[str, Any]:
    """What memory carries when not even an empty projection fits: an explicit notice, no JSON cut."""
    return {
        "kind": SUMMARY_KIND,
        "source": SUMMARY_SOURCE,
        "trust": SUMMARY_TRUST,
        "notice": OMISSION_NOTICE,
        "total_invocations": total,
        "omitted_invocations": total,
    }


def summary_project(summary: ExecutionSummary, *, max_chars: int) -> tuple[dict[str, Any], int] | None:
    """Re-project ``summary`` into at most ``max_chars`` characters of compact JSON.

    Whole invocation records are kept or omitted, never cut; unresolved records are kept first
    because they are the ones the agent must act on, and the output keeps the agent's order.
    ``omitted_invocations`` counts everything absent (omitted by the agent or by memory limits).
    Returns ``(projection, chars)``, or ``None`` when not even the empty projection fits (the
    caller then uses :func:`omission_notice`).
    """
    total = summary.total_invocations
    # The empty projection with omitted == total bounds every smaller omitted count's digits.
    used = _chars(_projection([], total))
    if used > max_chars:
        return None
    order = sorted(
        range(len(summary.invocations)),
        key=lambda index: (summary.invocations[index]["state"] not in UNRESOLVED_STATES, index),
    )
    kept: set[int] = set()
    for index in order:
        cost = _chars(summary.invocations[index]) + (1 if kept else 0)
        if used + cost <= max_chars:
            kept.add(index)
            used += cost
    projection = _projection([dict(summary.invocations[i]) for i in sorted(kept)], total)
    return projection, _chars(projection)


def summary_chars(value: dict[str, Any]) -> int:
    return _chars(value)
