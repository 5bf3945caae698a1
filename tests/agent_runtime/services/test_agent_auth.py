"""Service rules of Agent Auth v1: state machine, TTLs, PKCE, rotation, replay, revocation, hashing."""

from __future__ import annotations

import json
from datetime import timedelta
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import serializers as django_serializers
from django.utils import timezone

from agent_client import pkce_pair
from agent_runtime.errors import (
    AgentAuthorizeUrlInvalid,
    AuthorizationExpired,
    InvalidClient,
    InvalidGrant,
    InvalidState,
    RouteNotAllowed,
)
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession
from agent_runtime.services.agent_auth.authorizations import (
    authorization_approve,
    authorization_create,
    authorization_deny,
    authorization_effective_status,
    authorization_get_for_client,
    authorization_get_for_hub_consent,
)
from agent_runtime.services.agent_auth.sessions import (
    authorization_session_revoke,
    session_revoke,
    session_revoke_self,
)
from agent_runtime.services.agent_auth.tokens import pkce_s256, token_exchange_code, token_refresh
from agent_runtime.tokens import secret_hash
from bailing.api.errors import InvalidRequest, NotFound, RateLimited
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_chain_verify
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory, UserFactory

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:53682/callback"
BUSINESS_PAGE = "https://business.example.com/agent/authorize?lang=zh-CN"


@pytest.fixture
def business():
    return ClientFactory(
        app_id="shop",
        hub_consent=False,
        agent_authorize_url=BUSINESS_PAGE,
        allowed_routes=["orders", "tickets"],
    )


def create(client, *, routes=("orders",), ip="203.0.113.5", redirect=REDIRECT, state="state-1234567"):
    verifier, challenge = pkce_pair()
    authorization, url = authorization_create(
        client_app_id=client.app_id,
        redirect_uri=redirect,
        state=state,
        requested_routes=list(routes),
        device_label="laptop",
        code_challenge=challenge,
        ip=ip,
    )
    authorization.verifier = verifier
    return authorization, url


def approve(authorization, client, *, routes=("orders",), **extra):
    return authorization_approve(
        authorization_id=authorization.id,
        client=client,
        principal={"id": "alice", "tenant": "t1", "roles": ["staff"]},
        on_behalf_of="t1:alice",
        allowed_routes=list(routes),
        actor=Actor.client(client),
        **extra,
    )


def query_of(uri: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(uri).query).items()}


def login(client, **extra):
    authorization, _ = create(client)
    code = query_of(approve(authorization, client, **extra))["code"]
    tokens = token_exchange_code(
        client_app_id=client.app_id, code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier
    )
    return authorization, tokens


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


# --- PKCE -------------------------------------------------------------------------------------------------


def test_pkce_s256_matches_rfc7636_appendix_b():
    assert (
        pkce_s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


# --- create -----------------------------------------------------------------------------------------------


def test_create_opens_a_pending_authorization_for_ten_minutes(business):
    before = timezone.now()
    authorization, _ = create(business)
    authorization.refresh_from_db()
    assert authorization.status == "pending"
    assert authorization.client == business
    assert authorization.requested_routes == ["orders"]
    assert authorization.created_ip == "203.0.113.5"
    assert timedelta(seconds=599) <= authorization.expires_at - before <= timedelta(seconds=601)
    assert actions() == ["agent_auth.authorization.created"]


def test_create_url_keeps_the_business_query_and_appends_only_the_authorization_id(business):
    business.agent_authorize_url = (
        "https://business.example.com/authorize?lang=zh-CN&authorization_id=evil&x=a%20b"
    )
    business.save()
    authorization, url = create(business)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "business.example.com", "/authorize")
    assert parts.query == f"lang=zh-CN&x=a%20b&authorization_id={authorization.id}"


