"""The knowledge base pages in real headless Chromium: an administrator pastes a document, the worker
indexes it (``knowledge_worker --once`` in the test process), the detail page shows it ready, the hit
test finds it with a lexical and a vector rank, and the document is deleted again.

Pages are saved under var/screenshots/ (``knowledge-*.png``) for a human look at the layout.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from knowledge.models import Document, KnowledgeBase
from tests.factories import ClientFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document
from tests.support.console import PASSWORD

REFUNDS = (
    "# Refunds\n\nCustomers get their money back within 14 days of returning an item.\n\n"
    "Refunds above 500 need an approval by a supervisor."
)
SHIPPING = "# Shipping\n\nParcels ship within two working days by tracked courier."


def no_horizontal_overflow(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_add_index_hit_test_and_delete_in_a_browser(hub_server, administrator, browser_page, screenshot):
    kb = KnowledgeBaseFactory(kb_id="handbook", name="Customer handbook", description="Policies agents cite.")
    kb.writers.add(ClientFactory(app_id="cms"))
    RouteFactory(route_key="support", knowledge={"kb_ids": ["handbook"]})
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    page = browser_page
    base = hub_server.url
    detail = base + reverse("console:knowledge_detail", args=[kb.kb_id])

    page.goto(base + reverse("console:knowledge_list"))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:knowledge_list"))
    assert page.locator(".nav a[aria-current=page]").inner_text() == "Knowledge bases"
    row = page.locator("table.data tbody tr", has_text="handbook")
    assert "support" in row.inner_text() and "cms" in row.inner_text()
    assert no_horizontal_overflow(page)
    screenshot(page, "knowledge-01-list")

    page.get_by_role("link", name="handbook").click()
    page.wait_for_url(detail)
    page.get_by_role("link", name="Add document").click()
    page.wait_for_url(base + reverse("console:knowledge_document_add", args=[kb.kb_id]))
    paste = page.locator("#paste")
    paste.get_by_label("Title").fill("Refund policy")
    paste.get_by_label("Source key").fill("refunds")
    paste.get_by_label("Content").fill(REFUNDS)
    screenshot(page, "knowledge-02-add")
    paste.get_by_role("button", name="Add document").click()
    page.wait_for_url(detail)
    assert "queued" in page.locator(".alert-success").inner_text()
    assert (
        page.locator("table.data tbody tr", has_text="refunds").locator(".badge").inner_text() == "embedding"
    )

    call_command("knowledge_worker", "--once")
    assert Document.objects.get(kb=kb, source_key="refunds").status == "ready"
    page.reload()
    refunds_row = page.locator("table.data tbody tr", has_text="refunds")
    assert refunds_row.locator(".badge").inner_text() == "ready"
    assert no_horizontal_overflow(page)
    screenshot(page, "knowledge-03-detail")
    page.get_by_label("Title or key").fill("refund")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/?q=refund*")
    assert page.locator("table.data tbody tr", has_text="shipping").count() == 0
    assert page.locator("table.data tbody tr", has_text="refunds").count() == 1
    screenshot(page, "knowledge-03b-document-search")
    page.goto(detail)

    page.get_by_role("link", name="Hit test").click()
    page.get_by_label("Query").fill("money back after a return")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/search/?q=*")
    assert page.locator(".section-head .badge").first.inner_text() == "hybrid"
    top = page.locator("table.data tbody tr").first
    cells = top.locator("td")
    assert "Refund policy" in cells.nth(5).inner_text()
    assert cells.nth(2).inner_text().startswith("#1")
    assert cells.nth(3).inner_text().startswith("#1")
    assert "vector, text" in cells.nth(4).inner_text()
    assert no_horizontal_overflow(page)
    screenshot(page, "knowledge-04-hit-test")

    page.get_by_role("link", name="Refund policy").first.click()
    page.wait_for_url("**/docs/*/")
    assert "Refunds above 500" in page.locator("pre.guidance").inner_text()
    screenshot(page, "knowledge-05-document")

    page.goto(detail)
    page.get_by_role("link", name="Delete refunds").click()
    page.wait_for_url("**/docs/*/delete/")
    assert "Delete document refunds?" in page.locator("h1").inner_text()
    # Cancel goes back to the document and deletes nothing.
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url("**/docs/*/")
    assert Document.objects.filter(kb=kb, source_key="refunds").exists()
    page.get_by_role("link", name="Delete document…").click()
    page.wait_for_url("**/docs/*/delete/")
    screenshot(page, "knowledge-06-delete-confirm")
    page.get_by_role("button", name="Delete document").click()
    page.wait_for_url(detail)
    assert "deleted" in page.locator(".alert-success").inner_text()
    assert page.locator("table.data tbody tr", has_text="refunds").count() == 0
    assert not Document.objects.filter(kb=kb, source_key="refunds").exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_disable_asks_first_and_enable_does_not(hub_server, administrator, browser_page, screenshot):
    kb = KnowledgeBaseFactory(kb_id="handbook", name="Customer handbook")
    RouteFactory(route_key="support", knowledge={"kb_ids": ["handbook"]})
    page = browser_page
    base = hub_server.url
    detail = base + reverse("console:knowledge_detail", args=[kb.kb_id])
    page.goto(detail)
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(detail)

    page.get_by_role("link", name="Disable…").click()
    page.wait_for_url(base + reverse("console:knowledge_set_enabled", args=[kb.kb_id]))
    text = page.locator("main").inner_text()
    assert "Agents of the workspace support no longer find its documents" in text
    assert "documents, chunks and vectors are kept" in text
    screenshot(page, "knowledge-07-disable-confirm")
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(detail)
    assert KnowledgeBase.objects.get(pk=kb.pk).enabled

    page.get_by_role("link", name="Disable…").click()
    page.get_by_role("button", name="Disable knowledge base").click()
    page.wait_for_url(detail)
    assert not KnowledgeBase.objects.get(pk=kb.pk).enabled
    assert "Knowledge base handbook disabled" in page.locator(".alert-success").inner_text()
    screenshot(page, "knowledge-08-disabled")
    # Enabling gives back, so it is one click.
    page.get_by_role("button", name="Enable").click()
    page.wait_for_url(detail)
    assert KnowledgeBase.objects.get(pk=kb.pk).enabled
    assert page.get_by_role("link", name="Disable…").is_visible()
