"""Approvers in headless Chromium: the sentence a call's tool declares leads the dashboard, the inbox
and the approval page; Approve and Deny each go through a confirmation that restates the call
(cancel leaves it pending); the banner afterwards says what is true."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agent_runtime.models import ToolApproval
from tests.support.console import PASSWORD
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    invoke_body,
    post,
    provider_for,
    resume_url,
    workspace,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
ROUTE = "shop"
SENTENCE = "Refund 650 on order SO-1002? Reason: Broken jug"


@pytest.fixture
def refund(demo_shop, api_client, console_roles):
    """alice's refund of 650 on SO-1002, waiting for approval, and the approver april."""
    from tests.factories import UserFactory

    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["request_refund"])
    session = agent(route_key=ROUTE, on_behalf_of="alice")
    arguments = {"order_id": "SO-1002", "amount": 650, "reason": "Broken jug"}
    body = invoke_body(session, ROUTE, "request_refund", arguments)
    waiting = post(api_client, session, INVOKE_URL, body).json()
    assert waiting["state"] == "awaiting_approval"
    approval = ToolApproval.objects.get(pk=waiting["approval_id"])
    assert approval.summary == SENTENCE
    return session, body, approval, UserFactory(username="april", roles=["approver"])


def _sign_in(page, base: str, user, url: str) -> None:
    page.goto(base + url)
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + url)


def test_approving_shows_the_sentence_everywhere_and_asks_first(
    hub_server, api_client, browser_page, screenshot, demo_shop, refund
):
    session, body, approval, approver = refund
    page, base = browser_page, hub_server.url
    detail_url = base + reverse("console:approval_detail", args=[approval.pk])
    keys_before = len(demo_shop.records()["idempotency_keys"])

    _sign_in(page, base, approver, reverse("console:dashboard"))
    pending = page.locator("section.panel", has_text="Pending approvals")
    assert SENTENCE in pending.locator("table.data tbody tr").first.inner_text()
    # No unknown outcome: the card is as calm as the others.
    calm = page.locator(".stat", has_text="Unknown outcomes")
    assert calm.locator(".stat-value").inner_text() == "0"
    assert "stat-alarm" not in calm.get_attribute("class")
    screenshot(page, "decide-01-dashboard")

    page.goto(base + reverse("console:approval_list"))
    row = page.locator("table.data tbody tr").first
    assert SENTENCE in row.inner_text()
    status = row.locator("td.cell-badge")
    assert "Condition met: Refunds above 500" in status.inner_text()
    assert "confirm_when" not in status.inner_text() and "confirm_when" in status.get_attribute("title")
    screenshot(page, "decide-02-inbox")

    row.get_by_role("link", name=SENTENCE).click()
    page.wait_for_url(detail_url)
    assert page.get_by_role("heading", level=1).inner_text() == SENTENCE
    screenshot(page, "decide-03-detail")

    # Approve… opens the confirmation; Cancel goes back and nothing is decided.
    page.get_by_role("link", name="Approve…").click()
    page.wait_for_url(re.compile(r".*/decide/\?decision=approved$"))
    confirm = page.locator("section.confirm")
    assert confirm.locator(".confirm-lead").inner_text() == SENTENCE
    assert "request_refund of demo-shop" in confirm.inner_text()
    assert approval.args_hash in confirm.inner_text()
    screenshot(page, "decide-04-approve-confirm")
    confirm.get_by_role("link", name="Cancel").click()
    page.wait_for_url(detail_url)
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert page.get_by_role("link", name="Approve…").is_visible()

    page.get_by_role("link", name="Approve…").click()
    page.get_by_label("Comment").fill("Customer sent photos")
    page.get_by_role("button", name="Approve the call").click()
    page.wait_for_url(detail_url)
    banner = page.locator(".alert-success").inner_text()
    assert "next resume of this call executes it" in banner
    screenshot(page, "decide-05-approved")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decision_comment) == (
        "approved",
        "april",
        "Customer sent photos",
    )
    # The decision itself sent nothing; the agent's resume does, once.
    assert len(demo_shop.records()["idempotency_keys"]) == keys_before
    assert post(api_client, session, resume_url(body["invocation_id"]), {}).json()["state"] == "executed"
    assert len(demo_shop.records()["idempotency_keys"]) == keys_before + 1

    # The inbox says who decided and when (the exact time in the title).
    page.goto(base + reverse("console:approval_list"))
    decided = page.locator("table.data tbody tr").first.locator("td").last
    assert re.fullmatch(r"april\s+\d+ (s|min( \d+ s)?) ago", decided.inner_text().strip())
    assert re.fullmatch(
        r"decided \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(console\)", decided.get_attribute("title")
    )
    screenshot(page, "decide-06-inbox-decided")


def test_denying_asks_first_and_the_banner_says_what_is_true(
    hub_server, api_client, browser_page, screenshot, demo_shop, refund
):
    session, body, approval, approver = refund
    page, base = browser_page, hub_server.url
    detail_url = base + reverse("console:approval_detail", args=[approval.pk])
    keys_before = len(demo_shop.records()["idempotency_keys"])

    _sign_in(page, base, approver, reverse("console:approval_detail", args=[approval.pk]))
    page.get_by_role("link", name="Deny…").click()
    page.wait_for_url(re.compile(r".*/decide/\?decision=denied$"))
    confirm = page.locator("section.confirm")
    assert confirm.locator(".confirm-lead").inner_text() == SENTENCE
    assert approval.args_hash in confirm.inner_text()
    assert "Nothing is sent to the business system" in confirm.locator(".consequences").inner_text()
    screenshot(page, "decide-07-deny-confirm")
    confirm.get_by_role("link", name="Cancel").click()
    page.wait_for_url(detail_url)
    approval.refresh_from_db()
    assert approval.status == "pending"

    page.get_by_role("link", name="Deny…").click()
    page.get_by_role("button", name="Deny the call").click()
    page.wait_for_url(detail_url)
    banner = page.locator(".alert-success").inner_text()
    assert "continues when it resumes" not in banner
    assert "Nothing is sent to the business system" in banner
    assert "the agent's next resume of this call gets the denial" in banner
    assert page.locator(".eyebrow .badge").get_attribute("class") == "badge badge-dark"
    screenshot(page, "decide-08-denied")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("denied", "april")

    assert post(api_client, session, resume_url(body["invocation_id"]), {}).json()["state"] == "denied"
    assert len(demo_shop.records()["idempotency_keys"]) == keys_before
    page.get_by_role("link", name="Trace of this call").click()
    state = page.locator("h1 .badge")
    assert (state.inner_text(), state.get_attribute("class")) == ("denied", "badge badge-dark")
    screenshot(page, "decide-09-denied-trace")