def test_create_url_for_hub_consent_points_at_the_console(settings):
    settings.BAILING_PUBLIC_URL = "https://hub.example.com"
    client = ClientFactory(hub_consent=True)
    authorization, url = create(client)
    assert url == f"https://hub.example.com/console/consent/?authorization_id={authorization.id}"


@pytest.mark.parametrize(
    "change",
    [
        {"enabled": False},
        {"hub_consent": False, "agent_authorize_url": ""},
        {"allowed_routes": ["tickets"]},
        {"allowed_routes": []},
    ],
)
def test_create_requires_an_enabled_agent_client_allowing_every_route(business, change):
    for key, value in change.items():
        setattr(business, key, value)
    business.save()
    with pytest.raises(InvalidClient):
        create(business)
    assert not AgentAuthorization.objects.exists()


def test_create_for_an_unknown_client_is_invalid_client():
    with pytest.raises(InvalidClient):
        authorization_create(
            client_app_id="nobody",
            redirect_uri=REDIRECT,
            state="state-1234567",
            requested_routes=["orders"],
            device_label="laptop",
            code_challenge=pkce_pair()[1],
            ip=None,
        )


def test_create_needs_every_route_allowed_unless_wildcard(business):
    with pytest.raises(InvalidClient):
        create(business, routes=("orders", "billing"))
    create(ClientFactory(allowed_routes=["*"]), routes=("orders", "billing"))


def test_create_with_a_broken_business_page_is_agent_authorize_url_invalid(business):
    business.agent_authorize_url = "http://business.example.com/authorize"
    business.save()
    with pytest.raises(AgentAuthorizeUrlInvalid):
        create(business)


def test_create_throttle_is_ten_per_minute_per_client_and_ip(business):
    for _ in range(10):
        create(business, ip="198.51.100.7")
    with pytest.raises(RateLimited) as caught:
        create(business, ip="198.51.100.7")
    assert 1 <= caught.value.extra["retry_after_seconds"] <= 60
    assert caught.value.headers["Retry-After"] == str(caught.value.extra["retry_after_seconds"])
    create(business, ip="198.51.100.8")
    create(ClientFactory(), ip="198.51.100.7")
    assert AgentAuthorization.objects.filter(client=business, created_ip="198.51.100.7").count() == 10


def test_create_throttle_window_slides_and_retry_after_names_when(business):
    for _ in range(10):
        create(business, ip="198.51.100.7")
    AgentAuthorization.objects.filter(client=business).update(
        created_at=timezone.now() - timedelta(seconds=45)
    )
    with pytest.raises(RateLimited) as caught:
        create(business, ip="198.51.100.7")
    assert 14 <= caught.value.extra["retry_after_seconds"] <= 16
    AgentAuthorization.objects.filter(client=business).update(
        created_at=timezone.now() - timedelta(seconds=61)
    )
    create(business, ip="198.51.100.7")


def test_get_for_client_hides_other_clients_and_malformed_ids(business):
    authorization, _ = create(business)
    assert (
        authorization_get_for_client(client=business, authorization_id=str(authorization.id)) == authorization
    )
    for client, authorization_id in [
        (ClientFactory(), authorization.id),
        (business, "not-a-uuid"),
        (business, "00000000-0000-4000-8000-000000000000"),
        (business, None),
    ]:
        with pytest.raises(NotFound):
            authorization_get_for_client(client=client, authorization_id=authorization_id)


def test_effective_status_reports_expired_before_anyone_flips_it(business):
    authorization, _ = create(business)
    later = timezone.now() + timedelta(seconds=601)
    assert authorization_effective_status(authorization) == "pending"
    assert authorization_effective_status(authorization, now=later) == "expired"


# --- approve / deny -------------------------------------------------------------------------------------


