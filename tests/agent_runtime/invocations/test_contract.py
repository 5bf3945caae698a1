"""``POST /tool-invocations``, ``…/resume``, ``…/receipt``: every code, budget and state, against the
Demo Shop as a real business process (docs/protocol.md "Invocation checks")."""

from __future__ import annotations

import json
import socket
import types
import uuid

import pytest
from django.utils import timezone

from agent_runtime.models import (
    ApprovalNotification,
    Route,
    ToolApproval,
    ToolCallJournal,
    ToolInvocation,
    ToolProvider,
)
from agent_runtime.services import rate_limits
from agent_runtime.services.invocations import ARGUMENTS_MAX_BYTES, ENVELOPE_MAX_BYTES
from bailing.api.hashing import sha256_hex
from bailing.api.limits import compact_json_utf8_bytes
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    get,
    invoke_body,
    new_invocation_id,
    post,
    provider_for,
    receipt_url,
    resume_url,
    revision,
    workspace,
)
from tests.support.runtime import post_turn, turn_body

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
WRITES = ["create_ticket", "request_refund", "cancel_order"]


@pytest.fixture
def shop(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=WRITES)
    return demo_shop


@pytest.fixture
def alice(shop):
    return agent(route_key=ROUTE, on_behalf_of="alice")


def _invoke(api_client, session, tool_name, args, **overrides):
    body = invoke_body(session, ROUTE, tool_name, args)
    body.update(overrides)
    response = post(api_client, session, INVOKE_URL, body)
    return body, response


def _tickets(shop) -> int:
    return len(shop.records()["tickets"])


# --- budgets ----------------------------------------------------------------------------------------
def _padded(total_bytes: int) -> dict:
    """Arguments whose JSON.stringify is exactly ``total_bytes`` UTF-8 bytes (with a 3-byte char)."""
    base = {"subject": "x", "message": ""}
    fill = total_bytes - compact_json_utf8_bytes(base)
    message = "€" + "m" * (fill - 3)
    arguments = {"subject": "x", "message": message}
    assert compact_json_utf8_bytes(arguments) == total_bytes
    return arguments


def test_arguments_of_exactly_the_budget_are_accepted(api_client, alice):
    _, response = _invoke(api_client, alice, "create_ticket", _padded(ARGUMENTS_MAX_BYTES))
    assert response.status_code == 200
    # The budget let it through; the tool's own schema (message ≤ 2000) refuses it before dispatch.
    assert response.json()["state"] == "rejected_before_dispatch"


def test_one_byte_over_the_arguments_budget_is_413_with_the_exact_size(api_client, alice):
    body, response = _invoke(api_client, alice, "create_ticket", _padded(ARGUMENTS_MAX_BYTES + 1))
    assert response.status_code == 413
    error = response.json()
    assert error == {
        "error": "arguments_too_large",
        "message": error["message"],
        "origin": "core",
        "dispatch": "not_dispatched",
        "limit_scope": "arguments",
        "max_bytes": ARGUMENTS_MAX_BYTES,
        "actual_bytes": ARGUMENTS_MAX_BYTES + 1,
    }
    assert "mmmm" not in response.content.decode()
    assert not ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).exists()


def test_arguments_are_measured_as_javascript_writes_numbers(api_client, alice):
    # 1.0 is "1" in JSON.stringify: the budget counts what a JavaScript client measured.
    arguments = _padded(ARGUMENTS_MAX_BYTES - 10)
    arguments["n"] = 1.0
    assert compact_json_utf8_bytes(arguments) == ARGUMENTS_MAX_BYTES - 10 + len(',"n":1')
    _, response = _invoke(api_client, alice, "create_ticket", arguments)
    assert response.status_code == 200


def test_an_envelope_over_two_mebibytes_is_413_request_body(api_client, alice):
    body = invoke_body(alice, ROUTE, "create_ticket", {"subject": "x", "message": "y"})
    body["padding"] = "p" * ENVELOPE_MAX_BYTES
    raw = json.dumps(body).encode()
    response = api_client.post(
        INVOKE_URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alice._access}"
    )
    assert response.status_code == 413
    error = response.json()
    assert (error["error"], error["limit_scope"], error["max_bytes"]) == (
        "arguments_too_large",
        "request_body",
        ENVELOPE_MAX_BYTES,
    )
    assert error["observed_bytes"] > ENVELOPE_MAX_BYTES


