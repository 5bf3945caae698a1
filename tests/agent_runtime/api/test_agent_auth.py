"""Contract of /agent-auth/v1: statuses, error codes, response shapes, headers, throttling, races."""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

BASE = "/agent-auth/v1"
REDIRECT = "http://127.0.0.1:53682/callback"
PRINCIPAL = {"id": "alice", "tenant": "t1", "roles": ["staff"], "audience": "staff", "channel": "web"}


@pytest.fixture
def business():
    return ClientFactory(
        app_id="shop",
        name="Shop",
        hub_consent=False,
        agent_authorize_url="https://business.example.com/agent/authorize",
        allowed_routes=["orders", "tickets"],
    )


def create_body(**overrides):
    verifier, challenge = pkce_pair()
    body = {
        "client_app_id": "shop",
        "redirect_uri": REDIRECT,
        "state": "state-1234567",
        "requested_routes": ["orders"],
        "device_label": "laptop",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    body.update(overrides)
    return body, verifier


def post(client, path, body=None, token=None, **extra):
    if token:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.post(BASE + path, body if body is not None else {}, format="json", **extra)


def get(client, path, token=None):
    extra = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get(BASE + path, **extra)


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response.json()["error"] == code
    assert response["Cache-Control"] == "no-store"


def start(api_client, **overrides):
    body, verifier = create_body(**overrides)
    response = post(api_client, "/authorizations", body)
    assert response.status_code == 201, response.content
    return response.json()["authorization_id"], verifier


def approve_body(**overrides):
    body = {"principal": dict(PRINCIPAL), "on_behalf_of": "t1:alice", "allowed_routes": ["orders"]}
    body.update(overrides)
    return body


def approved_code(api_client, business, **overrides):
    authorization_id, verifier = start(api_client, **overrides)
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(), business._token
    )
    assert response.status_code == 200, response.content
    code = parse_qs(urlsplit(response.json()["redirect_uri"]).query)["code"][0]
    return authorization_id, code, verifier


def code_grant(code, verifier, overrides=None):
    body = {
        "grant_type": "authorization_code",
        "client_app_id": "shop",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    body.update(overrides or {})
    return body


def logged_in(api_client, business):
    _, code, verifier = approved_code(api_client, business)
    response = post(api_client, "/token", code_grant(code, verifier))
    assert response.status_code == 200, response.content
    return response.json()


# --- POST /authorizations ---------------------------------------------------------------------------------


def test_create_returns_201_with_the_upstream_shape(api_client, business):
    """The response shape of BailingHub (docs/compatibility.md "Agent sign-in")."""
    body, _ = create_body()
    response = post(api_client, "/authorizations", body)
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert set(data) == {"authorization_id", "authorization_url", "expires_in"}
    assert data["expires_in"] == 600
    assert data["authorization_url"] == (
        f"https://business.example.com/agent/authorize?authorization_id={data['authorization_id']}"
    )
    assert AgentAuthorization.objects.get(pk=data["authorization_id"]).status == "pending"


CREATE_INVALID = [
    ("unknown_field", {"scope": "x"}),
    ("client_app_id", {"client_app_id": "Shop"}),
    ("client_app_id", {"client_app_id": "s"}),
    ("client_app_id", {"client_app_id": 5}),
    ("redirect_uri", {"redirect_uri": "https://127.0.0.1:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://localhost:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1:0/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1:65536/callback"}),
    ("redirect_uri", {"redirect_uri": "http://user@127.0.0.1:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1:53682/callback#frag"}),
    ("redirect_uri", {"redirect_uri": "http://[::1]:53682/" + "a" * 2048}),
    ("redirect_uri", {"redirect_uri": "http://10.0.0.1:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://[::1]evil.com:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://[::1]@evil.com:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1.evil.com:53682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://127.0.0.1:053682/callback"}),
    ("redirect_uri", {"redirect_uri": "http://[::1]/callback"}),
    ("state", {"state": "1234567"}),
    ("state", {"state": "s" * 513}),
    ("state", {"state": 12345678}),
    ("requested_routes", {"requested_routes": []}),
    ("requested_routes", {"requested_routes": "orders"}),
    ("requested_routes", {"requested_routes": ["orders", "orders"]}),
    ("requested_routes", {"requested_routes": ["*"]}),
    ("requested_routes", {"requested_routes": ["auto"]}),
    ("requested_routes", {"requested_routes": ["Orders"]}),
    ("requested_routes", {"requested_routes": [f"r{i:02d}" for i in range(65)]}),
    ("device_label", {"device_label": ""}),
    ("device_label", {"device_label": "   "}),
    ("device_label", {"device_label": "d" * 129}),
    ("device_label", {"device_label": "line\nbreak"}),
    ("code_challenge", {"code_challenge": "a" * 42}),
    ("code_challenge", {"code_challenge": "a" * 44}),
    ("code_challenge", {"code_challenge": "+" * 43}),
    ("code_challenge_method", {"code_challenge_method": "plain"}),
    ("code_challenge_method", {"code_challenge_method": "s256"}),
]


@pytest.mark.parametrize(
    ("rule", "overrides"), CREATE_INVALID, ids=[f"{r}-{i}" for i, (r, _) in enumerate(CREATE_INVALID)]
)
def test_create_validation_is_invalid_request(api_client, business, rule, overrides):
    body, _ = create_body(**overrides)
    response = post(api_client, "/authorizations", body)
    assert_error(response, 400, "invalid_request")
    assert not AgentAuthorization.objects.exists()


@pytest.mark.parametrize(
    "field",
    [
        "client_app_id",
        "redirect_uri",
        "state",
        "requested_routes",
        "device_label",
        "code_challenge",
        "code_challenge_method",
    ],
)
def test_create_every_field_is_required(api_client, business, field):
    body, _ = create_body()
    del body[field]
    response = post(api_client, "/authorizations", body)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field


def test_create_limits_are_inclusive(api_client, business):
    start(
        api_client,
        state="s" * 512,
        device_label="d" * 128,
        redirect_uri="http://[::1]:65535/cb",
        requested_routes=["orders", "tickets"],
    )
    start(api_client, state="s" * 8, device_label="d")


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"{", b'{"state":"a","state":"b"}'])
def test_create_rejects_non_object_and_malformed_json(api_client, business, raw):
    response = api_client.post(BASE + "/authorizations", raw, content_type="application/json")
    assert_error(response, 400, "invalid_request")


