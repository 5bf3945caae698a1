"""Standard OAuth sign-in for MCP clients: metadata, registration, authorize, token, refresh, revoke.

Real PostgreSQL; statuses and ``error`` codes are asserted, never messages. The sign-in runs on the
Agent Auth v1 machinery, so the rows checked are ordinary authorizations and sessions.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client as HttpClient
from django.utils import timezone

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession, Client, OAuthClient
from agent_runtime.services.agent_auth.authorizations import authorization_approve
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db

PUBLIC = "https://hub.example.com"
RESOURCE = f"{PUBLIC}/mcp/demo"
REDIRECT = "http://127.0.0.1:33418/callback"


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def http() -> HttpClient:
    return HttpClient()


@pytest.fixture
def sign_in_client():
    return ClientFactory(
        app_id="mcp-agent",
        name="MCP agent",
        hub_consent=True,
        mcp_sign_in=True,
        allowed_routes=["demo", "orders"],
    )


def register(http, body=None, **extra):
    payload = {"redirect_uris": [REDIRECT], "client_name": "Claude Code"} if body is None else body
    return http.post("/oauth/register", payload, content_type="application/json", **extra)


def registered(http, **overrides) -> dict:
    response = register(http, {"redirect_uris": [REDIRECT], "client_name": "Claude Code", **overrides})
    assert response.status_code == 201, response.content
    return response.json()


def authorize_params(client_id_, challenge, **overrides):
    params = {
        "response_type": "code",
        "client_id": client_id_,
        "redirect_uri": REDIRECT,
        "state": "state-0123456789",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        "scope": "knowledge:read",
    }
    params.update(overrides)
    return {key: value for key, value in params.items() if value is not None}


def authorize(http, params):
    return http.get("/oauth/authorize?" + urlencode(params, doseq=True))


def redirect_query(response) -> dict[str, list[str]]:
    assert response.status_code == 302, response.content
    return parse_qs(urlsplit(response["Location"]).query)


def form_post(http, path, data, content_type="application/x-www-form-urlencoded"):
    return http.post(path, urlencode(data), content_type=content_type)


def assert_oauth_error(response, status, code):
    assert response.status_code == status, response.content
    assert response.json()["error"] == code
    assert response["Cache-Control"] == "no-store"


def approve(authorization_id, routes=("demo",)) -> str:
    """What the hub's consent page does on approval (client=None)."""
    return authorization_approve(
        authorization_id=authorization_id,
        client=None,
        principal={"id": "ada", "roles": []},
        on_behalf_of="ada",
        allowed_routes=list(routes),
        actor=Actor("user", "ada"),
    )


def started(http, client_id, **overrides):
    verifier, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, **overrides))
    assert response.status_code == 302, response.content
    consent = urlsplit(response["Location"])
    assert f"{consent.scheme}://{consent.netloc}{consent.path}" == f"{PUBLIC}/console/consent/"
    authorization_id = parse_qs(consent.query)["authorization_id"][0]
    return authorization_id, verifier


def approved_code(http, client_id, **overrides):
    authorization_id, verifier = started(http, client_id, **overrides)
    redirect = approve(authorization_id)
    query = parse_qs(urlsplit(redirect).query)
    assert query["state"] == [overrides.get("state", "state-0123456789")]
    assert query["iss"] == [PUBLIC]  # RFC 9207, on the success response too
    return authorization_id, query["code"][0], verifier


def code_body(client_id_, code_, verifier, **overrides):
    body = {
        "grant_type": "authorization_code",
        "code": code_,
        "redirect_uri": REDIRECT,
        "client_id": client_id_,
        "code_verifier": verifier,
        "resource": RESOURCE,
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not None}


def signed_in(http, client_id) -> dict:
    _, code, verifier = approved_code(http, client_id)
    response = form_post(http, "/oauth/token", code_body(client_id, code, verifier))
    assert response.status_code == 200, response.content
    return response.json()


def refresh_body(client_id_, tokens, **overrides):
    body = {
        "grant_type": "refresh_token",
        "refresh_token": tokens["refresh_token"],
        "client_id": client_id_,
        "resource": RESOURCE,
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not None}


def session_of(tokens) -> AgentSession:
    return AgentSession.objects.get(pk=tokens["session_id"])


# --- metadata --------------------------------------------------------------------------------------------