def test_envelope_just_under_two_mebibytes_is_read_and_then_judged(api_client, alice):
    body = invoke_body(alice, ROUTE, "create_ticket", {"subject": "x", "message": "y"})
    body["padding"] = ""
    size = len(json.dumps(body, separators=(",", ":")).encode())
    body["padding"] = "p" * (ENVELOPE_MAX_BYTES - size)
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) == ENVELOPE_MAX_BYTES
    response = api_client.post(
        INVOKE_URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alice._access}"
    )
    # Within the envelope budget: the strict body refuses the unknown field instead.
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": "padding",
    }


# --- body shape -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"invocation_id": "A" * 64}, "invocation_id"),
        ({"invocation_id": "a" * 63}, "invocation_id"),
        ({"tool": "list-orders"}, "tool"),
        ({"arguments": []}, "arguments"),
        ({"arguments": "{}"}, "arguments"),
        ({"capability_revision": "z" * 64}, "capability_revision"),
        ({"agent_run_id": "not-a-uuid"}, "agent_run_id"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_malformed_body_is_400_naming_the_field_and_stores_nothing(api_client, alice, override, field):
    _, response = _invoke(api_client, alice, "list_orders", {}, **override)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == field
    assert not ToolInvocation.objects.exists()


# --- the control-character rule of arguments, and numbers beyond a double --------------------------
@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"subject": "a\x00b", "message": "m"}, "arguments.subject"),
        ({"subject": "s", "message": "bell\x07"}, "arguments.message"),
        ({"subject": "s", "message": "del\x7f"}, "arguments.message"),
        ({"subject": "s", "message": "c1\x85"}, "arguments.message"),
        ({"subject": "s", "message": ["ok", "\x00"]}, "arguments.message[1]"),
        ({"subject": "s", "message": "m", "meta": {"k\x01": 1}}, "arguments.meta"),
    ],
)
def test_a_control_character_in_the_arguments_is_400_naming_it_and_stores_nothing(
    api_client, alice, shop, arguments, field
):
    tickets = _tickets(shop)
    _, response = _invoke(api_client, alice, "create_ticket", arguments)
    assert (response.status_code, response.json()["error"], response.json()["field"]) == (
        400,
        "invalid_request",
        field,
    )
    assert not ToolInvocation.objects.exists()
    assert _tickets(shop) == tickets


def test_tab_lf_cr_and_bidi_controls_in_the_arguments_are_sent_as_they_are(api_client, alice, shop):
    message = "line one\tcol\nline two \u202eDE00 1234\u202c ok \u200b"  # the shop refuses CR
    _, response = _invoke(api_client, alice, "create_ticket", {"subject": "Layout", "message": message})
    assert (response.status_code, response.json()["state"]) == (200, "executed")
    assert shop.records()["tickets"][-1]["message"] == message


def test_a_nul_in_a_call_that_needs_approval_is_400_before_any_approval_exists(api_client, alice):
    _, response = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": 650, "reason": "nul\x00"}
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid_request")
    assert response.json()["field"] == "arguments.reason"
    assert not ToolApproval.objects.exists()
    assert not ToolInvocation.objects.exists()


@pytest.mark.parametrize("digits", [309, 310, 400])
def test_an_integer_literal_beyond_a_double_is_400_naming_the_field(api_client, alice, digits):
    body = invoke_body(alice, ROUTE, "request_refund", {"order_id": "SO-1002", "amount": 0, "reason": "r"})
    raw = json.dumps(body).replace('"amount": 0', '"amount": ' + "9" * digits)
    response = api_client.post(
        INVOKE_URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alice._access}"
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid_request")
    assert response.json()["field"] == "arguments.amount"
    assert not ToolInvocation.objects.exists()


def test_an_integer_within_a_double_is_taken_as_the_nearest_double(api_client, alice):
    body = invoke_body(alice, ROUTE, "create_ticket", {"subject": "s", "message": "m"})
    raw = json.dumps(body).replace('"message": "m"', '"message": "m", "n": ' + "9" * 308)
    response = api_client.post(
        INVOKE_URL, raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alice._access}"
    )
    # Within a double: measured and normalized (then refused by the tool's schema, not a 500).
    assert response.status_code == 200
    assert response.json()["state"] == "rejected_before_dispatch"


