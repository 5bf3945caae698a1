"""Dynamic registration, bounded: the cap on registrations waiting for their first sign-in, their
expiry and purge, and ``application_type`` (OpenID Connect Registration §2 as the MCP spec asks).
The per-address rate limit is ``test_oauth.py::test_register_is_throttled_per_ip``."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client as HttpClient
from django.utils import timezone

from agent_runtime.models import AgentAuthorization, AgentSession, OAuthClient
from tests.agent_runtime.api.test_oauth import (
    PUBLIC,
    REDIRECT,
    assert_oauth_error,
    code_body,
    form_post,
    register,
    registered,
    signed_in,
    started,
)
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def http() -> HttpClient:
    return HttpClient()


@pytest.fixture
def sign_in_client():
    return ClientFactory(
        app_id="mcp-agent", name="MCP agent", hub_consent=True, mcp_sign_in=True, allowed_routes=["demo"]
    )


def age(client_id: str, **delta) -> None:
    OAuthClient.objects.filter(client_id=client_id).update(created_at=timezone.now() - timedelta(**delta))


# --- the cap -----------------------------------------------------------------------------------------------


def test_registrations_waiting_for_a_sign_in_are_capped(http, sign_in_client, settings):
    settings.OAUTH_REGISTER_PENDING_MAX = 2
    first = registered(http)["client_id"]
    registered(http, client_name="second")
    response = register(http)
    assert_oauth_error(response, 429, "rate_limited")
    # Free again when the oldest expires (in a day).
    assert 23 * 3600 < int(response["Retry-After"]) <= settings.OAUTH_REGISTER_PENDING_TTL
    # A registration that completed a sign-in no longer waits, so it frees a place.
    signed_in(http, first)
    assert register(http).status_code == 201
    assert_oauth_error(register(http), 429, "rate_limited")
    # The cap is global: another address is refused as well.
    assert_oauth_error(register(http, REMOTE_ADDR="10.0.0.9"), 429, "rate_limited")


def test_expired_registrations_do_not_count_against_the_cap(http, sign_in_client, settings):
    settings.OAUTH_REGISTER_PENDING_MAX = 1
    old = registered(http)["client_id"]
    assert_oauth_error(register(http), 429, "rate_limited")
    age(old, hours=25)
    assert register(http).status_code == 201
    assert not OAuthClient.objects.filter(client_id=old).exists()  # purged on the way


# --- expiry ------------------------------------------------------------------------------------------------


def test_a_registration_never_signed_in_expires(http, sign_in_client, settings):
    client_id = registered(http)["client_id"]
    authorization_id, verifier = started(http, client_id)
    age(client_id, seconds=settings.OAUTH_REGISTER_PENDING_TTL + 1)
    # Unknown from then on, at every endpoint.
    response = http.get(f"/oauth/authorize?client_id={client_id}&redirect_uri={REDIRECT}")
    assert response.status_code == 400 and response.context["code"] == "invalid_client"
    assert_oauth_error(
        form_post(http, "/oauth/token", code_body(client_id, "bhc_" + "a" * 43, verifier)),
        401,
        "invalid_client",
    )
    # The next registration purges it with its authorization (which never became a session).
    assert register(http).status_code == 201
    assert not OAuthClient.objects.filter(client_id=client_id).exists()
    assert not AgentAuthorization.objects.filter(pk=authorization_id).exists()


def test_a_signed_in_registration_never_expires(http, sign_in_client, settings):
    client_id = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    age(client_id, days=30)
    assert register(http).status_code == 201
    assert OAuthClient.objects.filter(client_id=client_id).exists()
    refreshed = form_post(
        http,
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client_id},
    )
    assert refreshed.status_code == 200, refreshed.content


def test_a_client_a_session_points_to_is_kept_even_if_never_marked(http, sign_in_client, settings):
    """Defence in depth: the purge never deletes a client with a session (RESTRICT would refuse)."""
    client_id = registered(http)["client_id"]
    signed_in(http, client_id)
    OAuthClient.objects.filter(client_id=client_id).update(signed_in_at=None)
    age(client_id, days=2)
    out = StringIO()
    call_command("oauth_clients_purge", stdout=out)
    assert out.getvalue().strip() == "oauth_clients_purge: 0 deleted"
    assert OAuthClient.objects.filter(client_id=client_id).exists()
    assert AgentSession.objects.filter(oauth_client__client_id=client_id).exists()


def test_the_purge_command_deletes_expired_clients(http, sign_in_client):
    expired = [registered(http, client_name=f"c{n}")["client_id"] for n in range(3)]
    fresh = registered(http)["client_id"]
    for client_id in expired:
        age(client_id, hours=25)
    out = StringIO()
    call_command("oauth_clients_purge", stdout=out)
    assert out.getvalue().strip() == "oauth_clients_purge: 3 deleted"
    assert list(OAuthClient.objects.values_list("client_id", flat=True)) == [fresh]


# --- application_type --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("application_type", "redirect_uris"),
    [
        ("web", ["https://app.example.com/cb"]),
        ("native", [REDIRECT]),
        ("native", ["http://localhost:8080/cb", "http://[::1]:9/cb"]),
        ("native", ["https://app.example.com/cb"]),  # RFC 8252 §7.2: claimed https
        (None, [REDIRECT, "https://app.example.com/cb"]),
    ],
)
def test_application_type_accepts_fitting_redirects(http, sign_in_client, application_type, redirect_uris):
    body = {"redirect_uris": redirect_uris, "client_name": "x"}
    if application_type is not None:
        body["application_type"] = application_type
    response = register(http, body)
    assert response.status_code == 201, response.content
    answer = response.json()
    if application_type is None:
        assert "application_type" not in answer
    else:
        assert answer["application_type"] == application_type
    assert OAuthClient.objects.get(client_id=answer["client_id"]).application_type == (application_type or "")


@pytest.mark.parametrize(
    "redirect_uris",
    [
        [REDIRECT],
        ["http://localhost:8080/cb"],
        ["https://localhost/cb"],
        ["https://127.0.0.1:8443/cb"],
        ["https://[::1]/cb"],
        ["https://app.example.com/cb", REDIRECT],
    ],
)
def test_a_web_client_may_not_use_this_computer(http, sign_in_client, redirect_uris):
    response = register(http, {"redirect_uris": redirect_uris, "application_type": "web"})
    assert_oauth_error(response, 400, "invalid_redirect_uri")
    assert OAuthClient.objects.count() == 0


@pytest.mark.parametrize("application_type", ["desktop", "", "WEB", 1, None, ["web"]])
def test_application_type_is_web_or_native(http, sign_in_client, application_type):
    response = register(http, {"redirect_uris": [REDIRECT], "application_type": application_type})
    if application_type is None:
        # JSON null is an absent member (RFC 7591 §2).
        assert response.status_code == 201
        return
    assert_oauth_error(response, 400, "invalid_client_metadata")


def test_the_sdk_registration_body_is_accepted(http, sign_in_client):
    """The MCP SDK sends application_type "native" by default, with its loopback redirect."""
    from mcp.shared.auth import OAuthClientMetadata

    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT], client_name="sdk", token_endpoint_auth_method="none"
    )
    response = register(http, metadata.model_dump(mode="json", exclude_none=True))
    assert response.status_code == 201, response.content
    assert response.json()["application_type"] == "native"
