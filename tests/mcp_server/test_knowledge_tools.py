"""``search_knowledge`` and ``ask_knowledge`` over the MCP endpoint: every rule of the tools' spec.

Real PostgreSQL and the real retriever (lexical-only knowledge bases, so the figures are exact and
need no embedding model); the answer model is a real local HTTP server speaking the OpenAI chat API.
"""

from __future__ import annotations

import json

import pytest

from bailing.audit.models import AuditEvent
from knowledge.models import KnowledgeBase
from mcp_server.services.knowledge_tools import RESPONSE_MAX_CHARS, excerpt, render_search
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    knowledge_document,
)
from tests.mcp_server.support import call_modern, post_modern, text_of
from tests.support.chat_model import chat_model

pytestmark = pytest.mark.django_db

ROUTE = "handbook"
REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
SHIPPING = "Parcels ship from the Berlin warehouse; delivery takes two working days."
SECRET = "zanzibar-marker"


def _lexical_kb(kb_id: str) -> KnowledgeBase:
    return KnowledgeBaseFactory(kb_id=kb_id, embedding_provider="none", embedding_model="", embedding_dim=0)


@pytest.fixture
def kb():
    return _lexical_kb("shop")


@pytest.fixture
def token(kb):
    RouteFactory(route_key=ROUTE, knowledge={"kb_ids": [kb.kb_id]})
    client = ClientFactory(hub_consent=True, allowed_routes=[ROUTE])
    return AgentSessionFactory(client=client, allowed_routes=[ROUTE])._access


def search(client, token, **arguments):
    return call_modern(client, ROUTE, token, "search_knowledge", arguments)


def ask(client, token, **arguments):
    return call_modern(client, ROUTE, token, "ask_knowledge", arguments)


# --- listing -----------------------------------------------------------------------------------------


def test_both_tools_are_listed_read_only_with_their_schemas(client, token):
    tools = post_modern(client, ROUTE, token, "tools/list").json()["result"]["tools"]
    by_name = {tool["name"]: tool for tool in tools}
    for name in ("search_knowledge", "ask_knowledge"):
        tool = by_name[name]
        assert tool["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}
        assert tool["inputSchema"]["required"] == ["query"]
        assert tool["inputSchema"]["properties"]["query"]["type"] == "string"
    assert by_name["search_knowledge"]["inputSchema"]["properties"]["limit"]["type"] == "number"
    assert by_name["search_knowledge"]["inputSchema"]["properties"]["limit"]["default"] == 10


# --- search_knowledge --------------------------------------------------------------------------------


def test_a_result_has_the_spec_fields_and_renders_as_specified(client, token, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS, metadata={"source": "notion:Policies"})
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    result = search(client, token, query="refund card")
    assert result["isError"] is False
    [item] = result["structuredContent"]["results"]
    assert list(item) == ["source_id", "document_id", "title", "score", "retrievers", "content", "source"]
    assert item["source_id"] == item["document_id"] == "shop:refunds"
    assert item["title"] == "Refund policy"
    assert item["retrievers"] == ["text"]
    assert item["content"] == REFUNDS
    assert item["source"] == "notion:Policies"
    assert result["structuredContent"]["truncated"] is False
    assert text_of(result) == (
        f"### Refund policy (score: {item['score']:.4f}, via text)\ndocument_id: shop:refunds\n\n{REFUNDS}"
    )


def test_source_is_absent_when_the_connector_recorded_none(client, token, kb):
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    [item] = search(client, token, query="warehouse")["structuredContent"]["results"]
    assert "source" not in item


def test_results_are_separated_by_a_blank_line_best_first(client, token, kb):
    knowledge_document(kb, "a", "Alpha", "refund refund refund policy")
    knowledge_document(kb, "b", "Beta", "refund once")
    result = search(client, token, query="refund")
    items = result["structuredContent"]["results"]
    assert [item["title"] for item in items] == ["Alpha", "Beta"]
    assert items[0]["score"] >= items[1]["score"]
    blocks = text_of(result).split("\n\n### ")
    assert len(blocks) == 2 and blocks[1].startswith("Beta (score: ")


def test_no_match_is_no_results_found(client, token, kb):
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    result = search(client, token, query="quantum chromodynamics")
    assert result["isError"] is False
    assert text_of(result) == "No results found."
    assert result["structuredContent"] == {"results": [], "truncated": False}


@pytest.fixture
def thirty(kb):
    for n in range(30):
        knowledge_document(kb, f"doc-{n:02d}", f"Refund note {n}", f"refund note number {n}")


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, 10), (3, 3), (0, 1), (-5, 1), (100, 25), (25, 25), (2.9, 2), ("5", 10), (True, 10), ([], 10)],
)
def test_limit_defaults_to_10_is_clamped_to_1_25_and_non_numbers_fall_back(
    client, token, thirty, limit, expected
):
    arguments = {"query": "refund"} if limit is None else {"query": "refund", "limit": limit}
    result = search(client, token, **arguments)
    assert len(result["structuredContent"]["results"]) == expected