def test_create_body_budget_is_413(api_client, business):
    body, _ = create_body(device_label="d" * 20000)
    assert_error(post(api_client, "/authorizations", body), 413, "arguments_too_large")


@pytest.mark.parametrize(
    "change",
    [
        {"enabled": False},
        {"agent_authorize_url": "", "hub_consent": False},
        {"allowed_routes": ["tickets"]},
    ],
)
def test_create_for_an_unusable_client_is_invalid_client(api_client, business, change):
    for key, value in change.items():
        setattr(business, key, value)
    business.save()
    body, _ = create_body()
    assert_error(post(api_client, "/authorizations", body), 400, "invalid_client")


def test_create_for_an_unknown_client_is_invalid_client(api_client, business):
    body, _ = create_body(client_app_id="nobody")
    assert_error(post(api_client, "/authorizations", body), 400, "invalid_client")


def test_create_with_a_broken_business_page_is_503(api_client, business):
    business.agent_authorize_url = "https://user:pw@business.example.com/authorize"
    business.save()
    body, _ = create_body()
    assert_error(post(api_client, "/authorizations", body), 503, "agent_authorize_url_invalid")


def test_create_throttle_is_429_with_retry_after_per_client_and_ip(api_client, business):
    for _ in range(10):
        body, _ = create_body()
        assert post(api_client, "/authorizations", body, REMOTE_ADDR="192.0.2.10").status_code == 201
    body, _ = create_body()
    response = post(api_client, "/authorizations", body, REMOTE_ADDR="192.0.2.10")
    assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["retry_after_seconds"] == int(response["Retry-After"])
    assert post(api_client, "/authorizations", body, REMOTE_ADDR="192.0.2.11").status_code == 201
    ClientFactory(app_id="other", allowed_routes=["*"])
    other, _ = create_body(client_app_id="other")
    assert post(api_client, "/authorizations", other, REMOTE_ADDR="192.0.2.10").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_create_throttle_holds_under_concurrency(business):
    results: list[int] = []
    barrier = threading.Barrier(14)

    def worker():
        try:
            body, _ = create_body()
            client = APIClient()
            barrier.wait()
            results.append(post(client, "/authorizations", body, REMOTE_ADDR="192.0.2.20").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(14)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [201] * 10 + [429] * 4
    assert AgentAuthorization.objects.filter(created_ip="192.0.2.20").count() == 10


# --- GET /authorizations/{id} -----------------------------------------------------------------------------


def test_context_shows_the_consent_facts_and_no_secrets(api_client, business):
    authorization_id, _ = start(api_client, requested_routes=["orders", "tickets"])
    response = get(api_client, f"/authorizations/{authorization_id}", business._token)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    expires_at = AgentAuthorization.objects.get(pk=authorization_id).expires_at
    assert data == {
        "authorization_id": authorization_id,
        "client": {"app_id": "shop", "name": "Shop"},
        "device": {"name": "laptop"},
        "requested_routes": ["orders", "tickets"],
        "status": "pending",
        "expires_at": expires_at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{expires_at.microsecond // 1000:03d}Z",
    }
    assert "state" not in response.content.decode() and "127.0.0.1" not in response.content.decode()


def test_context_reports_expired_once_past_the_deadline(api_client, business):
    authorization_id, _ = start(api_client)
    AgentAuthorization.objects.filter(pk=authorization_id).update(expires_at=timezone.now())
    assert (
        get(api_client, f"/authorizations/{authorization_id}", business._token).json()["status"] == "expired"
    )


def test_context_of_a_consumed_authorization_names_its_session(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    tokens = post(api_client, "/token", code_grant(code, verifier)).json()
    data = get(api_client, f"/authorizations/{authorization_id}", business._token).json()
    assert data["status"] == "consumed"
    assert data["session"]["session_id"] == tokens["session_id"]
    assert data["session"]["state"] == "active"
    assert data["session"]["subject_display_status"] == "missing"


@pytest.mark.parametrize(
    "authorization_id", ["not-a-uuid", "00000000-0000-4000-8000-000000000000", "1" * 300]
)
def test_context_of_unknown_or_malformed_ids_is_404(api_client, business, authorization_id):
    assert_error(get(api_client, f"/authorizations/{authorization_id}", business._token), 404, "not_found")


def test_business_endpoints_hide_other_clients_authorizations(api_client, business):
    authorization_id, _ = start(api_client)
    intruder = ClientFactory(allowed_routes=["*"])
    assert_error(get(api_client, f"/authorizations/{authorization_id}", intruder._token), 404, "not_found")
    path = f"/authorizations/{authorization_id}"
    assert_error(post(api_client, path + "/approve", approve_body(), intruder._token), 404, "not_found")
    assert_error(post(api_client, path + "/deny", {}, intruder._token), 404, "not_found")
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "pending"


@pytest.mark.parametrize("token", [None, "bct_" + "x" * 43, "short"])
def test_business_endpoints_need_a_valid_client_token(api_client, business, token):
    authorization_id, _ = start(api_client)
    assert_error(get(api_client, f"/authorizations/{authorization_id}", token), 401, "unauthorized")
    assert_error(
        post(api_client, f"/authorizations/{authorization_id}/approve", approve_body(), token),
        401,
        "unauthorized",
    )


def test_a_disabled_clients_token_is_401(api_client, business):
    authorization_id, _ = start(api_client)
    business.enabled = False
    business.save()
    assert_error(get(api_client, f"/authorizations/{authorization_id}", business._token), 401, "unauthorized")


# --- approve / deny ---------------------------------------------------------------------------------------


def test_approve_returns_only_the_redirect_uri(api_client, business):
    authorization_id, _ = start(api_client, state="state with & and =")
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(), business._token
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert set(response.json()) == {"redirect_uri"}
    params = parse_qs(urlsplit(response.json()["redirect_uri"]).query)
    assert params["state"] == ["state with & and ="]
    assert params["code"][0].startswith("bhc_")


def test_approve_accepts_the_optional_fields(api_client, business):
    authorization_id, _ = start(api_client)
    body = approve_body(principal={"id": "a" * 128, "roles": ["r" * 64] * 64}, on_behalf_of="o" * 191)
    body["subject_display"] = {"name": "n" * 120}
    assert (
        post(api_client, f"/authorizations/{authorization_id}/approve", body, business._token).status_code
        == 200
    )
    authorization_id, _ = start(api_client)
    body = approve_body(principal={"id": "a"}, subject_display=None)
    assert (
        post(api_client, f"/authorizations/{authorization_id}/approve", body, business._token).status_code
        == 200
    )


APPROVE_INVALID = [
    ("unknown_field", {"scope": "x"}),
    ("principal", {"principal": "alice"}),
    ("principal.unknown", {"principal": {"id": "alice", "email": "a@example.com"}}),
    ("principal.id", {"principal": {"roles": []}}),
    ("principal.id", {"principal": {"id": ""}}),
    ("principal.id", {"principal": {"id": "i" * 129}}),
    ("principal.tenant", {"principal": {"id": "a", "tenant": "t" * 129}}),
    ("principal.roles", {"principal": {"id": "a", "roles": ["r"] * 65}}),
    ("principal.roles", {"principal": {"id": "a", "roles": ["r" * 65]}}),
    ("principal.roles", {"principal": {"id": "a", "roles": [""]}}),
    ("principal.roles", {"principal": {"id": "a", "roles": "admin"}}),
    ("principal.audience", {"principal": {"id": "a", "audience": "a" * 65}}),
    ("principal.channel", {"principal": {"id": "a", "channel": "c" * 129}}),
    ("on_behalf_of", {"on_behalf_of": ""}),
    ("on_behalf_of", {"on_behalf_of": "o" * 192}),
    ("on_behalf_of", {"on_behalf_of": None}),
    ("allowed_routes", {"allowed_routes": []}),
    ("allowed_routes", {"allowed_routes": ["orders", "orders"]}),
    ("allowed_routes", {"allowed_routes": ["*"]}),
    ("allowed_routes", {"allowed_routes": ["auto"]}),
    ("subject_display", {"subject_display": "Team"}),
    ("subject_display", {"subject_display": {"name": "Team", "logo": "x"}}),
    ("subject_display", {"subject_display": {"name": "n" * 121}}),
    ("subject_display", {"subject_display": {"name": "  "}}),
    ("subject_display", {"subject_display": {"name": "a\u2028b"}}),
    ("subject_display", {"subject_display": {"name": "a\x85b"}}),
]


@pytest.mark.parametrize(
    ("rule", "overrides"), APPROVE_INVALID, ids=[f"{r}-{i}" for i, (r, _) in enumerate(APPROVE_INVALID)]
)
def test_approve_validation_is_invalid_request(api_client, business, rule, overrides):
    authorization_id, _ = start(api_client)
    body = approve_body(**overrides)
    response = post(api_client, f"/authorizations/{authorization_id}/approve", body, business._token)
    assert_error(response, 400, "invalid_request")
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "pending"


@pytest.mark.parametrize("subject", ["jos\u00e9", "渠道用户", " t1:alice", "t1:alice "])
def test_approve_refuses_a_subject_the_on_behalf_of_header_cannot_carry(api_client, business, subject):
    authorization_id, _ = start(api_client)
    response = post(
        api_client,
        f"/authorizations/{authorization_id}/approve",
        approve_body(on_behalf_of=subject),
        business._token,
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == "on_behalf_of"
    authorization = AgentAuthorization.objects.get(pk=authorization_id)
    assert (authorization.status, authorization.on_behalf_of, authorization.code_hash) == (
        "pending",
        "",
        None,
    )
    # The same authorization can still be approved with a subject that can be sent.
    assert (
        post(
            api_client, f"/authorizations/{authorization_id}/approve", approve_body(), business._token
        ).status_code
        == 200
    )


# Client text is rejected, never cleaned: control characters anywhere in a single-line field, and lone
# UTF-16 surrogates anywhere in the body (they can only arrive as \\u escapes, so the body is raw JSON).
CONTROL_CHARACTERS = ["\x00", "\x07", "\x1b", "\t", "\n", "\r", "\x7f", "\x85", "\x9f"]


@pytest.mark.parametrize("char", CONTROL_CHARACTERS, ids=[f"U+{ord(c):04X}" for c in CONTROL_CHARACTERS])
@pytest.mark.parametrize("field", ["state", "device_label"])
def test_create_rejects_control_characters(api_client, business, field, char):
    body, _ = create_body(**{field: f"laptop-{char}-12345"})
    response = post(api_client, "/authorizations", body)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field
    assert not AgentAuthorization.objects.exists()


@pytest.mark.parametrize("char", CONTROL_CHARACTERS, ids=[f"U+{ord(c):04X}" for c in CONTROL_CHARACTERS])
@pytest.mark.parametrize(
    ("path", "make"),
    [
        ("principal.id", lambda c: {"principal": {"id": f"al{c}ice"}}),
        ("principal.tenant", lambda c: {"principal": {"id": "alice", "tenant": f"t{c}"}}),
        ("principal.roles[1]", lambda c: {"principal": {"id": "alice", "roles": ["ok", f"r{c}"]}}),
        ("principal.audience", lambda c: {"principal": {"id": "alice", "audience": f"a{c}"}}),
        ("principal.channel", lambda c: {"principal": {"id": "alice", "channel": f"c{c}"}}),
        ("on_behalf_of", lambda c: {"on_behalf_of": f"t1:{c}alice"}),
        ("subject_display.name", lambda c: {"subject_display": {"name": f"Team{c}"}}),
    ],
)
def test_approve_rejects_control_characters_naming_the_field(api_client, business, path, make, char):
    authorization_id, _ = start(api_client)
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(**make(char)), business._token
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == path
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "pending"


# Bidirectional embeddings, overrides and isolates reorder what the console and consent pages show
# (a device label "laptop\u202eexe.txt" reads "laptoptxt.exe"): refused like control characters in
# displayed text.
BIDI_CONTROLS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
BIDI_IDS = [f"U+{ord(c):04X}" for c in BIDI_CONTROLS]


@pytest.mark.parametrize("char", BIDI_CONTROLS, ids=BIDI_IDS)
def test_create_rejects_bidi_controls_in_the_device_label(api_client, business, char):
    body, _ = create_body(device_label=f"laptop{char}exe.txt")
    response = post(api_client, "/authorizations", body)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == "device_label"
    assert not AgentAuthorization.objects.exists()


@pytest.mark.parametrize("char", BIDI_CONTROLS, ids=BIDI_IDS)
@pytest.mark.parametrize(
    ("path", "make"),
    [
        ("principal.id", lambda c: {"principal": {"id": f"al{c}ice"}}),
        ("principal.tenant", lambda c: {"principal": {"id": "alice", "tenant": f"t{c}"}}),
        ("principal.roles[1]", lambda c: {"principal": {"id": "alice", "roles": ["ok", f"r{c}"]}}),
        ("principal.audience", lambda c: {"principal": {"id": "alice", "audience": f"a{c}"}}),
        ("principal.channel", lambda c: {"principal": {"id": "alice", "channel": f"c{c}"}}),
        ("subject_display.name", lambda c: {"subject_display": {"name": f"Team{c}"}}),
    ],
)
def test_approve_rejects_bidi_controls_in_displayed_fields(api_client, business, path, make, char):
    authorization_id, _ = start(api_client)
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(**make(char)), business._token
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == path
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "pending"


def test_right_to_left_text_without_bidi_controls_is_accepted(api_client, business):
    # Hebrew and Arabic need no override characters; the implicit marks (U+200E/U+200F) stay allowed.
    label = "מחשב נייד ‏لابتوب"
    authorization_id, _ = start(api_client, device_label=label)
    assert AgentAuthorization.objects.get(pk=authorization_id).device_label == label


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("principal.email", {"principal": {"id": "alice", "email": "a@example.com"}}),
        ("subject_display.logo", {"subject_display": {"name": "Team", "logo": "x"}}),
        ("scope", {"scope": "all"}),
    ],
)
def test_unknown_fields_are_rejected_at_every_level_naming_the_path(api_client, business, path, body):
    authorization_id, _ = start(api_client)
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(**body), business._token
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == path


@pytest.mark.parametrize(
    ("endpoint", "raw", "field"),
    [
        ("/authorizations", '{"client_app_id":"shop","state":"state-\\ud83d-1234"}', "state"),
        ("/token", '{"grant_type":"refresh_token","refresh_token":"bhr_\\udfff"}', "refresh_token"),
        (
            "/revoke",
            '{"client_app_id":"shop","refresh_token":"bhr_' + "a" * 43 + '\\ud800"}',
            "refresh_token",
        ),
    ],
)
def test_lone_surrogates_are_rejected_not_replaced(api_client, business, endpoint, raw, field):
    # The parser refuses the body before any field rule runs, and names where the surrogate was.
    response = api_client.post(BASE + endpoint, raw.encode(), content_type="application/json")
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field


def test_approve_rejects_a_lone_surrogate_in_a_nested_field(api_client, business):
    authorization_id, _ = start(api_client)
    raw = b'{"principal":{"id":"al\\udc00ice"},"on_behalf_of":"alice","allowed_routes":["orders"]}'
    response = api_client.post(
        f"{BASE}/authorizations/{authorization_id}/approve",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {business._token}",
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == "principal.id"
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "pending"


def test_valid_text_is_stored_exactly_as_sent(api_client, business):
    label = "  Ada's 😀 laptop\u2028 (工作) "
    authorization_id, _ = start(api_client, device_label=label, state="  state with spaces  ")
    stored = AgentAuthorization.objects.get(pk=authorization_id)
    assert (stored.device_label, stored.state_value) == (label, "  state with spaces  ")


def test_approve_missing_required_fields_is_invalid_request(api_client, business):
    authorization_id, _ = start(api_client)
    for field in ("principal", "on_behalf_of", "allowed_routes"):
        body = approve_body()
        del body[field]
        response = post(api_client, f"/authorizations/{authorization_id}/approve", body, business._token)
        assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize("routes", [["tickets"], ["orders", "tickets"], ["billing"]])
def test_approve_outside_requested_or_allowed_routes_is_403(api_client, business, routes):
    authorization_id, _ = start(api_client, requested_routes=["orders"])
    body = approve_body(allowed_routes=routes)
    response = post(api_client, f"/authorizations/{authorization_id}/approve", body, business._token)
    assert_error(response, 403, "route_not_allowed")


@pytest.mark.django_db(transaction=True)
def test_approve_after_expiry_is_410_and_the_flip_persists(business):
    api_client = APIClient()
    authorization_id, _ = start(api_client)
    AgentAuthorization.objects.filter(pk=authorization_id).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(), business._token
    )
    assert_error(response, 410, "expired")
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "expired"
    response = post(api_client, f"/authorizations/{authorization_id}/deny", {}, business._token)
    assert_error(response, 409, "invalid_state")


def test_deny_after_expiry_is_410(api_client, business):
    authorization_id, _ = start(api_client)
    AgentAuthorization.objects.filter(pk=authorization_id).update(expires_at=timezone.now())
    assert_error(
        post(api_client, f"/authorizations/{authorization_id}/deny", {}, business._token), 410, "expired"
    )


def test_decisions_twice_are_409(api_client, business):
    authorization_id, _ = start(api_client)
    path = f"/authorizations/{authorization_id}"
    assert post(api_client, path + "/approve", approve_body(), business._token).status_code == 200
    assert_error(post(api_client, path + "/approve", approve_body(), business._token), 409, "invalid_state")
    assert_error(post(api_client, path + "/deny", {}, business._token), 409, "invalid_state")


def test_deny_redirects_with_access_denied(api_client, business):
    authorization_id, _ = start(api_client)
    response = post(api_client, f"/authorizations/{authorization_id}/deny", {}, business._token)
    assert response.status_code == 200
    assert set(response.json()) == {"redirect_uri"}
    uri = response.json()["redirect_uri"]
    assert uri.startswith(REDIRECT + "?")
    assert parse_qs(urlsplit(uri).query) == {"error": ["access_denied"], "state": ["state-1234567"]}
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "denied"


def test_deny_accepts_an_empty_body_but_no_fields(api_client, business):
    authorization_id, _ = start(api_client)
    path = f"{BASE}/authorizations/{authorization_id}/deny"
    response = api_client.post(
        path, {"reason": "no"}, format="json", HTTP_AUTHORIZATION=f"Bearer {business._token}"
    )
    assert_error(response, 400, "invalid_request")
    response = api_client.post(path, HTTP_AUTHORIZATION=f"Bearer {business._token}")
    assert response.status_code == 200


def test_decisions_on_malformed_ids_are_404(api_client, business):
    assert_error(
        post(api_client, "/authorizations/xyz/approve", approve_body(), business._token), 404, "not_found"
    )
    assert_error(post(api_client, "/authorizations/xyz/deny", {}, business._token), 404, "not_found")


# --- POST /token ------------------------------------------------------------------------------------------


def test_token_exchange_returns_the_upstream_token_response(api_client, business):
    """The token response of BailingHub (docs/compatibility.md "Agent sign-in")."""
    _, code, verifier = approved_code(api_client, business)
    response = post(api_client, "/token", code_grant(code, verifier))
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response["Pragma"] == "no-cache"
    data = response.json()
    assert set(data) == {
        "token_type",
        "access_token",
        "expires_in",
        "refresh_token",
        "refresh_expires_in",
        "session_id",
        "client_app_id",
        "subject_display",
        "subject_display_status",
    }
    assert data["token_type"] == "Bearer"
    assert data["access_token"].startswith("bha_") and data["refresh_token"].startswith("bhr_")
    assert data["expires_in"] == 900
    assert (
        isinstance(data["refresh_expires_in"], int)
        and 30 * 86400 - 5 <= data["refresh_expires_in"] <= 30 * 86400
    )
    assert data["client_app_id"] == "shop"
    assert (data["subject_display"], data["subject_display_status"]) == (None, "missing")
    assert AgentSession.objects.filter(pk=data["session_id"]).exists()


def test_token_errors_carry_no_store_and_pragma(api_client, business):
    response = post(api_client, "/token", {"grant_type": "password"})
    assert_error(response, 400, "unsupported_grant_type")
    assert response["Pragma"] == "no-cache"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid_request"),
        ({"client_app_id": "shop"}, "invalid_request"),
        ({"grant_type": 1}, "invalid_request"),
        ({"grant_type": "password", "client_app_id": "shop"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
        ({"grant_type": ""}, "unsupported_grant_type"),
    ],
)
def test_grant_type_rules(api_client, business, body, code):
    assert_error(post(api_client, "/token", body), 400, code)


def test_token_body_must_be_an_object(api_client, business):
    response = api_client.post(BASE + "/token", b"[]", content_type="application/json")
    assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"scope": "all"}, "invalid_request"),
        ({"client_app_id": "Shop!"}, "invalid_request"),
        ({"code": 5}, "invalid_request"),
        ({"code_verifier": None}, "invalid_request"),
        ({"code": "bhc_short"}, "invalid_grant"),
        ({"code": "bhx_" + "a" * 43}, "invalid_grant"),
        ({"code": "bhc_" + "a" * 43}, "invalid_grant"),
        ({"code_verifier": "a" * 42}, "invalid_grant"),
        ({"code_verifier": "a" * 129}, "invalid_grant"),
        ({"code_verifier": "a" * 42 + "!"}, "invalid_grant"),
        ({"code_verifier": "a" * 43}, "invalid_grant"),
        ({"redirect_uri": "http://127.0.0.1:53683/callback"}, "invalid_grant"),
        ({"redirect_uri": "https://example.com/callback"}, "invalid_grant"),
        ({"client_app_id": "other"}, "invalid_grant"),
        ({"client_app_id": "nobody"}, "invalid_grant"),
    ],
)
def test_code_grant_failures(api_client, business, overrides, code):
    ClientFactory(app_id="other", allowed_routes=["*"])
    _, auth_code, verifier = approved_code(api_client, business)
    assert_error(post(api_client, "/token", code_grant(auth_code, verifier, overrides)), 400, code)
    # None of these burned the code.
    assert post(api_client, "/token", code_grant(auth_code, verifier)).status_code == 200


