"""OAuth scopes and audience on the MCP endpoint and the REST agent API, over HTTP.

A standard OAuth (MCP) sign-in's session carries the scopes it was granted and the resource its token
is for (docs/protocol.md "Scopes", "Audience"); an Agent Auth v1 session carries neither and keeps
the whole agent surface. Real PostgreSQL and the real Demo Shop; statuses, codes and challenges are
asserted, never messages.
"""

from __future__ import annotations

import json

import pytest

from agent_runtime.models import AgentSession, Client, ToolInvocation
from tests.mcp_server.support import (
    call_modern,
    modern_headers,
    modern_message,
    post_legacy,
    post_modern,
    post_raw,
)
from tests.support.invocations import agent, provider_for, workspace

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
OTHER = "other"
PUBLIC = "http://hub.test"
KNOWLEDGE = ["search_knowledge", "ask_knowledge"]
CALLING = ["call_tool", "resume_invocation", "get_receipt"]
WRITES = ["create_ticket", "request_refund", "cancel_order"]


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def shop(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=WRITES)
    workspace(route_key=OTHER, provider="demo-shop", write_tools=WRITES)


def oauth_session(scopes, *, routes=(ROUTE,), resource=f"{PUBLIC}/mcp/{ROUTE}") -> AgentSession:
    """A session as a standard OAuth sign-in leaves it: granted scopes and the token's resource."""
    session = agent(route_key=routes[0])
    AgentSession.objects.filter(pk=session.pk).update(
        scopes=list(scopes), resource=resource, allowed_routes=list(routes)
    )
    return session


def names(client, token, route=ROUTE) -> list[str]:
    response = post_modern(client, route, token, "tools/list")
    assert response.status_code == 200, response.content
    return [tool["name"] for tool in response.json()["result"]["tools"]]


def call(client, token, name, arguments, route=ROUTE):
    message = modern_message("tools/call", {"name": name, "arguments": arguments})
    return post_raw(client, route, json.dumps(message), token=token, headers=modern_headers(message))


def assert_insufficient(response, scope: str, route=ROUTE):
    assert response.status_code == 403, response.content
    assert response.json()["error"] == "insufficient_scope"
    assert response.json()["required_scopes"] == scope.split(" ")
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="insufficient_scope"' in challenge and f'scope="{scope}"' in challenge
    assert f'resource_metadata="{PUBLIC}/.well-known/oauth-protected-resource/mcp/{route}"' in challenge


# --- tools/list -----------------------------------------------------------------------------------------


def test_knowledge_read_alone_lists_only_the_knowledge_tools(client, shop):
    token = oauth_session(["knowledge:read"])._access
    assert names(client, token) == KNOWLEDGE


def test_tools_read_lists_find_tools_and_the_business_tools_but_nothing_that_calls(client, shop):
    token = oauth_session(["tools:read"])._access
    listed = names(client, token)
    assert listed[0] == "find_tools"
    assert "list_orders" in listed and "request_refund" in listed
    assert not set(listed) & set(KNOWLEDGE + CALLING)


def test_all_three_scopes_list_what_an_agent_auth_session_lists(client, shop):
    full = names(client, oauth_session(["knowledge:read", "tools:read", "tools:call"])._access)
    assert full == names(client, agent(route_key=ROUTE)._access)
    assert full[:6] == [*KNOWLEDGE, "find_tools", *CALLING]


def test_the_handshake_era_lists_by_scope_too(client, shop):
    token = oauth_session(["knowledge:read"])._access
    response = post_legacy(client, ROUTE, token, "tools/list")
    assert [tool["name"] for tool in response.json()["result"]["tools"]] == KNOWLEDGE


# --- tools/call -----------------------------------------------------------------------------------------


def test_a_business_call_without_tools_call_is_an_insufficient_scope_challenge(client, shop):
    token = oauth_session(["knowledge:read", "tools:read"])._access
    arguments = {"order_id": "SO-1001", "amount": 10, "reason": "late"}
    assert_insufficient(call(client, token, "request_refund", arguments), "tools:call")
    assert_insufficient(call(client, token, "call_tool", {"name": "list_orders"}), "tools:call")
    assert_insufficient(call(client, token, "resume_invocation", {"invocation_id": "0" * 64}), "tools:call")
    # Known or not: any name but the hub's own tools is a business tool.
    assert_insufficient(call(client, token, "no_such_tool", {}), "tools:call")
    assert ToolInvocation.objects.count() == 0
    # What the scopes do cover still works.
    assert call(client, token, "find_tools", {"query": "refund"}).status_code == 200
    assert call(client, token, "search_knowledge", {"query": "refund"}).status_code == 200


def test_the_knowledge_tools_need_knowledge_read(client, shop):
    token = oauth_session(["tools:read", "tools:call"])._access
    assert_insufficient(call(client, token, "search_knowledge", {"query": "refund"}), "knowledge:read")
    assert_insufficient(call(client, token, "ask_knowledge", {"query": "refund"}), "knowledge:read")


def test_find_tools_needs_tools_read(client, shop):
    token = oauth_session(["knowledge:read"])._access
    assert_insufficient(call(client, token, "find_tools", {"query": "refund"}), "tools:read")


def test_tools_call_calls_business_tools(client, shop):
    token = oauth_session(["tools:read", "tools:call"])._access
    result = call_modern(client, ROUTE, token, "list_orders", {})
    assert result["isError"] is False
    assert ToolInvocation.objects.count() == 1


