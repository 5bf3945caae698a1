"""A client metadata document client in the console: the consent page names the client and, in a
warning box, the host its document came from; the session page shows the document's URL. Both in
headless Chromium at 1024 px, screenshotted."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client as HttpClient
from django.urls import reverse

from agent_client import pkce_pair
from agent_runtime.models import AgentSession, OAuthClient
from tests.agent_runtime.console.test_oauth_consent import LOCALHOST, _authorize_url, _sign_in_client
from tests.factories import AgentSessionFactory
from tests.support.console import PASSWORD, signed_in

PATH = "/mcp/claude-code.json"


def _document(cimd, redirect_uri: str = LOCALHOST) -> str:
    url = cimd.url(PATH)
    return cimd.put_document(
        PATH,
        {
            "client_id": url,
            "client_name": "Claude Code",
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
        },
    )


@pytest.mark.django_db
def test_the_consent_page_names_the_document_host(administrator, settings, cimd):
    settings.BAILING_PUBLIC_URL = "https://hub.example.com"
    _sign_in_client()
    url = _document(cimd)
    _, challenge = pkce_pair()
    consent_url = HttpClient().get(_authorize_url(settings.BAILING_PUBLIC_URL, url, LOCALHOST, challenge))[
        "Location"
    ]
    page = signed_in(administrator).get(urlsplit(consent_url).path + "?" + urlsplit(consent_url).query)
    assert page.status_code == 200
    assert page.context["mcp_client"]["metadata_url"] == url
    assert page.context["mcp_client"]["metadata_host"] == f"127.0.0.1:{cimd.port}"
    assert page.context["mcp_client"]["name"] == "Claude Code"


@pytest.mark.django_db
def test_the_session_page_shows_the_document_url(administrator, cimd):
    client = _sign_in_client()
    url = cimd.url(PATH)
    oauth_client = OAuthClient.objects.create(
        client_id=url, metadata_document=True, hub_client=client, client_name="Claude Code", redirect_uris=[]
    )
    session = AgentSessionFactory(client=client, oauth_client=oauth_client, device_label="Claude Code")
    page = signed_in(administrator).get(reverse("console:session_detail", args=[session.pk]))
    text = page.content.decode()
    assert f'<span class="mono metadata-url">{url}</span>' in text
    assert "(registered" not in text


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_cimd_sign_in_in_a_browser(
    hub_server, administrator, chromium, cimd, loopback_callback, screenshot
):
    _sign_in_client()
    base = hub_server.url
    callback = loopback_callback
    url = _document(cimd, callback)
    verifier, challenge = pkce_pair()
    context = chromium.new_context(viewport={"width": 1024, "height": 900}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        page.goto(base + _authorize_url(base, url, callback, challenge))
        page.get_by_label("Username").fill(administrator.username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(base + reverse("console:consent") + "?*")
        warning = page.locator("section.consent .metadata-host")
        assert warning.is_visible()
        assert f"127.0.0.1:{cimd.port}" in warning.inner_text()
        assert "Claude Code" in page.locator("section.consent").inner_text()
        screenshot(page, "consent-cimd")

        page.get_by_role("button", name="Approve").click()
        page.wait_for_url(callback + "?*")
        query = parse_qs(urlsplit(page.url).query)
        assert query["iss"] == [base]
        token = HttpClient().post(
            "/oauth/token",
            f"grant_type=authorization_code&code={query['code'][0]}&redirect_uri={callback}"
            f"&client_id={url}&code_verifier={verifier}",
            content_type="application/x-www-form-urlencoded",
        )
        assert token.status_code == 200, token.content
        session = AgentSession.objects.get()
        page.goto(base + reverse("console:session_detail", args=[session.pk]))
        assert page.locator(".metadata-url").inner_text() == url
        screenshot(page, "session-cimd")
    finally:
        context.close()
