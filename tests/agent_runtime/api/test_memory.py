"""Turn memory through the API: order, scoping, the three budgets and the read-before-append rule."""

from __future__ import annotations

import pytest

from agent_runtime.models import Route, VisibleMessage
from bailing.api.limits import cut_utf16
from tests.factories import AgentSessionFactory, RouteFactory
from tests.support.runtime import completion_body, post_complete, post_turn, turn_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    RouteFactory(route_key="orders")
    return AgentSessionFactory(allowed_routes=["orders"])


def set_memory(**memory):
    Route.objects.filter(route_key="orders").update(memory=memory)


def exchange(api_client, session, n, *, user_input=None, answer=None, conversation="conversation-1"):
    """One turn and its completion; returns the turn's response body."""
    body = turn_body(n, client_conversation_id=conversation)
    if user_input is not None:
        body["user_input"] = user_input
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 200, response.content
    data = response.json()
    if answer is not None:
        done = post_complete(api_client, session, data["run_id"], completion_body(n, content=answer))
        assert done.status_code == 200, done.content
    return data


def recent_of(data) -> list[dict]:
    return data["context"]["memory"]["recent"]


def pairs(data) -> list[tuple[str, str]]:
    return [(entry["role"], entry["content"]) for entry in recent_of(data)]


def test_first_turn_has_empty_memory(api_client, session):
    data = exchange(api_client, session, 1)
    assert data["context"]["memory"] == {"summary": None, "recent": []}
    assert data["context"]["memory_refs"][0]["prior_messages"] == 0


def test_memory_is_prior_messages_in_chronological_order_without_the_current_one(api_client, session):
    exchange(api_client, session, 1, user_input="Who is Ada?", answer="Ada is an engineer.")
    exchange(api_client, session, 2, user_input="And Bob?", answer="Bob is a designer.")
    data = exchange(api_client, session, 3, user_input="Thanks")
    assert pairs(data) == [
        ("user", "Who is Ada?"),
        ("assistant", "Ada is an engineer."),
        ("user", "And Bob?"),
        ("assistant", "Bob is a designer."),
    ]
    assert data["context"]["memory_refs"][0]["prior_messages"] == 4
    stored = VisibleMessage.objects.order_by("created_at", "id").exclude(content="Thanks")
    expected = [
        m.created_at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{m.created_at.microsecond // 1000:03d}Z"
        for m in stored
    ]
    assert [entry["created_at"] for entry in recent_of(data)] == expected
    assert all(list(entry) == ["role", "content", "created_at", "truncated"] for entry in recent_of(data))


def test_an_uncompleted_turn_leaves_only_its_user_message(api_client, session):
    exchange(api_client, session, 1, user_input="First question")
    data = exchange(api_client, session, 2)
    assert pairs(data) == [("user", "First question")]


def test_failed_and_cancelled_answers_are_visible_memory(api_client, session):
    first = exchange(api_client, session, 1, user_input="Q1")
    post_complete(
        api_client, session, first["run_id"], completion_body(1, status="failed", content="It failed.")
    )
    data = exchange(api_client, session, 2)
    assert pairs(data) == [("user", "Q1"), ("assistant", "It failed.")]


def test_memory_is_scoped_to_session_workspace_and_conversation(api_client, session):
    exchange(api_client, session, 1, user_input="in conversation 1", answer="answer 1")
    other_session = AgentSessionFactory(client=session.client, allowed_routes=["orders"])
    post_turn(api_client, other_session, "orders", turn_body(9, user_input="other session"))
    RouteFactory(route_key="billing")
    session.allowed_routes = ["orders", "billing"]
    session.save(update_fields=["allowed_routes"])
    post_turn(api_client, session, "billing", turn_body(8, user_input="other workspace"))
    exchange(api_client, session, 2, user_input="in conversation 2", conversation="conversation-2")
    data = exchange(api_client, session, 3)
    assert pairs(data) == [("user", "in conversation 1"), ("assistant", "answer 1")]


def test_replayed_turn_keeps_its_original_memory(api_client, session):
    first = exchange(api_client, session, 1, user_input="Q1", answer="A1")
    second = exchange(api_client, session, 2, user_input="Q2", answer="A2")
    assert pairs(second) == [("user", "Q1"), ("assistant", "A1")]
    assert recent_of(post_turn(api_client, session, "orders", turn_body(1, user_input="Q1")).json()) == []
    assert first["context"]["memory"]["recent"] == []


def test_recent_messages_keeps_the_newest(api_client, session):
    for n in range(1, 4):
        exchange(api_client, session, n, user_input=f"Q{n}", answer=f"A{n}")
    set_memory(recent_messages=3)
    data = exchange(api_client, session, 4)
    assert pairs(data) == [("assistant", "A2"), ("user", "Q3"), ("assistant", "A3")]


def test_per_message_chars_cuts_and_says_so(api_client, session):
    set_memory(per_message_chars=50)
    exchange(api_client, session, 1, user_input="u" * 80, answer="short answer")
    data = exchange(api_client, session, 2)
    user, assistant = recent_of(data)
    assert user["content"] == "u" * 50 and user["truncated"] is True
    assert assistant["content"] == "short answer" and assistant["truncated"] is False


def test_per_message_cut_counts_utf16_units_and_never_splits_a_pair(api_client, session):
    set_memory(per_message_chars=50)
    exchange(api_client, session, 1, user_input="a" + "😀" * 30)
    (entry,) = recent_of(exchange(api_client, session, 2))
    assert entry["content"] == "a" + "😀" * 24  # 49 units: a 25th emoji would need 51
    assert entry["truncated"] is True


@pytest.mark.parametrize(
    ("middle", "expected"),
    [
        # 15 + 185 = 200 fits exactly; the 1-character "x" would make 201: stop.
        (185, [("user", "a" * 185), ("user", "c" * 15)]),
        # 15 + 190 = 205 overflows: stop there, although "x" further back would still fit by size
        # (BailingHub stops at the first message over budget; docs/protocol.md "Memory").
        (190, [("user", "c" * 15)]),
    ],
)
def test_recent_budget_stops_at_the_first_message_that_does_not_fit(api_client, session, middle, expected):
    set_memory(recent_budget_chars=200, per_message_chars=2000)
    exchange(api_client, session, 1, user_input="x")
    exchange(api_client, session, 2, user_input="a" * middle)
    exchange(api_client, session, 3, user_input="c" * 15)
    data = exchange(api_client, session, 4)
    assert pairs(data) == expected
    assert data["context"]["memory_refs"][0]["prior_messages"] == len(expected)


def test_summary_is_null_even_when_enabled(api_client, session):
    set_memory(summary_enabled=True)
    exchange(api_client, session, 1, user_input="Q1", answer="A1")
    data = exchange(api_client, session, 2)
    assert data["context"]["memory"]["summary"] is None
    assert pairs(data) == [("user", "Q1"), ("assistant", "A1")]


@pytest.mark.parametrize(
    ("text", "units", "expected", "cut"),
    [
        ("abc", 3, "abc", False),
        ("abcd", 3, "abc", True),
        ("😀😀", 4, "😀😀", False),
        ("😀😀", 3, "😀", True),
        ("😀", 1, "", True),
        ("", 0, "", False),
        ("a", 0, "", True),
        ("a", -5, "", True),
    ],
)
def test_cut_utf16(text, units, expected, cut):
    assert cut_utf16(text, units) == (expected, cut)
