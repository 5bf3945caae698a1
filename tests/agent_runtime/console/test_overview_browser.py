"""The workspace page, the tools list (each filter) and the dashboard's health panels in real headless
Chromium, under the console's Content-Security-Policy (any violation fails the test).

Screenshots go to var/screenshots/ (``overview-*.png``) for a human look at layout: wide tables must
scroll inside their boxes, empty states must read as sentences, the raw configuration stays collapsed.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from agent_runtime.models import Route
from knowledge.models import WorkerHeartbeat
from tests.support.console import PASSWORD
from tests.support.console_overview import pending_approval, seed_overview

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def sign_in(page, base: str, user, url: str) -> None:
    page.goto(base + url)
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + url)


def section(page, title: str):
    return page.locator("section", has=page.locator("h2", has_text=title)).last


def test_workspace_page_in_a_browser(hub_server, administrator, browser_page, screenshot):
    seed_overview(failed_provider=False)
    page, base = browser_page, hub_server.url
    sign_in(page, base, administrator, reverse("console:workspace_detail", args=["writer"]))

    tools = section(page, "Offered tools")
    assert "write + " not in tools.inner_text()
    cancel = tools.locator("tbody tr", has_text="order_cancel").first
    assert "always (forced by this workspace)" in cancel.inner_text()
    assert "write" in cancel.inner_text()
    knowledge = section(page, "Knowledge bases")
    assert knowledge.locator("tbody tr").count() == 2
    assert "missing" in knowledge.locator("tbody tr", has_text="gone").inner_text()
    assert section(page, "Allowed clients").locator("tbody tr").count() == 2
    assert section(page, "Active agent sessions").locator("tbody tr").count() == 2
    assert section(page, "Recent conversations").locator("tbody tr").count() == 2
    assert "reciprocal rank fusion" in page.locator("#knowledge-settings").inner_text()
    # The raw configuration is there, collapsed until asked for.
    raw = page.locator("details.raw-config pre.json")
    assert not raw.is_visible()
    assert no_horizontal_overflow(page)
    screenshot(page, "overview-01-workspace")

    page.locator("details.raw-config summary").click()
    assert raw.is_visible()
    assert '"kb_ids"' in raw.inner_text()
    screenshot(page, "overview-02-workspace-raw-config")

    knowledge.get_by_role("link", name="faq", exact=True).click()
    page.wait_for_url(base + reverse("console:knowledge_detail", args=["faq"]))
    page.go_back()
    section(page, "Offered tools").get_by_role("link", name="refund_large", exact=True).click()
    page.wait_for_url(base + reverse("console:provider_tool_detail", args=["shop", "refund_large"]))

    page.goto(base + reverse("console:workspace_detail", args=["quiet"]))
    assert "Agent direct tools are off" in section(page, "Offered tools").inner_text()
    assert "No conversations in this workspace yet." in page.content()
    assert no_horizontal_overflow(page)
    screenshot(page, "overview-03-workspace-empty")


def test_tools_list_and_its_filters_in_a_browser(hub_server, administrator, browser_page, screenshot):
    seed_overview(failed_provider=False)
    page, base = browser_page, hub_server.url
    url = reverse("console:tool_list")
    sign_in(page, base, administrator, url)
    assert page.locator(".nav a[aria-current=page]").inner_text() == "Tools"
    rows = page.locator("table.data tbody tr")
    assert rows.count() == 17
    assert no_horizontal_overflow(page)
    screenshot(page, "overview-04-tools")

    def apply(**choices) -> None:
        page.goto(base + url)
        for name, value in choices.items():
            page.locator(f"form.filters select[name={name}]").select_option(value)
        page.get_by_role("button", name="Filter").click()
        page.wait_for_load_state()

    apply(provider="crm")
    assert rows.count() == 3
    screenshot(page, "overview-05-tools-provider")
    apply(risk="high")
    assert rows.count() == 1 and "refund_create" in rows.first.inner_text()
    screenshot(page, "overview-06-tools-risk")
    apply(approval="conditional")
    assert {row.split("\n")[0] for row in rows.all_inner_texts()} == {"order_note_add", "refund_large"}
    screenshot(page, "overview-07-tools-approval")
    apply(kind="write")
    assert rows.count() == 7
    apply(route="writer", approval="always")
    assert "always (forced by writer)" in page.locator("tbody tr", has_text="order_cancel").inner_text()
    assert no_horizontal_overflow(page)
    screenshot(page, "overview-08-tools-workspace")
    apply(route="quiet")
    assert (
        "The workspace quiet offers no tools: its agent direct tools are off."
        in page.locator("table.data").inner_text()
    )
    screenshot(page, "overview-09-tools-empty")

    page.goto(base + url)
    page.get_by_role("link", name="voucher_issue", exact=True).click()
    page.wait_for_url(base + reverse("console:provider_tool_detail", args=["shop", "voucher_issue"]))


def test_dashboard_health_panels_in_a_browser(hub_server, administrator, approver, browser_page, screenshot):
    seed_overview()
    route = Route.objects.get(route_key="writer")
    for n, minutes in enumerate((4, 75, 30)):
        pending_approval(tool=f"refund_{n}", route=route, waited=timedelta(minutes=minutes))
    page, base = browser_page, hub_server.url
    sign_in(page, base, administrator, reverse("console:dashboard"))

    providers = page.locator("section.panel", has_text="Tool provider health")
    assert providers.locator("tbody tr").first.inner_text().startswith("billing")
    assert "spec_unreachable" in providers.inner_text()
    indexing = page.locator("section.panel", has_text="Knowledge indexing")
    assert "no worker" in indexing.inner_text()
    assert "1 waiting" in indexing.inner_text()
    approvals = page.locator("section.panel", has_text="Pending approvals")
    assert approvals.locator("tbody tr").count() == 3
    assert approvals.locator("tbody tr").first.inner_text().split("\n")[0].startswith("#")
    assert no_horizontal_overflow(page)
    # Every panel's table fits its card at laptop width (no scrolling inside the box).
    assert page.evaluate(
        "[...document.querySelectorAll('.panel .table-wrap')].every(el => el.scrollWidth <= el.clientWidth)"
    )
    screenshot(page, "overview-10-dashboard")

    approvals.get_by_role("link", name="Open the approvals inbox (3 pending)").click()
    page.wait_for_url(base + reverse("console:approval_list") + "?status=pending")

    # A worker reports: the heartbeat turns good.
    from django.utils import timezone

    WorkerHeartbeat.objects.create(worker="host:1", started_at=timezone.now(), seen_at=timezone.now())
    page.goto(base + reverse("console:dashboard"))
    assert "1 worker alive" in page.locator("section.panel", has_text="Knowledge indexing").inner_text()
    screenshot(page, "overview-11-dashboard-worker")


def test_dashboard_empty_states_in_a_browser(hub_server, approver, browser_page, screenshot):
    page, base = browser_page, hub_server.url
    sign_in(page, base, approver, reverse("console:dashboard"))
    assert (
        "No tool providers yet" in page.locator("section.panel", has_text="Tool provider health").inner_text()
    )
    assert "No tool call is waiting for a decision." in page.content()
    assert no_horizontal_overflow(page)
    screenshot(page, "overview-12-dashboard-empty")