def test_approve_issues_a_two_minute_code_stored_only_as_its_hash(business):
    authorization, _ = create(business, state="st@te with spaces&=")
    uri = approve(authorization, business, subject_display={"name": "Example team"})
    params = query_of(uri)
    assert uri.startswith(REDIRECT + "?")
    assert params["state"] == "st@te with spaces&="
    assert params["code"].startswith("bhc_") and len(params["code"]) >= 40
    authorization.refresh_from_db()
    assert authorization.status == "approved"
    assert authorization.code_hash == secret_hash(params["code"])
    assert authorization.code_expires_at - authorization.decided_at == timedelta(seconds=120)
    assert authorization.principal == {"id": "alice", "tenant": "t1", "roles": ["staff"]}
    assert authorization.on_behalf_of == "t1:alice"
    assert authorization.allowed_routes == ["orders"]
    assert authorization.subject_display == {"name": "Example team"}
    assert actions()[-1] == "agent_auth.authorization.approved"


def test_approve_replaces_code_and_state_already_in_the_redirect(business):
    authorization, _ = create(business, redirect="http://[::1]:8123/cb?keep=1&code=x&state=y")
    params = parse_qs(urlsplit(approve(authorization, business)).query)
    assert params["keep"] == ["1"]
    assert len(params["code"]) == 1 and params["code"][0].startswith("bhc_")
    assert params["state"] == ["state-1234567"]


def test_approve_drops_blank_optional_principal_strings(business):
    authorization, _ = create(business)
    authorization_approve(
        authorization_id=authorization.id,
        client=business,
        principal={"id": "bob", "tenant": "", "audience": "", "channel": "web"},
        on_behalf_of="bob",
        allowed_routes=["orders"],
        actor=Actor("client", business.app_id),
    )
    authorization.refresh_from_db()
    assert authorization.principal == {"id": "bob", "roles": [], "channel": "web"}


@pytest.mark.parametrize(
    "kwargs",
    [{"allowed_routes": []}, {"on_behalf_of": ""}, {"principal": {"roles": []}}, {"principal": "alice"}],
)
def test_approve_rejects_missing_grant_fields_even_from_the_console(business, kwargs):
    authorization, _ = create(business)
    arguments = {
        "principal": {"id": "alice"},
        "on_behalf_of": "alice",
        "allowed_routes": ["orders"],
        **kwargs,
    }
    with pytest.raises(InvalidRequest):
        authorization_approve(
            authorization_id=authorization.id, client=business, actor=Actor("client", "shop"), **arguments
        )


# Subjects the signer could never put in X-Bailing-On-Behalf-Of (printable ASCII, no space at an end).
UNSENDABLE_SUBJECTS = ["jos\u00e9", "渠道用户", " alice", "alice ", "a\tb", "a\x7fb"]


@pytest.mark.parametrize("subject", UNSENDABLE_SUBJECTS)
@pytest.mark.parametrize("via", ["business", "hub_consent"])
def test_approve_refuses_a_subject_that_cannot_be_dispatched_and_stores_nothing(business, via, subject):
    client = business if via == "business" else ClientFactory(hub_consent=True)
    authorization, _ = create(client)
    events = actions()
    with pytest.raises(InvalidRequest) as refused:
        authorization_approve(
            authorization_id=authorization.id,
            client=client if via == "business" else None,
            principal={"id": "alice"},
            on_behalf_of=subject,
            allowed_routes=["orders"],
            actor=Actor.client(client) if via == "business" else Actor.system(),
        )
    assert refused.value.extra == {"field": "on_behalf_of"}
    authorization.refresh_from_db()
    assert (authorization.status, authorization.on_behalf_of, authorization.principal) == (
        "pending",
        "",
        None,
    )
    assert authorization.code_hash is None
    assert actions() == events


def test_approve_keeps_a_dispatchable_subject_exactly(business):
    authorization, _ = create(business)
    subject = "tenant 1:alice@example.com"  # inner spaces and punctuation travel unchanged
    authorization_approve(
        authorization_id=authorization.id,
        client=business,
        principal={"id": "alice"},
        on_behalf_of=subject,
        allowed_routes=["orders"],
        actor=Actor.client(business),
    )
    authorization.refresh_from_db()
    assert authorization.on_behalf_of == subject


