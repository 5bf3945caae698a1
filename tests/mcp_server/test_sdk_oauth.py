"""An MCP client that knows only the URL signs in: the official SDK's OAuth client provider against the
live hub — 401 challenge, protected-resource and authorization-server discovery, dynamic
registration, the authorization code with PKCE approved on the hub's consent page in headless
Chromium, the code exchange, then tools over the new bearer; refresh rotation through the SDK's own
token request; and the reference agent client's ``mcp-check`` command doing the same."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import async_playwright

from agent_client import browser_visit, main
from agent_client.mcp_check import LoopbackCallback, MemoryTokenStorage, oauth_provider
from agent_runtime.models import AgentAuthorization, AgentSession, OAuthClient
from agent_runtime.services.agent_auth.authorizations import authorization_approve
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory, UserFactory
from tests.mcp_server.conftest import ROUTE
from tests.support.asyncio_run import off_running_loop, run_async
from tests.support.console import CHROMIUM, CHROMIUM_ARGS, PASSWORD
from tests.support.invocations import agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sign_in_client(hub):
    return ClientFactory(
        app_id="mcp-agent", name="MCP agent", hub_consent=True, mcp_sign_in=True, allowed_routes=[ROUTE]
    )


@pytest.fixture
def alice(console_roles):
    return UserFactory(username="alice", roles=["administrator"])


async def _approve(url: str, user) -> None:
    """What the person does in the browser: sign in to the console, approve the MCP client."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page()
        await page.goto(url)
        await page.get_by_label("Username").fill(user.username)
        await page.get_by_label("Password").fill(PASSWORD)
        await page.get_by_role("button", name="Sign in").click()
        await page.locator("section.consent").wait_for()
        await page.get_by_role("button", name="Approve").click()
        await page.get_by_text("The MCP client is signed in").wait_for()
        await browser.close()


def test_an_mcp_client_that_knows_only_the_url_signs_in_and_works(hub, sign_in_client, alice):
    url = f"{hub.url}/mcp/{ROUTE}"
    callback = LoopbackCallback()
    seen: list[str] = []

    def open_browser(authorization_url: str) -> None:
        seen.append(authorization_url)

    provider = oauth_provider(url, callback, open_browser=open_browser, timeout=60)
    storage: MemoryTokenStorage = provider.context.storage

    async def approve_when_asked():
        while not seen:
            await asyncio.sleep(0.05)
        await _approve(seen[0], alice)

    async def scenario():
        http = httpx2.AsyncClient(auth=provider, timeout=60)
        async with http:
            approving = asyncio.create_task(approve_when_asked())
            async with Client(streamable_http_client(url, http_client=http)) as client:
                tools = await client.list_tools()
                found = await client.call_tool("search_knowledge", {"query": "refund", "limit": 2})
                # The default grant (the 401 challenge's scope) calls business tools too.
                orders = await client.call_tool("list_orders", {})
            await approving
        return tools, found, orders

    try:
        tools, found, orders = run_async(scenario())
    finally:
        callback.close()
    assert [tool.name for tool in tools.tools][:2] == ["search_knowledge", "ask_knowledge"]
    assert found.is_error is False and found.structured_content["results"]
    assert orders.is_error is False and orders.structured_content["state"] == "executed"
    # The sign-in went through the hub's OAuth endpoints with the resource indicator of this endpoint.
    assert seen[0].startswith(f"{hub.url}/oauth/authorize?")
    assert f"resource={url.replace(':', '%3A').replace('/', '%2F')}" in seen[0]
    registration = OAuthClient.objects.get()
    assert registration.hub_client == sign_in_client
    session = AgentSession.objects.get(oauth_client=registration)
    assert session.allowed_routes == [ROUTE] and session.on_behalf_of == "alice"
    assert storage.tokens is not None and storage.tokens.scope == "knowledge:read tools:read tools:call"
    assert session.scopes == ["knowledge:read", "tools:read", "tools:call"]
    assert session.resource == url
    assert AuditEvent.objects.filter(action="agent_auth.oauth_client.registered").count() == 1


