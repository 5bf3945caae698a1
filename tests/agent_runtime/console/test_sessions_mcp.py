"""The session page and the sessions list say how the agent signed in: Agent Auth v1, or standard OAuth
as an MCP client (the session keeps its OAuth client registration); the list filters by it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import OAuthClient
from tests.factories import AgentSessionFactory, ClientFactory
from tests.support.console import PASSWORD, signed_in

pytestmark = pytest.mark.django_db


def _mcp_session():
    client = ClientFactory(app_id="mcp-agent", hub_consent=True, mcp_sign_in=True, allowed_routes=["demo"])
    registration = OAuthClient.objects.create(
        client_id="bhm_" + "a" * 43, hub_client=client, client_name="Claude Code", redirect_uris=[]
    )
    return AgentSessionFactory(client=client, oauth_client=registration, device_label="Claude Code")


def test_an_mcp_sign_in_is_named_on_the_session_page(administrator):
    session = _mcp_session()
    page = signed_in(administrator).get(reverse("console:session_detail", args=[session.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "standard OAuth, as the MCP client <strong>Claude Code</strong>" in text


def test_an_agent_auth_v1_sign_in_says_so(administrator):
    session = AgentSessionFactory()
    text = signed_in(administrator).get(reverse("console:session_detail", args=[session.pk])).content.decode()
    assert "Agent Auth v1" in text and "MCP client" not in text


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_session_page_in_a_browser(hub_server, administrator, browser_page, screenshot):
    session = _mcp_session()
    page = browser_page
    page.goto(hub_server.url + reverse("console:session_detail", args=[session.pk]))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("standard OAuth, as the MCP client").wait_for()
    screenshot(page, "session-mcp-client")


def _via_column(response) -> dict[str, str]:
    table = response.context["table"]
    via = table.columns.index("Via")
    device = table.columns.index("Device")
    return {row[device].text: row[via].text for row in table.rows}


def test_the_session_list_tells_mcp_from_agent_auth_sessions(administrator):
    _mcp_session()
    AgentSessionFactory(device_label="Ada's laptop")
    browser = signed_in(administrator)
    response = browser.get(reverse("console:session_list"))
    assert _via_column(response) == {"Claude Code": "MCP", "Ada's laptop": "Agent Auth"}
    mcp_only = browser.get(reverse("console:session_list"), {"via": "mcp"})
    assert _via_column(mcp_only) == {"Claude Code": "MCP"}
    agent_auth_only = browser.get(reverse("console:session_list"), {"via": "agent_auth"})
    assert _via_column(agent_auth_only) == {"Ada's laptop": "Agent Auth"}
    assert (
        browser.get(reverse("console:session_list"), {"via": "carrier-pigeon"})
        .context["filter_form"]
        .errors["via"]
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_via_badge_in_a_browser(hub_server, administrator, browser_page, screenshot):
    _mcp_session()
    AgentSessionFactory(device_label="Ada's laptop")
    page = browser_page
    sessions = hub_server.url + reverse("console:session_list")
    page.goto(sessions)
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(sessions)
    mcp = page.locator("table.data tbody tr", has_text="Claude Code").locator(".badge-mcp")
    assert mcp.inner_text() == "MCP"
    laptop = page.locator("table.data tbody tr", has_text="Ada's laptop")
    assert laptop.locator(".badge", has_text="Agent Auth").is_visible()
    assert laptop.locator(".badge-mcp").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "sessions-via-01")
    page.get_by_label("Signed in via").select_option("mcp")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/?*via=mcp*")
    assert page.locator("table.data tbody tr").count() == 1
    page.set_viewport_size({"width": 1024, "height": 860})
    screenshot(page, "sessions-via-02-1024")
