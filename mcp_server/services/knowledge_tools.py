"""The MCP knowledge tools ``search_knowledge`` and ``ask_knowledge`` (docs/protocol.md "MCP endpoint").

Both search the workspace's knowledge scope with the same hybrid retriever as the REST knowledge
protocol (:func:`knowledge.services.retrieval.knowledge_search`), under the MCP tools' own limits:

* ``query`` must be a string with a non-whitespace character (else the tool fails with
  ``Tool failed: `query` must be a non-empty string``) and at most 2,000 characters, the REST
  protocol's bound (a decision: the tools' description names no maximum).
* ``limit`` (search only): a JSON number, clamped to 1–25 after rounding down; anything else —
  absent, a string, a boolean, null — is the default 10.
* An excerpt is at most 2,000 characters, then ``[…truncated]``; the text block stays under 50,000
  characters: the results that do not fit are dropped, ``truncated`` is true and a
  ``[…N more results truncated]`` line ends the text. Characters are UTF-16 code units (JavaScript
  ``String.length``), as everywhere else in the hub, and no cut splits a surrogate pair.
* ``source_id`` (and its alias ``document_id``) is ``<kb_id>:<source_key>``; ``source`` is the
  document metadata's ``source`` label when its connector recorded one (absent otherwise).
* A retrieval that finds no source at all (``unavailable``) fails the tool with the retriever's
  reason codes; a ``partial`` one answers with what it found.

``ask_knowledge`` retrieves up to 8 chunks, gives the answerer one source per document (its best
chunks, best first) and renders the cited answer (:mod:`knowledge.services.answers`). One audit event
per call (``mcp.knowledge.search`` / ``mcp.knowledge.ask``): status, mode and counts, never the query,
an excerpt or the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agent_runtime.identity import AgentIdentity
from agent_runtime.selectors.routes import WorkspaceAccess
from bailing.api.limits import cut_utf16, utf16_length
from bailing.audit.ledger import audit_record
from knowledge.models import Document
from knowledge.selectors.scope import knowledge_scope
from knowledge.selectors.search import STATUS_UNAVAILABLE, Hit, SearchResult
from knowledge.services.answers import AnswerSource, AnswerUnavailable, knowledge_answer
from knowledge.services.retrieval import knowledge_search

SEARCH_TOOL = "search_knowledge"
ASK_TOOL = "ask_knowledge"

LIMIT_DEFAULT = 10
LIMIT_MIN = 1
LIMIT_MAX = 25
EXCERPT_MAX_CHARS = 2000
EXCERPT_MARK = "[…truncated]"
RESPONSE_MAX_CHARS = 50_000  # the text block stays strictly under this
QUERY_MAX_CHARS = 2000
ASK_RETRIEVE = 8
ASK_CHUNKS_PER_SOURCE = 2
NO_RESULTS = "No results found."

TEXT_QUERY_REQUIRED = "Tool failed: `query` must be a non-empty string"
TEXT_QUERY_TOO_LONG = f"Tool failed: `query` must be at most {QUERY_MAX_CHARS} characters"

_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}

_SOURCE_PROPERTIES: dict[str, Any] = {
    "source_id": {"type": "string"},
    "document_id": {"type": "string"},
    "title": {"type": "string"},
    "score": {"type": "number"},
    "source": {"type": "string"},
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


def _query(arguments: dict[str, Any]) -> tuple[str | None, str | None]:
    """(query, failure text)."""
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return None, TEXT_QUERY_REQUIRED
    if utf16_length(query) > QUERY_MAX_CHARS:
        return None, TEXT_QUERY_TOO_LONG
    return query, None


def search_limit(value: Any) -> int:
    """``limit`` as the tool reads it: a number clamped to 1–25, anything else the default."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return LIMIT_DEFAULT
    return max(LIMIT_MIN, min(LIMIT_MAX, math.floor(value)))


def _unavailable(result: SearchResult) -> str:
    reasons = ", ".join(result.degraded) or "no knowledge base answered"
    return f"Tool failed: the knowledge base is unavailable ({reasons})"


def _source_id(hit: Hit) -> str:
    return f"{hit.kb_id}:{hit.source_key}"


