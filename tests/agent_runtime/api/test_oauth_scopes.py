"""Scopes of a standard OAuth sign-in: what is asked is what is granted (closed over what it implies),
stored on the authorization and the session, answered by the token endpoint, and kept by a refresh.
Every agent API view names the scopes it needs. Real PostgreSQL; codes are asserted, not messages."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client as HttpClient
from django.urls import URLPattern, URLResolver, get_resolver

from agent_client import pkce_pair
from agent_runtime.api.base import AgentApiView
from agent_runtime.identity import SCOPES, scopes_parse
from agent_runtime.models import AgentAuthorization
from bailing.audit.models import AuditEvent
from tests.agent_runtime.api.test_oauth import (
    PUBLIC,
    RESOURCE,
    approve,
    assert_oauth_error,
    authorize,
    authorize_params,
    code_body,
    form_post,
    refresh_body,
    registered,
    session_of,
    started,
)
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db
ALL = "knowledge:read tools:read tools:call"


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def http() -> HttpClient:
    return HttpClient()


@pytest.fixture
def sign_in_client():
    return ClientFactory(app_id="mcp-agent", hub_consent=True, mcp_sign_in=True, allowed_routes=["demo"])


def sign_in(http, scope):
    client_id = registered(http)["client_id"]
    authorization_id, verifier = started(http, client_id, scope=scope)
    code = parse_qs(urlsplit(approve(authorization_id)).query)["code"][0]
    response = form_post(http, "/oauth/token", code_body(client_id, code, verifier))
    assert response.status_code == 200, response.content
    return client_id, authorization_id, response.json()


@pytest.mark.parametrize(
    ("scope", "granted"),
    [
        (None, ["knowledge:read", "tools:read", "tools:call"]),
        ("", ["knowledge:read", "tools:read", "tools:call"]),
        ("knowledge:read", ["knowledge:read"]),
        ("tools:read", ["tools:read"]),
        # tools:call implies tools:read: a session that may call a tool may see it.
        ("tools:call", ["tools:read", "tools:call"]),
        ("tools:call knowledge:read", ["knowledge:read", "tools:read", "tools:call"]),
        ("tools:read tools:read", ["tools:read"]),
    ],
)
def test_what_is_asked_is_granted_stored_and_answered(http, sign_in_client, scope, granted):
    _, authorization_id, tokens = sign_in(http, scope)
    assert AgentAuthorization.objects.get(pk=authorization_id).scopes == granted
    session = session_of(tokens)
    assert (session.scopes, session.resource) == (granted, RESOURCE)
    assert tokens["scope"] == " ".join(granted)
    issued = AuditEvent.objects.get(action="agent_auth.token.issued")
    assert issued.data["scopes"] == granted


@pytest.mark.parametrize(
    "scope", ["tools:write", "knowledge:read offline_access", "Tools:read", " tools:read"]
)
def test_an_unknown_scope_is_invalid_scope(http, sign_in_client, scope):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, scope=scope))
    assert parse_qs(urlsplit(response["Location"]).query)["error"] == ["invalid_scope"]
    assert AgentAuthorization.objects.count() == 0


def test_a_refresh_keeps_the_granted_scope_and_never_widens_it(http, sign_in_client):
    client_id, _, tokens = sign_in(http, "knowledge:read")
    wider = form_post(
        http, "/oauth/token", refresh_body(client_id, tokens, scope="knowledge:read tools:call")
    )
    assert_oauth_error(wider, 400, "invalid_scope")
    same = form_post(http, "/oauth/token", refresh_body(client_id, tokens, scope="knowledge:read"))
    assert same.status_code == 200, same.content
    assert same.json()["scope"] == "knowledge:read"
    again = form_post(http, "/oauth/token", refresh_body(client_id, same.json()))
    assert again.json()["scope"] == "knowledge:read"
    assert session_of(again.json()).scopes == ["knowledge:read"]


def test_a_narrower_refresh_is_answered_with_what_was_granted(http, sign_in_client):
    client_id, _, tokens = sign_in(http, None)
    narrower = form_post(http, "/oauth/token", refresh_body(client_id, tokens, scope="knowledge:read"))
    assert narrower.status_code == 200
    assert narrower.json()["scope"] == ALL
    assert session_of(narrower.json()).scopes == ALL.split(" ")


def test_registration_answers_the_scope_it_asked_for(http, sign_in_client):
    assert registered(http, scope="tools:call")["scope"] == "tools:read tools:call"
    assert registered(http)["scope"] == ALL


def test_the_scope_rule_is_one_function():
    assert scopes_parse(None) == list(SCOPES)
    assert scopes_parse("tools:call") == ["tools:read", "tools:call"]
    assert scopes_parse("tools:call x") is None


def _views(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            view = getattr(pattern.callback, "view_class", None)
            if view is not None:
                yield prefix + str(pattern.pattern), view


def test_every_agent_view_names_the_scopes_it_needs():
    """A new agent endpoint must decide what an OAuth (MCP) sign-in needs for it; undeclared would
    mean every scope, which no reviewer should have to discover."""
    agent_views = [
        (route, view) for route, view in _views(get_resolver().url_patterns) if issubclass(view, AgentApiView)
    ]
    assert len(agent_views) >= 15
    for route, view in agent_views:
        assert view.required_scopes is not None, route
        assert set(view.required_scopes) <= set(SCOPES), route
