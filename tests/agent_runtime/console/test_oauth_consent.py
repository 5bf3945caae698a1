"""The hub's consent page for a standard MCP sign-in: it names the MCP client and where the browser goes
back to, approves into the client's registered redirect (localhost or https), and keeps the Agent Auth
v1 loopback rule exactly as strict as before. One test drives it in headless Chromium."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client as HttpClient
from django.urls import reverse

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization, AgentSession
from tests.factories import ClientFactory, RouteFactory
from tests.support.console import PASSWORD, signed_in

LOCALHOST = "http://localhost:43110/callback"
HTTPS = "https://app.example.com/oauth/callback"


def _sign_in_client():
    RouteFactory(route_key="demo")
    return ClientFactory(
        app_id="mcp-agent", name="MCP agent", hub_consent=True, mcp_sign_in=True, allowed_routes=["demo"]
    )


def _register(http, redirect_uri: str, name: str = "Claude Code") -> str:
    response = http.post(
        "/oauth/register",
        {"redirect_uris": [redirect_uri], "client_name": name},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()["client_id"]


def _authorize_url(
    base: str, client_id: str, redirect_uri: str, challenge: str, scope: str = "knowledge:read"
) -> str:
    return "/oauth/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": "mcp-state-42",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": f"{base}/mcp/demo",
            "scope": scope,
        }
    )


@pytest.mark.django_db
@pytest.mark.parametrize("redirect_uri", [LOCALHOST, HTTPS])
def test_consent_for_an_mcp_client_approves_into_its_redirect(administrator, settings, redirect_uri):
    settings.BAILING_PUBLIC_URL = "https://hub.example.com"
    _sign_in_client()
    anonymous = HttpClient()
    client_id = _register(anonymous, redirect_uri)
    verifier, challenge = pkce_pair()
    consent_url = anonymous.get(
        _authorize_url(settings.BAILING_PUBLIC_URL, client_id, redirect_uri, challenge)
    )["Location"]
    authorization = AgentAuthorization.objects.get()
    console = signed_in(administrator)

    page = console.get(urlsplit(consent_url).path + "?" + urlsplit(consent_url).query)
    assert page.status_code == 200
    assert page.context["mcp_client"] == {
        "name": "Claude Code",
        "redirect_host": urlsplit(redirect_uri).netloc,
        "loopback": redirect_uri == LOCALHOST,
        "metadata_url": "",
        "metadata_host": "",
    }
    assert "MCP client" in page.content.decode()

    response = console.post(
        reverse("console:consent"),
        {"authorization_id": str(authorization.id), "decision": "approve", "routes": ["demo"]},
    )
    assert response.status_code == 302
    assert response["Location"].startswith(redirect_uri + "?")
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["state"] == ["mcp-state-42"]

    token = anonymous.post(
        "/oauth/token",
        urlencode(
            {
                "grant_type": "authorization_code",
                "code": query["code"][0],
                "redirect_uri": redirect_uri,
                "client_id": client_id,
                "code_verifier": verifier,
            }
        ),
        content_type="application/x-www-form-urlencoded",
    )
    assert token.status_code == 200, token.content
    assert AgentSession.objects.get().on_behalf_of == administrator.username


@pytest.mark.django_db
def test_the_agent_auth_v1_redirect_rule_is_unchanged(administrator, start_hub_login):
    """An Agent Auth v1 sign-in whose stored redirect is not a v1 loopback URI is never followed, even
    though the same URI would be fine for an OAuth client (defence in depth on the consent page)."""
    login = start_hub_login()
    AgentAuthorization.objects.filter(pk=login.authorization.pk).update(redirect_uri=LOCALHOST)
    response = signed_in(administrator).post(
        reverse("console:consent"),
        {"authorization_id": str(login.authorization.id), "decision": "approve", "routes": ["orders"]},
    )
    assert response.status_code == 500
    assert "Location" not in response


def _deny(console, anonymous, settings, client_id, redirect_uri):
    _, challenge = pkce_pair()
    anonymous.get(_authorize_url(settings.BAILING_PUBLIC_URL, client_id, redirect_uri, challenge))
    authorization = AgentAuthorization.objects.get(oauth_client__client_id=client_id, status="pending")
    response = console.post(
        reverse("console:consent"), {"authorization_id": str(authorization.id), "decision": "deny"}
    )
    authorization.refresh_from_db()
    assert authorization.status == "denied"
    return response


@pytest.mark.django_db
def test_deny_for_a_loopback_mcp_client_goes_back_with_access_denied(approver, settings):
    _sign_in_client()
    anonymous = HttpClient()
    client_id = _register(anonymous, LOCALHOST)
    response = _deny(signed_in(approver), anonymous, settings, client_id, LOCALHOST)
    assert response.status_code == 302
    assert response["Location"].startswith(LOCALHOST + "?")
    assert parse_qs(urlsplit(response["Location"]).query) == {
        "error": ["access_denied"],
        "state": ["mcp-state-42"],
        "iss": [settings.BAILING_PUBLIC_URL],
    }


@pytest.mark.django_db
def test_deny_for_an_unproven_https_client_stays_on_the_hub(approver, settings):
    """RFC 9700 §4.11.2: a registered https redirect nobody has signed in through yet could be a
    phishing site; the user who denies is not sent there."""
    _sign_in_client()
    anonymous = HttpClient()
    client_id = _register(anonymous, HTTPS)
    response = _deny(signed_in(approver), anonymous, settings, client_id, HTTPS)
    assert response.status_code == 400
    assert "Location" not in response
    assert response.context["code"] == "access_denied"
    assert "app.example.com" not in response.content.decode()


@pytest.mark.django_db
def test_deny_for_an_https_client_that_completed_a_sign_in_goes_back(administrator, approver, settings):
    _sign_in_client()
    anonymous = HttpClient()
    client_id = _register(anonymous, HTTPS)
    verifier, challenge = pkce_pair()
    anonymous.get(_authorize_url(settings.BAILING_PUBLIC_URL, client_id, HTTPS, challenge))
    first = AgentAuthorization.objects.get()
    approved = signed_in(administrator).post(
        reverse("console:consent"),
        {"authorization_id": str(first.id), "decision": "approve", "routes": ["demo"]},
    )
    code = parse_qs(urlsplit(approved["Location"]).query)["code"][0]
    token = anonymous.post(
        "/oauth/token",
        urlencode(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": HTTPS,
                "client_id": client_id,
                "code_verifier": verifier,
            }
        ),
        content_type="application/x-www-form-urlencoded",
    )
    assert token.status_code == 200, token.content
    response = _deny(signed_in(approver), anonymous, settings, client_id, HTTPS)
    assert response.status_code == 302
    assert response["Location"].startswith(HTTPS + "?")
    assert parse_qs(urlsplit(response["Location"]).query)["error"] == ["access_denied"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_mcp_sign_in_in_a_browser(hub_server, administrator, browser_page, screenshot, loopback_callback):
    _sign_in_client()
    base = hub_server.url
    callback = loopback_callback  # the MCP client's own loopback listener (a real one, on a free port)
    client_id = _register(HttpClient(), callback, name="Claude Code (laptop)")
    _, challenge = pkce_pair()
    page = browser_page

    page.goto(base + _authorize_url(base, client_id, callback, challenge, scope="knowledge:read tools:read"))
    # Not signed in to the console yet: the login page, then back to the consent page.
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:consent") + "?*")
    consent = page.locator("section.consent")
    text = consent.inner_text()
    assert "MCP client" in text
    assert "Claude Code (laptop)" in text
    assert urlsplit(callback).netloc in text
    assert page.locator('input[name="routes"][value="demo"]').is_checked()
    # The scopes in plain words: what it asked for, and what it did not.
    scopes = page.locator("section.scopes")
    assert [item.get_attribute("data-scope") for item in scopes.locator("li.scope").all()] == [
        "knowledge:read",
        "tools:read",
    ]
    assert "Search the handbook" in scopes.inner_text() and "See the business tools" in scopes.inner_text()
    assert "call business tools; writes wait for approval" in scopes.locator(".scopes-not-asked").inner_text()
    screenshot(page, "oauth-consent")

    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(callback + "?*")
    query = parse_qs(urlsplit(page.url).query)
    assert set(query) == {"code", "state", "iss"} and query["state"] == ["mcp-state-42"]
    assert query["iss"] == [base]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_crafted_authorize_link_keeps_the_browser_on_the_hub(hub_server, browser_page, screenshot):
    """The open-redirector attack end to end: a freshly registered https client and a link with a
    bogus response_type. Chromium shows the hub's page and never asks the attacker's site for anything."""
    _sign_in_client()
    base = hub_server.url
    evil = "https://evil.example/cb"
    client_id = _register(HttpClient(), evil, name="Totally legit")
    _, challenge = pkce_pair()
    page = browser_page
    contacted: list[str] = []
    page.route("https://evil.example/**", lambda route: (contacted.append(route.request.url), route.abort()))
    link = _authorize_url(base, client_id, evil, challenge)
    link = link.replace("response_type=code", "response_type=bogus")
    response = page.goto(base + link)
    assert response.status == 400
    assert page.url == base + link
    assert "unsupported_response_type" in page.locator(".problem .status").inner_text()
    assert page.locator('a[href*="evil.example"]').count() == 0
    assert contacted == []
    screenshot(page, "oauth-authorize-untrusted-error")


@pytest.mark.django_db
def test_the_consent_page_shows_hidden_characters_of_the_device_label_as_escapes(
    administrator, start_hub_login
):
    """A device label may not carry bidirectional controls, but zero-width characters pass the API's
    check: the page still shows them, as tokens, so "Ada's laptop" and "Ada\u200b's laptop" differ."""
    from bailing.ui.visible import HIDDEN_CHARS

    login = start_hub_login(device_label="Ada\u200b's lap\u2060top")
    html = signed_in(administrator).get(
        urlsplit(login.consent_url).path + "?" + urlsplit(login.consent_url).query
    )
    text = html.content.decode()
    assert html.status_code == 200
    assert not HIDDEN_CHARS.search(text)
    assert ">U+200B</span>" in text and ">U+2060</span>" in text


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_denying_an_unproven_https_client_in_a_browser_stays_on_the_hub(
    hub_server, administrator, browser_page, screenshot
):
    """RFC 9700 §4.11.2, the consent variant: the user denies, and Chromium stays on the hub's page
    instead of following the sign-in to a website nobody has signed in to yet."""
    _sign_in_client()
    base = hub_server.url
    client_id = _register(HttpClient(), HTTPS, name="Looks legit")
    _, challenge = pkce_pair()
    page = browser_page
    contacted: list[str] = []
    page.route(
        "https://app.example.com/**", lambda route: (contacted.append(route.request.url), route.abort())
    )
    page.goto(base + _authorize_url(base, client_id, HTTPS, challenge))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:consent") + "?*")
    with page.expect_response(lambda response: response.request.method == "POST") as answer:
        page.get_by_role("button", name="Deny").click()
    assert answer.value.status == 400
    assert page.url.startswith(base)
    assert "access_denied" in page.locator(".problem .status").inner_text()
    assert contacted == []
    assert AgentAuthorization.objects.get().status == "denied"
    screenshot(page, "oauth-consent-denied-untrusted")
