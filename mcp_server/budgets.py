"""The MCP surface's budgets (``bailing.budgets``)."""

from __future__ import annotations

from bailing.budgets import RAW_BYTES, budget

MCP_BODY_MAX_BYTES = budget(
    "mcp.request_body",
    2_097_152,
    unit=RAW_BYTES,
    what="the body of a `POST /mcp/<route>` JSON-RPC message (room for a tool call's 1 MiB of arguments)",
    over="413 `arguments_too_large` (`limit_scope: request_body`), before the body is read when declared",
    paths=("MCP endpoint",),
)