def test_approve_for_another_client_or_unknown_id_is_not_found(business):
    authorization, _ = create(business)
    with pytest.raises(NotFound):
        approve(authorization, ClientFactory())
    authorization.id = "11111111-1111-4111-8111-111111111111"
    with pytest.raises(NotFound):
        approve(authorization, business)
    authorization.id = "../etc"
    with pytest.raises(NotFound):
        approve(authorization, business)


def test_approve_routes_must_be_requested_and_still_allowed(business):
    authorization, _ = create(business, routes=("orders",))
    with pytest.raises(RouteNotAllowed):
        approve(authorization, business, routes=("tickets",))
    business.allowed_routes = ["tickets"]
    business.save()
    with pytest.raises(RouteNotAllowed):
        approve(authorization, business, routes=("orders",))
    authorization.refresh_from_db()
    assert authorization.status == "pending"


def test_approve_a_subset_of_the_requested_routes(business):
    authorization, _ = create(business, routes=("orders", "tickets"))
    approve(authorization, business, routes=("tickets",))
    authorization.refresh_from_db()
    assert authorization.allowed_routes == ["tickets"]


@pytest.mark.parametrize("status", ["approved", "denied", "consumed", "expired"])
def test_decisions_only_from_pending(business, status):
    authorization, _ = create(business)
    AgentAuthorization.objects.filter(pk=authorization.pk).update(status=status)
    with pytest.raises(InvalidState):
        approve(authorization, business)
    with pytest.raises(InvalidState):
        authorization_deny(authorization_id=authorization.id, client=business, actor=Actor("client", "shop"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("decide", ["approve", "deny"])
def test_deciding_after_expiry_commits_the_flip_to_expired_then_raises(business, decide):
    authorization, _ = create(business)
    AgentAuthorization.objects.filter(pk=authorization.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(AuthorizationExpired):
        if decide == "approve":
            approve(authorization, business)
        else:
            authorization_deny(
                authorization_id=authorization.id, client=business, actor=Actor("client", "shop")
            )
    authorization.refresh_from_db()
    assert authorization.status == "expired"
    assert authorization.code_hash is None
    assert actions()[-1] == "agent_auth.authorization.expired"
    with pytest.raises(InvalidState):
        approve(authorization, business)


def test_expiry_follows_the_clock(business):
    authorization, _ = create(business)
    later = timezone.now() + timedelta(seconds=600)
    with mock.patch("django.utils.timezone.now", return_value=later), pytest.raises(AuthorizationExpired):
        approve(authorization, business)


def test_deny_sends_access_denied_with_the_state(business):
    authorization, _ = create(business)
    uri = authorization_deny(
        authorization_id=authorization.id, client=business, actor=Actor("client", "shop")
    )
    assert query_of(uri) == {"error": "access_denied", "state": "state-1234567"}
    authorization.refresh_from_db()
    assert authorization.status == "denied"
    assert authorization.code_hash is None
    assert actions()[-1] == "agent_auth.authorization.denied"


def test_hub_consent_approval_records_the_console_user():
    client = ClientFactory(hub_consent=True)
    user = UserFactory()
    authorization, _ = create(client)
    assert authorization_get_for_hub_consent(authorization_id=str(authorization.id)) == authorization
    authorization_approve(
        authorization_id=authorization.id,
        client=None,
        principal={"id": user.username},
        on_behalf_of=user.username,
        allowed_routes=["orders"],
        approved_by=user,
        actor=Actor.user(user),
    )
    authorization.refresh_from_db()
    assert authorization.status == "approved"
    assert authorization.approved_by == user
    event = AuditEvent.objects.get(action="agent_auth.authorization.approved")
    assert (event.actor_type, event.actor) == ("user", user.username)


def test_hub_consent_cannot_decide_for_business_page_or_disabled_clients(business):
    authorization, _ = create(business)
    with pytest.raises(NotFound):
        authorization_get_for_hub_consent(authorization_id=authorization.id)
    with pytest.raises(NotFound):
        authorization_deny(authorization_id=authorization.id, client=None, actor=Actor.system())
    hub = ClientFactory(hub_consent=True)
    other, _ = create(hub)
    hub.enabled = False
    hub.save()
    with pytest.raises(NotFound):
        authorization_get_for_hub_consent(authorization_id=other.id)


# --- code exchange ---------------------------------------------------------------------------------------


def test_exchange_creates_the_session_and_consumes_the_authorization(business):
    before = timezone.now()
    authorization, tokens = login(business, subject_display={"name": "Example team"})
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].startswith("bha_") and tokens["refresh_token"].startswith("bhr_")
    assert tokens["expires_in"] == 900
    assert 30 * 86400 - 5 <= tokens["refresh_expires_in"] <= 30 * 86400
    assert tokens["client_app_id"] == "shop"
    assert tokens["subject_display"] == {"name": "Example team"}
    assert tokens["subject_display_status"] == "provided"
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session.client == business
    assert session.principal == {"id": "alice", "tenant": "t1", "roles": ["staff"]}
    assert session.on_behalf_of == "t1:alice"
    assert session.allowed_routes == ["orders"]
    assert session.device_label == "laptop"
    assert session.access_token_hash == secret_hash(tokens["access_token"])
    assert (
        timedelta(days=30) - timedelta(seconds=5)
        <= session.refresh_expires_at - before
        <= timedelta(days=30, seconds=5)
    )
    assert timedelta(seconds=895) <= session.access_expires_at - before <= timedelta(seconds=905)
    refresh = AgentRefreshToken.objects.get(session=session)
    assert refresh.token_hash == secret_hash(tokens["refresh_token"])
    assert (refresh.status, refresh.expires_at) == ("active", session.refresh_expires_at)
    authorization.refresh_from_db()
    assert authorization.status == "consumed"
    assert authorization.session == session
    assert actions()[-1] == "agent_auth.token.issued"


def test_a_code_works_exactly_once(business):
    authorization, _ = create(business)
    code = query_of(approve(authorization, business))["code"]
    exchange = dict(
        client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier
    )
    token_exchange_code(**exchange)
    with pytest.raises(InvalidGrant):
        token_exchange_code(**exchange)
    assert AgentSession.objects.count() == 1


@pytest.mark.parametrize(
    "breakage",
    [
        "wrong_verifier",
        "wrong_redirect",
        "other_client",
        "expired_code",
        "short_code",
        "wrong_prefix",
        "bad_verifier_chars",
        "short_verifier",
        "non_loopback_redirect",
        "denied",
        "disabled_client",
        "client_lost_agent_page",
    ],
)
def test_exchange_failures_are_invalid_grant(business, breakage):
    authorization, _ = create(business)
    code = query_of(approve(authorization, business))["code"]
    args = dict(client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier)
    if breakage == "wrong_verifier":
        args["code_verifier"] = pkce_pair()[0]
    elif breakage == "wrong_redirect":
        args["redirect_uri"] = "http://127.0.0.1:53683/callback"
    elif breakage == "other_client":
        args["client_app_id"] = ClientFactory(allowed_routes=["*"]).app_id
    elif breakage == "expired_code":
        AgentAuthorization.objects.filter(pk=authorization.pk).update(code_expires_at=timezone.now())
    elif breakage == "short_code":
        args["code"] = code[:39]
    elif breakage == "wrong_prefix":
        args["code"] = "bhr_" + code[4:]
    elif breakage == "bad_verifier_chars":
        args["code_verifier"] = "!" * 43
    elif breakage == "short_verifier":
        args["code_verifier"] = "a" * 42
    elif breakage == "non_loopback_redirect":
        args["redirect_uri"] = "https://127.0.0.1:53682/callback"
    elif breakage == "denied":
        AgentAuthorization.objects.filter(pk=authorization.pk).update(status="denied")
    elif breakage == "disabled_client":
        business.enabled = False
        business.save()
    elif breakage == "client_lost_agent_page":
        business.agent_authorize_url = ""
        business.save()
    with pytest.raises(InvalidGrant):
        token_exchange_code(**args)
    assert not AgentSession.objects.exists()


def test_code_expiry_follows_the_clock(business):
    authorization, _ = create(business)
    code = query_of(approve(authorization, business))["code"]
    later = timezone.now() + timedelta(seconds=121)
    with mock.patch("django.utils.timezone.now", return_value=later), pytest.raises(InvalidGrant):
        token_exchange_code(
            client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier
        )


def test_the_pkce_check_is_a_constant_time_comparison(business, monkeypatch):
    # Secrets are otherwise found by digest through a unique index; the PKCE challenge is the one
    # value compared in Python, and it must not be compared with ``==``.
    from agent_runtime.services.agent_auth import tokens as service
    from bailing.api import hashing

    compared = []

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return hashing.constant_time_equals(a, b)

    monkeypatch.setattr(service, "constant_time_equals", spy)
    authorization, _ = create(business)
    code = query_of(approve(authorization, business))["code"]
    wrong = pkce_pair()[0]
    with pytest.raises(InvalidGrant):
        token_exchange_code(client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=wrong)
    assert compared == [(pkce_s256(wrong), authorization.code_challenge)]
    token_exchange_code(
        client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier
    )
    assert compared[-1] == (authorization.code_challenge, authorization.code_challenge)


# --- refresh ---------------------------------------------------------------------------------------------


def test_refresh_rotates_both_tokens_and_keeps_the_absolute_lifetime(business):
    _, first = login(business)
    session = AgentSession.objects.get(pk=first["session_id"])
    later = timezone.now() + timedelta(days=3)
    with mock.patch("django.utils.timezone.now", return_value=later):
        second = token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    assert second["session_id"] == first["session_id"]
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    refreshed = AgentSession.objects.get(pk=session.pk)
    assert refreshed.refresh_expires_at == session.refresh_expires_at
    assert refreshed.access_expires_at == later + timedelta(seconds=900)
    assert second["refresh_expires_in"] == int((session.refresh_expires_at - later).total_seconds())
    # Only the current access token is valid.
    assert refreshed.access_token_hash == secret_hash(second["access_token"])
    assert not AgentSession.objects.filter(access_token_hash=secret_hash(first["access_token"])).exists()
    statuses = dict(AgentRefreshToken.objects.filter(session=session).values_list("token_hash", "status"))
    assert statuses == {
        secret_hash(first["refresh_token"]): "used",
        secret_hash(second["refresh_token"]): "active",
    }
    assert actions()[-1] == "agent_auth.token.refreshed"


def test_refresh_stops_at_the_absolute_end_of_the_session(business):
    _, tokens = login(business)
    session = AgentSession.objects.get(pk=tokens["session_id"])
    with mock.patch(
        "django.utils.timezone.now", return_value=session.refresh_expires_at - timedelta(seconds=10)
    ):
        tokens = token_refresh(client_app_id="shop", refresh_token=tokens["refresh_token"])
        assert 9 <= tokens["refresh_expires_in"] <= 10
    end = session.refresh_expires_at
    with mock.patch("django.utils.timezone.now", return_value=end), pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=tokens["refresh_token"])


@pytest.mark.django_db(transaction=True)
def test_replaying_a_used_refresh_token_revokes_the_whole_session_and_commits(business):
    _, first = login(business)
    second = token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    session = AgentSession.objects.get(pk=first["session_id"])
    assert session.revoked_at is not None
    assert session.revoke_reason == "refresh_replay"
    assert session.access_token_hash is None
    statuses = dict(AgentRefreshToken.objects.filter(session=session).values_list("token_hash", "status"))
    assert statuses == {
        secret_hash(first["refresh_token"]): "replayed",
        secret_hash(second["refresh_token"]): "revoked",
    }
    assert actions()[-2:] == ["agent_auth.refresh.replayed", "agent_auth.session.revoked"]
    revoked = AuditEvent.objects.get(action="agent_auth.session.revoked")
    assert revoked.data == {"by": "refresh_replay", "reason": "refresh_replay"}
    assert str(revoked.session_id) == first["session_id"]
    # The sibling that was still active is dead too.
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=second["refresh_token"])
    assert audit_chain_verify().ok


