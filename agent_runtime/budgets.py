"""The agent runtime's budgets (``bailing.budgets``): what an agent may send and what it is told.

Declared here, once; the checks import these constants. docs/budgets.md is the table they make.
"""

from __future__ import annotations

from bailing.budgets import JSON_BYTES, RAW_BYTES, UTF16_CHARS, budget

# --- governed invocations ---------------------------------------------------------------------------------
ARGUMENTS_MAX_BYTES = budget(
    "invocation.arguments",
    1_048_576,
    unit=JSON_BYTES,
    what="a tool call's `arguments` (also what an approval freezes and seals)",
    over="413 `arguments_too_large` (`limit_scope: arguments`, `actual_bytes`); MCP: a failed tool call "
    "with the same fields",
    paths=(
        "REST invoke → console approval page → console decision → resume → business system",
        "MCP call_tool → resume_invocation → business system",
    ),
)
INVOCATION_BODY_MAX_BYTES = budget(
    "invocation.request_body",
    2_097_152,
    unit=RAW_BYTES,
    what="the body of `POST /tool-invocations` (arguments and envelope)",
    over="413 `arguments_too_large` (`limit_scope: request_body`), before the body is read when declared",
    paths=("REST invoke",),
)
RESUME_BODY_MAX_BYTES = budget(
    "invocation.resume_body",
    1024,
    unit=RAW_BYTES,
    what="the body of `…/resume` (exactly `{}`)",
    over="413 `arguments_too_large` (`limit_scope: request_body`)",
    paths=("REST resume",),
)
RESULT_TEXT_MAX_CHARS = budget(
    "invocation.result_text",
    8192,
    unit=UTF16_CHARS,
    what="the `text` of an invocation result, kept as the journal's evidence",
    over="cut to the limit (the result says what the business answered; never an error)",
    paths=("REST resume (the result and the journal's text)",),
)

# --- turns ------------------------------------------------------------------------------------------------
TURN_BODY_MAX_BYTES = budget(
    "turn.request_body",
    512 * 1024,
    unit=RAW_BYTES,
    what="the body of `POST …/turns` and `…/complete`",
    over="413 `arguments_too_large` (`limit_scope: request_body`)",
    paths=("REST turns",),
)
TURN_TEXT_MAX_CHARS = budget(
    "turn.client_text",
    64_000,
    unit=UTF16_CHARS,
    what="`user_input` of a turn, `content` of a completion",
    over="400 `invalid_request` naming the field",
    paths=("REST turns",),
)
PAGE_CONTEXT_MAX_BYTES = budget(
    "turn.page_context",
    16 * 1024,
    unit=JSON_BYTES,
    what="a turn's `page_context`",
    over="413 `page_context_too_large` (`max_bytes`, `actual_bytes`)",
    paths=("REST turns",),
)

# --- approvals and business answers -------------------------------------------------------------------
WEBHOOK_BODY_MAX_BYTES = budget(
    "approval.webhook_body",
    64 * 1024,
    unit=JSON_BYTES,
    what="the body of an approval webhook (the approval snapshot, with the complete arguments when they fit)",
    over="the arguments are left out (`args_omitted: true`, `args_bytes`; the approver reads them in the "
    "console), then the summary is cut (`summary_truncated: true`)",
    paths=("approval webhook to the Demo Shop",),
)
ERROR_TEXT_MAX_CHARS = budget(
    "business.error_text",
    2048,
    unit=UTF16_CHARS,
    what="the part of a non-2xx business answer the agent reads (`HTTP <status>: …`)",
    over="cut to the limit, never splitting a pair",
    paths=("REST resume",),
)