def test_authorization_server_metadata(http):
    response = http.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {
        "issuer": PUBLIC,
        "authorization_endpoint": f"{PUBLIC}/oauth/authorize",
        "token_endpoint": f"{PUBLIC}/oauth/token",
        "registration_endpoint": f"{PUBLIC}/oauth/register",
        "revocation_endpoint": f"{PUBLIC}/oauth/revoke",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": ["knowledge:read", "tools:read", "tools:call"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


def test_the_mcp_sdk_accepts_the_metadata_and_its_issuer(http):
    """The MCP SDK parses the metadata with its own model and compares the issuer as a string."""
    from mcp.client.auth.utils import validate_metadata_issuer
    from mcp.shared.auth import OAuthMetadata

    metadata = OAuthMetadata.model_validate_json(http.get("/.well-known/oauth-authorization-server").content)
    validate_metadata_issuer(metadata, PUBLIC)
    assert str(metadata.token_endpoint) == f"{PUBLIC}/oauth/token"


def test_no_openid_configuration(http):
    assert_oauth_error(http.get("/.well-known/openid-configuration"), 404, "not_found")


# --- registration ----------------------------------------------------------------------------------------


def test_register_answers_201_with_the_client_information(http, sign_in_client):
    response = register(http)
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert data["client_id"].startswith("bhm_") and len(data["client_id"]) >= 4 + 32
    assert isinstance(data["client_id_issued_at"], int)
    assert {key: value for key, value in data.items() if key not in {"client_id", "client_id_issued_at"}} == {
        "client_name": "Claude Code",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": "knowledge:read tools:read tools:call",
    }
    stored = OAuthClient.objects.get(client_id=data["client_id"])
    assert (stored.hub_client_id, stored.client_name, stored.created_ip) == (
        sign_in_client.pk,
        "Claude Code",
        "127.0.0.1",
    )
    event = AuditEvent.objects.get(action="agent_auth.oauth_client.registered")
    assert event.target_id == data["client_id"]
    assert event.data == {
        "client_name": "Claude Code",
        "redirect_hosts": ["127.0.0.1:33418"],
        "ip": "127.0.0.1",
    }


def test_register_accepts_what_the_mcp_sdk_sends(http, sign_in_client):
    """The SDK's registration body (``OAuthClientMetadata`` dumped without nulls) and its parse of the
    answer, including the check that the registration is usable by its authorization-code flow."""
    from mcp.client.auth.oauth2 import check_registration_usable
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

    metadata = OAuthClientMetadata(
        redirect_uris=["http://localhost:3030/callback"],
        client_name="MCP SDK client",
        scope="knowledge:read",
    )
    response = register(http, metadata.model_dump(by_alias=True, mode="json", exclude_none=True))
    assert response.status_code == 201, response.content
    info = OAuthClientInformationFull.model_validate(response.json())
    check_registration_usable(info)
    assert [str(uri) for uri in info.redirect_uris] == ["http://localhost:3030/callback"]


def test_register_defaults_the_name_and_ignores_unknown_metadata(http, sign_in_client):
    response = register(http, {"redirect_uris": [REDIRECT], "logo_uri": "https://x.example/l.png", "x": 1})
    assert response.status_code == 201
    assert response.json()["client_name"] == "MCP client"


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:8503/callback",
        "http://[::1]:8503/callback",
        "http://localhost:8503/callback",
        "http://localhost:8503",
        "https://app.example.com/oauth/callback",
        "https://app.example.com:8443/cb?tenant=1",
    ],
)
def test_register_accepts_loopback_and_https_redirects(http, sign_in_client, uri):
    assert register(http, {"redirect_uris": [uri]}).status_code == 201


@pytest.mark.parametrize(
    "uri",
    [
        "http://[::1]evil.com:8503/",
        "http://[::1]@evil.com:8503/",
        "http://127.0.0.1.evil.com:8503/cb",
        "http://localhost.evil.com:8503/cb",
        "http://127.0.0.1:65536/cb",
        "http://[::1]/cb",
        "http://127.0.0.1/callback",
        "http://localhost/callback",
        "http://127.0.0.1:0/callback",
        "http://127.0.0.1:08503/callback",
        "http://example.com:8503/callback",
        "http://127.0.0.2:8503/callback",
        "https://user@app.example.com/cb",
        "https://user:pw@app.example.com/cb",
        "https://app.example.com/cb#frag",
        "https://app.example.com/cb#",
        "https://App.Example.com/cb",
        "https://app.example.com/c b",
        "https://app.example.com/\u202ecb",
        "https:///cb",
        "ftp://app.example.com/cb",
        "javascript:alert(1)",
        "/callback",
        "",
        "https://" + "a" * 2050 + ".com/",
    ],
)
def test_register_refuses_bad_redirects(http, sign_in_client, uri):
    assert_oauth_error(register(http, {"redirect_uris": [uri]}), 400, "invalid_redirect_uri")


