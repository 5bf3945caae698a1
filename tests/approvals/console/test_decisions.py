"""Deciding an approval in the console takes a confirmation: Approve and Deny open a page that
restates the call, and the decision POST needs that page's confirmation and the arguments hash it
showed. What each role may do, and the whole flow, are in test_approvals_console.py; the flows in
Chromium in test_decisions_browser.py."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from bailing.audit.models import AuditEvent
from tests.support.console import signed_in
from tests.support.invocations import (
    call_awaiting_approval,
    console_decision,
    post,
    resume_url,
)

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"


@pytest.fixture
def refund(demo_shop, api_client):
    """alice's refund of 650 on SO-1002, waiting for approval (a rule matched)."""
    return call_awaiting_approval(
        api_client,
        demo_shop,
        tool="request_refund",
        arguments={"order_id": "SO-1002", "amount": 650, "reason": "jug"},
        write_tools=("request_refund",),
    )


def _decide_url(approval, decision: str | None = None) -> str:
    url = reverse("console:approval_decide", args=[approval.pk])
    return f"{url}?decision={decision}" if decision else url


def test_the_confirmation_restates_the_sentence_the_tool_and_the_hash(refund, approver):
    _, _, approval = refund
    client = signed_in(approver)
    for decision, button, button_class in (
        ("approved", "Approve the call", "btn-primary"),
        ("denied", "Deny the call", "btn-danger"),
    ):
        page = client.get(_decide_url(approval, decision))
        assert page.status_code == 200
        assert "no-store" in page["Cache-Control"]
        confirmation = page.context["confirmation"]
        assert confirmation.lead == approval.summary == "Refund 650 on order SO-1002? Reason: jug"
        facts = dict(confirmation.facts)
        assert facts["Tool"] == "request_refund of demo-shop"
        assert facts["Arguments hash"] == approval.args_hash
        assert facts["Why approval"].startswith("Condition met: ")
        assert (confirmation.button, confirmation.button_class) == (button, button_class)
        html = page.content.decode()
        assert f'name="args_hash" value="{approval.args_hash}"' in html
        assert f'name="decision" value="{decision}"' in html
        assert 'name="confirm" value="yes"' in html
    approval.refresh_from_db()
    assert approval.status == "pending"  # looking at a confirmation decides nothing


def test_the_confirmation_page_refuses_what_it_cannot_confirm(refund, approver, console_roles):
    from tests.factories import UserFactory

    _, _, approval = refund
    client = signed_in(approver)
    for query in (None, "maybe"):
        refused = client.get(_decide_url(approval, query))
        assert (refused.status_code, refused.context["field"]) == (400, "decision")
    alice = signed_in(UserFactory(username="alice", roles=["approver"]))
    assert alice.get(_decide_url(approval, "approved")).context["code"] == "own_call"
    client.post(_decide_url(approval), console_decision(approval, "denied"))
    again = client.get(_decide_url(approval, "approved"))
    assert again.status_code == 302 and again["Location"] == reverse(
        "console:approval_detail", args=[approval.pk]
    )
    assert [m.level_tag for m in get_messages(again.wsgi_request)][-1] == "info"


def test_a_decision_without_its_confirmation_or_for_other_arguments_changes_nothing(refund, approver):
    _, _, approval = refund
    client = signed_in(approver)
    body = console_decision(approval, "approved")
    unconfirmed = {name: value for name, value in body.items() if name != "confirm"}
    refused = client.post(_decide_url(approval), unconfirmed)
    assert (refused.status_code, refused.context["code"]) == (400, "not_confirmed")
    other = client.post(_decide_url(approval), {**body, "args_hash": "0" * 64})
    assert other.status_code == 302
    assert [m.level_tag for m in get_messages(other.wsgi_request)][-1] == "error"
    missing = client.post(_decide_url(approval), {**body, "args_hash": ""})
    assert missing.status_code == 400
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not AuditEvent.objects.filter(action__startswith="approvals.request.").exists()


def test_a_comment_over_budget_shows_the_confirmation_again_with_the_error(refund, approver):
    from approvals.budgets import DECISION_COMMENT_MAX_CHARS

    _, _, approval = refund
    comment = "x" * (DECISION_COMMENT_MAX_CHARS + 1)
    page = signed_in(approver).post(
        _decide_url(approval), console_decision(approval, "denied", comment=comment)
    )
    assert page.status_code == 400
    assert "console/confirm.html" in [t.name for t in page.templates]
    assert page.context["confirmation"].form.errors["comment"]
    assert page.context["confirmation"].form["decision"].value() == "denied"
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize("decision", ["approved", "denied"])
def test_the_banner_says_what_the_decision_sets_in_motion(refund, approver, api_client, demo_shop, decision):
    session, body, approval = refund
    keys_before = len(demo_shop.records()["idempotency_keys"])
    client = signed_in(approver)
    decided = client.post(_decide_url(approval), console_decision(approval, decision))
    (banner,) = [m for m in get_messages(decided.wsgi_request)]
    assert banner.level_tag == "success"
    assert "continues when it resumes" not in banner.message
    assert "next resume" in banner.message
    # Nothing reached the business system with the decision itself.
    assert len(demo_shop.records()["idempotency_keys"]) == keys_before
    resumed = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    if decision == "approved":
        assert "executes it" in banner.message
        assert resumed["state"] == "executed"
        assert len(demo_shop.records()["idempotency_keys"]) == keys_before + 1
    else:
        assert "Nothing is sent to the business system" in banner.message
        assert "gets the denial" in banner.message
        assert resumed["state"] == "denied"
        assert len(demo_shop.records()["idempotency_keys"]) == keys_before