def test_an_integer_beyond_a_double_in_a_turn_is_400(api_client, alice):
    raw = json.dumps(turn_body(1, page_context={"n": 0})).replace('"n": 0', '"n": ' + "1" * 320)
    response = api_client.post(
        f"/agent-api/v1/workspaces/{ROUTE}/turns",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice._access}",
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid_request")
    assert response.json()["field"] == "page_context.n"


def test_without_a_bearer_it_is_401(api_client, alice):
    response = api_client.post(INVOKE_URL, invoke_body(alice, ROUTE, "list_orders", {}), format="json")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


# --- the route gate and the catalog -----------------------------------------------------------------
def test_route_gate_codes(api_client, alice):
    cases = [("AUTO", 400, "invalid_route"), ("other", 403, "route_not_allowed")]
    for route, status, code in cases:
        _, response = _invoke(api_client, alice, "list_orders", {}, route=route)
        assert (response.status_code, response.json()["error"]) == (status, code)
    Route.objects.filter(route_key=ROUTE).update(enabled=False)
    _, response = _invoke(api_client, alice, "list_orders", {}, capability_revision="0" * 64)
    assert (response.status_code, response.json()["error"]) == (404, "route_unavailable")


def test_agent_direct_disabled_is_403(api_client, alice):
    route = Route.objects.get(route_key=ROUTE)
    route.tools = {**route.tools, "agent_direct": {"enabled": False}}
    route.save()
    _, response = _invoke(api_client, alice, "list_orders", {}, capability_revision="0" * 64)
    assert (response.status_code, response.json()["error"]) == (403, "agent_direct_disabled")


def test_audience_gate_is_403(api_client, alice):
    route = Route.objects.get(route_key=ROUTE)
    route.audience = {"enabled": True, "principals": ["somebody-else"]}
    route.save()
    _, response = _invoke(api_client, alice, "list_orders", {}, capability_revision="0" * 64)
    assert (response.status_code, response.json()["error"]) == (403, "audience_not_allowed")


def test_a_stale_capability_revision_is_409_and_an_unknown_tool_404(api_client, alice):
    _, stale = _invoke(api_client, alice, "list_orders", {}, capability_revision="0" * 64)
    assert (stale.status_code, stale.json()["error"]) == (409, "capability_changed")
    _, unknown = _invoke(api_client, alice, "drop_database", {})
    assert (unknown.status_code, unknown.json()["error"]) == (404, "tool_not_found")
    assert not ToolInvocation.objects.exists()


def test_a_write_not_listed_in_write_tools_is_not_found(api_client, shop):
    workspace(route_key="readonly-shop", provider="demo-shop", write_tools=[])
    session = agent(route_key="readonly-shop")
    body = invoke_body(session, "readonly-shop", "create_ticket", {"subject": "a", "message": "b"})
    response = post(api_client, session, INVOKE_URL, body)
    assert (response.status_code, response.json()["error"]) == (404, "tool_not_found")


def test_a_run_of_another_session_or_workspace_is_404(api_client, alice):
    other = AgentSessionFactory(client=alice.client, allowed_routes=[ROUTE])
    _, response = _invoke(api_client, alice, "list_orders", {}, agent_run_id=str(uuid.uuid4()))
    assert (response.status_code, response.json()["error"]) == (404, "run_not_found")
    route = Route.objects.get(route_key=ROUTE)
    route.agent_client = {"enabled": True}
    route.save()
    turn = post_turn(api_client, other, ROUTE, turn_body(1)).json()
    _, foreign = _invoke(api_client, alice, "list_orders", {}, agent_run_id=turn["run_id"])
    assert (foreign.status_code, foreign.json()["error"]) == (404, "run_not_found")


# --- execution and idempotency -----------------------------------------------------------------------
def test_a_write_executes_once_and_replays_without_a_second_write(api_client, alice, shop):
    before = _tickets(shop)
    body, response = _invoke(
        api_client, alice, "create_ticket", {"subject": "Late parcel", "message": "Where?"}
    )
    result = response.json()
    assert (result["state"], result["ok"], result["business_status"]) == ("executed", True, 201)
    assert result["auto_retry_allowed"] is False
    assert _tickets(shop) == before + 1
    for _ in range(3):
        assert post(api_client, alice, INVOKE_URL, body).json() == result
        assert post(api_client, alice, resume_url(body["invocation_id"]), {}).json() == result
    assert _tickets(shop) == before + 1
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.journal.state == ToolCallJournal.State.COMPLETED
    assert invocation.journal.http_status == 201


