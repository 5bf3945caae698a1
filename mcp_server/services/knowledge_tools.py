"""The MCP knowledge tools ``search_knowledge`` and ``ask_knowledge`` (docs/protocol.md "MCP endpoint").

Both are the knowledge orchestration's operations
(:func:`knowledge.services.agent_knowledge.knowledge_passages_search` and
:func:`~knowledge.services.agent_knowledge.knowledge_ask`: query rule, scope, retrieval, sources and
audit); this module translates the tools' arguments and renders the results:

* ``query`` is passed as given; the service's refusal (a non-string, blank, or over 2,000
  characters: the REST protocol's bound, a decision, as the tools' description names no maximum)
  fails the tool with ``Tool failed: <its message>``, e.g. ``Tool failed: `query` must be a
  non-empty string``.
* ``limit`` (search only): a JSON number, clamped to 1–25 after rounding down; anything else —
  absent, a string, a boolean, null — is the default 10.
* An excerpt is at most 2,000 characters, then ``[…truncated]``; the text block stays under 50,000
  characters: the results that do not fit are dropped, ``truncated`` is true and a
  ``[…N more results truncated]`` line ends the text. Characters are UTF-16 code units (JavaScript
  ``String.length``), as everywhere else in the hub, and no cut splits a surrogate pair.
* A retrieval that finds no source at all (``unavailable``) fails the tool with the retriever's
  reason codes; a ``partial`` one answers with what it found. A failing answer model fails the tool
  with its fixed message.
* ``ask_knowledge`` renders ``<answer>`` and, when it cites anything, the ``Sources:`` list.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from agent_runtime.identity import AgentIdentity
from agent_runtime.selectors.routes import WorkspaceAccess
from bailing.api.errors import InvalidRequest
from bailing.api.limits import cut_utf16, utf16_length
from knowledge.errors import KnowledgeUnavailable
from knowledge.services.agent_knowledge import knowledge_ask, knowledge_passages_search
from knowledge.services.answers import AnswerUnavailable

SEARCH_TOOL = "search_knowledge"
ASK_TOOL = "ask_knowledge"

LIMIT_DEFAULT = 10
LIMIT_MIN = 1
LIMIT_MAX = 25
EXCERPT_MAX_CHARS = 2000
EXCERPT_MARK = "[…truncated]"
RESPONSE_MAX_CHARS = 50_000  # the text block stays strictly under this
NO_RESULTS = "No results found."

_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}

_SOURCE_PROPERTIES: dict[str, Any] = {
    "source_id": {"type": "string"},
    "document_id": {"type": "string"},
    "title": {"type": "string"},
    "score": {"type": "number"},
    "source": {"type": "string"},
}


# The additive field a result carries when the workspace's data policy touched it (counts only).
_DATA_POLICY_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["redact", "block", "flag"]},
        "findings": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
    },
    "required": ["action", "findings"],
}


def knowledge_tool_definitions() -> list[dict[str, Any]]:
    """The two tools as ``tools/list`` shows them."""
    return [
        {
            "name": SEARCH_TOOL,
            "title": "Search knowledge",
            "description": (
                "Hybrid (vector + full-text) search over this workspace's knowledge base. Returns "
                "ranked excerpts with relevance scores; use it to find source material to reason "
                "over yourself. For a direct answer, use ask_knowledge."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The search query (non-empty)."},
                    "limit": {
                        "type": "number",
                        "description": "Maximum results, 1 to 25 (clamped); default 10.",
                        "default": LIMIT_DEFAULT,
                    },
                },
                "required": ["query"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                **_SOURCE_PROPERTIES,
                                "retrievers": {"type": "array", "items": {"type": "string"}},
                                "content": {"type": "string"},
                            },
                            "required": [
                                "source_id",
                                "document_id",
                                "title",
                                "score",
                                "retrievers",
                                "content",
                            ],
                        },
                    },
                    "truncated": {"type": "boolean"},
                    "data_policy": _DATA_POLICY_SCHEMA,
                },
                "required": ["results", "truncated"],
            },
            "annotations": dict(_READ_ONLY),
        },
        {
            "name": ASK_TOOL,
            "title": "Ask knowledge",
            "description": (
                "Ask a question about this workspace's knowledge base and get an answer that cites "
                "its sources as [n]. Use it when you want a direct answer rather than raw excerpts; "
                "follow the cited sources for detail."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "The question (non-empty)."}},
                "required": ["query"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string"},
                    "sources": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": _SOURCE_PROPERTIES,
                            "required": ["source_id", "document_id", "title", "score"],
                        },
                    },
                    "data_policy": _DATA_POLICY_SCHEMA,
                },
                "required": ["answer", "sources"],
            },
            "annotations": dict(_READ_ONLY),
        },
    ]


def tool_failed(text: str) -> dict[str, Any]:
    """A ``CallToolResult`` the agent reads as a failure (``isError``), text only."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _result(text: str, structured: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def search_limit(value: Any) -> int:
    """``limit`` as the tool reads it: a number clamped to 1–25, anything else the default."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return LIMIT_DEFAULT
    return max(LIMIT_MIN, min(LIMIT_MAX, math.floor(value)))


def _retrievers_text(retrievers: list[str]) -> str:
    return "+".join(retrievers) if retrievers else "none"


def excerpt(content: str) -> str:
    """A result's ``content``: at most 2,000 characters, then ``[…truncated]``."""
    cut, truncated = cut_utf16(content, EXCERPT_MAX_CHARS)
    return cut + EXCERPT_MARK if truncated else cut