def test_missing_code_grant_field_is_invalid_request(api_client, business):
    _, auth_code, verifier = approved_code(api_client, business)
    body = code_grant(auth_code, verifier)
    del body["code_verifier"]
    assert_error(post(api_client, "/token", body), 400, "invalid_request")


def test_code_is_single_use_and_expires(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    first = post(api_client, "/token", code_grant(code, verifier))
    assert first.status_code == 200
    assert_error(post(api_client, "/token", code_grant(code, verifier)), 400, "invalid_grant")
    # A consumed code presented again leaked (RFC 6749 §4.1.2): the session it produced is revoked.
    session = AgentSession.objects.get(pk=first.json()["session_id"])
    assert (session.state, session.revoke_reason) == ("revoked", "code_replay")
    assert_error(get(api_client, "/session", first.json()["access_token"]), 401, "unauthorized")
    assert (
        AuditEvent.objects.filter(action="agent_auth.code.replayed", target_id=authorization_id).count() == 1
    )
    authorization_id, code, verifier = approved_code(api_client, business)
    AgentAuthorization.objects.filter(pk=authorization_id).update(code_expires_at=timezone.now())
    assert_error(post(api_client, "/token", code_grant(code, verifier)), 400, "invalid_grant")


def test_code_replay_revokes_everything_once_and_audits_every_replay(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    first = post(api_client, "/token", code_grant(code, verifier)).json()
    # A replay needs no verifier: whoever holds a consumed code proves it leaked.
    for verifier_presented in (verifier, "v" * 43):
        assert_error(post(api_client, "/token", code_grant(code, verifier_presented)), 400, "invalid_grant")
    session = AgentSession.objects.get(pk=first["session_id"])
    assert (session.state, session.revoke_reason) == ("revoked", "code_replay")
    assert AgentRefreshToken.objects.get(session=session).status == "revoked"
    refreshed = post(
        api_client,
        "/token",
        {"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": first["refresh_token"]},
    )
    assert_error(refreshed, 400, "invalid_grant")
    replays = AuditEvent.objects.filter(action="agent_auth.code.replayed", target_id=authorization_id)
    assert replays.count() == 2
    assert {event.session_id for event in replays} == {session.id}
    revoked = AuditEvent.objects.filter(action="agent_auth.session.revoked", session_id=session.id)
    assert [(e.data["reason"], e.data["authorization_id"]) for e in revoked] == [
        ("code_replay", authorization_id)
    ]


@pytest.mark.django_db(transaction=True)
def test_parallel_code_exchanges_succeed_exactly_once(business):
    _, code, verifier = approved_code(APIClient(), business)
    results: list[int] = []
    barrier = threading.Barrier(8)

    def worker():
        try:
            client = APIClient()
            barrier.wait()
            results.append(post(client, "/token", code_grant(code, verifier)).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200] + [400] * 7
    assert AgentSession.objects.count() == 1
    assert AgentRefreshToken.objects.count() == 1
    # The losers presented a consumed code: that is a replay, which ends the winner's session too.
    assert AgentSession.objects.get().revoke_reason == "code_replay"


def refresh_grant(tokens, overrides=None):
    body = {"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": tokens["refresh_token"]}
    body.update(overrides or {})
    return body


def test_refresh_rotates_and_the_old_access_token_stops_working(api_client, business):
    first = logged_in(api_client, business)
    response = post(api_client, "/token", refresh_grant(first))
    assert response.status_code == 200
    assert response["Pragma"] == "no-cache"
    second = response.json()
    assert second["session_id"] == first["session_id"]
    assert second["refresh_expires_in"] <= first["refresh_expires_in"]
    assert_error(get(api_client, "/session", first["access_token"]), 401, "unauthorized")
    assert get(api_client, "/session", second["access_token"]).status_code == 200


def test_refresh_replay_is_invalid_grant_and_revokes_the_session(api_client, business):
    first = logged_in(api_client, business)
    second = post(api_client, "/token", refresh_grant(first)).json()
    assert_error(post(api_client, "/token", refresh_grant(first)), 400, "invalid_grant")
    assert_error(get(api_client, "/session", second["access_token"]), 401, "unauthorized")
    assert_error(post(api_client, "/token", refresh_grant(second)), 400, "invalid_grant")
    assert AgentSession.objects.get(pk=first["session_id"]).revoke_reason == "refresh_replay"


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"refresh_token": "bhr_short"}, "invalid_grant"),
        ({"refresh_token": "bhr_" + "z" * 43}, "invalid_grant"),
        ({"client_app_id": "other"}, "invalid_grant"),
        ({"extra": 1}, "invalid_request"),
        ({"refresh_token": 7}, "invalid_request"),
        ({"code": "bhc_" + "a" * 43}, "invalid_request"),
    ],
)
def test_refresh_grant_failures(api_client, business, overrides, code):
    ClientFactory(app_id="other", allowed_routes=["*"])
    tokens = logged_in(api_client, business)
    assert_error(post(api_client, "/token", refresh_grant(tokens, overrides)), 400, code)
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None