@pytest.mark.parametrize(
    "redirect_uris",
    [
        None,
        [],
        "http://127.0.0.1:8503/cb",
        [REDIRECT, REDIRECT],
        [f"http://127.0.0.1:{p}/" for p in range(1, 12)],
        [5],
    ],
)
def test_register_refuses_bad_redirect_lists(http, sign_in_client, redirect_uris):
    body = {} if redirect_uris is None else {"redirect_uris": redirect_uris}
    assert_oauth_error(register(http, body), 400, "invalid_redirect_uri")


@pytest.mark.parametrize(
    "patch",
    [
        {"client_name": "a" * 129},
        {"client_name": ""},
        {"client_name": "   "},
        {"client_name": 5},
        {"client_name": "two\nlines"},
        {"client_name": "tab\there"},
        {"client_name": "nul\x00"},
        {"client_name": "del\x7f"},
        {"client_name": "c1\x85"},
        *({"client_name": f"Claude {chr(c)}Code"} for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))),
        {"client_name": "line\u2028sep"},
        {"token_endpoint_auth_method": "client_secret_post"},
        {"token_endpoint_auth_method": "client_secret_basic"},
        {"token_endpoint_auth_method": "private_key_jwt"},
        {"grant_types": ["client_credentials"]},
        {"grant_types": ["authorization_code", "implicit"]},
        {"grant_types": []},
        {"grant_types": "authorization_code"},
        {"response_types": ["token"]},
        {"response_types": ["code", "id_token"]},
        {"scope": "knowledge:write"},
        {"scope": "knowledge:read offline_access"},
        {"scope": 1},
    ],
)
def test_register_refuses_bad_metadata(http, sign_in_client, patch):
    body = {"redirect_uris": [REDIRECT], **patch}
    assert_oauth_error(register(http, body), 400, "invalid_client_metadata")
    assert OAuthClient.objects.count() == 0


@pytest.mark.parametrize(
    "patch",
    [
        {"token_endpoint_auth_method": "none"},
        {"grant_types": ["authorization_code"]},
        {"response_types": ["code"]},
        {"scope": "knowledge:read"},
        {"client_name": "a" * 128},
        {"client_name": "Claude 代码 🚀"},
    ],
)
def test_register_accepts_the_allowed_values(http, sign_in_client, patch):
    assert register(http, {"redirect_uris": [REDIRECT], **patch}).status_code == 201


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"[1]", "application/json"), (b"{", "application/json"), (b'{"redirect_uris": []}', "text/plain")],
)
def test_register_refuses_bodies_that_are_not_a_json_object(http, sign_in_client, body, content_type):
    response = http.post("/oauth/register", body, content_type=content_type)
    assert_oauth_error(response, 400, "invalid_client_metadata")


def test_register_without_a_sign_in_client_is_403(http):
    assert_oauth_error(register(http), 403, "mcp_sign_in_disabled")
    ClientFactory(app_id="off", hub_consent=True, mcp_sign_in=True, enabled=False)
    assert_oauth_error(register(http), 403, "mcp_sign_in_disabled")


def test_register_is_throttled_per_ip(http, sign_in_client, settings):
    settings.OAUTH_REGISTER_LIMIT = 3
    for _ in range(3):
        assert register(http).status_code == 201
    response = register(http)
    assert_oauth_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= settings.OAUTH_REGISTER_WINDOW
    # Another address has its own bucket; rows leaving the window free the first one.
    assert register(http, REMOTE_ADDR="10.0.0.9").status_code == 201
    OAuthClient.objects.filter(created_ip="127.0.0.1").update(created_at=timezone.now() - timedelta(hours=2))
    assert register(http).status_code == 201


def test_register_accepts_only_post(http, sign_in_client):
    assert http.get("/oauth/register").status_code == 405


# --- authorize -------------------------------------------------------------------------------------------


def test_authorize_opens_an_ordinary_authorization_and_redirects_to_consent(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, prompt="consent"))
    assert response.status_code == 302
    assert response["Cache-Control"] == "no-store"
    authorization = AgentAuthorization.objects.get()
    assert response["Location"] == f"{PUBLIC}/console/consent/?authorization_id={authorization.id}"
    assert authorization.client == sign_in_client
    assert authorization.oauth_client.client_id == client_id
    assert (authorization.redirect_uri, authorization.state_value) == (REDIRECT, "state-0123456789")
    assert (authorization.requested_routes, authorization.device_label) == (["demo"], "Claude Code")
    assert (authorization.code_challenge, authorization.created_ip) == (challenge, "127.0.0.1")
    assert OAuthClient.objects.get(client_id=client_id).last_used_at is not None


