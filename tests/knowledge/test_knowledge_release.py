"""Every knowledge text an agent receives passes ``agent_knowledge.knowledge_text_release``, on every
surface: REST search and read, the MCP tools ``search_knowledge`` and ``ask_knowledge``, and turns
(inline chunk and doc modes, on-demand hints). The probe release below rewrites one word; no surface
may show it as stored (real PostgreSQL, real retrieval, lexical-only knowledge base)."""

from __future__ import annotations

import json

import pytest

from agent_runtime.models import Route
from knowledge.selectors.scope import KnowledgeScope
from knowledge.services import agent_knowledge
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    knowledge_document,
)
from tests.mcp_server.support import call_modern
from tests.support.runtime import post_json, post_turn, turn_body

pytestmark = pytest.mark.django_db

ROUTE = "docs"
STORED = "fourteen"
RELEASED = "[released]"
REFUNDS = f"Refunds are paid back to the original card within {STORED} days of the return."


@pytest.fixture(autouse=True)
def release(monkeypatch):
    scopes: list[KnowledgeScope] = []

    def probe(text: str, *, scope: KnowledgeScope, hold: tuple[int, str] | None = None) -> str:
        scopes.append(scope)
        return text.replace(STORED, RELEASED)

    monkeypatch.setattr(agent_knowledge, "knowledge_text_release", probe)
    return scopes


@pytest.fixture
def session(settings):
    settings.BAILING_ANSWER_CHAT_URL = ""
    kb = KnowledgeBaseFactory(
        kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    knowledge_document(kb, "refunds", f"Refund policy ({STORED} days)", REFUNDS, metadata={"source": STORED})
    RouteFactory(route_key=ROUTE, knowledge={"kb_ids": [kb.kb_id]})
    client = ClientFactory(hub_consent=True, allowed_routes=[ROUTE])
    return AgentSessionFactory(client=client, allowed_routes=[ROUTE])


def _released(payload) -> None:
    text = json.dumps(payload, ensure_ascii=False)
    assert STORED not in text
    assert RELEASED in text


def _rest(api_client, session, action: str, body: dict):
    response = post_json(
        api_client, f"/agent-api/v1/workspaces/{ROUTE}/knowledge/{action}", session._access, body
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_rest_search_and_read(api_client, session, release):
    found = _rest(api_client, session, "search", {"query": "refund card"})
    _released(found["hints"])
    page = _rest(api_client, session, "read", {"ref": found["hints"][0]["ref"]})
    _released([page["title"], page["content"]])
    assert {scope.revision for scope in release} == {found["knowledge_scope_revision"]}


def test_mcp_search_and_ask(client, session):
    token = session._access
    searched = call_modern(client, ROUTE, token, "search_knowledge", {"query": "refund card"})
    _released(searched)
    asked = call_modern(client, ROUTE, token, "ask_knowledge", {"query": "How are refunds paid back?"})
    assert asked["structuredContent"]["sources"]
    _released(asked)


@pytest.mark.parametrize("knowledge", [{}, {"inject": "doc"}])
def test_inline_turn_knowledge(api_client, session, knowledge):
    Route.objects.filter(route_key=ROUTE).update(knowledge={"kb_ids": ["handbook"], **knowledge})
    response = post_turn(api_client, session, ROUTE, turn_body(1, user_input="refund card"))
    assert response.status_code == 200, response.content
    context = response.json()["context"]
    assert context["knowledge"]
    _released([context["knowledge"], context["knowledge_refs"]])


def test_on_demand_turn_hints(api_client, session):
    body = turn_body(1, user_input="refund card", knowledge_delivery="on_demand")
    response = post_turn(api_client, session, ROUTE, body)
    assert response.status_code == 200, response.content
    hints = response.json()["context"]["knowledge_delivery"]["hints"]
    assert hints
    _released(hints)