def test_the_same_id_with_another_call_is_invocation_conflict(api_client, alice):
    body, first = _invoke(api_client, alice, "list_orders", {})
    assert first.status_code == 200
    for change in (
        {"arguments": {"status": "paid"}},
        {"tool": "get_order", "arguments": {"order_id": "SO-1001"}},
    ):
        response = post(api_client, alice, INVOKE_URL, {**body, **change})
        assert (response.status_code, response.json()["error"]) == (409, "invocation_conflict")


def test_arguments_are_taken_as_a_javascript_peer_holds_them(api_client, alice, shop):
    """1.0 is 1 for the hash, the snapshot and the request: the same call written either way is one."""
    refunds = len(shop.records()["refunds"])
    body, first = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1001", "amount": 2.0, "reason": "x"}
    )
    assert first.json()["state"] == "executed"
    again = post(
        api_client,
        alice,
        INVOKE_URL,
        {**body, "arguments": {"order_id": "SO-1001", "amount": 2, "reason": "x"}},
    )
    assert again.json() == first.json()
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.args_hash == sha256_hex('{"amount":2,"order_id":"SO-1001","reason":"x"}')
    assert len(shop.records()["refunds"]) == refunds + 1


def test_invocation_ids_are_per_session(api_client, alice, shop):
    bob = agent(route_key=ROUTE, on_behalf_of="bob")
    body, first = _invoke(api_client, alice, "list_orders", {})
    same_id = invoke_body(bob, ROUTE, "list_orders", {}, invocation_id=body["invocation_id"])
    second = post(api_client, bob, INVOKE_URL, same_id)
    assert second.json()["state"] == "executed"
    assert first.json()["text"] != second.json()["text"]  # alice's and bob's orders
    assert ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).count() == 2


def test_a_business_rejection_is_business_rejected_with_its_status(api_client, alice):
    _, response = _invoke(api_client, alice, "get_order", {"order_id": "SO-2001"})  # bob's order
    result = response.json()
    assert (result["state"], result["ok"], result["business_status"]) == ("business_rejected", False, 404)
    assert result["text"].startswith("HTTP 404: {")  # the status, then the shop's error body


def test_a_stable_result_is_not_replayed_once_the_tool_is_no_longer_authorized(api_client, alice):
    body, first = _invoke(api_client, alice, "list_orders", {})
    assert first.json()["state"] == "executed"
    route = Route.objects.get(route_key=ROUTE)
    route.tools = {**route.tools, "sources": [{"provider": "demo-shop", "allow": ["shop.ticket.*"]}]}
    route.save()
    replay = post(api_client, alice, INVOKE_URL, body)
    assert (replay.status_code, replay.json()["error"]) == (409, "capability_changed")
    resumed = post(api_client, alice, resume_url(body["invocation_id"]), {})
    assert (resumed.status_code, resumed.json()["error"]) == (409, "capability_changed")


def test_the_dispatch_is_signed_with_subject_job_and_idempotency_key(api_client, alice, shop):
    body, response = _invoke(api_client, alice, "create_ticket", {"subject": "Sig", "message": "check"})
    assert response.json()["state"] == "executed"
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    keys = {record["key"] for record in shop.records()["idempotency_keys"]}
    # The Demo Shop verified the signature and deduplicates by the hub's idempotency key.
    assert invocation.journal.idempotency_key in keys


# --- rules before dispatch ---------------------------------------------------------------------------
def test_arguments_the_schema_refuses_are_rejected_before_dispatch(api_client, alice, shop):
    before = _tickets(shop)
    body, response = _invoke(api_client, alice, "create_ticket", {"subject": 5, "message": "x"})
    result = response.json()
    assert (result["state"], result["auto_retry_allowed"]) == ("rejected_before_dispatch", False)
    assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).reason_code == "arguments_invalid"
    assert _tickets(shop) == before
    assert not ToolCallJournal.objects.filter(invocation__invocation_id=body["invocation_id"]).exists()


def test_an_approval_rule_that_cannot_be_evaluated_rejects_the_call(api_client, alice):
    body, response = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": "600", "reason": "r"}
    )
    result = response.json()
    assert result["state"] == "rejected_before_dispatch"
    # The schema check (amount is a number) refuses it first; either way nothing is sent.
    assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).reason_code in (
        "arguments_invalid",
        "confirm_when_argument_type",
    )


