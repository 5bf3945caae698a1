"""Destructive console actions in real headless Chromium: each button leads to a confirmation page
that says what will happen; cancel changes nothing, confirm does it.

Pages are saved under var/screenshots/ (``confirm-*.png``).
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import AgentSession, Client
from tests.factories import AgentSessionFactory, ClientFactory
from tests.support.console import PASSWORD


def sign_in(page, base, user, url):
    page.goto(base + url)
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + url)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_revoke_session_asks_first(hub_server, administrator, browser_page, screenshot):
    session = AgentSessionFactory(device_label="Ops laptop", on_behalf_of="alice@acme")
    page = browser_page
    base = hub_server.url
    detail = reverse("console:session_detail", args=[session.id])
    sign_in(page, base, administrator, detail)

    page.get_by_role("link", name="Revoke session…").click()
    page.wait_for_url(base + reverse("console:session_revoke", args=[session.id]))
    text = page.locator("main").inner_text()
    assert "The agent on Ops laptop loses access at once" in text
    assert "refresh token stops working" in text
    assert "alice@acme" in text
    screenshot(page, "confirm-01-revoke-session")

    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(base + detail)
    assert AgentSession.objects.get(pk=session.pk).revoked_at is None

    page.get_by_role("link", name="Revoke session…").click()
    page.get_by_role("button", name="Revoke session").click()
    page.wait_for_url(base + detail)
    assert "Session revoked" in page.locator(".alert-success").inner_text()
    assert AgentSession.objects.get(pk=session.pk).revoked_at is not None
    assert page.get_by_role("link", name="Revoke session…").count() == 0
    screenshot(page, "confirm-02-session-revoked")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_rotate_token_and_disable_client_ask_first(hub_server, administrator, browser_page, screenshot):
    client = ClientFactory(app_id="shop", name="Demo Shop")
    page = browser_page
    base = hub_server.url
    detail = reverse("console:client_detail", args=[client.app_id])
    sign_in(page, base, administrator, detail)

    page.get_by_role("link", name="Rotate token…").click()
    page.wait_for_url(base + reverse("console:client_token_rotate", args=[client.app_id]))
    assert "stops working at once" in page.locator("main").inner_text()
    screenshot(page, "confirm-03-rotate-token")
    page.get_by_role("button", name="Rotate token").click()
    assert page.get_by_label("Client Token").input_value().startswith("bct_")
    assert Client.objects.get(pk=client.pk).token_hash != client.token_hash

    page.goto(base + detail)
    page.get_by_role("link", name="Disable…").click()
    page.wait_for_url(base + reverse("console:client_set_enabled", args=[client.app_id]))
    assert "Client Token is refused at once" in page.locator("main").inner_text()
    screenshot(page, "confirm-04-disable-client")
    page.get_by_role("button", name="Disable client").click()
    page.wait_for_url(base + detail)
    assert Client.objects.get(pk=client.pk).enabled is False
    page.get_by_role("button", name="Enable").click()
    page.wait_for_url(base + detail)
    assert Client.objects.get(pk=client.pk).enabled is True