def test_an_excerpt_is_cut_at_2000_characters_then_marked():
    # Chunks are at most 700 characters today, so the cut is checked on the rendering itself.
    # 1999 ASCII characters, then an astral character (two UTF-16 units) that must not be split.
    content = "r" * 1999 + "😀" + "tail"
    assert excerpt(content) == "r" * 1999 + "[…truncated]"
    assert excerpt("s" * 2000) == "s" * 2000
    assert excerpt("s" * 2001) == "s" * 2000 + "[…truncated]"


def _item(n: int, size: int) -> dict:
    return {
        "source_id": f"kb:{n}",
        "document_id": f"kb:{n}",
        "title": f"T{n}",
        "score": 0.5,
        "retrievers": ["vector", "text"],
        "content": "c" * size,
    }


def test_the_response_stays_under_50000_characters_by_dropping_results():
    items = [_item(n, 2000 + len("[…truncated]")) for n in range(25)]
    rendering = render_search(items)
    assert rendering.truncated is True
    assert len(rendering.text.encode("utf-16-le")) // 2 < RESPONSE_MAX_CHARS
    kept = len(rendering.results)
    assert rendering.results == items[:kept]
    assert rendering.text.endswith(f"\n\n[…{25 - kept} more results truncated]")
    assert rendering.text.count("### ") == kept
    # One result more would not have fitted with the truncation line.
    longer = render_search(items[: kept + 1] + items[kept + 1 :])
    assert len(longer.results) == kept
    assert rendering.text.startswith("### T0 (score: 0.5000, via vector+text)\ndocument_id: kb:0\n\nccc")


def test_a_response_just_under_the_cap_is_kept_whole():
    items = [_item(n, 1000) for n in range(25)]
    rendering = render_search(items)
    assert rendering.truncated is False and len(rendering.results) == 25
    assert "more results truncated" not in rendering.text


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "   "}, {"query": 5}, {"query": None}])
@pytest.mark.parametrize("tool", ["search_knowledge", "ask_knowledge"])
def test_a_missing_or_empty_query_fails_the_tool(client, token, tool, arguments):
    result = call_modern(client, ROUTE, token, tool, arguments)
    assert result["isError"] is True
    assert text_of(result) == "Tool failed: `query` must be a non-empty string"
    assert "structuredContent" not in result


def test_a_query_over_2000_characters_fails_the_tool(client, token):
    result = search(client, token, query="q" * 2001)
    assert result["isError"] is True
    assert text_of(result).startswith("Tool failed: ")


def test_a_knowledge_backend_that_cannot_answer_fails_the_tool(client, token, kb):
    # The route names a knowledge base that does not exist (and no other): nothing can be searched.
    from agent_runtime.models import Route

    Route.objects.filter(route_key=ROUTE).update(knowledge={"kb_ids": ["gone"]})
    result = search(client, token, query="refund")
    assert result["isError"] is True
    assert text_of(result).startswith("Tool failed: ")


