"""Races on turn idempotency, for real: parallel requests on their own connections and threads."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agent_runtime.models import AgentConversation, AgentRun, VisibleMessage
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory, RouteFactory
from tests.support.runtime import post_turn, turn_body

pytestmark = pytest.mark.django_db(transaction=True)


def run_parallel(bodies, session, route="orders"):
    """POST every body at once (one thread and one DB connection each); [(status, bytes)] in order."""
    results: list[tuple[int, bytes] | None] = [None] * len(bodies)
    barrier = threading.Barrier(len(bodies))

    def worker(index, body):
        try:
            client = APIClient()
            barrier.wait()
            response = post_turn(client, session, route, body)
            results[index] = (response.status_code, response.content)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, body)) for i, body in enumerate(bodies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture
def session():
    RouteFactory(route_key="orders")
    return AgentSessionFactory(allowed_routes=["orders"])


def test_fifty_identical_first_requests_create_one_run_and_one_body(session):
    results = run_parallel([turn_body()] * 50, session)
    assert [status for status, _ in results] == [200] * 50
    assert len({body for _, body in results}) == 1
    assert AgentRun.objects.count() == 1
    assert AgentConversation.objects.count() == 1
    assert VisibleMessage.objects.count() == 1
    assert AuditEvent.objects.filter(action="agent_runtime.turn.context_ready").count() == 1
    assert AgentRun.objects.get().context_body.encode() == results[0][1]


def test_two_different_payloads_under_one_key_give_one_200_and_one_409(session):
    for attempt in range(5):
        bodies = [
            turn_body(attempt, user_input="first payload"),
            turn_body(attempt, user_input="second payload"),
        ]
        results = run_parallel(bodies, session)
        assert sorted(status for status, _ in results) == [200, 409]
        loser = next(body for status, body in results if status == 409)
        assert b'"error":"turn_conflict"' in loser
    assert AgentRun.objects.count() == 5
    assert VisibleMessage.objects.count() == 5


def test_one_user_message_id_raced_under_two_turns_gives_one_run(session):
    bodies = [
        turn_body(1, user_message_id="shared-message"),
        turn_body(2, user_message_id="shared-message"),
    ]
    results = run_parallel(bodies, session)
    assert sorted(status for status, _ in results) == [200, 409]
    assert AgentRun.objects.count() == 1


def test_parallel_first_turns_of_one_new_conversation_share_it(session):
    results = run_parallel([turn_body(n) for n in range(8)], session)
    assert [status for status, _ in results] == [200] * 8
    assert AgentConversation.objects.count() == 1
    assert AgentRun.objects.count() == 8
