"""The operators' app's budgets (``bailing.budgets``): decisions and the console's approval page."""

from __future__ import annotations

from bailing.budgets import JSON_BYTES, RAW_BYTES, UTF16_CHARS, budget

DECISION_BODY_MAX_BYTES = budget(
    "approval.decision_body",
    64 * 1024,
    unit=RAW_BYTES,
    what="the body of `POST /approvals/<id>/decision`",
    over="413 `arguments_too_large` (`limit_scope: request_body`)",
    paths=("REST decision",),
)
DECISION_COMMENT_MAX_CHARS = budget(
    "approval.decision_comment",
    1000,
    unit=UTF16_CHARS,
    what="a decision's `comment`",
    over="400 `invalid_request` naming `comment` (REST); the form's error (console)",
    paths=("REST decision", "console decision"),
)
INLINE_ARGS_MAX_BYTES = budget(
    "approval.console_inline_args",
    64 * 1024,
    unit=JSON_BYTES,
    what="the arguments the console's approval page shows inline",
    over="shown on demand: a link to the exact JSON instead",
    paths=("console approval page",),
)
