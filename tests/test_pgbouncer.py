"""The shipped hub (the front + gunicorn) on its database through Debian's PgBouncer in transaction
mode, with the settings docs/scaling.md "A connection pooler" gives for it (``DB_PREPARE_THRESHOLD=``,
``DB_DISABLE_SERVER_SIDE_CURSORS=1``) and a pool smaller than the hub's connections, so that client
connections really share server connections between transactions.

Through it: readiness; turns and their replay; one governed write sent by many identical requests at
once, which reaches the Demo Shop exactly once (the invocation lock holds behind the pooler); many
distinct governed calls at once, none stalled (each pins a server connection for its lock's
transaction while it runs, and the pool is sized above the hub's threads as the docs say); a write
approved and resumed, sent once; and the audit chain verified by ``approvals_audit_verify`` through
the pooler. The first test shows the pooler is what it should be: a session-level advisory lock
taken by one client is "already its own" for the next client of the same server connection — the
failure the hub's locks no longer have.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.demo_business import running_demo_business
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    approve,
    invoke_body,
    provider_for,
    resume_url,
    workspace,
)
from tests.support.live_hub import knowledge_worker_running, live_hub
from tests.support.pgbouncer import pgbouncer_running

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[1]
THREADS = 4  # gunicorn threads of the hub's one worker: each may hold an invocation lock at once
POOLED = {"DB_PREPARE_THRESHOLD": "", "DB_DISABLE_SERVER_SIDE_CURSORS": "1"}


@pytest.fixture(scope="module")
def bouncer(django_db_setup, django_db_blocker):
    # Above the threads that may hold a lock's transaction at once, so one connection is always left
    # for the journal's commits (docs/scaling.md), and below the hub's connections (a request
    # connection and a lock connection per thread), so they share.
    with django_db_blocker.unblock(), pgbouncer_running(pool_size=THREADS + 1) as url:
        yield url


@pytest.fixture(scope="module")
def shop():
    with running_demo_business() as running:
        yield running


@pytest.fixture(scope="module")
def worker(bouncer, tmp_path_factory):
    """A knowledge worker through the pooler too (its queue claims and heartbeat): readiness needs one."""
    log = tmp_path_factory.mktemp("pgbouncer-worker") / "worker.log"
    with knowledge_worker_running(log, args=("--idle-max", "0.5"), env={"DATABASE_URL": bouncer, **POOLED}):
        yield log


@pytest.fixture(scope="module")
def hub(bouncer, worker, tmp_path_factory):
    env = {"DATABASE_URL": bouncer, **POOLED, "GUNICORN_WORKERS": "1", "GUNICORN_THREADS": str(THREADS)}
    with live_hub(tmp_path_factory.mktemp("pgbouncer"), env) as url:
        yield url


def _client(url: str, session) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {session._access}"})


def test_the_pooler_hands_one_server_connection_to_client_after_client(django_db_blocker):
    with (
        django_db_blocker.unblock(),
        pgbouncer_running(pool_size=1) as url,
        psycopg.connect(url, autocommit=True) as first,
        psycopg.connect(url, autocommit=True) as second,
    ):
        pid = first.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert first.execute("SELECT pg_try_advisory_lock(7, 7)").fetchone()[0] is True
        assert second.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
        # A session lock stays with the server connection: the next client finds it its own.
        assert second.execute("SELECT pg_try_advisory_lock(7, 7)").fetchone()[0] is True
        second.execute("SELECT pg_advisory_unlock_all()")


def test_the_hub_and_a_knowledge_worker_are_ready_through_the_pooler(hub, worker):
    deadline = time.monotonic() + 60
    while (response := httpx.get(f"{hub}/health/ready", timeout=30)).status_code != 200:
        assert time.monotonic() < deadline, (response.text, worker.read_text()[-2000:])
        time.sleep(0.2)
    checks = response.json()["checks"]
    assert checks["database"]["ok"] is True and checks["knowledge_worker"]["ok"] is True


def test_a_turn_and_its_replay_through_the_pooler(hub, shop):
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="pooled-turns", provider="demo-shop", write_tools=["create_ticket"])
    session = agent(route_key="pooled-turns")
    body = {
        "client_conversation_id": "pooled-1",
        "client_turn_id": "turn-1",
        "user_message_id": "pooled-message-1",
        "user_input": "Where is order SO-1001?",
    }
    with _client(hub, session) as client:
        assert client.get("/agent-api/v1/workspaces/pooled-turns/bootstrap").status_code == 200
        first = client.post("/agent-api/v1/workspaces/pooled-turns/turns", json=body)
        again = client.post("/agent-api/v1/workspaces/pooled-turns/turns", json=body)
    assert first.status_code == 200, first.text
    assert again.status_code == 200 and again.json()["run_id"] == first.json()["run_id"]


def test_one_write_sent_by_many_identical_requests_at_once_reaches_the_shop_once(hub, shop):
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="pooled-race", provider="demo-shop", write_tools=["create_ticket"])
    session = agent(route_key="pooled-race")
    subject = "pooled-" + secrets.token_hex(6)
    body = invoke_body(session, "pooled-race", "create_ticket", {"subject": subject, "message": "once"})

    def send(_):
        with _client(hub, session) as client:
            return client.post(INVOKE_URL, json=body)

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(send, range(12)))
    assert {answer.status_code for answer in answers} == {200}, [a.text for a in answers]
    states = [answer.json()["state"] for answer in answers]
    assert set(states) <= {"executed", "in_progress"} and "executed" in states, states
    tickets = [ticket for ticket in shop.records()["tickets"] if ticket.get("subject") == subject]
    assert len(tickets) == 1, tickets


def test_distinct_governed_calls_at_once_all_complete_and_each_reaches_the_shop_once(hub, shop):
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key="pooled-many", provider="demo-shop", write_tools=["create_ticket"], max_calls=50)
    session = agent(route_key="pooled-many")
    prefix = "pooled-many-" + secrets.token_hex(4)
    bodies = [
        invoke_body(session, "pooled-many", "create_ticket", {"subject": f"{prefix}-{n}", "message": "m"})
        for n in range(16)
    ]

    def send(body):
        with _client(hub, session) as client:
            answer = client.post(INVOKE_URL, json=body)
            # A call the bulkhead turned away before dispatch may be sent again (auto_retry_allowed).
            deadline = time.monotonic() + 30
            while answer.status_code == 200 and answer.json().get("auto_retry_allowed") is True:
                assert time.monotonic() < deadline, answer.json()
                time.sleep(0.05)
                answer = client.post(INVOKE_URL, json=body)
            return answer

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(send, bodies))
    assert [answer.status_code for answer in answers] == [200] * len(bodies), [a.text for a in answers]
    assert [answer.json()["state"] for answer in answers] == ["executed"] * len(bodies), [
        answer.json() for answer in answers if answer.json()["state"] != "executed"
    ]
    subjects = sorted(
        t["subject"] for t in shop.records()["tickets"] if t.get("subject", "").startswith(prefix)
    )
    assert subjects == sorted(body["arguments"]["subject"] for body in bodies)


def test_a_write_approved_and_resumed_through_the_pooler_is_sent_once(hub, shop):
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(
        route_key="pooled-approval",
        provider="demo-shop",
        write_tools=["request_refund"],
        force_approval=["request_refund"],
    )
    session = agent(route_key="pooled-approval")
    reason = "pooled-" + secrets.token_hex(6)
    body = invoke_body(
        session, "pooled-approval", "request_refund", {"order_id": "SO-1001", "amount": 1.5, "reason": reason}
    )
    with _client(hub, session) as client:
        waiting = client.post(INVOKE_URL, json=body).json()
        assert waiting["state"] == "awaiting_approval", waiting
        approve(waiting["approval_id"])
        resumed = [client.post(resume_url(body["invocation_id"]), json={}) for _ in range(3)]
    assert [answer.status_code for answer in resumed] == [200, 200, 200]
    assert [answer.json()["state"] for answer in resumed] == ["executed"] * 3
    refunds = [refund for refund in shop.records()["refunds"] if refund.get("reason") == reason]
    assert len(refunds) == 1, refunds


def test_the_audit_chain_verifies_through_the_pooler(hub, bouncer):
    # Audit events exist from the tests above (or any other writes of the session).
    env = {**os.environ, "DATABASE_URL": bouncer, **POOLED}
    verified = subprocess.run(
        [sys.executable, "manage.py", "approvals_audit_verify"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