def test_refresh_of_another_clients_token_is_invalid_grant_without_revoking(business):
    _, tokens = login(business)
    other = ClientFactory()
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id=other.app_id, refresh_token=tokens["refresh_token"])
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None


@pytest.mark.parametrize("token", ["bhr_short", "bha_" + "x" * 43, "bhr_" + "x" * 43, "", "bhr_" + "é" * 43])
def test_refresh_with_malformed_or_unknown_tokens_is_invalid_grant(business, token):
    login(business)
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=token)


def test_refresh_of_a_revoked_session_is_invalid_grant(business):
    _, tokens = login(business)
    session = AgentSession.objects.get(pk=tokens["session_id"])
    session_revoke(session=session, actor=Actor("client", "shop"), reason="business_revoked")
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=tokens["refresh_token"])


# --- revocation ------------------------------------------------------------------------------------------


def test_session_revoke_is_idempotent_and_kills_every_credential(business):
    _, tokens = login(business)
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session_revoke(session=session, actor=Actor("client", "shop"), reason="business_revoked") is True
    assert session_revoke(session=session, actor=Actor("client", "shop"), reason="business_revoked") is False
    session.refresh_from_db()
    assert session.state == "revoked"
    assert session.access_token_hash is None
    assert set(AgentRefreshToken.objects.filter(session=session).values_list("status", flat=True)) == {
        "revoked"
    }
    events = AuditEvent.objects.filter(action="agent_auth.session.revoked")
    assert [event.data for event in events] == [{"by": "business", "reason": "business_revoked"}]
    assert events[0].client_app_id == "shop"


