"""Never a duplicate write: every attempt whose outcome is unknown is ``reconciliation_required`` and
is never sent again, counted on the business side (docs/protocol.md "Unknown outcomes")."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
from django.db import connection

from agent_runtime.models import ToolCallJournal, ToolInvocation
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    get,
    invoke_body,
    post,
    provider_for,
    receipt_url,
    resume_url,
    workspace,
)
from tests.support.live_hub import test_database_url

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "chaos"
WRITES = ["chaos_ok", "chaos_drop_after_write", "chaos_hang", "chaos_reset_mid_body", "chaos_slow_ok"]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def session(chaos_business):
    provider_for(name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret)
    workspace(route_key=ROUTE, provider="chaos", write_tools=WRITES)
    return agent(route_key=ROUTE)


def _unknown_then_never_again(api_client, session, chaos, tool, arguments, reason):
    body = invoke_body(session, ROUTE, tool, arguments)
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "reconciliation_required", result
    assert (result["ok"], result["auto_retry_allowed"]) == (False, False)
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == reason
    assert invocation.journal.state == ToolCallJournal.State.UNCERTAIN
    assert invocation.journal.idempotency_key in result["text"] or invocation.readonly
    for _ in range(3):
        assert post(api_client, session, INVOKE_URL, body).json()["state"] == "reconciliation_required"
        assert post(api_client, session, resume_url(body["invocation_id"]), {}).json()["state"] == (
            "reconciliation_required"
        )
    receipt = get(api_client, session, receipt_url(body["invocation_id"])).json()
    assert (receipt["dispatch_state"], receipt["journal_state"]) == ("attempted", "uncertain")
    assert chaos.calls(tool) == 1
    return body


def test_a_write_whose_answer_was_dropped_is_never_sent_again(api_client, session, chaos_business):
    _unknown_then_never_again(
        api_client, session, chaos_business, "chaos_drop_after_write", {"note": "a"}, "connection_lost"
    )
    assert chaos_business.writes("chaos_drop_after_write") == 1


def test_a_write_that_hangs_past_the_timeout_is_never_sent_again(api_client, session, chaos_business):
    started = time.monotonic()
    _unknown_then_never_again(api_client, session, chaos_business, "chaos_hang", {"note": "h"}, "timeout")
    assert time.monotonic() - started < 10  # the ACC timeout (1.5 s) bounds the first attempt
    assert chaos_business.writes("chaos_hang") == 1


def test_a_reset_in_the_middle_of_the_body_is_never_sent_again(api_client, session, chaos_business):
    _unknown_then_never_again(
        api_client, session, chaos_business, "chaos_reset_mid_body", {"note": "r"}, "body_unreadable"
    )
    assert chaos_business.writes("chaos_reset_mid_body") == 1


def test_a_read_only_tool_with_an_unknown_outcome_is_not_retried_either(api_client, session, chaos_business):
    chaos_business.drop_reads(1)
    _unknown_then_never_again(
        api_client, session, chaos_business, "chaos_read", {"mode": "ok"}, "connection_lost"
    )


def test_an_unknown_outcome_freezes_further_writes_of_the_run_until_resolved(
    api_client, session, chaos_business
):
    from approvals.services.reconciliation import journal_resolve
    from bailing.audit.actor import Actor

    lost = invoke_body(session, ROUTE, "chaos_drop_after_write", {"note": "lost"})
    assert post(api_client, session, INVOKE_URL, lost).json()["state"] == "reconciliation_required"
    frozen = post(
        api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "chaos_ok", {"note": "next"})
    ).json()
    assert frozen["state"] == "rejected_before_dispatch"
    assert ToolInvocation.objects.get(invocation_id=frozen["invocation_id"]).reason_code == "run_frozen"
    # Reads still work.
    read = post(
        api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "chaos_read", {"mode": "ok"})
    ).json()
    assert read["state"] == "executed"
    assert chaos_business.writes("chaos_ok") == 0

    invocation = ToolInvocation.objects.get(invocation_id=lost["invocation_id"])
    journal_resolve(
        invocation=invocation,
        resolution="executed",
        evidence="write #1 in the log",
        actor=Actor.system("ops"),
    )
    resolved = post(api_client, session, resume_url(lost["invocation_id"]), {}).json()
    assert (resolved["state"], resolved["ok"]) == ("executed", True)
    assert resolved["reconciliation"]["resolution"] == "executed"
    assert "write #1 in the log" in resolved["text"]
    assert post(api_client, session, resume_url(lost["invocation_id"]), {}).json() == resolved
    after = post(
        api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "chaos_ok", {"note": "after"})
    ).json()
    assert after["state"] == "executed"
    assert chaos_business.writes("chaos_drop_after_write") == 1  # resolving never redispatches


def test_resolved_as_not_executed_is_replayed_as_such(api_client, session, chaos_business):
    from approvals.services.reconciliation import journal_resolve
    from bailing.audit.actor import Actor

    body = invoke_body(session, ROUTE, "chaos_hang", {"note": "n"})
    post(api_client, session, INVOKE_URL, body)
    journal_resolve(
        invocation=ToolInvocation.objects.get(invocation_id=body["invocation_id"]),
        resolution="not_executed",
        evidence="",
        actor=Actor.system("ops"),
    )
    result = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert (result["state"], result["reconciliation"]["resolution"]) == (
        "rejected_before_dispatch",
        "not_executed",
    )
    assert chaos_business.calls("chaos_hang") == 1


def test_twenty_parallel_identical_invocations_make_one_business_write(api_client, session, chaos_business):
    from rest_framework.test import APIClient

    body = invoke_body(session, ROUTE, "chaos_slow_ok", {"delay_ms": 300, "note": "once"})
    barrier = threading.Barrier(20)
    states: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        try:
            barrier.wait(timeout=20)
            result = post(APIClient(), session, INVOKE_URL, body).json()
            with lock:
                states.append(result["state"])
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(states) == 20
    assert set(states) <= {"executed", "in_progress"}
    assert "executed" in states
    assert chaos_business.writes("chaos_slow_ok") == 1
    assert ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).count() == 1
    assert post(api_client, session, INVOKE_URL, body).json()["state"] == "executed"
    assert chaos_business.writes("chaos_slow_ok") == 1


def test_a_write_still_in_flight_does_not_freeze_the_next_one(api_client, session, chaos_business):
    """Only an unknown outcome freezes further writes: a sibling that is merely slow is not one."""
    from rest_framework.test import APIClient

    slow = invoke_body(session, ROUTE, "chaos_slow_ok", {"delay_ms": 1500, "note": "slow"})
    results: dict[str, dict] = {}

    def call_slow() -> None:
        try:
            results["slow"] = post(APIClient(), session, INVOKE_URL, slow).json()
        finally:
            connection.close()

    thread = threading.Thread(target=call_slow)
    thread.start()
    deadline = time.monotonic() + 10
    while not ToolInvocation.objects.filter(
        invocation_id=slow["invocation_id"], status="dispatching"
    ).exists():
        assert time.monotonic() < deadline, "the slow call never started dispatching"
        time.sleep(0.02)
    quick = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "chaos_ok", {"note": "quick"}))
    thread.join(timeout=20)
    assert quick.json()["state"] == "executed", quick.json()
    assert results["slow"]["state"] == "executed"
    assert (chaos_business.writes("chaos_ok"), chaos_business.writes("chaos_slow_ok")) == (1, 1)


# --- a gunicorn worker killed during dispatch -------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def gunicorn_hub(tmp_path):
    """The hub under the shipped gunicorn config, on this test's database, one worker."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "BAILING_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "4",
    }
    log = (tmp_path / "gunicorn.log").open("w")
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")),
            "-c",
            str(ROOT / "bailing" / "gunicorn.conf.py"),
            "bailing.wsgi",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.1)
        yield server, f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_a_worker_killed_during_dispatch_leaves_an_unknown_outcome_that_is_never_resent(
    session, chaos_business, gunicorn_hub
):
    server, base_url = gunicorn_hub
    body = invoke_body(session, ROUTE, "chaos_slow_ok", {"delay_ms": 1500, "note": "killed"})
    headers = {"Authorization": f"Bearer {session._access}"}
    outcome: dict = {}

    def call() -> None:
        try:
            with httpx.Client(trust_env=False, timeout=20) as client:
                outcome["response"] = client.post(base_url + INVOKE_URL, json=body, headers=headers)
        except httpx.HTTPError as exc:
            outcome["error"] = type(exc).__name__

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 15
    while chaos_business.calls("chaos_slow_ok") == 0:
        assert time.monotonic() < deadline, f"the business request never arrived: {outcome}" + (
            outcome["response"].text if "response" in outcome else ""
        )
        time.sleep(0.02)
    # The request is in flight and its journal said dispatching: kill the worker outright.
    [worker] = psutil.Process(server.pid).children()
    assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).status == "dispatching"
    os.kill(worker.pid, signal.SIGKILL)
    caller.join(timeout=30)
    assert "response" not in outcome or outcome["response"].status_code >= 500
    # The business finishes its write regardless; the hub never learnt it.
    deadline = time.monotonic() + 10
    while chaos_business.writes("chaos_slow_ok") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    with httpx.Client(trust_env=False, timeout=30) as client:
        deadline = time.monotonic() + 60
        while True:  # the master starts a new worker
            try:
                resumed = client.post(base_url + resume_url(body["invocation_id"]), json={}, headers=headers)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        result = resumed.json()
        assert result["state"] == "reconciliation_required", result
        replay = client.post(base_url + INVOKE_URL, json=body, headers=headers).json()
        assert replay["state"] == "reconciliation_required"
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "worker_lost"
    assert invocation.journal.state == ToolCallJournal.State.UNCERTAIN
    assert chaos_business.calls("chaos_slow_ok") == 1
    assert chaos_business.writes("chaos_slow_ok") == 1
