"""The session page says how the agent signed in: Agent Auth v1, or standard OAuth as an MCP client."""

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