def test_admin_revoke_is_recorded_as_admin(business):
    _, tokens = login(business)
    user = UserFactory()
    session = AgentSession.objects.get(pk=tokens["session_id"])
    session_revoke(session=session, actor=Actor.user(user), reason="admin_revoked")
    event = AuditEvent.objects.get(action="agent_auth.session.revoked")
    assert event.data == {"by": "admin", "reason": "admin_revoked"}
    assert (event.actor_type, event.actor) == ("user", user.username)


def test_revoke_by_authorization_ends_its_session_once_and_audits_once(business):
    authorization, tokens = login(business)
    actor = Actor.client(business)

    session, revoked = authorization_session_revoke(
        client=business, authorization_id=str(authorization.id), actor=actor
    )
    again, revoked_again = authorization_session_revoke(
        client=business, authorization_id=authorization.id, actor=actor
    )

    assert (str(session.id), revoked) == (tokens["session_id"], True)
    assert (again.id, revoked_again) == (session.id, False)
    session.refresh_from_db()
    assert (session.state, session.access_token_hash, session.revoke_reason) == (
        "revoked",
        None,
        "business_revoked",
    )
    assert set(AgentRefreshToken.objects.filter(session=session).values_list("status", flat=True)) == {
        "revoked"
    }
    [event] = AuditEvent.objects.filter(action="agent_auth.session.revoked")
    assert event.data == {
        "authorization_id": str(authorization.id),
        "by": "business",
        "reason": "business_revoked",
    }
    assert (event.actor_type, event.actor, event.target_id) == ("client", "shop", tokens["session_id"])
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=tokens["refresh_token"])


