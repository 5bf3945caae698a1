"""The trace page shows a sealed business answer in its filtered form with the data policy's counts;
an administrator reveals the raw answer behind a confirmation, and the reveal is audited (counts,
who, which call — never a value). The flow in Chromium is in test_answer_reveal_browser.py."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agent_runtime.models import Route, ToolCallJournal, ToolInvocation
from agent_runtime.services.invocations.answers import journal_answer_open
from approvals.console.invocations import answer_display
from approvals.errors import AnswerNotSealed, AnswerUnavailable
from approvals.services.answers import REVEALED_ACTION, invocation_answer_reveal
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from tests.support.console import signed_in
from tests.support.invocations import INVOKE_URL, agent, invoke_body, post
from tests.support.sealed_answers import CARD, EMAIL, SEALED_FINDINGS, sealed_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sealed(api_client, demo_shop):
    return sealed_call(api_client, demo_shop)


def _reveal_url(invocation) -> str:
    return reverse("console:invocation_answer_reveal", args=[invocation.job_id])


def _reveals():
    return AuditEvent.objects.filter(action=REVEALED_ACTION)


def test_the_trace_shows_the_filtered_answer_and_its_counts(sealed, auditor):
    page = signed_in(auditor).get(reverse("console:invocation_detail", args=[sealed.job_id]))
    assert page.status_code == 200
    answer = page.context["answer"]
    assert answer.sealed and answer.action == "redact"
    assert dict(answer.findings) == SEALED_FINDINGS
    html = page.content.decode()
    assert "[REDACTED:payment_card#1]" in html and CARD not in html and EMAIL not in html
    assert page.context["can_reveal"] is False and _reveal_url(sealed) not in html


def test_an_administrator_reveals_after_confirming_and_the_reveal_is_audited(sealed, administrator):
    client = signed_in(administrator)
    trace = client.get(reverse("console:invocation_detail", args=[sealed.job_id]))
    assert trace.context["can_reveal"] is True and _reveal_url(sealed) in trace.content.decode()
    confirm = client.get(_reveal_url(sealed))
    assert confirm.status_code == 200 and "no-store" in confirm["Cache-Control"]
    assert 'name="confirm" value="yes"' in confirm.content.decode()
    assert CARD not in confirm.content.decode() and not _reveals().exists()  # a GET reveals nothing

    refused = client.post(_reveal_url(sealed), {})
    assert (refused.status_code, refused.context["code"]) == (400, "not_confirmed")
    assert not _reveals().exists()

    revealed = client.post(_reveal_url(sealed), {"confirm": "yes"})
    assert revealed.status_code == 200
    assert "no-store" in revealed["Cache-Control"]
    html = revealed.content.decode()
    assert CARD in html and EMAIL in html
    (event,) = _reveals()
    assert (event.actor_type, event.actor) == ("user", administrator.username)
    assert (event.target_type, event.target_id) == ("tool_invocation", str(sealed.job_id))
    assert event.data["invocation_id"] == sealed.invocation_id
    assert event.data["data_policy"] == {"action": "redact", "findings": SEALED_FINDINGS}
    raw = journal_answer_open(journal=sealed.journal, job_id=sealed.job_id)
    assert event.data["chars"] == len(raw) and revealed.context["raw"] == answer_display(raw)
    dumped = json.dumps(event.data)
    for value in (CARD, EMAIL, "4111111111111111", "carol.buyer"):
        assert value not in dumped


@pytest.mark.parametrize("role", ["approver", "auditor"])
def test_without_the_permission_there_is_no_reveal(sealed, role, console_roles):
    from tests.factories import UserFactory

    client = signed_in(UserFactory(roles=[role]))
    for response in (client.get(_reveal_url(sealed)), client.post(_reveal_url(sealed), {"confirm": "yes"})):
        assert response.status_code == 403
        assert CARD not in response.content.decode()
    assert not _reveals().exists()


def test_an_answer_stored_without_a_policy_has_nothing_to_reveal(api_client, demo_shop, administrator):
    sealed_call(api_client, demo_shop, route_key="shop-clear")  # the workspace, then no policy
    Route.objects.filter(route_key="shop-clear").update(data_policy={})
    session = agent(route_key="shop-clear")
    body = invoke_body(session, "shop-clear", "get_order", {"order_id": "SO-1007"})
    assert CARD in post(api_client, session, INVOKE_URL, body).json()["text"]
    clear = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    client = signed_in(administrator)
    trace = client.get(reverse("console:invocation_detail", args=[clear.job_id]))
    assert trace.context["answer"].sealed is False and trace.context["can_reveal"] is False
    for response in (client.get(_reveal_url(clear)), client.post(_reveal_url(clear), {"confirm": "yes"})):
        assert (response.status_code, response.context["code"]) == (404, "answer_not_sealed")
    with pytest.raises(AnswerNotSealed):
        invocation_answer_reveal(invocation=clear, actor=Actor.system("tests"))
    assert not _reveals().exists()


def test_a_seal_that_does_not_open_reveals_nothing_and_records_nothing(sealed, administrator):
    ToolCallJournal.objects.filter(pk=sealed.journal.pk).update(text_sealed="v1.tampered")
    response = signed_in(administrator).post(_reveal_url(sealed), {"confirm": "yes"})
    assert (response.status_code, response.context["code"]) == (409, "answer_unavailable")
    sealed.journal.refresh_from_db()
    with pytest.raises(AnswerUnavailable):
        invocation_answer_reveal(invocation=sealed, actor=Actor.system("tests"))
    assert not _reveals().exists()
