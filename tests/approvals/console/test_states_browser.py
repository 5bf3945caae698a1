"""States that need an operator, in headless Chromium at a 1024 px laptop width: an unknown outcome,
a denial and a business failure get distinct badges in the tool-call list (whose state column stays
on screen), the dashboard's unknown-outcomes card raises the alarm and leads to them, and the trace
of a call the business system answered with 500 shows that answer, never a green "completed"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import ToolApproval, ToolInvocation
from tests.support.chaos_business import running_chaos_business
from tests.support.console import PASSWORD, csp_violations
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


def _three_states(api_client, demo_shop) -> dict[str, ToolInvocation]:
    """One call in each of reconciliation_required, denied and business_rejected, made for real."""
    from approvals.services.decisions import approval_decide
    from bailing.audit.actor import Actor

    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key="shop", provider="demo-shop", write_tools=["request_refund"])
    shop = agent(route_key="shop", on_behalf_of="alice")
    failed = invoke_body(shop, "shop", "demo_failure_probe", {})
    assert post(api_client, shop, INVOKE_URL, failed).json()["state"] == "business_rejected"

    refund = invoke_body(
        shop, "shop", "request_refund", {"order_id": "SO-1002", "amount": 650, "reason": "x"}
    )
    approval_id = post(api_client, shop, INVOKE_URL, refund).json()["approval_id"]
    approval_decide(
        approval_id=approval_id,
        decision="denied",
        decision_id="tests-deny",
        approver="manager-1",
        comment="",
        source="console",
        actor=Actor.system("tests"),
    )
    assert post(api_client, shop, resume_url(refund["invocation_id"]), {}).json()["state"] == "denied"

    with running_chaos_business() as chaos:
        provider_for(name="chaos", base_url=chaos.base_url, secret=chaos.secret)
        workspace(route_key="chaos", provider="chaos", write_tools=["chaos_drop_after_write"])
        lost = agent(route_key="chaos")
        unknown = invoke_body(lost, "chaos", "chaos_drop_after_write", {"note": "x"})
        assert post(api_client, lost, INVOKE_URL, unknown).json()["state"] == "reconciliation_required"
    return {
        body["tool"]: ToolInvocation.objects.get(invocation_id=body["invocation_id"])
        for body in (failed, refund, unknown)
    }


def test_states_that_need_an_operator_stand_out(
    hub_server, api_client, chromium, screenshot, console_roles, demo_shop
):
    from tests.factories import UserFactory

    calls = _three_states(api_client, demo_shop)
    assert ToolApproval.objects.get(invocation=calls["request_refund"]).status == "denied"
    administrator = UserFactory(username="ada", roles=["administrator"])
    context = chromium.new_context(viewport={"width": 1024, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = csp_violations(page)
    base = hub_server.url
    page.goto(base + reverse("console:dashboard"))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:dashboard"))

    # The unknown outcome raises the alarm on the dashboard, and the card leads to it.
    card = page.locator(".stat", has_text="Unknown outcomes")
    assert card.get_attribute("class") == "stat stat-alarm"
    assert card.locator(".stat-value").inner_text() == "1"
    assert "needs an operator" in card.inner_text()
    calm = page.locator(".stat", has_text="Approvals pending")
    assert calm.get_attribute("class") == "stat"
    screenshot(page, "states-01-dashboard-alarm")
    card.click()
    page.wait_for_url(base + reverse("console:invocation_list") + "?state=reconciliation_required")
    (row,) = page.locator("table.data tbody tr").all()
    state, answer = row.locator("td").nth(2).locator(".badge"), row.locator("td").nth(3).locator(".badge")
    assert (state.inner_text(), state.get_attribute("class")) == ("needs operator", "badge badge-alarm")
    assert (answer.inner_text(), answer.get_attribute("class")) == ("outcome unknown", "badge badge-alarm")

    # Three states, three badges that differ in word and colour class.
    page.goto(base + reverse("console:invocation_list"))
    rows = page.locator("table.data tbody tr")
    assert rows.count() == 3
    shown = {}
    for tool in calls:
        row = rows.filter(has_text=tool)
        state = row.locator("td").nth(2)
        badge = state.locator(".badge")
        shown[tool] = (badge.inner_text(), badge.get_attribute("class"))
        assert calls[tool].status in state.get_attribute("title")  # the raw code, for operators
        # At 1024 px the state column is on screen, inside its table's box, without scrolling.
        box, wrap = state.bounding_box(), page.locator(".table-wrap").bounding_box()
        assert box["x"] >= wrap["x"] and box["x"] + box["width"] <= wrap["x"] + wrap["width"], (box, wrap)
        assert box["x"] + box["width"] <= 1024
    assert shown == {
        "chaos_drop_after_write": ("needs operator", "badge badge-alarm"),
        "request_refund": ("denied", "badge badge-dark"),
        "demo_failure_probe": ("business refused", "badge badge-refused"),
    }
    assert page.evaluate("(el => el.scrollWidth <= el.clientWidth)(document.querySelector('.table-wrap'))")
    failure_answer = rows.filter(has_text="demo_failure_probe").locator("td").nth(3).locator(".badge")
    assert (failure_answer.inner_text(), failure_answer.get_attribute("class")) == (
        "answered 500",
        "badge badge-bad",
    )
    screenshot(page, "states-02-calls-1024")

    # The trace of the business failure: a heading with tool and state, its journal says 500, in red.
    rows.filter(has_text="demo_failure_probe").get_by_role("link").click()
    page.wait_for_url(base + reverse("console:invocation_detail", args=[calls["demo_failure_probe"].job_id]))
    heading = page.get_by_role("heading", level=1)
    assert " ".join(heading.inner_text().split()) == "Tool call demo_failure_probe business refused"
    assert heading.locator(".badge").get_attribute("class") == "badge badge-refused"
    journal = page.locator("section.card", has_text="Execution journal")
    assert journal.locator(".badge").inner_text() == "answered 500"
    assert journal.locator(".badge-ok").count() == 0
    dispatched = page.locator(".trace-step", has_text="Dispatched")
    assert "trace-warn" not in dispatched.get_attribute("class")
    assert "answered 500" in dispatched.inner_text()
    screenshot(page, "states-03-trace-500")

    # The trace of the unknown outcome ends in the alarm, with the reconciliation form.
    page.goto(base + reverse("console:invocation_detail", args=[calls["chaos_drop_after_write"].job_id]))
    assert page.locator(".trace-step").last.get_attribute("class") == "trace-step trace-alarm"
    assert page.get_by_role("heading", name="Reconcile this call").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "states-04-trace-unknown")
    context.close()
    assert not violations, violations