def test_revoke_by_authorization_of_a_session_the_agent_already_ended_writes_nothing(business):
    authorization, tokens = login(business)
    session_revoke_self(access_token=tokens["access_token"])
    events = actions()
    session, revoked = authorization_session_revoke(
        client=business, authorization_id=authorization.id, actor=Actor.client(business)
    )
    assert revoked is False
    assert session.revoke_reason == "agent_logout"
    assert actions() == events


def test_revoke_by_authorization_is_only_for_the_owning_client(business):
    authorization, tokens = login(business)
    intruder = ClientFactory()
    for authorization_id in (authorization.id, "11111111-1111-4111-8111-111111111111", "not-a-uuid"):
        with pytest.raises(NotFound):
            authorization_session_revoke(
                client=intruder if authorization_id == authorization.id else business,
                authorization_id=authorization_id,
                actor=Actor.client(intruder),
            )
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None
    assert "agent_auth.session.revoked" not in actions()


@pytest.mark.parametrize("decision", ["pending", "approved", "denied"])
def test_revoke_by_authorization_without_a_session_is_invalid_state(business, decision):
    authorization, _ = create(business)
    if decision == "approved":
        approve(authorization, business)
    elif decision == "denied":
        authorization_deny(authorization_id=authorization.id, client=business, actor=Actor.client(business))
    events = actions()
    with pytest.raises(InvalidState):
        authorization_session_revoke(
            client=business, authorization_id=authorization.id, actor=Actor.client(business)
        )
    assert actions() == events
    authorization.refresh_from_db()
    assert authorization.status == decision