@pytest.mark.django_db(transaction=True)
def test_parallel_refreshes_with_one_token_end_in_one_success_and_a_revoked_session(business):
    tokens = logged_in(APIClient(), business)
    results: list[tuple[int, dict]] = []
    barrier = threading.Barrier(2)

    def worker():
        try:
            client = APIClient()
            barrier.wait()
            response = post(client, "/token", refresh_grant(tokens))
            results.append((response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [200, 400]
    assert [body["error"] for status, body in results if status == 400] == ["invalid_grant"]
    # BailingHub's policy (docs/protocol.md "Refresh replay"): the loser's request is a replay, so the
    # session is revoked.
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session.revoke_reason == "refresh_replay"
    winner = next(body for status, body in results if status == 200)
    assert_error(get(APIClient(), "/session", winner["access_token"]), 401, "unauthorized")


# --- GET /session -----------------------------------------------------------------------------------------


def test_session_returns_non_secret_metadata(api_client, business):
    authorization_id, verifier = start(api_client)
    redirect = post(
        api_client,
        f"/authorizations/{authorization_id}/approve",
        approve_body(subject_display={"name": "Example team"}),
        business._token,
    ).json()
    code = parse_qs(urlsplit(redirect["redirect_uri"]).query)["code"][0]
    tokens = post(api_client, "/token", code_grant(code, verifier)).json()
    response = get(api_client, "/session", tokens["access_token"])
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert set(data) == {
        "session_id",
        "client_app_id",
        "device_label",
        "subject_display",
        "subject_display_status",
        "principal",
        "on_behalf_of",
        "allowed_routes",
        "created_at",
        "expires_at",
        "refresh_expires_at",
    }
    assert data["session_id"] == tokens["session_id"]
    assert data["client_app_id"] == "shop"
    assert data["principal"] == PRINCIPAL
    assert data["on_behalf_of"] == "t1:alice"
    assert data["allowed_routes"] == ["orders"]
    assert (data["subject_display"], data["subject_display_status"]) == ({"name": "Example team"}, "provided")
    for key in ("created_at", "expires_at", "refresh_expires_at"):
        assert data[key].endswith("Z")
    assert data["expires_at"] < data["refresh_expires_at"]
    assert tokens["access_token"] not in response.content.decode()


@pytest.mark.parametrize("token", [None, "bha_short", "bhr_" + "x" * 43, "bha_" + "x" * 43])
def test_session_needs_a_current_access_token(api_client, business, token):
    logged_in(api_client, business)
    assert_error(get(api_client, "/session", token), 401, "unauthorized")


@pytest.mark.parametrize("change", [{"enabled": False}, {"agent_authorize_url": "", "hub_consent": False}])
def test_a_disabled_client_makes_the_bearer_401(api_client, business, change):
    tokens = logged_in(api_client, business)
    for key, value in change.items():
        setattr(business, key, value)
    business.save()
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")


def test_an_expired_access_token_is_401(api_client, business):
    tokens = logged_in(api_client, business)
    AgentSession.objects.filter(pk=tokens["session_id"]).update(access_expires_at=timezone.now())
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")


# --- POST /revoke, POST /sessions/{id}/revoke -------------------------------------------------------------


def test_revoke_with_the_access_bearer(api_client, business):
    tokens = logged_in(api_client, business)
    response = post(api_client, "/revoke", {}, tokens["access_token"])
    assert response.status_code == 200
    assert response.json() == {"revoked": True}
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")
    assert_error(post(api_client, "/token", refresh_grant(tokens)), 400, "invalid_grant")


def test_revoke_with_bearer_and_the_sdk_body(api_client, business):
    tokens = logged_in(api_client, business)
    body = {"client_app_id": "shop", "refresh_token": tokens["refresh_token"]}
    assert post(api_client, "/revoke", body, tokens["access_token"]).json() == {"revoked": True}
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is not None


def test_revoke_with_the_refresh_token_body(api_client, business):
    tokens = logged_in(api_client, business)
    body = {"client_app_id": "shop", "refresh_token": tokens["refresh_token"]}
    assert post(api_client, "/revoke", body).json() == {"revoked": True}
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")


def test_revoke_with_unknown_credentials_answers_the_same(api_client, business):
    tokens = logged_in(api_client, business)
    body = {"client_app_id": "shop", "refresh_token": "bhr_" + "q" * 43}
    assert post(api_client, "/revoke", body).json() == {"revoked": True}
    assert post(api_client, "/revoke", {}, "bha_" + "q" * 43).json() == {"revoked": True}
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"client_app_id": "shop"},
        {"refresh_token": "bhr_" + "q" * 43},
        {"client_app_id": "shop", "refresh_token": "bha_" + "q" * 43},
        {"client_app_id": "Shop", "refresh_token": "bhr_" + "q" * 43},
        {"client_app_id": "shop", "refresh_token": "bhr_" + "q" * 43, "all": True},
    ],
)
def test_revoke_without_bearer_needs_the_refresh_body(api_client, business, body):
    assert_error(post(api_client, "/revoke", body), 400, "invalid_request")


