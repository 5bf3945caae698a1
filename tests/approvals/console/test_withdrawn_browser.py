"""An approval the agent withdrew (an MCP ``tasks/cancel``), as the approver sees it in headless
Chromium at 1024 px: the inbox counts and badges it ``withdrawn``, its page says when and that nothing
is sent, and offers no decision."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.identity import AgentIdentity
from agent_runtime.services.invocations import invocation_withdraw
from tests.support.console import PASSWORD, csp_violations
from tests.support.invocations import call_awaiting_approval

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_the_approver_sees_a_withdrawn_approval(
    hub_server, api_client, chromium, screenshot, approver, demo_shop
):
    session, body, approval = call_awaiting_approval(
        api_client, demo_shop, tool="cancel_order", arguments={"order_id": "SO-1005", "reason": "not needed"}
    )
    identity = AgentIdentity(session=session, client=session.client)
    assert invocation_withdraw(identity=identity, invocation_id=body["invocation_id"]).withdrawn
    approval.refresh_from_db()
    assert approval.status == "withdrawn"

    context = chromium.new_context(viewport={"width": 1024, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = csp_violations(page)
    base = hub_server.url
    page.goto(base + reverse("console:approval_list"))
    page.get_by_label("Username").fill(approver.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:approval_list"))
    row = page.locator("table.data tbody tr", has_text=f"#{approval.pk}")
    badge = row.locator(".badge", has_text="withdrawn")
    assert badge.count() == 1 and badge.get_attribute("class") == "badge badge-off"
    assert "withdrew" in row.locator("td").nth(4).get_attribute("title")  # the status cell's tooltip
    assert page.locator(".badge", has_text="1 withdrawn").count() == 1  # the inbox's status counts
    screenshot(page, "mcp-tasks-01-inbox-withdrawn")

    row.get_by_role("link", name=f"#{approval.pk}").click()
    page.wait_for_url(base + reverse("console:approval_detail", args=[approval.pk]))
    decision = page.locator("section.card", has_text="Decision")
    assert "withdrawn" in decision.locator(".badge").first.inner_text()
    assert "Withdrawn" in decision.inner_text()
    assert page.get_by_role("link", name="Approve…").count() == 0  # nothing left to decide
    screenshot(page, "mcp-tasks-02-approval-withdrawn")
    context.close()
    assert not violations, violations
