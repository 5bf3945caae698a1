"""One stalling business system cannot take the hub: each provider's bulkhead, through the shipped server.

The hub runs as ``make demo`` runs it (the front before gunicorn, 2 workers × 4 threads) on this test
session's database. Eight calls to a business system that takes seconds to answer are sent at once;
while they are still in flight, ``/health``, a bootstrap and a call to another provider are answered.
Without the bulkhead the eight calls hold all eight threads and those answers come only after the
stalled calls return. With it, at most ``BAILING_PROVIDER_MAX_CONCURRENT_CALLS`` (2) per process wait
on the stalled provider; the others are refused at once — ``rejected_before_dispatch``,
``auto_retry_allowed: true``, nothing sent, nothing stored — and succeed when retried.
"""

from __future__ import annotations

import concurrent.futures
import threading

import httpx
import pytest

from agent_runtime.models import ToolInvocation
from tests.support.chaos_business import running_chaos_business
from tests.support.invocations import INVOKE_URL, agent, invoke_body, provider_for, resume_url, workspace
from tests.support.live_hub import live_hub

pytestmark = pytest.mark.django_db(transaction=True)
# A held call gives up after this; the tool's own timeout (10 s) is longer, so the hub waits on it.
HELD_MS = 9000
# What "answered meanwhile" allows: far above a normal answer, well below the held calls.
PROBE_TIMEOUT = 5.0
WORKERS, THREADS, PER_PROCESS = 2, 4, 2


@pytest.fixture(scope="module")
def hub(django_db_setup, tmp_path_factory):
    env = {
        "GUNICORN_WORKERS": str(WORKERS),
        "GUNICORN_THREADS": str(THREADS),
        "BAILING_PROVIDER_MAX_CONCURRENT_CALLS": str(PER_PROCESS),
    }
    with live_hub(tmp_path_factory.mktemp("bulkhead"), env) as url:
        yield url


@pytest.fixture
def businesses():
    with running_chaos_business() as stalled, running_chaos_business() as other:
        yield stalled, other


def _headers(session) -> dict[str, str]:
    return {"Authorization": f"Bearer {session._access}"}


def test_a_stalled_provider_takes_a_bounded_share_and_everything_else_is_answered_meanwhile(hub, businesses):
    stalled, other = businesses
    provider_for(name="stalled", base_url=stalled.base_url, secret=stalled.secret)
    provider_for(name="other", base_url=other.base_url, secret=other.secret)
    workspace(route_key="stalled", provider="stalled", write_tools=["chaos_slow_ok"], max_calls=20)
    workspace(route_key="other", provider="other", write_tools=["chaos_ok"])
    stuck_agent, other_agent = agent(route_key="stalled"), agent(route_key="other")
    bodies = [
        invoke_body(stuck_agent, "stalled", "chaos_slow_ok", {"delay_ms": HELD_MS, "note": f"s{index}"})
        for index in range(8)
    ]
    # The stalled system holds every call it receives until the test releases it.
    stalled.hold_slow_calls()
    with httpx.Client(base_url=hub, timeout=60) as client, concurrent.futures.ThreadPoolExecutor(8) as pool:

        def stuck(body):
            response = client.post(INVOKE_URL, json=body, headers=_headers(stuck_agent))
            return response.status_code, response.json()

        futures = [pool.submit(stuck, body) for body in bodies]
        try:
            # Each of the eight is either refused at once or held by the stalled system (a thread each).
            pause = threading.Event()
            for _ in range(400):
                if stalled.calls("chaos_slow_ok") + sum(future.done() for future in futures) >= len(bodies):
                    break
                pause.wait(0.05)
            # Meanwhile the rest of the hub answers (without the bulkhead these wait for a free thread,
            # and none frees before the release).
            health = client.get("/health", timeout=PROBE_TIMEOUT)
            bootstrap = client.get(
                "/agent-api/v1/workspaces/other/bootstrap",
                headers=_headers(other_agent),
                timeout=PROBE_TIMEOUT,
            )
            call = client.post(
                INVOKE_URL,
                json=invoke_body(other_agent, "other", "chaos_ok", {"note": "meanwhile"}),
                headers=_headers(other_agent),
                timeout=PROBE_TIMEOUT,
            )
            assert stalled.writes("chaos_slow_ok") == 0  # nothing held was released yet
        finally:
            stalled.release_slow_calls()
        results = [future.result() for future in futures]

    assert (health.status_code, bootstrap.status_code, call.status_code) == (200, 200, 200)
    assert call.json()["state"] == "executed"
    assert other.writes("chaos_ok") == 1

    states = [result["state"] for _, result in results]
    executed = [result for _, result in results if result["state"] == "executed"]
    refused = [result for _, result in results if result["state"] == "rejected_before_dispatch"]
    assert len(executed) + len(refused) == 8, states
    assert 1 <= len(executed) <= WORKERS * PER_PROCESS
    assert stalled.writes("chaos_slow_ok") == stalled.calls("chaos_slow_ok") == len(executed)
    for result in refused:
        assert (result["auto_retry_allowed"], result["retry_after_ms"]) == (True, 1000)
        assert result["concurrency_limit"] == {
            "level": "provider",
            "limit": PER_PROCESS,
            "scope": "hub_process",
        }
        # Nothing was stored: the same invocation may be sent again.
        assert not ToolInvocation.objects.filter(invocation_id=result["invocation_id"]).exists()

    # Sent again once the stalled system answers, a refused call goes through, once.
    retry = next(body for body in bodies if body["invocation_id"] == refused[0]["invocation_id"])
    with httpx.Client(base_url=hub, timeout=60) as client:
        again = client.post(INVOKE_URL, json=retry, headers=_headers(stuck_agent)).json()
        assert again["state"] == "executed", again
        replay = client.post(resume_url(retry["invocation_id"]), json={}, headers=_headers(stuck_agent))
        assert replay.json() == again
    assert stalled.writes("chaos_slow_ok") == len(executed) + 1