def test_revoke_with_a_malformed_bearer_is_401(api_client, business):
    assert_error(post(api_client, "/revoke", {}, "bct_" + "q" * 43), 401, "unauthorized")


def test_business_revoke_is_scoped_and_idempotent(api_client, business):
    tokens = logged_in(api_client, business)
    path = f"/sessions/{tokens['session_id']}/revoke"
    intruder = ClientFactory()
    assert_error(post(api_client, path, {}, intruder._token), 404, "not_found")
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None
    assert post(api_client, path, {}, business._token).json() == {"revoked": True}
    assert post(api_client, path, {}, business._token).json() == {"revoked": True}
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoke_reason == "business_revoked"


@pytest.mark.parametrize("session_id", ["nope", "00000000-0000-4000-8000-000000000000"])
def test_business_revoke_of_unknown_sessions_is_404(api_client, business, session_id):
    assert_error(post(api_client, f"/sessions/{session_id}/revoke", {}, business._token), 404, "not_found")


def test_business_revoke_needs_the_client_token(api_client, business):
    tokens = logged_in(api_client, business)
    path = f"/sessions/{tokens['session_id']}/revoke"
    assert_error(post(api_client, path, {}, tokens["access_token"]), 401, "unauthorized")


# --- GET /sessions?authorization_id=, POST /authorizations/{id}/revoke -----------------------------------