def test_the_handshake_era_gets_the_same_challenge(client, shop):
    token = oauth_session(["knowledge:read"])._access
    response = post_legacy(client, ROUTE, token, "tools/call", {"name": "list_orders", "arguments": {}})
    assert_insufficient(response, "tools:call")


# --- REST with an OAuth session's token -------------------------------------------------------------------


def test_rest_calls_are_held_to_the_same_scopes(client, shop):
    token = oauth_session(["knowledge:read"])._access
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    search = client.post(
        f"/agent-api/v1/workspaces/{ROUTE}/knowledge/search",
        {"query": "refund"},
        content_type="application/json",
        **auth,
    )
    assert search.status_code == 200, search.content
    bootstrap = client.get(f"/agent-api/v1/workspaces/{ROUTE}/bootstrap", **auth)
    assert bootstrap.status_code == 403 and bootstrap.json()["error"] == "insufficient_scope"
    assert bootstrap.json()["required_scopes"] == ["tools:read"]
    challenge = bootstrap["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="tools:read"' in challenge
    invoke = client.post(
        "/agent-api/v1/tool-invocations",
        {"invocation_id": "1" * 64, "route": ROUTE, "tool": "list_orders", "arguments": {}},
        content_type="application/json",
        **auth,
    )
    assert invoke.status_code == 403 and invoke.json()["required_scopes"] == ["tools:call"]
    assert ToolInvocation.objects.count() == 0
    # Nothing a scope covers: the session's own workspaces.
    assert client.get("/agent-api/v1/workspaces", **auth).status_code == 200


def test_rest_bootstrap_with_tools_read_and_knowledge_with_it_refused(client, shop):
    token = oauth_session(["tools:read"])._access
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.get(f"/agent-api/v1/workspaces/{ROUTE}/bootstrap", **auth).status_code == 200
    search = client.post(
        f"/agent-api/v1/workspaces/{ROUTE}/knowledge/search",
        {"query": "refund"},
        content_type="application/json",
        **auth,
    )
    assert search.status_code == 403 and search.json()["required_scopes"] == ["knowledge:read"]


def test_agent_auth_sessions_keep_the_whole_surface_on_rest(client, shop):
    token = agent(route_key=ROUTE)._access
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert client.get(f"/agent-api/v1/workspaces/{ROUTE}/bootstrap", **auth).status_code == 200
    assert call_modern(client, ROUTE, token, "list_orders", {})["isError"] is False


# --- audience -----------------------------------------------------------------------------------------


def test_a_token_works_on_the_endpoint_it_was_issued_for(client, shop):
    token = oauth_session(["knowledge:read"])._access
    assert post_modern(client, ROUTE, token, "tools/list").status_code == 200


@pytest.mark.parametrize("routes", [(ROUTE,), (ROUTE, OTHER)])
def test_a_token_is_refused_on_another_routes_endpoint(client, shop, routes):
    """Even a session whose grant listed the other workspace too: the token's audience is one endpoint."""
    token = oauth_session(["knowledge:read", "tools:read", "tools:call"], routes=routes)._access
    response = post_modern(client, OTHER, token, "tools/list")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    challenge = response["WWW-Authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{PUBLIC}/.well-known/oauth-protected-resource/mcp/{OTHER}"' in challenge


def test_a_token_issued_under_another_public_url_is_refused(client, shop, settings):
    token = oauth_session(["knowledge:read"], resource=f"https://old.example/mcp/{ROUTE}")._access
    response = post_modern(client, ROUTE, token, "tools/list")
    assert response.status_code == 401 and 'error="invalid_token"' in response["WWW-Authenticate"]


def test_agent_auth_tokens_have_no_audience_beyond_the_route_gate(client, shop):
    session = agent(route_key=ROUTE)
    AgentSession.objects.filter(pk=session.pk).update(allowed_routes=[ROUTE, OTHER])
    Client.objects.filter(pk=session.client_id).update(allowed_routes=[ROUTE, OTHER])
    assert post_modern(client, OTHER, session._access, "tools/list").status_code == 200


def test_on_rest_the_route_gate_keeps_a_token_to_its_workspace(client, shop):
    token = oauth_session(["knowledge:read", "tools:read", "tools:call"])._access
    response = client.get(f"/agent-api/v1/workspaces/{OTHER}/bootstrap", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 403 and response.json()["error"] == "route_not_allowed"


# --- cache hints --------------------------------------------------------------------------------------


def test_tools_list_cache_hints_follow_the_capability_revision(client, shop):
    session = oauth_session(["knowledge:read", "tools:read", "tools:call"])
    auth = {"HTTP_AUTHORIZATION": f"Bearer {session._access}"}
    result = post_modern(client, ROUTE, session._access, "tools/list").json()["result"]
    assert (result["ttlMs"], result["cacheScope"]) == (30_000, "private")
    bootstrap = client.get(f"/agent-api/v1/workspaces/{ROUTE}/bootstrap", **auth).json()
    revision = result["_meta"]["io.bailinghub/capability_revision"]
    assert revision == bootstrap["capabilities"]["revision"]
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["create_ticket"])
    changed = post_modern(client, ROUTE, session._access, "tools/list").json()["result"]
    assert changed["_meta"]["io.bailinghub/capability_revision"] != revision
    # A list without business tools names no revision.
    knowledge_only = oauth_session(["knowledge:read"])._access
    assert "io.bailinghub/capability_revision" not in post_modern(
        client, ROUTE, knowledge_only, "tools/list"
    ).json()["result"].get("_meta", {})