def _labels(hits: list[Hit]) -> dict[int, str]:
    """The ``source`` label of each hit's document, when its metadata records one."""
    ids = {hit.document_id for hit in hits}
    if not ids:
        return {}
    labels = {}
    for pk, metadata in Document.objects.filter(pk__in=ids).values_list("pk", "metadata"):
        label = metadata.get("source") if isinstance(metadata, dict) else None
        if isinstance(label, str) and label.strip():
            labels[pk] = label
    return labels


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


def _audit(identity: AgentIdentity, access: WorkspaceAccess, action: str, revision: str, data: dict) -> None:
    with transaction.atomic():
        audit_record(
            action=action,
            actor=identity.actor,
            route_key=access.route_key,
            target_type="knowledge_scope",
            target_id=revision,
            data=data,
        )


def search_knowledge_call(
    *, identity: AgentIdentity, access: WorkspaceAccess, arguments: dict[str, Any]
) -> dict[str, Any]:
    """``search_knowledge``: ranked excerpts of the workspace's knowledge."""
    query, failure = _query(arguments)
    if failure:
        return tool_failed(failure)
    limit = search_limit(arguments.get("limit"))
    scope = knowledge_scope(route=access.route, effective=access.effective)
    result = knowledge_search(scope=scope, query=query, limit=limit)
    if result.status == STATUS_UNAVAILABLE:
        _audit(identity, access, "mcp.knowledge.search", scope.revision, {"status": result.status})
        return tool_failed(_unavailable(result))
    hits = result.hits[:limit]
    labels = _labels(hits)
    items = []
    for hit in hits:
        item: dict[str, Any] = {
            "source_id": _source_id(hit),
            "document_id": _source_id(hit),
            "title": hit.title,
            "score": hit.score,
            "retrievers": list(hit.retrievers),
            "content": excerpt(hit.content),
        }
        if hit.document_id in labels:
            item["source"] = labels[hit.document_id]
        items.append(item)
    rendering = render_search(items)
    _audit(
        identity,
        access,
        "mcp.knowledge.search",
        scope.revision,
        {
            "status": result.status,
            "mode": result.mode,
            "degraded": result.degraded,
            "limit": limit,
            "hits": len(hits),
            "returned": len(rendering.results),
            "truncated": rendering.truncated,
        },
    )
    return _result(rendering.text, {"results": rendering.results, "truncated": rendering.truncated})


def _answer_sources(hits: list[Hit]) -> tuple[list[AnswerSource], dict[str, Hit]]:
    """One source per document, best first: its best chunks (in rank order) as the content."""
    chunks: dict[str, list[Hit]] = {}
    for hit in hits:
        chunks.setdefault(_source_id(hit), []).append(hit)
    sources = []
    best = {}
    for source_id, document_hits in chunks.items():
        top = document_hits[0]
        best[source_id] = top
        content = "\n\n".join(hit.content for hit in document_hits[:ASK_CHUNKS_PER_SOURCE])
        sources.append(AnswerSource(source_id=source_id, title=top.title, content=content, score=top.score))
    return sources, best


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
    query, failure = _query(arguments)
    if failure:
        return tool_failed(failure)
    scope = knowledge_scope(route=access.route, effective=access.effective)
    result = knowledge_search(scope=scope, query=query, limit=ASK_RETRIEVE)
    if result.status == STATUS_UNAVAILABLE:
        _audit(identity, access, "mcp.knowledge.ask", scope.revision, {"status": result.status})
        return tool_failed(_unavailable(result))
    candidates, best = _answer_sources(result.hits)
    try:
        answer = knowledge_answer(question=query, sources=candidates)
    except AnswerUnavailable as exc:
        _audit(
            identity,
            access,
            "mcp.knowledge.ask",
            scope.revision,
            {"status": result.status, "answer": "failed", "hits": len(result.hits)},
        )
        return tool_failed(f"Tool failed: {exc.message}")
    labels = _labels([best[source.source_id] for source in answer.sources])
    sources = []
    for source in answer.sources:
        item: dict[str, Any] = {
            "source_id": source.source_id,
            "document_id": source.source_id,
            "title": source.title,
            "score": source.score,
        }
        label = labels.get(best[source.source_id].document_id)
        if label:
            item["source"] = label
        sources.append(item)
    _audit(
        identity,
        access,
        "mcp.knowledge.ask",
        scope.revision,
        {
            "status": result.status,
            "mode": result.mode,
            "answer": answer.mode,
            "hits": len(result.hits),
            "sources": len(sources),
        },
    )
    return _result(render_answer(answer.text, sources), {"answer": answer.text, "sources": sources})