def _block(item: dict[str, Any]) -> str:
    return (
        f"### {item['title']} (score: {item['score']:.4f}, via {_retrievers_text(item['retrievers'])})\n"
        f"document_id: {item['document_id']}\n\n{item['content']}"
    )


@dataclass(frozen=True)
class SearchRendering:
    text: str
    results: list[dict[str, Any]]
    truncated: bool
    data_policy: dict[str, Any] | None = None


def render_search(items: list[dict[str, Any]]) -> SearchRendering:
    """The text block and the results it holds, strictly under :data:`RESPONSE_MAX_CHARS`: the most
    results (best first) that fit together with the ``[…N more results truncated]`` line."""
    if not items:
        return SearchRendering(NO_RESULTS, [], False)
    blocks = [_block(item) for item in items]
    text = "\n\n".join(blocks)
    if utf16_length(text) < RESPONSE_MAX_CHARS:
        return SearchRendering(text, list(items), False)
    for kept in range(len(items) - 1, -1, -1):
        line = f"[…{len(items) - kept} more results truncated]"
        text = "\n\n".join([*blocks[:kept], line])
        if utf16_length(text) < RESPONSE_MAX_CHARS:
            return SearchRendering(text, list(items[:kept]), True)
    raise AssertionError("the truncation line alone fits")  # pragma: no cover


def _fit(passages: list[dict[str, Any]], data_policy: dict[str, Any] | None) -> SearchRendering:
    """The service's passages as the tool shows them: excerpts, then the 50,000-character cap."""
    rendering = render_search([{**passage, "content": excerpt(passage["content"])} for passage in passages])
    return dataclasses.replace(rendering, data_policy=data_policy) if data_policy else rendering


def _with_policy(structured: dict[str, Any], data_policy: dict[str, Any] | None) -> dict[str, Any]:
    """The data policy's summary (counts only) as an additive ``structuredContent`` field."""
    return {**structured, "data_policy": data_policy} if data_policy else structured


def search_knowledge_call(
    *, identity: AgentIdentity, access: WorkspaceAccess, arguments: dict[str, Any]
) -> dict[str, Any]:
    """``search_knowledge``: ranked excerpts of the workspace's knowledge."""
    try:
        rendering = knowledge_passages_search(
            identity=identity,
            access=access,
            query=arguments.get("query"),
            limit=search_limit(arguments.get("limit")),
            fit=_fit,
        )
    except (InvalidRequest, KnowledgeUnavailable) as exc:
        return tool_failed(f"Tool failed: {exc.message}")
    structured = {"results": rendering.results, "truncated": rendering.truncated}
    return _result(rendering.text, _with_policy(structured, rendering.data_policy))


def render_answer(answer_text: str, sources: list[dict[str, Any]]) -> str:
    """``<answer>`` then, when it cites anything, the ``Sources:`` list in citation order."""
    if not sources:
        return answer_text
    lines = [
        f"[{index}] {source['title']} ({source['document_id']}, score {source['score']:.4f})"
        for index, source in enumerate(sources, start=1)
    ]
    return answer_text + "\n\nSources:\n" + "\n".join(lines)


def ask_knowledge_call(
    *, identity: AgentIdentity, access: WorkspaceAccess, arguments: dict[str, Any]
) -> dict[str, Any]:
    """``ask_knowledge``: an answer citing only retrieved sources, with those sources."""
    try:
        answer = knowledge_ask(identity=identity, access=access, query=arguments.get("query"))
    except (InvalidRequest, KnowledgeUnavailable, AnswerUnavailable) as exc:
        return tool_failed(f"Tool failed: {exc.message}")
    structured = {"answer": answer.text, "sources": answer.sources}
    return _result(render_answer(answer.text, answer.sources), _with_policy(structured, answer.data_policy))