@pytest.mark.parametrize("credential", ["access", "refresh", "old_refresh"])
def test_self_revoke_by_either_credential(business, credential):
    _, first = login(business)
    tokens = token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    if credential == "access":
        session_revoke_self(access_token=tokens["access_token"])
    elif credential == "refresh":
        session_revoke_self(client_app_id="shop", refresh_token=tokens["refresh_token"])
    else:
        session_revoke_self(client_app_id="shop", refresh_token=first["refresh_token"])
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session.revoked_at is not None
    event = AuditEvent.objects.get(action="agent_auth.session.revoked")
    assert event.data == {"by": "agent", "reason": "agent_logout"}
    assert (event.actor_type, event.actor) == ("agent", tokens["session_id"])


def test_self_revoke_with_unknown_or_foreign_credentials_changes_nothing(business):
    _, tokens = login(business)
    session_revoke_self(access_token="bha_" + "x" * 43)
    session_revoke_self(client_app_id="shop", refresh_token="bhr_" + "x" * 43)
    session_revoke_self(client_app_id=ClientFactory().app_id, refresh_token=tokens["refresh_token"])
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None


# --- secrets at rest -------------------------------------------------------------------------------------


def test_no_plaintext_secret_is_ever_stored(business):
    authorization, _ = create(business)
    code = query_of(approve(authorization, business))["code"]
    first = token_exchange_code(
        client_app_id="shop", code=code, redirect_uri=REDIRECT, code_verifier=authorization.verifier
    )
    second = token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    with pytest.raises(InvalidGrant):
        token_refresh(client_app_id="shop", refresh_token=first["refresh_token"])
    dump = django_serializers.serialize(
        "json",
        [
            *AgentAuthorization.objects.all(),
            *AgentSession.objects.all(),
            *AgentRefreshToken.objects.all(),
            *AuditEvent.objects.all(),
        ],
    )
    secrets = [
        code,
        first["access_token"],
        first["refresh_token"],
        second["access_token"],
        second["refresh_token"],
        authorization.verifier,
    ]
    for secret in secrets:
        assert secret not in dump
        assert secret[4:] not in dump
    # ...while the digests are what is stored.
    assert secret_hash(code) in dump
    assert json.loads(dump)
