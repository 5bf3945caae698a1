"""The workspace page shows the workspace's MCP URL, the one thing an MCP client needs
(README "Connecting an MCP client"), in a block one click selects, and says whether an MCP client can
sign in there at all. The browser test checks the URL is the live MCP endpoint
(``workspace-mcp-*.png``)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import ClientFactory, RouteFactory
from tests.support.console import PASSWORD


def url(route_key: str) -> str:
    return reverse("console:workspace_detail", args=[route_key])


@pytest.mark.django_db
def test_the_page_gives_the_mcp_url_and_who_signs_in(admin_http, settings):
    settings.BAILING_PUBLIC_URL = "https://hub.example.com"
    RouteFactory(route_key="demo")
    ClientFactory(app_id="demo-agent", allowed_routes=["demo"], mcp_sign_in=True)
    ClientFactory(app_id="other", allowed_routes=["demo"])
    response = admin_http.get(url("demo"))
    assert response.context["mcp_url"] == "https://hub.example.com/mcp/demo"
    assert response.context["mcp_clients"] == ["demo-agent"]
    html = response.content.decode()
    assert (
        '<pre class="copy" aria-label="MCP URL"><code>https://hub.example.com/mcp/demo</code></pre>' in html
    )
    assert "claude mcp add --transport http bailing-demo https://hub.example.com/mcp/demo" in html


@pytest.mark.django_db
def test_the_page_says_when_no_mcp_client_can_sign_in(admin_http):
    RouteFactory(route_key="demo")
    ClientFactory(app_id="demo-agent", allowed_routes=["other"], mcp_sign_in=True)
    ClientFactory(app_id="off-agent", allowed_routes=["demo"], mcp_sign_in=False)
    response = admin_http.get(url("demo"))
    assert response.context["mcp_clients"] == []
    assert "an MCP client cannot sign in yet" in response.content.decode()
    RouteFactory(route_key="closed", agent_client={"enabled": False})
    assert "the MCP endpoint refuses them" in admin_http.get(url("closed")).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_mcp_url_in_a_browser(hub_server, administrator, browser_page, screenshot):
    RouteFactory(route_key="demo", name="Demo workspace")
    ClientFactory(app_id="demo-agent", allowed_routes=["demo"], hub_consent=True, mcp_sign_in=True)
    page = browser_page
    base = hub_server.url
    page.goto(base + url("demo"))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + url("demo"))

    block = page.get_by_role("region", name="Connect an MCP client").locator("pre.copy code")
    mcp_url = block.inner_text()
    assert mcp_url == f"{base}/mcp/demo"
    assert block.evaluate("element => getComputedStyle(element).userSelect") == "all"
    assert "demo-agent" in page.locator("#mcp-url").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "workspace-mcp-01")
    # It is the workspace's MCP endpoint: without a bearer it asks for the standard OAuth sign-in.
    answer = page.request.post(mcp_url, data="{}", headers={"Content-Type": "application/json"})
    assert answer.status == 401
    assert (
        f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp/demo"'
        in (answer.headers["www-authenticate"])
    )
    page.set_viewport_size({"width": 1024, "height": 860})
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "workspace-mcp-02-1024")
