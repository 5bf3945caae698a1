"""Agent Auth v1 end to end over real HTTP: the reference agent client against a live hub.

The test plays the business backend (Client Token calls) and the user's browser (following the
redirect URI the backend got back); the agent side is ``agent_client``.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agent_client import AgentAuthError, AuthorizationDenied, ReferenceAgentClient, browser_visit
from agent_runtime.models import AgentSession
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db(transaction=True)

CONSENT_PAGE = "https://business.example.com/agent/authorize?lang=en"


@pytest.fixture
def business():
    return ClientFactory(
        app_id="shop",
        name="Shop",
        hub_consent=False,
        agent_authorize_url=CONSENT_PAGE,
        allowed_routes=["orders"],
    )


@pytest.fixture
def backend(live_server, business):
    """The business backend's HTTP client, holding the Client Token."""
    with httpx.Client(
        base_url=live_server.url,
        trust_env=False,
        timeout=10,
        headers={"Authorization": f"Bearer {business._token}"},
    ) as client:
        yield client


@pytest.fixture
def agent(live_server, business):
    with ReferenceAgentClient(live_server.url, "shop", ["orders"], device_label="Alice's laptop") as client:
        yield client


def consent_authorization_id(url: str) -> str:
    """What the business consent page reads from its own URL."""
    assert url.startswith("https://business.example.com/agent/authorize?lang=en&authorization_id=")
    return parse_qs(urlsplit(url).query)["authorization_id"][0]


def approve(backend: httpx.Client, authorization_id: str) -> str:
    response = backend.post(
        f"/agent-auth/v1/authorizations/{authorization_id}/approve",
        json={
            "principal": {"id": "alice", "tenant": "acme", "roles": ["buyer"]},
            "on_behalf_of": "acme:alice",
            "allowed_routes": ["orders"],
            "subject_display": {"name": "Acme purchasing"},
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return response.json()["redirect_uri"]


def test_login_session_refresh_and_replay_over_http(agent, backend):
    authorization_id = consent_authorization_id(agent.start_login())

    context = backend.get(f"/agent-auth/v1/authorizations/{authorization_id}")
    assert context.status_code == 200
    assert context.json()["device"] == {"name": "Alice's laptop"}
    assert context.json()["requested_routes"] == ["orders"]
    assert context.json()["status"] == "pending"

    redirect_uri = approve(backend, authorization_id)
    assert redirect_uri.startswith(agent.redirect_uri + "?")
    # A forged redirect with another state is refused and does not end the login.
    forged = redirect_uri.replace("state=", "state=x")
    assert browser_visit(forged).status_code == 400
    assert browser_visit(redirect_uri).status_code == 200
    params = agent.wait_for_redirect()
    assert params["state"] == agent.state and params["code"].startswith("bhc_")

    tokens = agent.exchange()
    assert tokens["subject_display"] == {"name": "Acme purchasing"}
    info = agent.session_info()
    assert info["session_id"] == tokens["session_id"]
    assert info["allowed_routes"] == ["orders"]
    assert info["on_behalf_of"] == "acme:alice"
    assert info["device_label"] == "Alice's laptop"

    consumed = backend.get(f"/agent-auth/v1/authorizations/{authorization_id}").json()
    assert consumed["status"] == "consumed"
    assert consumed["session"]["session_id"] == tokens["session_id"]

    old_access, old_refresh = agent.access_token, agent.refresh_token
    agent.refresh()
    with pytest.raises(AgentAuthError) as stale:
        agent.session_info(old_access)
    assert (stale.value.status, stale.value.code) == (401, "unauthorized")
    assert agent.session_info()["session_id"] == tokens["session_id"]

    replay = agent.http.post(
        "/agent-auth/v1/token",
        json={"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": old_refresh},
    )
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert replay.headers["pragma"] == "no-cache"
    # Passing the access token asks the hub itself, without the client's refresh-and-retry.
    with pytest.raises(AgentAuthError) as revoked:
        agent.session_info(agent.access_token)
    assert revoked.value.status == 401
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoke_reason == "refresh_replay"


def test_denied_login_reaches_the_listener_as_access_denied(agent, backend):
    authorization_id = consent_authorization_id(agent.start_login())
    response = backend.post(f"/agent-auth/v1/authorizations/{authorization_id}/deny", json={})
    assert response.status_code == 200
    assert browser_visit(response.json()["redirect_uri"]).status_code == 403
    with pytest.raises(AuthorizationDenied) as denied:
        agent.wait_for_redirect()
    assert denied.value.error == "access_denied"
    assert agent.code is None


def test_logout_revokes_the_session(agent, backend):
    authorization_id = consent_authorization_id(agent.start_login())
    browser_visit(approve(backend, authorization_id))
    agent.wait_for_redirect()
    agent.exchange()
    assert agent.revoke(with_bearer=False) == {"revoked": True}
    with pytest.raises(AgentAuthError) as after:
        agent.session_info(agent.access_token)
    assert after.value.status == 401
    with pytest.raises(AgentAuthError) as refresh:
        agent.refresh()
    assert (refresh.value.status, refresh.value.code) == (400, "invalid_grant")


def test_business_revoke_ends_the_agents_session(agent, backend):
    authorization_id = consent_authorization_id(agent.start_login())
    browser_visit(approve(backend, authorization_id))
    agent.wait_for_redirect()
    tokens = agent.exchange()
    response = backend.post(f"/agent-auth/v1/sessions/{tokens['session_id']}/revoke", json={})
    assert response.json() == {"revoked": True}
    with pytest.raises(AgentAuthError) as after:
        agent.session_info(agent.access_token)
    assert after.value.status == 401
