"""How many SQL statements a turn sends (issue 14, "Hot-path cost"): counted, not timed.

Transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) is not counted; every other
statement is. The turns run as in production: outside any transaction (``transaction=True``), so the
knowledge lanes take their pipelined path. The bounds are the counts reached; a change that adds a
statement to the hot path has to raise them here, on purpose.

Statements of a new turn (workspace with business tools), up to its COMMIT: the session
(authentication), the route (gate), the turn keys (replay check), the tool providers (catalog, built
once), the conversation upsert with its memory, the run with its user message, and the audit
event's two. With inline knowledge three more: the knowledge scope, the lane settings and the lanes
with their freshness check (one round trip). Nothing follows the COMMIT on the request's connection:
the process's audit sealer thread seals the event on its own connection (``bailing.audit``; a batch
shared by concurrent requests). A replay stops after the turn keys and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import (
    AgentSessionFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    ToolProviderFactory,
    knowledge_document,
)
from tests.support.runtime import post_turn, turn_body

pytestmark = pytest.mark.django_db(transaction=True)

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")

# (up to the turn's COMMIT, in all)
NEW_TURN = (8, 8)
NEW_TURN_INLINE_KNOWLEDGE = (11, 11)
REPLAY = 3


def is_control(sql: str) -> bool:
    return sql.strip().upper().startswith(TRANSACTION_CONTROL)


def counted(api_client, session, route, body) -> tuple[list[str], list[str], list[str], bytes]:
    """(counted statements up to the turn's COMMIT, all counted statements, the turn's transaction
    control, response bytes) of one turn."""
    with CaptureQueriesContext(connection) as ctx:
        response = post_turn(api_client, session, route, body)
    assert response.status_code == 200, response.content
    sql = [query["sql"] for query in ctx.captured_queries]
    end = sql.index("COMMIT") + 1 if "COMMIT" in sql else len(sql)
    turn = sql[:end]
    return (
        [s for s in turn if not is_control(s)],
        [s for s in sql if not is_control(s)],
        [s for s in turn if is_control(s)],
        response.content,
    )


@pytest.fixture
def session():
    ToolProviderFactory(name="shop", spec=json.loads((SPECS / "catalog_shop.json").read_text("utf-8")))
    tools = {"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}}
    kb = KnowledgeBaseFactory(kb_id="handbook")
    for n in range(3):
        knowledge_document(kb, f"refund-{n}", f"Refunds {n}", f"Refund rule {n}: paid back within 14 days.")
    RouteFactory(route_key="orders", tools=tools)
    RouteFactory(route_key="docs", tools=tools, knowledge={"kb_ids": ["handbook"]})
    return AgentSessionFactory(allowed_routes=["orders", "docs"])


def test_new_turn_and_replay(api_client, session):
    post_turn(api_client, session, "orders", turn_body("warm", client_conversation_id="warm"))
    statements, every, control, first = counted(api_client, session, "orders", turn_body(1))
    assert len(statements) <= NEW_TURN[0], statements
    assert len(every) <= NEW_TURN[1], every
    assert control == ["BEGIN", "COMMIT"]  # one transaction, no savepoint
    assert not [s for s in statements if s.lstrip().upper().startswith("UPDATE")]  # final values at once

    # A second turn of the same conversation reads its memory in the upsert: no extra statement.
    statements, every, control, second = counted(api_client, session, "orders", turn_body(2))
    assert len(statements) <= NEW_TURN[0], statements
    assert len(every) <= NEW_TURN[1], every
    assert control == ["BEGIN", "COMMIT"]
    recent = json.loads(second)["context"]["memory"]["recent"]
    assert [entry["content"] for entry in recent] == [turn_body(1)["user_input"]]

    statements, every, control, replay = counted(api_client, session, "orders", turn_body(1))
    assert replay == first
    assert len(every) <= REPLAY, every
    assert control == []


def test_new_turn_with_inline_knowledge(api_client, session):
    body = turn_body("warm", client_conversation_id="warm", user_input="How are refunds paid?")
    post_turn(api_client, session, "docs", body)
    statements, every, control, content = counted(
        api_client, session, "docs", turn_body(1, user_input="How are refunds paid?")
    )
    assert json.loads(content)["context"]["knowledge"], content
    assert len(statements) <= NEW_TURN_INLINE_KNOWLEDGE[0], statements
    assert len(every) <= NEW_TURN_INLINE_KNOWLEDGE[1], every
    assert control == ["BEGIN", "COMMIT"]