def test_authorize_matches_a_loopback_redirect_on_any_port(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    other_port = "http://127.0.0.1:50123/callback"
    response = authorize(http, authorize_params(client_id, challenge, redirect_uri=other_port))
    assert response.status_code == 302
    assert AgentAuthorization.objects.get().redirect_uri == other_port


def _page(response, status):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("text/html")
    assert "Location" not in response


@pytest.mark.parametrize(
    "patch",
    [
        {"client_id": None},
        {"client_id": "bhm_" + "x" * 43},
        {"client_id": "bhm_" + "x" * 20 + "\x00" + "x" * 22},  # PostgreSQL text refuses NUL: never looked up
        {"client_id": "someone-else"},
        {"client_id": ["{client_id}", "{client_id}"]},
        {"redirect_uri": None},
        {"redirect_uri": "http://127.0.0.1:33418/other"},
        {"redirect_uri": "http://localhost:33418/callback"},
        {"redirect_uri": "https://evil.example.com/callback"},
        {"redirect_uri": [REDIRECT, REDIRECT]},
    ],
)
def test_authorize_without_a_known_client_and_redirect_is_an_error_page(http, sign_in_client, patch):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    patch = {
        key: [item.format(client_id=client_id) for item in value] if isinstance(value, list) else value
        for key, value in patch.items()
    }
    _page(authorize(http, authorize_params(client_id, challenge, **patch)), 400)
    assert AgentAuthorization.objects.count() == 0


def test_authorize_for_a_client_that_lost_mcp_sign_in_is_an_error_page(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    Client.objects.filter(pk=sign_in_client.pk).update(mcp_sign_in=False)
    _page(authorize(http, authorize_params(client_id, challenge)), 400)
    Client.objects.filter(pk=sign_in_client.pk).update(mcp_sign_in=True, enabled=False)
    _page(authorize(http, authorize_params(client_id, challenge)), 400)


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        ({"response_type": None}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"code_challenge": None}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"code_challenge": "a" * 42 + "="}, "invalid_request"),
        ({"code_challenge_method": None}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"scope": "knowledge:write"}, "invalid_scope"),
        ({"scope": "knowledge:read offline_access"}, "invalid_scope"),
        ({"resource": None}, "invalid_request"),
        ({"resource": f"{PUBLIC}/mcp/demo/"}, "invalid_target"),
        ({"resource": f"{PUBLIC}/mcp/Demo"}, "invalid_target"),
        ({"resource": f"{PUBLIC}/mcp/auto"}, "invalid_target"),
        ({"resource": f"{PUBLIC}/mcp/"}, "invalid_target"),
        ({"resource": "https://other.example.com/mcp/demo"}, "invalid_target"),
        ({"resource": f"{PUBLIC}/mcp/demo?x=1"}, "invalid_target"),
        # Allowed by the pattern but not by the client: still the client's redirect.
        ({"resource": f"{PUBLIC}/mcp/tickets"}, "invalid_target"),
        ({"response_type": ["code", "code"]}, "invalid_request"),
    ],
)
def test_authorize_problems_go_back_to_the_redirect_with_state(http, sign_in_client, patch, error):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    query = redirect_query(authorize(http, authorize_params(client_id, challenge, **patch)))
    # RFC 9207: every authorization response names the issuer.
    assert query == {"error": [error], "state": ["state-0123456789"], "iss": [PUBLIC]}
    assert AgentAuthorization.objects.count() == 0


def test_authorize_without_state_goes_back_without_state(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, state=None))
    assert response["Location"].startswith(REDIRECT + "?")
    assert redirect_query(response) == {"error": ["invalid_request"], "iss": [PUBLIC]}


def test_authorize_is_throttled_with_an_error_page(http, sign_in_client, settings):
    settings.AGENT_AUTH_CREATE_LIMIT = 1
    client_id = registered(http)["client_id"]
    _, challenge = pkce_pair()
    assert authorize(http, authorize_params(client_id, challenge)).status_code == 302
    response = authorize(http, authorize_params(client_id, challenge))
    _page(response, 429)
    assert int(response["Retry-After"]) >= 1


# --- error redirects only to redirects the hub trusts (RFC 9700 §4.11.2) ------------------------------------

EVIL = "https://evil.example/cb"
# Every authorization error that the checks after the client and redirect can give.
AUTHORIZE_ERRORS = [
    ({"response_type": "bogus"}, "unsupported_response_type"),
    ({"response_type": None}, "invalid_request"),
    ({"response_type": ["code", "code"]}, "invalid_request"),
    ({"state": None}, "invalid_request"),
    ({"state": "x" * 513}, "invalid_request"),
    ({"code_challenge": None}, "invalid_request"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"scope": "knowledge:write"}, "invalid_scope"),
    ({"resource": None}, "invalid_request"),
    ({"resource": "https://other.example.com/mcp/demo"}, "invalid_target"),
    # A workspace the hub client may not use: refused by the service, after the shape checks.
    ({"resource": f"{PUBLIC}/mcp/tickets"}, "invalid_target"),
]