SESSION_VIEW_KEYS = {
    "session_id",
    "client_app_id",
    "device_label",
    "subject_display",
    "subject_display_status",
    "principal",
    "on_behalf_of",
    "allowed_routes",
    "created_at",
    "expires_at",
    "refresh_expires_at",
    "state",
    "revoked_at",
    "last_seen_at",
}


def test_sessions_of_an_authorization_show_non_secret_metadata(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    before = get(api_client, f"/sessions?authorization_id={authorization_id}", business._token)
    assert before.status_code == 200
    assert before.json() == {"authorization_id": authorization_id, "sessions": []}
    tokens = post(api_client, "/token", code_grant(code, verifier)).json()
    get(api_client, "/session", tokens["access_token"])  # the agent is seen once

    response = get(api_client, f"/sessions?authorization_id={authorization_id.upper()}", business._token)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert data["authorization_id"] == authorization_id
    [session] = data["sessions"]
    assert set(session) == SESSION_VIEW_KEYS
    assert session["session_id"] == tokens["session_id"]
    assert (session["state"], session["revoked_at"]) == ("active", None)
    assert (session["principal"], session["on_behalf_of"]) == (PRINCIPAL, "t1:alice")
    assert session["last_seen_at"].endswith("Z")
    text = response.content.decode()
    assert tokens["access_token"] not in text and tokens["refresh_token"] not in text


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "authorization_id"),
        ("?authorization_id=", "authorization_id"),
        ("?authorization_id=not-a-uuid", "authorization_id"),
        ("?authorization_id={id}&authorization_id={id}", "authorization_id"),
        ("?authorization_id={id}&session_id=x", "session_id"),
        ("?authorization_id={{{id}}}", "authorization_id"),
        ("?authorization_id={hex}", "authorization_id"),
    ],
)
def test_sessions_query_is_strict(api_client, business, query, field):
    authorization_id, _ = start(api_client)
    query = query.format(id=authorization_id, hex=authorization_id.replace("-", ""))
    response = get(api_client, "/sessions" + query, business._token)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field


