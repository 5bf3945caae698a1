"""The business answer at rest under a data policy (docs/data-policy.md "At rest"), against the Demo
Shop's order SO-1007 whose notes hold a card number, an email, an injection line and an
exfiltrating image: the raw answer is sealed on the journal, the journal's text and the invocation's
result hold only the filtered form, and every later release (replay, resume, receipt) serves that
form under the policy in force then — never less filtered."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection

from agent_runtime.data_policy import (
    BUILTIN_DETECTORS,
    TOOL_RESULTS,
    data_policy_apply,
    data_policy_from_config,
    placeholder,
)
from agent_runtime.models import Route, ToolInvocation
from agent_runtime.secrets_box import SealedSecretError
from agent_runtime.services.invocations.answers import RAW_ANSWER, journal_answer_open
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
ROUTE = "shop-sealed"
CARD = "4111 1111 1111 1111"
CARD_DIGITS = "4111111111111111"
EMAIL = "carol.buyer@example.com"
FINDINGS = {"email": 1, "payment_card": 1, "injection": 1, "external_media": 1}
POLICY = {
    "detectors": ["payment_card", "email", "injection", "external_media"],
    "actions": {"injection": "flag"},
}


@pytest.fixture
def shop_session(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["create_ticket"])
    return agent(route_key=ROUTE)


def _policy(policy: dict | None) -> None:
    Route.objects.filter(route_key=ROUTE).update(data_policy=policy or {})


def _get_order(api_client, session) -> tuple[dict, dict]:
    body = invoke_body(session, ROUTE, "get_order", {"order_id": "SO-1007"})
    response = post(api_client, session, INVOKE_URL, body)
    assert response.status_code == 200, response.content
    return body, response.json()


def _rows_as_stored(job_id: uuid.UUID) -> str:
    """The invocation's and its journal's columns as PostgreSQL holds them, as one text."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT row_to_json(i)::text, row_to_json(j)::text FROM agent_runtime_toolinvocation i "
            "JOIN agent_runtime_toolcalljournal j ON j.invocation_id = i.id WHERE i.job_id = %s",
            [job_id],
        )
        invocation_row, journal_row = cursor.fetchone()
    return invocation_row + journal_row


def _raw_answer(api_client, session) -> str:
    """What the Demo Shop answers for SO-1007, read through a call made without any policy."""
    _policy(None)
    body, _ = _get_order(api_client, session)
    return ToolInvocation.objects.get(invocation_id=body["invocation_id"]).journal.text


def test_under_a_policy_the_raw_answer_is_sealed_and_the_rows_hold_only_the_filtered_form(
    api_client, shop_session
):
    raw = _raw_answer(api_client, shop_session)
    assert CARD in raw and EMAIL in raw
    _policy(POLICY)
    body, result = _get_order(api_client, shop_session)
    assert result["data_policy"] == {"action": "redact", "findings": FINDINGS}
    invocation = ToolInvocation.objects.select_related("journal").get(invocation_id=body["invocation_id"])
    journal = invocation.journal
    # At rest: neither row holds the card or the email, in any form; the seal is opaque.
    stored = _rows_as_stored(invocation.job_id)
    for value in (CARD, CARD_DIGITS, EMAIL, "carol.buyer"):
        assert value not in stored
    assert journal.text_sealed.startswith("v1.") and "SO-1007" not in journal.text_sealed
    # The journal's text and the stored result are the filtered form the agent got.
    assert invocation.result == result
    assert journal.text == result["text"]
    assert "[REDACTED:payment_card#1]" in json.loads(journal.text)["order"]["notes"]
    assert journal.data_policy == {"action": "redact", "findings": FINDINGS}
    # The seal opens to exactly the raw answer, bytes and all.
    opened = journal_answer_open(journal=journal, job_id=invocation.job_id)
    assert opened.encode("utf-8") == raw.encode("utf-8")


def test_the_seal_is_bound_to_its_invocation(api_client, shop_session):
    _policy(POLICY)
    body, _ = _get_order(api_client, shop_session)
    journal = ToolInvocation.objects.get(invocation_id=body["invocation_id"]).journal
    assert journal_answer_open(journal=journal, job_id=uuid.uuid4()) is None
    with pytest.raises(SealedSecretError):
        RAW_ANSWER.open(journal.text_sealed[:-2] + "AA", context=str(journal.invocation.job_id))


def test_without_a_policy_nothing_is_sealed(api_client, shop_session):
    body, result = _get_order(api_client, shop_session)
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert CARD in result["text"] and "data_policy" not in result
    assert invocation.result == result and invocation.journal.text == result["text"]
    assert (invocation.journal.text_sealed, invocation.journal.data_policy) == ("", None)


def test_a_policy_for_knowledge_only_seals_nothing(api_client, shop_session):
    _policy({**POLICY, "apply_to": ["knowledge"]})
    body, result = _get_order(api_client, shop_session)
    journal = ToolInvocation.objects.get(invocation_id=body["invocation_id"]).journal
    assert CARD in result["text"] and journal.text_sealed == ""