def test_the_client_rate_limit_is_a_retryable_rejection_that_stores_nothing(api_client, shop, monkeypatch):
    # The client's window is a fixed minute: both calls must fall in one, not straddle two.
    mid_minute = timezone.now().replace(second=30, microsecond=0)
    monkeypatch.setattr(rate_limits, "timezone", types.SimpleNamespace(now=lambda: mid_minute))
    session = agent(route_key=ROUTE, rate_limit=1)
    first = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "list_orders", {}))
    assert first.json()["state"] == "executed"
    body = invoke_body(session, ROUTE, "list_orders", {})
    limited = post(api_client, session, INVOKE_URL, body).json()
    assert limited["state"] == "rejected_before_dispatch"
    assert limited["auto_retry_allowed"] is True
    assert 0 < limited["retry_after_ms"] <= 60_000
    assert limited["rate_limit"] == {
        "level": "client",
        "count": 1,
        "window_sec": 60,
        "scope": "client",
        "source": "client_rate_limit",
    }
    assert not ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).exists()


def test_the_provider_rate_limit_is_a_retryable_rejection(api_client, shop, monkeypatch):
    # The provider's window is a fixed minute: the three calls must fall in one, not straddle two.
    mid_minute = timezone.now().replace(second=30, microsecond=0)
    monkeypatch.setattr(rate_limits, "timezone", types.SimpleNamespace(now=lambda: mid_minute))
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret, rate_limit=2)
    session = agent(route_key=ROUTE)
    states = [
        post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "list_orders", {})).json()
        for _ in range(3)
    ]
    assert [s["state"] for s in states] == ["executed", "executed", "rejected_before_dispatch"]
    assert states[2]["rate_limit"]["level"] == "provider"
    assert states[2]["rate_limit"]["source"] == "provider_total"
    assert states[2]["auto_retry_allowed"] is True


def test_the_tool_call_budget_of_a_run(api_client, shop):
    workspace(route_key="budget", provider="demo-shop", write_tools=WRITES, max_calls=2)
    route = Route.objects.get(route_key="budget")
    route.agent_client = {"enabled": True}
    route.save()
    session = agent(route_key="budget")
    run_id = post_turn(api_client, session, "budget", turn_body(1)).json()["run_id"]
    states = []
    for _ in range(3):
        body = invoke_body(session, "budget", "list_orders", {}, agent_run_id=run_id)
        states.append(post(api_client, session, INVOKE_URL, body).json())
    assert [s["state"] for s in states] == ["executed", "executed", "rejected_before_dispatch"]
    last = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert last.reason_code == "tool_call_budget_exhausted"


# --- approvals -------------------------------------------------------------------------------------
def test_a_refund_above_the_rule_waits_and_below_it_runs(api_client, alice):
    _, small = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": 20, "reason": "dent"}
    )
    assert small.json()["state"] == "executed"
    body, big = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": 600, "reason": "broken"}
    )
    waiting = big.json()
    assert waiting["state"] == "awaiting_approval"
    assert waiting["auto_retry_allowed"] is False
    approval = ToolApproval.objects.get(pk=waiting["approval_id"])
    assert approval.policy == "confirm_when"
    assert approval.intent["confirm_when"]["param"] == "amount"
    assert approval.summary == "Refund 600 on order SO-1002? Reason: broken"
    assert str(approval.pk) in waiting["text"] and body["invocation_id"] in waiting["text"]
    assert "Reason: broken. Nothing was sent." in waiting["text"]  # the summary ends as a sentence
    # A replay while pending reuses the approval.
    again = post(api_client, alice, INVOKE_URL, body).json()
    assert again["approval_id"] == approval.pk
    assert ToolApproval.objects.filter(invocation__invocation_id=body["invocation_id"]).count() == 1


def test_force_approval_tools_adds_an_approval(api_client, shop):
    workspace(route_key="strict", provider="demo-shop", write_tools=WRITES, force_approval=["create_ticket"])
    session = agent(route_key="strict")
    body = invoke_body(session, "strict", "create_ticket", {"subject": "a", "message": "b"})
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "awaiting_approval"
    assert ToolApproval.objects.get(pk=result["approval_id"]).policy == "confirm_required"


