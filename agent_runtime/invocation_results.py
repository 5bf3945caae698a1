"""The result an agent reads of a governed invocation (``bailing.agent-tool-invocation.v1``): its
shape and the texts shared by the call path (services) and the receipt (selectors). Pure: no
database, no network."""

from __future__ import annotations

from typing import Any

from agent_runtime.budgets import RESULT_TEXT_MAX_CHARS
from bailing.api.limits import cut_utf16

INVOCATION_SCHEMA = "bailing.agent-tool-invocation.v1"

TEXT_UNKNOWN = (
    "The outcome is unknown ({reason}): the request was sent but no complete answer came back. The hub "
    "will not send it again. Do not repeat this action with a new call or another tool; an operator must "
    "check the business system (idempotency key {key})."
)


def result_text(raw: str) -> str:
    """Text as the agent sees it: control characters become spaces, at most 8,192 characters (the
    result's bound)."""
    cleaned = "".join(" " if (ord(ch) < 0x20 and ch not in "\t\n\r") or ord(ch) == 0x7F else ch for ch in raw)
    # Characters as the protocol counts them (UTF-16 units), never splitting a surrogate pair.
    return cut_utf16(cleaned.strip(), RESULT_TEXT_MAX_CHARS)[0]


def invocation_result(
    *,
    invocation_id: str,
    route: str,
    tool: str,
    state: str,
    text: str,
    ok: bool = False,
    auto_retry_allowed: bool = False,
    business_status: int | None = None,
    approval_id: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The public result, in the wire's key order; ``text`` is at most 8,192 characters."""
    body: dict[str, Any] = {
        "schema_version": INVOCATION_SCHEMA,
        "invocation_id": invocation_id,
        "route": route,
        "tool": tool,
        "state": state,
        "ok": ok,
        "auto_retry_allowed": auto_retry_allowed,
        "text": result_text(text),
    }
    if business_status is not None:
        body["business_status"] = business_status
    if approval_id is not None:
        body["approval_id"] = approval_id
    body.update(extra)
    return body
