"""What an agent is told: the fixed texts of every outcome and the result builders.

Texts are fixed (plus coordinates the hub chose); they never carry argument values.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.invocation_results import invocation_result
from agent_runtime.models import ToolApproval, ToolInvocation
from agent_runtime.services.rate_limits import RateLimitHit

STABLE = frozenset(
    {
        ToolInvocation.Status.EXECUTED,
        ToolInvocation.Status.BUSINESS_REJECTED,
        ToolInvocation.Status.DENIED,
        ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
        ToolInvocation.Status.RECONCILIATION_REQUIRED,
    }
)

TEXT_IN_PROGRESS = "The same governed invocation is already in progress; resume it later with the same id."
TEXT_RATE_LIMITED = (
    "Rate limit reached ({level}); nothing was sent. Retry the same invocation after {seconds} s."
)
TEXT_PROVIDER_BUSY = (
    "The business system already has as many calls in flight as the hub allows ({limit}); nothing was "
    "sent. Retry the same invocation after {seconds} s."
)
TEXT_AWAITING = (
    "Awaiting approval #{approval_id}: {summary} Nothing was sent. After the approver decides, resume "
    "this invocation (POST /agent-api/v1/tool-invocations/{invocation_id}/resume); do not send a new call."
)
TEXT_DENIED = "The approver denied this call (approval #{approval_id}); nothing was sent."
TEXT_EXPIRED = "Approval #{approval_id} expired undecided; nothing was sent."
TEXT_WITHDRAWN = "This call was withdrawn by its caller (approval #{approval_id}); nothing was sent."
TEXT_REJECTED = {
    "subject_required": "This tool acts on behalf of a signed-in business user, and this session has none.",
    "arguments_invalid": "The arguments do not match the tool's input schema at {field}; nothing was sent.",
    "header_value_invalid": "Argument {field} cannot be sent as an HTTP header (printable ASCII only).",
    "path_invalid": "The request path cannot be built from these arguments (printable ASCII only).",
    "run_frozen": (
        "Another call in this run has an unknown outcome; write calls are refused until an operator "
        "resolves it."
    ),
    "tool_call_budget_exhausted": "This run used its {limit} tool calls; nothing was sent.",
    "business_unreachable": "The business system could not be reached; nothing was sent.",
    "target_forbidden": "The tool provider's address is not allowed as an outbound target; nothing was sent.",
    "secret_unavailable": "The tool provider has no usable secret; nothing was sent.",
    "frozen_arguments_unavailable": "The exact frozen arguments are unavailable; nothing was sent.",
    "approval_args_mismatch": "The approved arguments do not match this invocation; nothing was sent.",
    "approval_already_consumed": "The approval was already used; nothing was sent.",
}
TEXT_APPROVAL_CONDITION = "An approval rule could not be evaluated ({code}: {field}); nothing was sent."
TEXT_RECONCILED_EXECUTED = "An operator confirmed in the business system that this call executed."
TEXT_RECONCILED_NOT_EXECUTED = "An operator confirmed in the business system that this call did not execute."
# How long an agent is told to wait when its provider's in-flight slots are all taken.
PROVIDER_BUSY_RETRY_MS = 1000


def result_for(invocation: ToolInvocation, state: str, text: str, **kwargs: Any) -> dict[str, Any]:
    return invocation_result(
        invocation_id=invocation.invocation_id,
        route=invocation.route_key,
        tool=invocation.tool,
        state=state,
        text=text,
        **kwargs,
    )


def in_progress(coords: tuple[str, str, str]) -> dict[str, Any]:
    invocation_id, route, tool = coords
    return invocation_result(
        invocation_id=invocation_id,
        route=route,
        tool=tool,
        state="in_progress",
        text=TEXT_IN_PROGRESS,
        auto_retry_allowed=True,
    )


def coordinates(invocation: ToolInvocation) -> tuple[str, str, str]:
    """What a result names a call by: its ``invocation_id``, route and tool."""
    return invocation.invocation_id, invocation.route_key, invocation.tool


def _not_stored(coords: tuple[str, str, str], text: str, **kwargs: Any) -> dict[str, Any]:
    invocation_id, route, tool = coords
    return invocation_result(
        invocation_id=invocation_id,
        route=route,
        tool=tool,
        state="rejected_before_dispatch",
        text=text,
        auto_retry_allowed=True,
        **kwargs,
    )


def rate_limited(coords: tuple[str, str, str], hit: RateLimitHit) -> dict[str, Any]:
    """A limit was reached: nothing is stored, the same invocation may be sent again later."""
    return _not_stored(
        coords,
        TEXT_RATE_LIMITED.format(level=hit.level, seconds=max(1, round(hit.retry_after_ms / 1000))),
        retry_after_ms=hit.retry_after_ms,
        rate_limit=hit.as_dict(),
    )


def provider_busy(coords: tuple[str, str, str], limit: int) -> dict[str, Any]:
    """The provider's bulkhead is full (``locks.provider_slot``): nothing is stored or sent."""
    return _not_stored(
        coords,
        TEXT_PROVIDER_BUSY.format(limit=limit, seconds=max(1, round(PROVIDER_BUSY_RETRY_MS / 1000))),
        retry_after_ms=PROVIDER_BUSY_RETRY_MS,
        concurrency_limit={"level": "provider", "limit": limit, "scope": "hub_process"},
    )


def awaiting_result(invocation: ToolInvocation, approval: ToolApproval) -> dict[str, Any]:
    summary = (approval.summary or f"{invocation.tool} ({approval.reason})").rstrip()
    if not summary.endswith((".", "?", "!")):
        summary += "."  # a summary rendered from the tool's template may end mid-sentence
    text = TEXT_AWAITING.format(
        approval_id=approval.pk, summary=summary, invocation_id=invocation.invocation_id
    )
    return result_for(invocation, "awaiting_approval", text, approval_id=approval.pk)