def test_denied_and_expired_approvals_answer_denied_and_never_dispatch(api_client, alice, shop, settings):
    body, response = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1001", "reason": "no"})
    approval = ToolApproval.objects.get(pk=response.json()["approval_id"])
    ToolApproval.objects.filter(pk=approval.pk).update(status="denied")
    denied = post(api_client, alice, resume_url(body["invocation_id"]), {}).json()
    assert (denied["state"], denied["approval_id"]) == ("denied", approval.pk)
    assert not ToolCallJournal.objects.filter(invocation__invocation_id=body["invocation_id"]).exists()

    settings.BAILING_APPROVAL_TTL_SECONDS = 0
    body2, response2 = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1003", "reason": "late"})
    from datetime import timedelta

    from django.utils import timezone

    ToolApproval.objects.filter(pk=response2.json()["approval_id"]).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    expired = post(api_client, alice, resume_url(body2["invocation_id"]), {}).json()
    assert expired["state"] == "denied"
    assert ToolApproval.objects.get(pk=response2.json()["approval_id"]).status == "expired"


def test_an_approved_call_runs_once_with_the_frozen_arguments(api_client, alice, shop):
    body, response = _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": 600, "reason": "torn"}
    )
    approval = ToolApproval.objects.get(pk=response.json()["approval_id"])
    refunds_before = len(shop.records()["refunds"])
    ToolApproval.objects.filter(pk=approval.pk).update(status="approved")
    done = post(api_client, alice, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed", done
    assert post(api_client, alice, resume_url(body["invocation_id"]), {}).json() == done
    assert post(api_client, alice, INVOKE_URL, body).json() == done
    refunds = shop.records()["refunds"]
    assert len(refunds) == refunds_before + 1
    assert refunds[-1]["amount"] in (600, 600.0, "600.00")
    approval.refresh_from_db()
    assert approval.consumed_at is not None


STRICT = "strict-refunds"


@pytest.fixture
def strict(shop):
    """alice in a workspace that wants approval for every refund: approved 0.01 refunds never run out."""
    workspace(route_key=STRICT, provider="demo-shop", write_tools=WRITES, force_approval=["request_refund"])
    return agent(route_key=STRICT, on_behalf_of="alice")


def _approved_refund(api_client, session):
    body = invoke_body(
        session, STRICT, "request_refund", {"order_id": "SO-1002", "amount": 0.01, "reason": "r"}
    )
    response = post(api_client, session, INVOKE_URL, body).json()
    assert response["state"] == "awaiting_approval", response
    ToolApproval.objects.filter(pk=response["approval_id"]).update(status="approved")
    return body, response["approval_id"]


def test_a_rate_limited_resume_keeps_the_approval_for_a_later_one(api_client, strict, shop):
    alice = strict
    body, approval_id = _approved_refund(api_client, alice)
    refunds = len(shop.records()["refunds"])
    ToolProvider.objects.filter(name="demo-shop").update(rate_limit_per_min=1)
    post(
        api_client, alice, INVOKE_URL, invoke_body(alice, STRICT, "list_orders", {})
    )  # the minute's one call
    limited = post(api_client, alice, resume_url(body["invocation_id"]), {}).json()
    assert (limited["state"], limited["auto_retry_allowed"]) == ("rejected_before_dispatch", True)
    assert limited["rate_limit"]["level"] == "provider"
    assert ToolApproval.objects.get(pk=approval_id).consumed_at is None
    ToolProvider.objects.filter(name="demo-shop").update(rate_limit_per_min=0)
    assert post(api_client, alice, resume_url(body["invocation_id"]), {}).json()["state"] == "executed"
    assert len(shop.records()["refunds"]) == refunds + 1


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("approval_args", "approval_args_mismatch"),
        ("sealed_arguments", "frozen_arguments_unavailable"),
        ("consumed", "approval_already_consumed"),
    ],
)
def test_an_approved_call_whose_snapshot_does_not_hold_is_never_sent(
    api_client, strict, shop, tamper, reason
):
    alice = strict
    body, approval_id = _approved_refund(api_client, alice)
    refunds = len(shop.records()["refunds"])
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    if tamper == "approval_args":
        ToolApproval.objects.filter(pk=approval_id).update(
            args={"order_id": "SO-1002", "amount": 7000, "reason": "r"}
        )
    elif tamper == "sealed_arguments":
        ToolInvocation.objects.filter(pk=invocation.pk).update(arguments_sealed="v1.tampered")
    else:
        ToolApproval.objects.filter(pk=approval_id).update(consumed_at=timezone.now())
    result = post(api_client, alice, resume_url(body["invocation_id"]), {}).json()
    assert (result["state"], result["auto_retry_allowed"]) == ("rejected_before_dispatch", False)
    assert ToolInvocation.objects.get(pk=invocation.pk).reason_code == reason
    assert len(shop.records()["refunds"]) == refunds
    assert post(api_client, alice, resume_url(body["invocation_id"]), {}).json() == result


