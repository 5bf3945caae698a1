"""The business backend's view of its sessions: by authorization, only its own, in every state."""

from __future__ import annotations

import uuid
from urllib.parse import parse_qs, urlsplit

import pytest

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization, Client
from agent_runtime.selectors.agent_sessions import sessions_for_authorization
from agent_runtime.services.agent_auth.authorizations import authorization_approve, authorization_create
from agent_runtime.services.agent_auth.sessions import session_revoke
from agent_runtime.services.agent_auth.tokens import token_exchange_code
from bailing.api.errors import NotFound
from bailing.audit.actor import Actor
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:53682/callback"


@pytest.fixture
def business() -> Client:
    return ClientFactory(
        app_id="shop", hub_consent=False, agent_authorize_url="https://shop.example.com/agent/authorize"
    )


def sign_in(client: Client, *, until: str = "exchanged") -> tuple[AgentAuthorization, str | None]:
    """An authorization of ``client`` taken as far as ``until`` (pending/approved/exchanged), and the
    session id when it was exchanged."""
    verifier, challenge = pkce_pair()
    authorization, _ = authorization_create(
        client_app_id=client.app_id,
        redirect_uri=REDIRECT,
        state="state-1234567",
        requested_routes=["orders"],
        device_label="laptop",
        code_challenge=challenge,
        ip="203.0.113.5",
    )
    if until == "pending":
        return authorization, None
    redirect = authorization_approve(
        authorization_id=authorization.id,
        client=client,
        principal={"id": "alice"},
        on_behalf_of="alice",
        allowed_routes=["orders"],
        actor=Actor.client(client),
    )
    if until == "approved":
        return authorization, None
    code = parse_qs(urlsplit(redirect).query)["code"][0]
    tokens = token_exchange_code(
        client_app_id=client.app_id, code=code, redirect_uri=REDIRECT, code_verifier=verifier
    )
    return authorization, tokens["session_id"]


def test_an_authorization_lists_the_one_session_it_produced_in_every_state(business):
    authorization, session_id = sign_in(business)
    sign_in(business)  # another sign-in of the same client belongs to another authorization

    [session] = sessions_for_authorization(client=business, authorization_id=authorization.id)
    assert str(session.id) == session_id
    session_revoke(session=session, actor=Actor.client(business), reason="business_revoked")
    [revoked] = sessions_for_authorization(client=business, authorization_id=authorization.id)
    assert (revoked.id, revoked.state) == (session.id, "revoked")


@pytest.mark.parametrize("until", ["pending", "approved"])
def test_an_authorization_not_exchanged_yet_lists_no_session(business, until):
    authorization, _ = sign_in(business, until=until)
    assert sessions_for_authorization(client=business, authorization_id=authorization.id) == []


def test_another_clients_or_an_unknown_authorization_is_not_found(business):
    authorization, _ = sign_in(business)
    with pytest.raises(NotFound):
        sessions_for_authorization(client=ClientFactory(), authorization_id=authorization.id)
    with pytest.raises(NotFound):
        sessions_for_authorization(client=business, authorization_id=uuid.uuid4())