def assert_hub_error_page(response, error):
    """The hub's own page naming the OAuth error: no redirect and no link to the untrusted URI."""
    _page(response, 400)
    assert response["Cache-Control"] == "no-store"
    assert response.context["code"] == error
    body = response.content.decode()
    assert error in body
    assert "evil.example" not in body


@pytest.mark.parametrize(("patch", "error"), AUTHORIZE_ERRORS)
def test_authorize_errors_never_redirect_to_an_untrusted_https_redirect(http, sign_in_client, patch, error):
    """The open-redirector attack: anyone registers an https client and crafts a failing authorize
    link; the browser must stay on the hub."""
    client_id = registered(http, redirect_uris=[EVIL])["client_id"]
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, redirect_uri=EVIL, **patch))
    assert_hub_error_page(response, error)
    assert AgentAuthorization.objects.count() == 0


def test_an_authorize_refused_by_the_service_is_a_page_for_an_untrusted_redirect(
    http, sign_in_client, monkeypatch
):
    """``access_denied`` (the hub client became unusable while the sign-in started) likewise."""
    from agent_runtime.errors import InvalidClient
    from agent_runtime.services.agent_auth import oauth

    def refuse(**kwargs):
        raise InvalidClient()

    client_id = registered(http, redirect_uris=[EVIL, REDIRECT])["client_id"]
    monkeypatch.setattr(oauth, "authorization_create", refuse)
    _, challenge = pkce_pair()
    assert_hub_error_page(
        authorize(http, authorize_params(client_id, challenge, redirect_uri=EVIL)), "access_denied"
    )
    # The same refusal goes back to the client's loopback redirect.
    query = redirect_query(authorize(http, authorize_params(client_id, challenge)))
    assert query == {"error": ["access_denied"], "state": ["state-0123456789"], "iss": [PUBLIC]}


@pytest.mark.parametrize(
    "loopback", ["http://127.0.0.1:33418/callback", "http://[::1]:33418/callback", "http://localhost:9/cb"]
)
@pytest.mark.parametrize(("patch", "error"), AUTHORIZE_ERRORS)
def test_authorize_errors_go_back_to_a_loopback_redirect(http, sign_in_client, loopback, patch, error):
    """A native client on the user's computer (RFC 8252) gets its error redirect (RFC 6749 §4.1.2.1)
    before it ever signed in."""
    client_id = registered(http, redirect_uris=[loopback])["client_id"]
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, redirect_uri=loopback, **patch))
    assert response["Location"].startswith(loopback + "?")
    state = patch.get("state", "state-0123456789")
    assert redirect_query(response) == {
        "error": [error],
        **({"state": [state]} if state else {}),
        "iss": [PUBLIC],
    }


def _complete_sign_in(http, client_id, redirect_uri):
    _, code, verifier = approved_code(http, client_id, redirect_uri=redirect_uri)
    body = code_body(client_id, code, verifier, redirect_uri=redirect_uri)
    response = form_post(http, "/oauth/token", body)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(("patch", "error"), AUTHORIZE_ERRORS)
def test_authorize_errors_go_back_to_a_client_that_completed_a_sign_in(http, sign_in_client, patch, error):
    client_id = registered(http, redirect_uris=[EVIL])["client_id"]
    _complete_sign_in(http, client_id, EVIL)
    assert OAuthClient.objects.get(client_id=client_id).signed_in_at is not None
    _, challenge = pkce_pair()
    response = authorize(http, authorize_params(client_id, challenge, redirect_uri=EVIL, **patch))
    assert response["Location"].startswith(EVIL + "?")
    assert redirect_query(response)["error"] == [error]


def test_an_approved_sign_in_whose_code_was_not_exchanged_does_not_make_a_client_trusted(
    http, sign_in_client
):
    client_id = registered(http, redirect_uris=[EVIL])["client_id"]
    _, code, verifier = approved_code(http, client_id, redirect_uri=EVIL)
    # A failed exchange is no completed sign-in either.
    failed = form_post(http, "/oauth/token", code_body(client_id, code, "v" * 43, redirect_uri=EVIL))
    assert_oauth_error(failed, 400, "invalid_grant")
    _, challenge = pkce_pair()
    bogus = authorize_params(client_id, challenge, redirect_uri=EVIL, response_type="bogus")
    assert_hub_error_page(authorize(http, bogus), "unsupported_response_type")
    assert OAuthClient.objects.get(client_id=client_id).signed_in_at is None
    ok = form_post(http, "/oauth/token", code_body(client_id, code, verifier, redirect_uri=EVIL))
    assert ok.status_code == 200
    first = OAuthClient.objects.get(client_id=client_id).signed_in_at
    assert first is not None
    assert redirect_query(authorize(http, bogus))["error"] == ["unsupported_response_type"]
    # The marker is the first completed sign-in: later ones and refreshes keep it.
    assert form_post(http, "/oauth/token", refresh_body(client_id, ok.json())).status_code == 200
    assert OAuthClient.objects.get(client_id=client_id).signed_in_at == first