def test_an_answer_that_cannot_be_recorded_is_kept_as_degraded_evidence_and_never_resent(
    api_client, alice, shop, monkeypatch
):
    from django.db import DatabaseError

    from agent_runtime.services.invocations import dispatch as service

    real_audit = service.audit

    def failing_outcome(invocation, identity, action, **data):
        if action == "outcome":
            raise DatabaseError("the ledger is unavailable")
        return real_audit(invocation, identity, action, **data)

    monkeypatch.setattr(service, "audit", failing_outcome)
    tickets = _tickets(shop)
    body, response = _invoke(api_client, alice, "create_ticket", {"subject": "Lost", "message": "answer"})
    result = response.json()
    assert (response.status_code, result["state"], result["auto_retry_allowed"]) == (
        200,
        "reconciliation_required",
        False,
    )
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "evidence_degraded"
    assert (invocation.journal.state, invocation.journal.http_status) == ("evidence_degraded", 201)
    assert "TCK-" in invocation.journal.text  # what the shop answered is kept for the operator
    monkeypatch.setattr(service, "audit", real_audit)
    for url in (INVOKE_URL, resume_url(body["invocation_id"])):
        again = post(api_client, alice, url, body if url == INVOKE_URL else {}).json()
        assert again["state"] == "reconciliation_required"
    assert _tickets(shop) == tickets + 1
    # An operator confirms it from the kept answer; the agent then learns it executed.
    from approvals.services.reconciliation import journal_resolve
    from bailing.audit.actor import Actor

    journal_resolve(
        invocation=invocation, resolution="executed", evidence="TCK in the shop", actor=Actor.system("op")
    )
    assert post(api_client, alice, resume_url(body["invocation_id"]), {}).json()["state"] == "executed"
    assert _tickets(shop) == tickets + 1


def test_an_unreachable_business_system_is_rejected_before_dispatch(api_client, alice, shop):
    provider = ToolProvider.objects.get(name="demo-shop")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    ToolProvider.objects.filter(pk=provider.pk).update(base_url=f"http://127.0.0.1:{closed_port}")
    body, response = _invoke(api_client, alice, "list_orders", {}, capability_revision=revision(alice, ROUTE))
    result = response.json()
    assert (result["state"], result["ok"]) == ("rejected_before_dispatch", False), result
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.reason_code == "business_unreachable"


def test_a_provider_without_a_usable_secret_sends_nothing(api_client, alice, shop):
    ToolProvider.objects.filter(name="demo-shop").update(secret_encrypted="v1.unreadable")
    body, response = _invoke(api_client, alice, "create_ticket", {"subject": "s", "message": "m"})
    assert response.json()["state"] == "rejected_before_dispatch"
    assert ToolInvocation.objects.get(invocation_id=body["invocation_id"]).reason_code == "secret_unavailable"


def test_a_changed_execution_contract_blocks_the_approved_call_and_keeps_the_approval(api_client, alice):
    body, response = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1004", "reason": "dup"})
    approval_id = response.json()["approval_id"]
    ToolApproval.objects.filter(pk=approval_id).update(status="approved")
    from agent_runtime.models import ProviderTool

    ProviderTool.objects.filter(name="cancel_order").update(execution_fingerprint="f" * 64)
    blocked = post(api_client, alice, resume_url(body["invocation_id"]), {})
    assert (blocked.status_code, blocked.json()["error"]) == (409, "capability_changed")
    assert ToolApproval.objects.get(pk=approval_id).consumed_at is None


def test_a_guidance_only_change_does_not_block_the_approved_call(api_client, alice):
    body, response = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1004", "reason": "ok"})
    ToolApproval.objects.filter(pk=response.json()["approval_id"]).update(status="approved")
    from agent_runtime.models import ProviderTool

    # The discovery revision moves (a new material digest), the execution fingerprint does not.
    ProviderTool.objects.filter(name="list_orders").update(material_digest="e" * 64)
    assert revision(alice, ROUTE) != body["capability_revision"]
    done = post(api_client, alice, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] in ("executed", "business_rejected")


