"""The knowledge budgets at ``limit - 1``, ``limit`` and ``limit + 1``: REST search and read, and the MCP
knowledge tools, on a real (lexical) knowledge base (see test_sweep.py for the table itself)."""

from __future__ import annotations

import json

import pytest

from bailing.api.limits import utf16_length
from tests.budgets.sweeps import DELTAS, limit, sweeps
from tests.factories import AgentSessionFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document
from tests.mcp_server.support import modern_headers, modern_message, post_raw
from tests.support.runtime import post_json

pytestmark = pytest.mark.django_db
ROUTE = "docs"
TEXT = "Refunds are paid back to the original card within fourteen days of the return."


@pytest.fixture
def session():
    kb = KnowledgeBaseFactory(
        kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    knowledge_document(kb, "refunds", "Refund policy", TEXT * 200)
    RouteFactory(route_key=ROUTE, knowledge={"kb_ids": [kb.kb_id]})
    return AgentSessionFactory(allowed_routes=[ROUTE])


def url(action: str) -> str:
    return f"/agent-api/v1/workspaces/{ROUTE}/knowledge/{action}"


def query_of(units: int) -> str:
    """A query of exactly ``units`` UTF-16 units that still finds the refund page (an astral
    character at the end counts two)."""
    head = "refund "
    text = head + "🔑" * ((units - len(head)) // 2) + "x" * ((units - len(head)) % 2)
    assert utf16_length(text) == units
    return text


def padded(body: dict, size: int) -> bytes:
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def _mcp(client, session, name: str, arguments: dict) -> dict:
    message = modern_message("tools/call", {"name": name, "arguments": arguments})
    response = post_raw(
        client, ROUTE, json.dumps(message), token=session._access, headers=modern_headers(message)
    )
    assert response.status_code == 200, response.content[:300]
    return response.json()["result"]


@sweeps("knowledge.query")
@pytest.mark.parametrize("delta", DELTAS)
def test_query_budget_through_rest_search_and_the_mcp_tools(api_client, client, session, delta):
    query = query_of(limit("knowledge.query") + delta)
    response = post_json(api_client, url("search"), session._access, {"query": query})
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["field"]) == (
            400,
            "invalid_request",
            "query",
        )
    else:
        assert response.status_code == 200, response.content
        assert response.json()["hints"]
    for tool in ("search_knowledge", "ask_knowledge"):
        result = _mcp(client, session, tool, {"query": query})
        assert result["isError"] is (delta > 0), (tool, result)
        if delta > 0:
            assert result["content"][0]["text"].startswith("Tool failed: ")


@sweeps("knowledge.search_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_search_body_budget(api_client, session, delta):
    raw = padded({"query": "refund"}, limit("knowledge.search_body") + delta)
    response = api_client.post(
        url("search"), raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
    else:
        assert response.status_code == 200, response.content


def _ref(api_client, session) -> str:
    return post_json(api_client, url("search"), session._access, {"query": "refund"}).json()["hints"][0][
        "ref"
    ]


@sweeps("knowledge.read_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_read_body_budget(api_client, session, delta):
    raw = padded({"ref": _ref(api_client, session)}, limit("knowledge.read_body") + delta)
    response = api_client.post(
        url("read"), raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
    else:
        assert response.status_code == 200, response.content


@sweeps("knowledge.read_max_bytes")
@pytest.mark.parametrize("delta", DELTAS)
def test_read_max_bytes_budget(api_client, session, delta):
    max_bytes = limit("knowledge.read_max_bytes") + delta
    response = post_json(
        api_client, url("read"), session._access, {"ref": _ref(api_client, session), "max_bytes": max_bytes}
    )
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["field"]) == (
            400,
            "invalid_request",
            "max_bytes",
        )
    else:
        assert response.status_code == 200, response.content
        assert len(response.content) <= max_bytes  # the whole JSON answer of the page fits
