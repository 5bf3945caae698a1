"""Governed calls through the real REST API against the chaos business system, for the outbound rules
of tool dispatch (docs/protocol.md "Dispatch", "Unknown outcomes", "Outbound targets"): one absolute
deadline per call however the answer drips, the path sent is the path signed, and a target the
outbound policy denies is never connected to."""

from __future__ import annotations

import json
import time

import pytest

from agent_runtime.models import ToolCallJournal, ToolInvocation, ToolProvider
from agent_runtime.services import http_dispatch
from agent_runtime.tools.compiler import compile_spec
from tests.support.chaos_business import TIMEOUT_MS
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

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "chaos"
WRITES = ["chaos_ok", "chaos_drip_headers", "chaos_drip_body"]
# The chaos tools' declared execution.timeout_ms; "by the deadline" allows 2 s on a loaded machine
# for the business call the hub timed, and more for the whole API request around it.
DEADLINE = TIMEOUT_MS / 1000
MARGIN = 2.0
REQUEST_MARGIN = 6.0


@pytest.fixture
def session(chaos_business):
    provider_for(name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret)
    workspace(route_key=ROUTE, provider="chaos", write_tools=WRITES)
    chaos_business.reset()  # forget the catalog fetches: targets() then holds the calls only
    return agent(route_key=ROUTE)


# --- one deadline per call ---------------------------------------------------------------------------
@pytest.mark.parametrize("tool", ["chaos_drip_headers", "chaos_drip_body"])
def test_an_answer_that_drips_ends_at_the_deadline_as_an_unknown_outcome_never_sent_again(
    api_client, session, chaos_business, tool
):
    # A first call warms the process up (the first request of a test run loads a lot).
    warm = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "chaos_ok", {"note": "w"}))
    assert warm.json()["state"] == "executed"
    body = invoke_body(session, ROUTE, tool, {"note": "drip"})
    started = time.monotonic()
    result = post(api_client, session, INVOKE_URL, body).json()
    elapsed = time.monotonic() - started
    assert result["state"] == "reconciliation_required", result
    assert (result["ok"], result["auto_retry_allowed"]) == (False, False)
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "timeout"
    assert invocation.journal.state == ToolCallJournal.State.UNCERTAIN
    # The drip goes on for a minute; the call ended at its deadline.
    assert invocation.journal.duration_ms < (DEADLINE + MARGIN) * 1000
    assert elapsed < DEADLINE + REQUEST_MARGIN
    for _ in range(2):
        assert post(api_client, session, resume_url(body["invocation_id"]), {}).json()["state"] == (
            "reconciliation_required"
        )
        assert post(api_client, session, INVOKE_URL, body).json()["state"] == "reconciliation_required"
    receipt = get(api_client, session, receipt_url(body["invocation_id"])).json()
    assert (receipt["dispatch_state"], receipt["journal_state"]) == ("attempted", "uncertain")
    assert chaos_business.writes(tool) == chaos_business.calls(tool) == 1


# --- the path sent is the path signed ------------------------------------------------------------------
SENT_AS_IS = ["a/..", "%2e", "%2e%2e", ".%2e", "%2E.", "..%2f", "...", ".a", "a.", "a/../b", "./", "..\\"]
DOT_SEGMENTS = [".", ".."]


@pytest.mark.parametrize("value", DOT_SEGMENTS + SENT_AS_IS)
def test_the_path_received_is_byte_for_byte_the_path_signed_or_nothing_is_sent(chaos_business, value):
    [tool] = [t for t in compile_spec(chaos_business.spec, provider="chaos").tools if t.name == "chaos_item"]
    chaos_business.reset()
    try:
        request = http_dispatch.dispatch_request_build(
            tool=tool,
            arguments={"item": value},
            base_url=chaos_business.base_url,
            secret=chaos_business.secret,
            job_id="job-path",
            client_app_id="agent-path",
            on_behalf_of="alice",
            idempotency_key=None,
        )
    except http_dispatch.DispatchBuildError as refused:
        assert value in DOT_SEGMENTS
        assert refused.code == "path_invalid"
        assert chaos_business.targets() == []
        return
    assert value in SENT_AS_IS
    outcome = http_dispatch.dispatch_send(request, timeout_ms=TIMEOUT_MS)
    assert chaos_business.targets() == [request.path_with_query]
    assert outcome.ok, outcome  # the business verified the signature over the target it received
    assert json.loads(outcome.text)["target"] == request.path_with_query


@pytest.mark.parametrize("value", DOT_SEGMENTS)
def test_a_dot_segment_path_argument_is_refused_before_dispatch(api_client, session, chaos_business, value):
    body = invoke_body(session, ROUTE, "chaos_item", {"item": value})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "rejected_before_dispatch", result
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "path_invalid"
    assert not ToolCallJournal.objects.filter(invocation=invocation).exists()
    assert chaos_business.targets() == []


def test_a_path_argument_with_dots_inside_a_segment_is_sent_as_signed(api_client, session, chaos_business):
    body = invoke_body(session, ROUTE, "chaos_item", {"item": "a/.."})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "executed", result
    assert chaos_business.targets() == ["/chaos/items/a%2F.."]
    assert json.loads(result["text"])["target"] == "/chaos/items/a%2F.."


# --- outbound targets ------------------------------------------------------------------------------------
def test_a_provider_name_resolving_to_a_denied_address_is_not_sent(
    api_client, session, chaos_business, stand_in_resolver, loopback_only
):
    ToolProvider.objects.filter(name="chaos").update(base_url="https://metadata.test")
    resolver = stand_in_resolver({"metadata.test": [["169.254.169.254"]]})
    body = invoke_body(session, ROUTE, "chaos_ok", {"note": "ssrf"})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "rejected_before_dispatch", result
    assert result["ok"] is False
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "target_forbidden"
    assert invocation.journal.error == "target_forbidden"
    assert resolver.calls == ["metadata.test"]
    assert loopback_only == []  # never connected anywhere
    assert chaos_business.calls("chaos_ok") == 0


@pytest.mark.parametrize("base_url", ["http://169.254.169.254", "http://[::ffff:169.254.169.254]:80"])
def test_a_stored_base_url_with_a_denied_address_is_not_sent(
    api_client, session, chaos_business, loopback_only, base_url
):
    # A row written before the rule existed (config validation refuses it now).
    ToolProvider.objects.filter(name="chaos").update(base_url=base_url)
    body = invoke_body(session, ROUTE, "chaos_read", {"mode": "ok"})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "rejected_before_dispatch", result
    assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).reason_code == "target_forbidden"
    assert loopback_only == []
