"""The API docs page in headless Chromium: Swagger UI loads from the hub alone and renders the document."""

from __future__ import annotations

import pytest


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_docs_page_renders_the_document_from_local_assets(hub_server, browser_page, screenshot):
    page = browser_page  # fails on any Content-Security-Policy violation
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(hub_server.url + "/api/docs/")
    page.locator(".opblock-summary-path", has_text="/agent-api/v1/tool-invocations").first.wait_for()
    assert page.locator(".opblock").count() >= 29
    page.locator(".opblock-summary-path", has_text="/agent-api/v1/tool-invocations").first.click()
    page.locator(".responses-table").first.wait_for()
    assert page.locator(".response-col_status", has_text="413").first.is_visible()
    screenshot(page, "api-docs")
    assert requested
    assert all(url.startswith(hub_server.url) for url in requested), requested