def test_a_policy_that_finds_nothing_still_seals_the_answer(api_client, shop_session):
    _policy({"detectors": ["iban"]})
    body, result = _get_order(api_client, shop_session)
    journal = ToolInvocation.objects.get(invocation_id=body["invocation_id"]).journal
    assert "data_policy" not in result and journal.data_policy is None
    assert journal_answer_open(journal=journal, job_id=journal.invocation.job_id) == result["text"]


def test_replay_resume_and_receipt_return_the_stored_filtered_form(api_client, shop_session):
    _policy(POLICY)
    body, first = _get_order(api_client, shop_session)
    again = post(api_client, shop_session, INVOKE_URL, body).json()
    resumed = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    receipt = get(api_client, shop_session, receipt_url(body["invocation_id"])).json()
    for result in (again, resumed, receipt["result"]):
        assert result == first
        assert result["data_policy"] == {"action": "redact", "findings": FINDINGS}
        assert CARD not in json.dumps(result) and EMAIL not in json.dumps(result)


def test_a_stricter_policy_later_filters_the_stored_form_further_and_removing_it_unfilters_nothing(
    api_client, shop_session
):
    _policy(POLICY)  # injection only flagged: its line reaches the agent
    body, first = _get_order(api_client, shop_session)
    assert "Ignore previous instructions" in first["text"]
    # injection redacted now: the stored form is filtered again; one finding, not two.
    _policy({**POLICY, "actions": {}})
    redacted = post(api_client, shop_session, INVOKE_URL, body).json()
    assert "Ignore previous instructions" not in redacted["text"]
    assert "[REDACTED:injection#1]" in redacted["text"]
    assert redacted["data_policy"] == {"action": "redact", "findings": FINDINGS}
    # The card is blocked now: its value is a placeholder already, and the answer is withheld.
    _policy({**POLICY, "actions": {"payment_card": "block"}})
    blocked = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    assert blocked["state"] == "executed" and blocked["data_policy"]["action"] == "block"
    assert "SO-1007" not in blocked["text"] and "payment_card" in blocked["text"]
    # No policy any more: the stored form stays as filtered as when it was stored.
    _policy(None)
    receipt = get(api_client, shop_session, receipt_url(body["invocation_id"])).json()["result"]
    assert receipt == first and CARD not in receipt["text"]


def test_a_blocked_answer_is_stored_withheld_and_sealed(api_client, shop_session):
    _policy({**POLICY, "actions": {"payment_card": "block"}})
    body, result = _get_order(api_client, shop_session)
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert result["data_policy"]["action"] == "block" and invocation.status == "executed"
    assert invocation.journal.text == result["text"] and "SO-1007" not in invocation.journal.text
    assert CARD in journal_answer_open(journal=invocation.journal, job_id=invocation.job_id)


def test_an_answer_kept_as_degraded_evidence_is_sealed_too(api_client, shop_session, monkeypatch):
    from django.db import DatabaseError

    from agent_runtime.services.invocations import dispatch as service

    real_audit = service.audit

    def failing_outcome(invocation, identity, action, **data):
        if action == "outcome":
            raise DatabaseError("the ledger is unavailable")
        return real_audit(invocation, identity, action, **data)

    monkeypatch.setattr(service, "audit", failing_outcome)
    _policy({"detectors": ["email"]})
    arguments = {"subject": "Contact", "message": f"Write to {EMAIL}", "order_id": "SO-1007"}
    body = invoke_body(shop_session, ROUTE, "create_ticket", arguments)
    result = post(api_client, shop_session, INVOKE_URL, body).json()
    assert result["state"] == "reconciliation_required"
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    journal = invocation.journal
    assert (invocation.reason_code, journal.state, journal.http_status) == (
        "evidence_degraded",
        "evidence_degraded",
        201,
    )
    assert "TCK-" in journal.text and EMAIL not in journal.text  # the operator still sees the ticket
    assert EMAIL not in _rows_as_stored(invocation.job_id)
    assert EMAIL in journal_answer_open(journal=journal, job_id=invocation.job_id)


def test_placeholders_and_the_withheld_notice_are_no_findings_of_any_built_in_detector():
    policy = data_policy_from_config({"detectors": list(BUILTIN_DETECTORS)})
    tokens = [placeholder(detector, n) for detector in BUILTIN_DETECTORS for n in (1, 2, 10, 9999)]
    text = " ".join(tokens) + f' ![x]({tokens[0]}) <img src="{placeholder("external_media", 3)}">'
    notice = (
        "This answer was withheld by the workspace's data policy (detectors: "
        + ", ".join(BUILTIN_DETECTORS)
        + ")."
    )
    for value in (text, notice, {"notes": text, placeholder("email", 1): tokens}):
        outcome = data_policy_apply(policy=policy, value=value, surface=TOOL_RESULTS)
        assert (outcome.findings, outcome.action) == ({}, None)
