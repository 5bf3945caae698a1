"""The workspace's data policy on REST tool results (invoke, resume, receipt) against the Demo Shop's
order SO-1007, whose notes hold a card number, an email, an injection line and an exfiltrating image."""

from __future__ import annotations

import json

import pytest
from prometheus_client import REGISTRY

from agent_runtime.models import Route, ToolApproval, ToolInvocation
from bailing.audit.models import AuditEvent
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
ROUTE = "shop-policy"
CARD = "4111 1111 1111 1111"
EMAIL = "carol.buyer@example.com"
FINDINGS = {"email": 1, "payment_card": 1, "injection": 1, "external_media": 1}


@pytest.fixture
def shop_session(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["create_ticket", "cancel_order"])
    return agent(route_key=ROUTE)


def _policy(**policy) -> None:
    Route.objects.filter(route_key=ROUTE).update(data_policy=policy)


def _all_detectors(**extra) -> dict:
    return {"detectors": ["payment_card", "email", "injection", "external_media"], **extra}


def _get_order(api_client, session, order_id="SO-1007"):
    body = invoke_body(session, ROUTE, "get_order", {"order_id": order_id})
    response = post(api_client, session, INVOKE_URL, body)
    assert response.status_code == 200, response.content
    return body, response.json()


def _metric(detector: str, action: str) -> float:
    labels = {"route": ROUTE, "detector": detector, "action": action}
    return REGISTRY.get_sample_value("bailing_data_policy_findings_total", labels) or 0.0


def test_without_a_policy_the_order_notes_reach_the_agent_whole(api_client, shop_session):
    _, result = _get_order(api_client, shop_session)
    assert result["state"] == "executed"
    assert CARD in result["text"] and EMAIL in result["text"]
    assert "data_policy" not in result


def test_redact_filters_the_invoke_result_and_keeps_the_json_answer_valid(api_client, shop_session):
    _policy(**_all_detectors(actions={"injection": "flag"}))
    before = _metric("payment_card", "redact")
    body, result = _get_order(api_client, shop_session)
    assert (result["state"], result["ok"], result["business_status"]) == ("executed", True, 200)
    assert result["data_policy"] == {"action": "redact", "findings": FINDINGS}
    notes = json.loads(result["text"])["order"]["notes"]
    assert "[REDACTED:payment_card#1]" in notes and "[REDACTED:email#1]" in notes
    assert "![tracking]([REDACTED:external_media#1])" in notes
    assert "Ignore previous instructions" in notes  # flagged, not replaced
    assert CARD not in result["text"] and EMAIL not in result["text"]
    assert _metric("payment_card", "redact") == before + 1
    # The stored result is the released form; the raw answer is sealed on the journal.
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.result == result
    assert CARD not in invocation.result["text"] and invocation.journal.text_sealed
    # The outcome's audit event carries the counts, never a value.
    event = AuditEvent.objects.get(
        action="agent_runtime.invocation.outcome", target_id=str(invocation.job_id)
    )
    assert event.data["data_policy"] == {"action": "redact", "findings": FINDINGS}
    assert CARD not in json.dumps(event.data) and EMAIL not in json.dumps(event.data)


def test_replay_resume_and_receipt_pass_the_policy_in_force_now(api_client, shop_session):
    body, raw = _get_order(api_client, shop_session)
    assert CARD in raw["text"]
    _policy(**_all_detectors())
    again = post(api_client, shop_session, INVOKE_URL, body).json()
    resumed = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    receipt = get(api_client, shop_session, receipt_url(body["invocation_id"]))
    assert receipt.status_code == 200
    for result in (again, resumed, receipt.json()["result"]):
        assert result["state"] == "executed"
        assert result["data_policy"] == {"action": "redact", "findings": FINDINGS}
        assert CARD not in result["text"] and EMAIL not in result["text"]
    assert receipt.json()["schema_version"] == "bailing.agent-invocation-receipt.v1"


def test_block_withholds_the_answer_but_the_call_stays_executed(api_client, shop_session):
    _policy(**_all_detectors(actions={"payment_card": "block"}))
    body, result = _get_order(api_client, shop_session)
    assert result["state"] == "executed" and result["ok"] is True
    assert result["data_policy"] == {"action": "block", "findings": FINDINGS}
    assert "SO-1007" not in result["text"] and CARD not in result["text"]
    for detector in FINDINGS:
        assert detector in result["text"]
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.status == ToolInvocation.Status.EXECUTED


def test_a_blocked_write_after_approval_stays_executed(api_client, shop_session, demo_shop):
    # The shop echoes the ticket's message: a write whose answer holds a finding.
    _policy(detectors=["email"], action="block")
    arguments = {"subject": "Contact", "message": f"Write to {EMAIL}", "order_id": "SO-1007"}
    body = invoke_body(shop_session, ROUTE, "create_ticket", arguments)
    tickets_before = len(demo_shop.records()["tickets"])
    result = post(api_client, shop_session, INVOKE_URL, body).json()
    assert result["state"] == "executed", result
    assert result["data_policy"]["action"] == "block" and EMAIL not in result["text"]
    assert len(demo_shop.records()["tickets"]) == tickets_before + 1


def test_an_awaiting_result_is_released_untouched(api_client, shop_session):
    _policy(**_all_detectors())
    body = invoke_body(shop_session, ROUTE, "cancel_order", {"order_id": "SO-1007", "reason": "asked"})
    waiting = post(api_client, shop_session, INVOKE_URL, body).json()
    assert waiting["state"] == "awaiting_approval" and "data_policy" not in waiting
    ToolApproval.objects.filter(pk=waiting["approval_id"]).update(status="approved")
    done = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed", done
    # The cancelled order's answer carries its notes: released under the policy.
    assert done["data_policy"]["action"] == "redact" and CARD not in done["text"]


def test_flag_passes_the_answer_with_the_counts(api_client, shop_session):
    _policy(**_all_detectors(action="flag"))
    before = _metric("injection", "flag")
    _, result = _get_order(api_client, shop_session)
    assert CARD in result["text"]
    assert result["data_policy"] == {"action": "flag", "findings": FINDINGS}
    assert _metric("injection", "flag") == before + 1