def test_the_migration_marks_clients_that_already_signed_in(http, sign_in_client):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("agent_runtime.migrations.0009_oauth_client_signed_in")
    earlier = registered(http)["client_id"]
    _complete_sign_in(http, earlier, REDIRECT)
    never = registered(http, redirect_uris=[EVIL])["client_id"]
    approved_code(http, never, redirect_uri=EVIL)  # approved, never exchanged
    OAuthClient.objects.update(signed_in_at=None)
    migration.mark_signed_in(apps, None)
    consumed = AgentAuthorization.objects.get(oauth_client__client_id=earlier, status="consumed")
    assert OAuthClient.objects.get(client_id=earlier).signed_in_at == consumed.consumed_at
    assert OAuthClient.objects.get(client_id=never).signed_in_at is None


# --- token -----------------------------------------------------------------------------------------------


def test_full_flow_code_exchange_gives_an_ordinary_session(http, sign_in_client):
    client_id = registered(http)["client_id"]
    authorization_id, code, verifier = approved_code(http, client_id)
    response = form_post(http, "/oauth/token", code_body(client_id, code, verifier))
    assert response.status_code == 200, response.content
    assert (response["Cache-Control"], response["Pragma"]) == ("no-store", "no-cache")
    tokens = response.json()
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].startswith("bha_") and tokens["refresh_token"].startswith("bhr_")
    assert (tokens["expires_in"], tokens["scope"]) == (900, "knowledge:read")
    session = session_of(tokens)
    assert (session.client, session.oauth_client.client_id) == (sign_in_client, client_id)
    assert (session.allowed_routes, session.device_label, session.on_behalf_of) == (
        ["demo"],
        "Claude Code",
        "ada",
    )
    assert AgentAuthorization.objects.get(pk=authorization_id).status == "consumed"
    # The access token is the agent bearer of every agent surface.
    me = http.get("/agent-auth/v1/session", HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}")
    assert me.status_code == 200 and me.json()["session_id"] == tokens["session_id"]


def test_the_mcp_sdk_parses_the_token_answer(http, sign_in_client):
    from mcp.shared.auth import OAuthToken

    client_id = registered(http)["client_id"]
    token = OAuthToken.model_validate(signed_in(http, client_id))
    assert (token.token_type, token.scope, token.expires_in) == ("Bearer", "knowledge:read", 900)


