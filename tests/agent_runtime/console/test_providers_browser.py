"""The tool provider pages in real headless Chromium: list → detail → Refresh → tool pages, and a
Refresh against the real Demo Shop process.

Every page is saved under var/screenshots/ (``providers-*.png``) for a human look at layout: wide
tool tables, long JSON pointers, the input schema and long usage guidance must scroll inside their
boxes instead of stretching the page.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.services.providers import provider_refresh
from bailing.audit.actor import Actor
from tests.support.console import PASSWORD
from tests.support.demo_business import running_demo_business
from tests.support.providers_seed import SHOP_SECRET, closed_port, seed_console_providers, url_provider


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_provider_pages_in_a_browser(hub_server, administrator, browser_page, screenshot):
    seed_console_providers()
    # A URL provider whose business system is gone: the list shows the failed refresh and probe.
    billing = url_provider("billing", f"http://127.0.0.1:{closed_port()}", "billing-secret-value")
    provider_refresh(provider=billing, actor=Actor.system("tests"))
    page = browser_page
    base = hub_server.url

    page.goto(base + reverse("console:provider_list"))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:provider_list"))
    assert page.locator(".nav a[aria-current=page]").inner_text() == "Tool providers"
    assert page.locator("table.data tbody tr").count() == 3
    assert "spec_unreachable" in page.locator("table.data tbody tr", has_text="billing").inner_text()
    assert no_horizontal_overflow(page)
    screenshot(page, "providers-01-list")

    page.get_by_role("link", name="shop", exact=True).click()
    page.wait_for_url(base + reverse("console:provider_detail", args=["shop"]))
    assert "secret set on" in page.locator("dl.facts").first.inner_text()
    assert SHOP_SECRET not in page.content()
    tools = page.locator("table.data", has=page.locator("th", has_text="Approval"))
    assert tools.locator("tbody tr").count() == 14
    writer_row = tools.locator("tbody tr", has_text="order_cancel")
    assert "write + forced approval" in writer_row.inner_text()
    assert no_horizontal_overflow(page)
    screenshot(page, "providers-02-detail")

    page.get_by_role("button", name="Refresh").click()
    page.wait_for_url(base + reverse("console:provider_detail", args=["shop"]))
    assert page.locator(".alert-success").inner_text().startswith("Refreshed shop: 14 tools")
    screenshot(page, "providers-03-refreshed")

    page.get_by_role("link", name="refund_large", exact=True).click()
    page.wait_for_url(base + reverse("console:provider_tool_detail", args=["shop", "refund_large"]))
    assert "when amount > 500" in page.locator("dl.facts").nth(1).inner_text()
    assert page.locator("pre.json").is_visible()
    assert no_horizontal_overflow(page)
    screenshot(page, "providers-04-tool-write")

    page.goto(base + reverse("console:provider_tool_detail", args=["shop", "guidance_over_chars"]))
    guidance = page.locator("pre.guidance")
    # 32,768 characters of guidance scroll inside their box rather than lengthening the page.
    assert guidance.evaluate("el => el.scrollHeight > el.clientHeight")
    assert (
        page.locator(".section-head", has_text="Usage guidance").locator(".badge").inner_text() == "truncated"
    )
    assert no_horizontal_overflow(page)
    screenshot(page, "providers-05-tool-guidance")

    page.goto(base + reverse("console:provider_tool_detail", args=["shop", "long_description"]))
    assert page.locator(".badge", has_text="description truncated").is_visible()
    assert no_horizontal_overflow(page)
    screenshot(page, "providers-06-tool-description")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_refresh_of_the_demo_business_in_a_browser(hub_server, administrator, browser_page, screenshot):
    page = browser_page
    base = hub_server.url
    with running_demo_business() as shop:
        url_provider("demo-shop", shop.base_url, shop.secret)
        detail = base + reverse("console:provider_detail", args=["demo-shop"])
        page.goto(detail)
        page.get_by_label("Username").fill(administrator.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(detail)
        assert page.locator("table.data", has_text="No compiled tools").count() == 1

        page.get_by_role("button", name="Refresh").click()
        page.wait_for_url(detail)
        assert page.locator(".alert-success").is_visible()
        probe = page.locator("table.data", has=page.locator("th", has_text="Signed request"))
        assert "protected" in probe.inner_text()
        assert "HTTP 200" in probe.inner_text()
        assert shop.secret not in page.content()
        assert no_horizontal_overflow(page)
        screenshot(page, "providers-07-demo-refreshed")