def test_the_sdk_signs_in_with_a_client_metadata_document(hub, sign_in_client, alice, cimd):
    """The SDK's ``client_metadata_url``: the hub advertises CIMD, so the SDK skips registration and
    uses the document's https URL as its client_id; the hub fetches the document (a local HTTPS server
    with a test certificate), the user approves on the consent page, and the SDK checks ``iss``."""
    url = f"{hub.url}/mcp/{ROUTE}"
    callback = LoopbackCallback()
    metadata_url = cimd.put_document(
        "/clients/sdk.json",
        {
            "client_id": cimd.url("/clients/sdk.json"),
            "client_name": "MCP SDK (document)",
            "redirect_uris": [callback.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    seen: list[str] = []
    provider = oauth_provider(
        url, callback, open_browser=seen.append, timeout=60, client_metadata_url=metadata_url
    )

    async def approve_when_asked():
        while not seen:
            await asyncio.sleep(0.05)
        await _approve(seen[0], alice)

    async def scenario():
        http = httpx2.AsyncClient(auth=provider, timeout=60)
        async with http:
            approving = asyncio.create_task(approve_when_asked())
            async with Client(streamable_http_client(url, http_client=http)) as client:
                found = await client.call_tool("search_knowledge", {"query": "refund", "limit": 2})
            await approving
        return found

    try:
        found = run_async(scenario())
    finally:
        callback.close()
    assert found.is_error is False and found.structured_content["results"]
    assert parse_qs(urlsplit(seen[0]).query)["client_id"] == [metadata_url]
    oauth_client = OAuthClient.objects.get()  # no registration happened
    assert oauth_client.client_id == metadata_url and oauth_client.metadata_document
    assert oauth_client.client_name == "MCP SDK (document)" and oauth_client.signed_in_at is not None
    session = AgentSession.objects.get(oauth_client=oauth_client)
    assert session.client == sign_in_client and session.on_behalf_of == "alice"
    assert not AuditEvent.objects.filter(action="agent_auth.oauth_client.registered").exists()
    assert cimd.hits("/clients/sdk.json") == 1


def test_the_sdk_refreshes_an_expired_access_token_with_rotation(hub, sign_in_client, alice):
    url = f"{hub.url}/mcp/{ROUTE}"
    callback = LoopbackCallback()
    seen: list[str] = []
    provider = oauth_provider(url, callback, open_browser=seen.append, timeout=60)

    async def first():
        http = httpx2.AsyncClient(auth=provider, timeout=60)

        async def approve_when_asked():
            while not seen:
                await asyncio.sleep(0.05)
            await _approve(seen[0], alice)

        async with http:
            approving = asyncio.create_task(approve_when_asked())
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await client.list_tools()
            await approving

    try:
        run_async(first())
    finally:
        callback.close()
    session = AgentSession.objects.get()
    first_refresh = provider.context.current_tokens.refresh_token
    # Fifteen minutes pass: the access token expires on the hub and in the SDK's own clock, so its next
    # request first refreshes (rotation) instead of signing in again.
    AgentSession.objects.filter(pk=session.pk).update(access_expires_at=timezone.now())
    provider.context.token_expiry_time = time.time() - 1

    async def second():
        http = httpx2.AsyncClient(auth=provider, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return await client.list_tools()

    tools = run_async(second())
    assert tools.tools
    assert provider.context.current_tokens.refresh_token != first_refresh
    assert AgentSession.objects.get().pk == session.pk  # same session, rotated tokens
    assert AuditEvent.objects.filter(action="agent_auth.token.refreshed").count() == 1


def test_the_reference_clients_mcp_check_signs_in_with_only_the_url(hub, sign_in_client, alice, capsys):
    """``python -m agent_client mcp-check --url …``: the one-command smoke check of the README."""
    result: dict[str, int] = {}
    argv = ["mcp-check", "--url", f"{hub.url}/mcp/{ROUTE}", "--no-browser", "--timeout", "30"]
    thread = threading.Thread(target=lambda: result.setdefault("code", main(argv)))
    thread.start()
    # The command prints the authorization URL (--no-browser); the "browser" opens it.
    printed = ""
    deadline = time.monotonic() + 20
    while "/oauth/authorize?" not in printed and time.monotonic() < deadline:
        time.sleep(0.05)
        printed += capsys.readouterr().out
    authorize_url = next(line.strip() for line in printed.splitlines() if "/oauth/authorize?" in line)
    assert browser_visit(authorize_url).status_code == 302  # to the hub's consent page
    authorization = AgentAuthorization.objects.get()
    assert authorization.oauth_client is not None
    redirect = authorization_approve(
        authorization_id=authorization.id,
        client=None,
        principal={"id": "alice", "roles": []},
        on_behalf_of="alice",
        allowed_routes=[ROUTE],
        approved_by=alice,
        actor=Actor.user(alice),
    )
    assert browser_visit(redirect).status_code == 200
    thread.join(timeout=60)
    assert result == {"code": 0}
    out = printed + capsys.readouterr().out
    assert "(MCP 2026-07-28)" in out
    assert "--- search_knowledge" in out and "document_id: demo-handbook:" in out
    assert "Sources:\n[1] " in out
    assert out.rstrip().endswith("mcp-check: ok")


def test_mcp_check_with_saved_agent_auth_tokens(hub, tmp_path, capsys):
    token = agent(route_key=ROUTE)._access
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"hub": hub.url, "client_app_id": "x", "access_token": token}))
    assert off_running_loop(main, ["mcp-check", "--tokens", str(tokens), "--workspace", ROUTE]) == 0
    assert capsys.readouterr().out.rstrip().endswith("mcp-check: ok")
    tokens.write_text(json.dumps({"hub": hub.url, "client_app_id": "x", "access_token": "bha_" + "0" * 43}))
    # A refused access token and nothing to refresh it with: the session has ended, sign in again.
    assert off_running_loop(main, ["mcp-check", "--tokens", str(tokens), "--workspace", ROUTE]) == 3
    assert "Sign in again" in capsys.readouterr().err