def test_the_approval_webhook_is_skipped_without_a_channel(api_client, alice):
    _, response = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1001", "reason": "x"})
    assert not ApprovalNotification.objects.filter(approval_id=response.json()["approval_id"]).exists()


# --- resume and receipt ----------------------------------------------------------------------------
def test_resume_takes_exactly_an_empty_object(api_client, alice):
    body, _ = _invoke(api_client, alice, "list_orders", {})
    for payload, status in (({"x": 1}, 400), ([], 400)):
        response = post(api_client, alice, resume_url(body["invocation_id"]), payload)
        assert (response.status_code, response.json()["error"]) == (status, "invalid_request")
    big = api_client.post(
        resume_url(body["invocation_id"]),
        b"{" + b" " * 2000 + b"}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice._access}",
    )
    assert (big.status_code, big.json()["limit_scope"], big.json()["max_bytes"]) == (
        413,
        "request_body",
        1024,
    )


def test_resume_of_an_unknown_or_foreign_invocation_is_404(api_client, alice):
    assert (
        post(api_client, alice, resume_url(new_invocation_id()), {}).json()["error"] == "invocation_not_found"
    )
    body, _ = _invoke(api_client, alice, "list_orders", {})
    bob = agent(route_key=ROUTE, on_behalf_of="bob")
    response = post(api_client, bob, resume_url(body["invocation_id"]), {})
    assert (response.status_code, response.json()["error"]) == (404, "invocation_not_found")
    bad = post(api_client, alice, resume_url("XYZ"), {})
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid_request")


def test_receipt_reports_result_journal_and_approval_without_dispatching(api_client, alice, shop):
    capabilities = get(api_client, alice, f"{INVOKE_URL}/inspection-capabilities")
    assert capabilities.json() == {
        "schema_version": "bailing.agent-invocation-inspection-capabilities.v1",
        "receipt_schema": "bailing.agent-invocation-receipt.v1",
        "read_only": True,
    }
    assert capabilities["Cache-Control"] == "no-store"
    body, response = _invoke(api_client, alice, "cancel_order", {"order_id": "SO-1003", "reason": "r"})
    approval_id = response.json()["approval_id"]
    ToolApproval.objects.filter(pk=approval_id).update(status="approved")
    receipt = get(api_client, alice, receipt_url(body["invocation_id"])).json()
    assert receipt["schema_version"] == "bailing.agent-invocation-receipt.v1"
    assert (receipt["read_only"], receipt["business_operation_performed"]) == (True, False)
    assert (receipt["dispatch_state"], receipt["journal_state"], receipt["result_source"]) == (
        "not_dispatched",
        "absent",
        "job",
    )
    assert receipt["approval"] == {"status": "approved", "approval_id": approval_id}
    assert receipt["result"]["state"] == "awaiting_approval"
    assert ToolApproval.objects.get(pk=approval_id).consumed_at is None  # read-only
    done_body, _ = _invoke(api_client, alice, "list_orders", {})
    done = get(api_client, alice, receipt_url(done_body["invocation_id"])).json()
    assert (done["dispatch_state"], done["journal_state"], done["approval"]) == (
        "attempted",
        "completed",
        {"status": "none"},
    )
    assert get(api_client, alice, receipt_url(new_invocation_id())).json()["error"] == "invocation_not_found"
    query = api_client.get(
        receipt_url(done_body["invocation_id"]) + "?x=1", HTTP_AUTHORIZATION=f"Bearer {alice._access}"
    )
    assert (query.status_code, query.json()["field"]) == (400, "x")


# --- audit ------------------------------------------------------------------------------------------
def test_the_ledger_holds_key_names_never_argument_values_or_business_bodies(api_client, alice):
    secret_text = "very-private-customer-remark-4711"
    _invoke(api_client, alice, "create_ticket", {"subject": secret_text, "message": secret_text})
    _invoke(
        api_client, alice, "request_refund", {"order_id": "SO-1002", "amount": 900, "reason": secret_text}
    )
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {
        "agent_runtime.invocation.created",
        "agent_runtime.invocation.dispatched",
        "agent_runtime.invocation.outcome",
        "agent_runtime.invocation.approval_requested",
    } <= actions
    for event in AuditEvent.objects.all():
        dumped = json.dumps(event.data)
        assert secret_text not in dumped
        assert "Support ticket" not in dumped  # the business response body
    created = AuditEvent.objects.filter(action="agent_runtime.invocation.created").order_by("id").first()
    assert created.data["argument_keys"] == ["message", "subject"]