def test_sessions_of_another_clients_or_an_unknown_authorization_are_404(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    post(api_client, "/token", code_grant(code, verifier))
    intruder = ClientFactory(allowed_routes=["*"])
    path = f"/sessions?authorization_id={authorization_id}"
    assert_error(get(api_client, path, intruder._token), 404, "not_found")
    unknown = "/sessions?authorization_id=00000000-0000-4000-8000-000000000000"
    assert_error(get(api_client, unknown, business._token), 404, "not_found")


def test_sessions_need_the_client_token(api_client, business):
    tokens = logged_in(api_client, business)
    authorization_id = str(AgentSession.objects.get(pk=tokens["session_id"]).authorization.id)
    path = f"/sessions?authorization_id={authorization_id}"
    assert_error(get(api_client, path, tokens["access_token"]), 401, "unauthorized")
    assert_error(get(api_client, path), 401, "unauthorized")
    assert_error(post(api_client, path, {}, business._token), 405, "method_not_allowed")


def test_revoke_by_authorization_is_idempotent_and_ends_the_session(api_client, business):
    authorization_id, code, verifier = approved_code(api_client, business)
    tokens = post(api_client, "/token", code_grant(code, verifier)).json()
    path = f"/authorizations/{authorization_id}/revoke"

    first = post(api_client, path, {}, business._token)
    second = post(api_client, path, None, business._token)

    assert first.status_code == second.status_code == 200
    assert first["Cache-Control"] == second["Cache-Control"] == "no-store"
    session_id = tokens["session_id"]
    assert first.json() == {"revoked": True, "already_revoked": False, "session_id": session_id}
    assert second.json() == {"revoked": True, "already_revoked": True, "session_id": session_id}
    assert_error(get(api_client, "/session", tokens["access_token"]), 401, "unauthorized")
    assert_error(post(api_client, "/token", refresh_grant(tokens)), 400, "invalid_grant")
    [listed] = get(api_client, f"/sessions?authorization_id={authorization_id}", business._token).json()[
        "sessions"
    ]
    assert listed["state"] == "revoked" and listed["revoked_at"].endswith("Z")
    revoked = AgentSession.objects.get(pk=session_id)
    assert revoked.revoke_reason == "business_revoked"


def test_revoke_by_authorization_is_only_for_the_owning_client(api_client, business):
    tokens = logged_in(api_client, business)
    authorization_id = str(AgentSession.objects.get(pk=tokens["session_id"]).authorization.id)
    intruder = ClientFactory(allowed_routes=["*"])
    assert_error(
        post(api_client, f"/authorizations/{authorization_id}/revoke", {}, intruder._token), 404, "not_found"
    )
    for unknown in ("nope", "00000000-0000-4000-8000-000000000000"):
        assert_error(
            post(api_client, f"/authorizations/{unknown}/revoke", {}, business._token), 404, "not_found"
        )
    assert_error(
        post(api_client, f"/authorizations/{authorization_id}/revoke", {}, tokens["access_token"]),
        401,
        "unauthorized",
    )
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None
    assert_error(
        get(api_client, f"/authorizations/{authorization_id}/revoke", business._token),
        405,
        "method_not_allowed",
    )


def test_revoke_by_authorization_without_a_session_is_409(api_client, business):
    authorization_id, _ = start(api_client)
    path = f"/authorizations/{authorization_id}/revoke"
    assert_error(post(api_client, path, {}, business._token), 409, "invalid_state")
    post(api_client, f"/authorizations/{authorization_id}/approve", approve_body(), business._token)
    assert_error(post(api_client, path, {}, business._token), 409, "invalid_state")
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "approved"


def test_revoke_by_authorization_takes_an_empty_body_only(api_client, business):
    tokens = logged_in(api_client, business)
    authorization_id = str(AgentSession.objects.get(pk=tokens["session_id"]).authorization.id)
    response = post(
        api_client, f"/authorizations/{authorization_id}/revoke", {"reason": "x"}, business._token
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == "reason"
    assert AgentSession.objects.get(pk=tokens["session_id"]).revoked_at is None


# --- surface ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/agent-auth/v1/nope", "/agent-auth/v2/token", "/agent-auth/v1/token/"])
def test_unknown_paths_are_json_404(api_client, path):
    response = api_client.post(path, {}, format="json")
    assert_error(response, 404, "not_found")
    assert response["Content-Type"].startswith("application/json")


def test_wrong_methods_are_405(api_client, business):
    assert_error(api_client.get(BASE + "/token"), 405, "method_not_allowed")
    assert_error(api_client.get(BASE + "/authorizations"), 405, "method_not_allowed")
    tokens = logged_in(api_client, business)
    response = post(api_client, "/session", {}, tokens["access_token"])
    assert_error(response, 405, "method_not_allowed")


@pytest.fixture
def hub_consent_client():
    """A client whose sign-ins are approved on the hub's consent page: hub consent, no business page."""
    return ClientFactory(app_id="desk", hub_consent=True, agent_authorize_url="", allowed_routes=["orders"])


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_hub_consent_client_cannot_decide_its_own_authorizations(api_client, hub_consent_client, decision):
    """The hub's consent page makes the signed-in hub user the principal; the business endpoints would
    let the client's Client Token vouch for anyone instead."""
    authorization_id, _ = start(api_client, client_app_id="desk")
    before = AuditEvent.objects.count()
    body = approve_body() if decision == "approve" else {}
    response = post(
        api_client, f"/authorizations/{authorization_id}/{decision}", body, hub_consent_client._token
    )
    assert_error(response, 403, "hub_consent_only")
    authorization = AgentAuthorization.objects.get(pk=authorization_id)
    assert (authorization.status, authorization.code_hash, authorization.principal) == ("pending", None, None)
    assert AuditEvent.objects.count() == before
    # The hub's own consent page still decides it.
    from agent_runtime.services.agent_auth.authorizations import authorization_approve
    from bailing.audit.actor import Actor

    redirect = authorization_approve(
        authorization_id=authorization_id,
        client=None,
        principal={"id": "ada", "roles": []},
        on_behalf_of="ada",
        allowed_routes=["orders"],
        actor=Actor("user", "ada"),
    )
    assert "code=" in redirect


def test_a_client_with_its_own_consent_page_still_decides_with_hub_consent_on(api_client, hub_consent_client):
    hub_consent_client.agent_authorize_url = "https://desk.example.com/agent/authorize"
    hub_consent_client.save(update_fields=["agent_authorize_url"])
    authorization_id, _ = start(api_client, client_app_id="desk")
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(), hub_consent_client._token
    )
    assert response.status_code == 200, response.content


def test_another_clients_authorization_stays_404_for_a_hub_consent_client(
    api_client, business, hub_consent_client
):
    authorization_id, _ = start(api_client)
    response = post(
        api_client, f"/authorizations/{authorization_id}/approve", approve_body(), hub_consent_client._token
    )
    assert_error(response, 404, "not_found")