def test_only_the_tokens_workspace_is_searched(client, token, kb):
    other = _lexical_kb("other")
    RouteFactory(route_key="other", knowledge={"kb_ids": [other.kb_id]})
    knowledge_document(other, "secret", "Other refunds", REFUNDS)
    assert text_of(search(client, token, query="refund")) == "No results found."


def test_each_call_is_audited_without_query_or_content(client, token, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    before = AuditEvent.objects.count()
    search(client, token, query=f"refund {SECRET}")
    ask(client, token, query=f"refund {SECRET}")
    events = list(AuditEvent.objects.order_by("id")[before:])
    assert [event.action for event in events] == ["mcp.knowledge.search", "mcp.knowledge.ask"]
    for event in events:
        assert event.route_key == ROUTE
        dumped = json.dumps(event.data)
        assert SECRET not in dumped and "fourteen" not in dumped
    assert events[0].data["returned"] == 1


# --- ask_knowledge -----------------------------------------------------------------------------------


def test_without_a_model_the_answer_is_extractive_and_cites_retrieved_sources(client, token, kb, settings):
    settings.BAILING_ANSWER_CHAT_URL = ""
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS, metadata={"source": "notion:Policies"})
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    result = ask(client, token, query="How are refunds paid back?")
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert "[1]" in structured["answer"]
    assert structured["sources"][0] == {
        "source_id": "shop:refunds",
        "document_id": "shop:refunds",
        "title": "Refund policy",
        "score": structured["sources"][0]["score"],
        "source": "notion:Policies",
    }
    lines = [
        f"[{n}] {s['title']} ({s['document_id']}, score {s['score']:.4f})"
        for n, s in enumerate(structured["sources"], 1)
    ]
    assert text_of(result) == structured["answer"] + "\n\nSources:\n" + "\n".join(lines)


def test_nothing_relevant_is_an_explicit_not_found_answer_with_no_sources(client, token, kb):
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    result = ask(client, token, query="quantum chromodynamics")
    assert result["isError"] is False
    assert result["structuredContent"]["sources"] == []
    answer = result["structuredContent"]["answer"]
    assert answer and "[" not in answer
    assert text_of(result) == answer  # no sources: only the answer


@pytest.fixture
def chat(settings):
    with chat_model(settings) as state:
        yield state


def test_with_a_model_the_answer_is_synthesized_and_citations_outside_the_sources_are_removed(
    client, token, kb, chat
):
    knowledge_document(kb, "refunds", "Refund policy", "refund " + REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", "refund " + SHIPPING)
    # The model cites the second source first, the first source next, and a source that was never given.
    chat["content"] = "Parcels ship from Berlin [2]. Refunds go to the card [1][7]."
    result = ask(client, token, query="refund")
    [request] = chat["requests"]
    assert request["path"] == "/v1/chat/completions"
    prompt = json.dumps(request["body"]["messages"])
    assert "refund" in prompt and "Refund policy" in prompt and "Shipping" in prompt
    structured = result["structuredContent"]
    assert structured["answer"] == "Parcels ship from Berlin [1]. Refunds go to the card [2]."
    titles = [source["title"] for source in structured["sources"]]
    given = next(message for message in request["body"]["messages"] if message["role"] == "user")["content"]
    # Sources are in citation order: the one cited first is [1].
    assert given.index(titles[1]) < given.index(titles[0])
    second = structured["sources"][1]
    assert text_of(result).endswith(f"[2] {titles[1]} ({second['document_id']}, score {second['score']:.4f})")


def test_a_failing_model_fails_the_tool_instead_of_inventing_an_answer(client, token, kb, chat):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    chat["mode"] = "status"
    result = ask(client, token, query="refunds card")
    assert result["isError"] is True
    assert text_of(result).startswith("Tool failed: ")
    assert "structuredContent" not in result