def test_code_exchange_without_resource_works(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, code, verifier = approved_code(http, client_id)
    assert (
        form_post(http, "/oauth/token", code_body(client_id, code, verifier, resource=None)).status_code
        == 200
    )


@pytest.mark.parametrize(
    ("overrides", "status", "error"),
    [
        ({"code_verifier": "v" * 43}, 400, "invalid_grant"),
        ({"code_verifier": "short"}, 400, "invalid_grant"),
        ({"redirect_uri": "http://127.0.0.1:33419/callback"}, 400, "invalid_grant"),
        ({"code": "bhc_" + "A" * 43}, 400, "invalid_grant"),
        ({"code": "nonsense"}, 400, "invalid_grant"),
        ({"resource": f"{PUBLIC}/mcp/orders"}, 400, "invalid_target"),
        ({"resource": "https://elsewhere.example.com/mcp/demo"}, 400, "invalid_target"),
        ({"client_id": "bhm_" + "x" * 43}, 401, "invalid_client"),
        ({"client_id": "bhm_" + "x" * 20 + "\x00" + "x" * 22}, 401, "invalid_client"),
        ({"client_id": None}, 400, "invalid_request"),
        ({"code": None}, 400, "invalid_request"),
        ({"code_verifier": None}, 400, "invalid_request"),
        ({"redirect_uri": None}, 400, "invalid_request"),
        ({"grant_type": None}, 400, "invalid_request"),
        ({"grant_type": "client_credentials"}, 400, "unsupported_grant_type"),
        ({"grant_type": "password"}, 400, "unsupported_grant_type"),
        ({"client_secret": "s3cret"}, 401, "invalid_client"),
    ],
)
def test_code_exchange_failures(http, sign_in_client, overrides, status, error):
    client_id = registered(http)["client_id"]
    _, code, verifier = approved_code(http, client_id)
    assert_oauth_error(
        form_post(http, "/oauth/token", code_body(client_id, code, verifier, **overrides)), status, error
    )
    assert AgentSession.objects.count() == 0
    # Nothing consumed the code: the right request still works.
    assert form_post(http, "/oauth/token", code_body(client_id, code, verifier)).status_code == 200


def test_token_endpoint_takes_only_form_bodies(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, code, verifier = approved_code(http, client_id)
    body = code_body(client_id, code, verifier)
    response = http.post("/oauth/token", body, content_type="application/json")
    assert_oauth_error(response, 400, "invalid_request")
    assert response["Pragma"] == "no-cache"
    repeated = urlencode(body) + "&code=" + code
    response = http.post("/oauth/token", repeated, content_type="application/x-www-form-urlencoded")
    assert_oauth_error(response, 400, "invalid_request")
    assert_oauth_error(
        http.post("/oauth/token", "%ff=1", content_type="application/x-www-form-urlencoded"),
        400,
        "invalid_request",
    )
    assert http.get("/oauth/token").status_code == 405


def test_code_of_another_oauth_client_is_invalid_grant(http, sign_in_client):
    first = registered(http)["client_id"]
    second = registered(http)["client_id"]
    _, code, verifier = approved_code(http, first)
    assert_oauth_error(
        form_post(http, "/oauth/token", code_body(second, code, verifier)), 400, "invalid_grant"
    )
    assert form_post(http, "/oauth/token", code_body(first, code, verifier)).status_code == 200


def test_oauth_codes_and_refresh_tokens_do_not_work_at_the_agent_auth_v1_door(http, sign_in_client):
    client_id = registered(http)["client_id"]
    _, code, verifier = approved_code(http, client_id)
    v1 = {
        "grant_type": "authorization_code",
        "client_app_id": "mcp-agent",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    assert_oauth_error(
        http.post("/agent-auth/v1/token", v1, content_type="application/json"), 400, "invalid_grant"
    )
    tokens = form_post(http, "/oauth/token", code_body(client_id, code, verifier)).json()
    v1_refresh = {
        "grant_type": "refresh_token",
        "client_app_id": "mcp-agent",
        "refresh_token": tokens["refresh_token"],
    }
    response = http.post("/agent-auth/v1/token", v1_refresh, content_type="application/json")
    assert_oauth_error(response, 400, "invalid_grant")
    assert session_of(tokens).state == "active"


def test_code_replay_revokes_the_session(http, sign_in_client):
    client_id = registered(http)["client_id"]
    authorization_id, code, verifier = approved_code(http, client_id)
    tokens = form_post(http, "/oauth/token", code_body(client_id, code, verifier)).json()
    assert_oauth_error(
        form_post(http, "/oauth/token", code_body(client_id, code, verifier)), 400, "invalid_grant"
    )
    session = session_of(tokens)
    assert (session.state, session.revoke_reason) == ("revoked", "code_replay")
    assert AgentRefreshToken.objects.get(session=session).status == "revoked"
    assert AuditEvent.objects.filter(action="agent_auth.code.replayed", target_id=authorization_id).exists()
    me = http.get("/agent-auth/v1/session", HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}")
    assert me.status_code == 401
    revoked = AuditEvent.objects.filter(action="agent_auth.session.revoked", session_id=session.id)
    assert [event.data["reason"] for event in revoked] == ["code_replay"]
    assert_oauth_error(form_post(http, "/oauth/token", refresh_body(client_id, tokens)), 400, "invalid_grant")


def test_an_oauth_code_replayed_at_the_agent_auth_door_revokes_its_session(http, sign_in_client):
    client_id = registered(http)["client_id"]
    authorization_id, code, verifier = approved_code(http, client_id)
    tokens = form_post(http, "/oauth/token", code_body(client_id, code, verifier)).json()
    v1 = {
        "grant_type": "authorization_code",
        "client_app_id": "mcp-agent",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    response = http.post("/agent-auth/v1/token", v1, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"
    assert (session_of(tokens).state, session_of(tokens).revoke_reason) == ("revoked", "code_replay")
    assert (
        AuditEvent.objects.filter(action="agent_auth.code.replayed", target_id=authorization_id).count() == 1
    )


def test_expired_code_is_invalid_grant(http, sign_in_client):
    client_id = registered(http)["client_id"]
    authorization_id, code, verifier = approved_code(http, client_id)
    AgentAuthorization.objects.filter(pk=authorization_id).update(code_expires_at=timezone.now())
    assert_oauth_error(
        form_post(http, "/oauth/token", code_body(client_id, code, verifier)), 400, "invalid_grant"
    )


def test_refresh_rotates_and_a_replay_revokes_the_session(http, sign_in_client):
    client_id = registered(http)["client_id"]
    first = signed_in(http, client_id)
    response = form_post(http, "/oauth/token", refresh_body(client_id, first, scope="knowledge:read"))
    assert response.status_code == 200, response.content
    assert (response["Cache-Control"], response["Pragma"]) == ("no-store", "no-cache")
    second = response.json()
    assert second["session_id"] == first["session_id"] and second["scope"] == "knowledge:read"
    assert second["refresh_token"] != first["refresh_token"]
    old = http.get("/agent-auth/v1/session", HTTP_AUTHORIZATION=f"Bearer {first['access_token']}")
    assert old.status_code == 401
    # The used refresh token again: theft, the whole session ends.
    assert_oauth_error(form_post(http, "/oauth/token", refresh_body(client_id, first)), 400, "invalid_grant")
    session = session_of(first)
    assert (session.state, session.revoke_reason) == ("revoked", "refresh_replay")
    assert_oauth_error(form_post(http, "/oauth/token", refresh_body(client_id, second)), 400, "invalid_grant")


@pytest.mark.parametrize(
    ("overrides", "status", "error"),
    [
        ({"resource": f"{PUBLIC}/mcp/orders"}, 400, "invalid_target"),
        ({"resource": f"{PUBLIC}/mcp/demo/"}, 400, "invalid_target"),
        ({"scope": "knowledge:write"}, 400, "invalid_scope"),
        ({"refresh_token": "bhr_" + "A" * 43}, 400, "invalid_grant"),
        ({"refresh_token": None}, 400, "invalid_request"),
        ({"client_id": "bhm_" + "x" * 43}, 401, "invalid_client"),
        ({"client_id": "bhm_" + "x" * 20 + "\x00" + "x" * 22}, 401, "invalid_client"),
    ],
)
def test_refresh_failures_leave_the_session_alone(http, sign_in_client, overrides, status, error):
    client_id = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    assert_oauth_error(
        form_post(http, "/oauth/token", refresh_body(client_id, tokens, **overrides)), status, error
    )
    assert session_of(tokens).state == "active"
    assert form_post(http, "/oauth/token", refresh_body(client_id, tokens)).status_code == 200


def test_refresh_by_another_oauth_client_is_invalid_grant_and_revokes_nothing(http, sign_in_client):
    client_id = registered(http)["client_id"]
    other = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    assert_oauth_error(form_post(http, "/oauth/token", refresh_body(other, tokens)), 400, "invalid_grant")
    assert session_of(tokens).state == "active"


def test_refresh_stops_when_mcp_sign_in_is_turned_off(http, sign_in_client):
    client_id = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    Client.objects.filter(pk=sign_in_client.pk).update(mcp_sign_in=False)
    assert_oauth_error(
        form_post(http, "/oauth/token", refresh_body(client_id, tokens)), 401, "invalid_client"
    )


# --- revoke ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["access_token", "refresh_token"])
def test_revoke_ends_the_session_of_either_token(http, sign_in_client, which):
    client_id = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    response = form_post(http, "/oauth/revoke", {"token": tokens[which], "client_id": client_id})
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    session = session_of(tokens)
    assert (session.state, session.revoke_reason) == ("revoked", "agent_logout")


def test_revoke_is_200_for_unknown_and_other_clients_tokens(http, sign_in_client):
    client_id = registered(http)["client_id"]
    other = registered(http)["client_id"]
    tokens = signed_in(http, client_id)
    for token in ("bha_" + "A" * 43, "nonsense", tokens["access_token"], tokens["refresh_token"]):
        assert form_post(http, "/oauth/revoke", {"token": token, "client_id": other}).status_code == 200
    assert session_of(tokens).state == "active"
    assert_oauth_error(form_post(http, "/oauth/revoke", {"client_id": client_id}), 400, "invalid_request")
    response = form_post(
        http, "/oauth/revoke", {"token": tokens["access_token"], "client_id": "bhm_" + "x" * 43}
    )
    assert_oauth_error(response, 401, "invalid_client")
    nul_id = "bhm_" + "x" * 20 + "\x00" + "x" * 22
    response = form_post(http, "/oauth/revoke", {"token": tokens["access_token"], "client_id": nul_id})
    assert_oauth_error(response, 401, "invalid_client")
    assert session_of(tokens).state == "active"


def test_a_registration_with_sign_ins_cannot_be_deleted_alone(http, sign_in_client):
    from django.db.models import RestrictedError

    client_id = registered(http)["client_id"]
    signed_in(http, client_id)
    with pytest.raises(RestrictedError):
        OAuthClient.objects.filter(client_id=client_id).delete()
    # Deleting the client it signs in as removes everything, the registration included.
    Client.objects.filter(pk=sign_in_client.pk).delete()
    assert (OAuthClient.objects.count(), AgentSession.objects.count()) == (0, 0)
