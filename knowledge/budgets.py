"""The knowledge app's budgets (``bailing.budgets``): what an agent may ask of the knowledge base."""

from __future__ import annotations

from bailing.budgets import JSON_BYTES, RAW_BYTES, UTF16_CHARS, budget

QUERY_MAX_CHARS = budget(
    "knowledge.query",
    2000,
    unit=UTF16_CHARS,
    what="a knowledge `query` (search, and the question of `ask_knowledge`)",
    over="400 `invalid_request` naming `query` (REST); `Tool failed: …` (MCP)",
    paths=("REST knowledge search", "MCP search_knowledge", "MCP ask_knowledge"),
)
SEARCH_BODY_MAX_BYTES = budget(
    "knowledge.search_body",
    16 * 1024,
    unit=RAW_BYTES,
    what="the body of `POST …/knowledge/search`",
    over="413 `arguments_too_large` (`limit_scope: request_body`)",
    paths=("REST knowledge search",),
)
READ_BODY_MAX_BYTES = budget(
    "knowledge.read_body",
    8 * 1024,
    unit=RAW_BYTES,
    what="the body of `POST …/knowledge/read`",
    over="413 `arguments_too_large` (`limit_scope: request_body`)",
    paths=("REST knowledge read",),
)
READ_MAX_BYTES = budget(
    "knowledge.read_max_bytes",
    32768,
    unit=JSON_BYTES,
    what="the largest `max_bytes` a read accepts (the whole JSON answer of one page)",
    over="400 `invalid_request` naming `max_bytes`",
    paths=("REST knowledge read",),
)
