"""Client ID Metadata Documents: an https ``client_id`` fetched over real HTTPS from a local server whose
certificate the test made (``tests/support/cimd_server.py``), through authorize → consent → token, and
every refusal. Refusals are the hub's own 400 page with ``invalid_client`` and the failed check named
in its ``field`` slot; none redirects anywhere. Statuses and codes are asserted, never messages."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client as HttpClient

from agent_client import pkce_pair
from agent_runtime.models import AgentAuthorization, AgentSession, OAuthClient
from agent_runtime.services.agent_auth import cimd as cimd_module
from agent_runtime.services.agent_auth.cimd import (
    CACHE_DEFAULT_SECONDS,
    CACHE_MAX_SECONDS,
    cache_seconds,
    cimd_cache_size,
)
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from tests.agent_runtime.api.test_oauth import (
    PUBLIC,
    REDIRECT,
    RESOURCE,
    approve,
    assert_oauth_error,
    form_post,
)
from tests.factories import ClientFactory
from tests.support.cimd_server import Answer

pytestmark = pytest.mark.django_db

PATH = "/clients/claude.json"


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


def document(url: str, **overrides) -> dict:
    body = {
        "client_id": url,
        "client_name": "Claude Code",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not None}


def serve(cimd, path: str = PATH, *, cache_control: str | None = None, **overrides) -> str:
    url = cimd.url(path)
    return cimd.put_document(path, document(url, **overrides), cache_control=cache_control)


def authorize(http, client_id: str, *, redirect_uri: str = REDIRECT, **overrides):
    verifier, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "state-0123456789",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        "scope": "knowledge:read",
        **overrides,
    }
    response = http.get("/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None}))
    return response, verifier


def assert_refused(response, reason: str):
    """The hub's own page: 400 invalid_client naming the check, no redirect, nothing opened."""
    assert response.status_code == 400, response.content
    assert "Location" not in response
    assert response.context["code"] == "invalid_client"
    assert response.context["field"] == f"client_id ({reason})"
    assert AgentAuthorization.objects.count() == 0


def consent_id(response) -> str:
    assert response.status_code == 302, response.content
    consent = urlsplit(response["Location"])
    assert f"{consent.scheme}://{consent.netloc}{consent.path}" == f"{PUBLIC}/console/consent/"
    return parse_qs(consent.query)["authorization_id"][0]


# --- success --------------------------------------------------------------------------------------------


def test_a_metadata_document_client_signs_in_end_to_end(http, sign_in_client, cimd):
    url = serve(cimd)
    response, verifier = authorize(http, url)
    authorization_id = consent_id(response)
    oauth_client = OAuthClient.objects.get(client_id=url)
    assert oauth_client.metadata_document is True
    assert oauth_client.client_name == "Claude Code" and oauth_client.redirect_uris == [REDIRECT]
    assert oauth_client.hub_client == sign_in_client
    assert oauth_client.metadata_host == f"127.0.0.1:{cimd.port}"
    assert oauth_client.metadata_fetched_at is not None
    authorization = AgentAuthorization.objects.get(pk=authorization_id)
    assert authorization.oauth_client == oauth_client and authorization.device_label == "Claude Code"
    # Consent, then the code back to the document's redirect with state and iss (RFC 9207).
    query = parse_qs(urlsplit(approve(authorization_id)).query)
    assert query["state"] == ["state-0123456789"] and query["iss"] == [PUBLIC]
    token = form_post(
        http,
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": url,
            "resource": RESOURCE,
        },
    )
    assert token.status_code == 200, token.content
    tokens = token.json()
    session = AgentSession.objects.get(pk=tokens["session_id"])
    assert session.oauth_client == oauth_client and session.client == sign_in_client
    oauth_client.refresh_from_db()
    assert oauth_client.signed_in_at is not None
    # A public client: refresh with the URL as client_id, no secret.
    refreshed = form_post(
        http,
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": url},
    )
    assert refreshed.status_code == 200, refreshed.content
    # Another client id cannot use its grants.
    other = form_post(
        http,
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": refreshed.json()["refresh_token"],
            "client_id": url + "x",
        },
    )
    assert_oauth_error(other, 401, "invalid_client")
    event = AuditEvent.objects.get(action="agent_auth.oauth_client.metadata_document")
    assert event.target_id == url and event.data["metadata_host"] == f"127.0.0.1:{cimd.port}"
    assert cimd.hits(PATH) == 1


def test_the_document_is_refetched_and_the_client_updated_when_not_cached(http, sign_in_client, cimd):
    url = serve(cimd, cache_control="no-store")
    consent_id(authorize(http, url)[0])
    serve(cimd, cache_control="no-store", client_name="Claude Code 2")
    consent_id(authorize(http, url)[0])
    assert cimd.hits(PATH) == 2
    assert OAuthClient.objects.get(client_id=url).client_name == "Claude Code 2"
    assert OAuthClient.objects.count() == 1
    assert AuditEvent.objects.filter(action="agent_auth.oauth_client.metadata_document").count() == 1


def test_an_unknown_metadata_url_at_the_token_endpoint_is_invalid_client(http, sign_in_client, cimd):
    url = serve(cimd)
    response = form_post(
        http,
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": "bhc_" + "a" * 43,
            "redirect_uri": REDIRECT,
            "code_verifier": "v" * 43,
            "client_id": url,
        },
    )
    assert_oauth_error(response, 401, "invalid_client")
    assert cimd.hits(PATH) == 0  # the token endpoint fetches nothing


def test_nothing_is_fetched_while_mcp_sign_in_is_off(http, cimd):
    url = serve(cimd)
    response, _ = authorize(http, url)
    assert response.status_code == 400 and response.context["code"] == "invalid_client"
    assert cimd.hits(PATH) == 0


# --- refusals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_url",
    [
        lambda server: server.url(PATH).replace("https://", "http://"),
        lambda server: server.url("/"),
        lambda server: server.url(PATH) + "#frag",
        lambda server: server.url(PATH).replace("https://", "https://user@"),
        lambda server: server.url("/clients/../claude.json"),
        lambda server: server.url("/clients/./claude.json"),
        lambda server: server.url("/" + "a" * 520),
        lambda server: "ftp://127.0.0.1/claude.json",
    ],
    ids=["http", "root-path", "fragment", "userinfo", "dot-dot", "dot", "too-long", "ftp"],
)
def test_a_client_id_that_is_no_https_document_url_is_refused_unfetched(http, sign_in_client, cimd, make_url):
    serve(cimd)
    response, _ = authorize(http, make_url(cimd))
    assert_refused(response, "url_invalid")
    assert cimd.hits(PATH) == 0


def test_a_loopback_document_is_refused_without_allow_private(http, sign_in_client, cimd, settings):
    settings.BAILING_CIMD_ALLOW_PRIVATE = False
    url = serve(cimd)
    assert_refused(authorize(http, url)[0], "target_forbidden")
    assert cimd.hits(PATH) == 0  # refused before connecting


def test_a_name_resolving_to_a_private_address_is_refused(
    http, sign_in_client, cimd, settings, stand_in_resolver, loopback_only
):
    settings.BAILING_CIMD_ALLOW_PRIVATE = False
    stand_in_resolver({"docs.example.com": [["93.184.215.14", "10.1.2.3"]]})
    response, _ = authorize(http, "https://docs.example.com/client.json")
    assert_refused(response, "target_forbidden")
    assert loopback_only == []


def test_link_local_is_refused_even_with_allow_private(http, sign_in_client, cimd, loopback_only):
    response, _ = authorize(http, "https://169.254.169.254/latest/meta-data.json")
    assert_refused(response, "target_forbidden")
    assert loopback_only == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (Answer(status=302, headers={"Location": "/clients/other.json"}), "redirect"),
        (Answer(status=301, headers={"Location": "https://elsewhere.example/c.json"}), "redirect"),
        (Answer(status=404, body=b"{}"), "http_status"),
        (Answer(status=500, body=b"{}"), "http_status"),
        (Answer(body=b"{}", headers={"Content-Type": "text/html"}), "content_type"),
        (
            Answer(body=b"{}", headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}),
            "content_type",
        ),
        (Answer(body=b'{"client_id": '), "invalid_json"),
        (Answer(body=b"[1, 2]"), "invalid_json"),
        (Answer(body=b"\xff\xfe{}"), "invalid_json"),
        (Answer(body=b" " * (5 * 1024 + 1)), "too_large"),
        (Answer(body=b" " * (5 * 1024 + 1), content_length=False), "too_large"),
    ],
    ids=[
        "302-same-host",
        "301-other-host",
        "404",
        "500",
        "html",
        "gzip",
        "truncated-json",
        "json-array",
        "not-utf8",
        "over-5k",
        "over-5k-unannounced",
    ],
)
def test_a_bad_answer_is_refused(http, sign_in_client, cimd, answer, reason):
    url = cimd.put(PATH, answer)
    assert_refused(authorize(http, url)[0], reason)
    assert OAuthClient.objects.count() == 0


def test_a_url_of_200_characters_is_accepted(http, sign_in_client, cimd):
    prefix = cimd.url("/")
    path = "/" + "a" * (200 - len(prefix)) + ".json"
    path = path[: 200 - len(prefix) + 1]
    url = serve(cimd, path)
    assert len(url) == 200
    consent_id(authorize(http, url)[0])
    response, _ = authorize(http, serve(cimd, path[:-1] + "ab"))
    assert response.status_code == 400 and response.context["field"] == "client_id (url_invalid)"
    assert AgentAuthorization.objects.count() == 1


def test_a_document_of_exactly_5_kib_is_accepted(http, sign_in_client, cimd):
    url = cimd.url(PATH)
    body = document(url)
    raw = json.dumps(body).encode()
    padded = raw[:-1] + b" " * (5 * 1024 - len(raw)) + b"}"
    assert len(padded) == 5 * 1024
    cimd.put(PATH, Answer(body=padded))
    consent_id(authorize(http, url)[0])


def test_a_slow_server_is_cut_off_at_the_deadline(http, sign_in_client, cimd, settings):
    settings.BAILING_CIMD_TIMEOUT = 0.5
    url = cimd.put(PATH, Answer(body=b"{}", delay=1.5))
    assert_refused(authorize(http, url)[0], "timeout")


def test_a_dripping_body_is_cut_off_at_the_total_deadline(http, sign_in_client, cimd, settings):
    """Each byte arrives well within any per-read timeout; the whole body does not within the total."""
    settings.BAILING_CIMD_TIMEOUT = 0.6
    url = cimd.url(PATH)
    body = json.dumps(document(url)).encode()
    cimd.put(PATH, Answer(body=body, drip=0.05))
    assert_refused(authorize(http, url)[0], "timeout")


def test_the_default_deadline_is_five_seconds(settings):
    from bailing import settings as hub_settings

    assert hub_settings.BAILING_CIMD_TIMEOUT == 5.0


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"client_id": "https://elsewhere.example/claude.json"}, "client_id_mismatch"),
        ({"client_id": None}, "client_id_mismatch"),
        ({"client_id_trailing_slash": True}, "client_id_mismatch"),
        ({"client_secret": "s3cret"}, "invalid_metadata"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "invalid_metadata"),
        ({"client_name": None}, "invalid_metadata"),
        ({"client_name": "bad\u202ename"}, "invalid_metadata"),
        ({"redirect_uris": None}, "invalid_metadata"),
        ({"redirect_uris": ["ftp://127.0.0.1/cb"]}, "invalid_metadata"),
        ({"redirect_uris": "http://127.0.0.1:33418/callback"}, "invalid_metadata"),
        ({"grant_types": ["client_credentials"]}, "invalid_metadata"),
        ({"application_type": "web"}, "invalid_metadata"),  # web with a loopback redirect
    ],
    ids=lambda value: value if isinstance(value, str) else next(iter(value)),
)
def test_a_document_that_cannot_identify_its_client_is_refused(http, sign_in_client, cimd, overrides, reason):
    url = cimd.url(PATH)
    body = document(
        url, **{key: value for key, value in overrides.items() if key != "client_id_trailing_slash"}
    )
    if "client_id" in overrides and overrides["client_id"] is None:
        body.pop("client_id", None)
    if overrides.get("client_id_trailing_slash"):
        body["client_id"] = url + "/"
    cimd.put(PATH, Answer(body=json.dumps(body).encode()))
    assert_refused(authorize(http, url)[0], reason)


def test_a_redirect_uri_not_in_the_document_is_refused_exactly(http, sign_in_client, cimd):
    url = serve(cimd)
    # Another loopback port (a registration would accept it, RFC 8252 §7.3), a trailing slash, a query.
    for presented in (
        "http://127.0.0.1:33419/callback",
        REDIRECT + "/",
        REDIRECT + "?x=1",
        "https://evil.example/callback",
    ):
        response, _ = authorize(http, url, redirect_uri=presented)
        assert response.status_code == 400 and "Location" not in response
        assert response.context["code"] == "invalid_redirect_uri"
    assert AgentAuthorization.objects.count() == 0


def test_an_unproven_https_redirect_gets_no_error_redirect(http, sign_in_client, cimd):
    """A document anyone can host may list any https redirect: until a sign-in completed, errors stay
    on the hub's page (RFC 9700 §4.11.2), as for registrations."""
    url = serve(cimd, redirect_uris=["https://app.example.com/cb"])
    response, _ = authorize(http, url, redirect_uri="https://app.example.com/cb", scope="knowledge:write")
    assert response.status_code == 400 and "Location" not in response
    assert response.context["code"] == "invalid_scope"


def test_a_loopback_redirect_gets_error_redirects_with_iss(http, sign_in_client, cimd):
    url = serve(cimd)
    response, _ = authorize(http, url, scope="knowledge:write")
    assert response.status_code == 302
    assert parse_qs(urlsplit(response["Location"]).query) == {
        "error": ["invalid_scope"],
        "state": ["state-0123456789"],
        "iss": [PUBLIC],
    }


def test_a_registration_id_is_never_taken_for_a_url(http, sign_in_client, cimd):
    url = serve(cimd)
    OAuthClient.objects.create(
        client_id=url, hub_client=sign_in_client, client_name="x", redirect_uris=[REDIRECT]
    )
    assert_refused(authorize(http, url)[0], "url_invalid")


# --- cache ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_control", "fetches"),
    [
        (None, 1),
        ("max-age=60", 1),
        ("public, max-age=600", 1),
        ("no-store", 2),
        ("no-cache", 2),
        ("max-age=0", 2),
        ("private, no-store, max-age=600", 2),
    ],
)
def test_the_cache_honours_cache_control(http, sign_in_client, cimd, cache_control, fetches):
    url = serve(cimd, cache_control=cache_control)
    consent_id(authorize(http, url)[0])
    consent_id(authorize(http, url)[0])
    assert cimd.hits(PATH) == fetches


def test_cache_lifetimes_have_a_default_and_a_cap():
    assert cache_seconds(None) == CACHE_DEFAULT_SECONDS == 300
    assert cache_seconds("max-age=120") == 120
    assert cache_seconds("max-age=9999999") == CACHE_MAX_SECONDS == 3600
    assert cache_seconds("no-store") == cache_seconds("No-Cache") == 0
    assert cache_seconds("must-revalidate") == CACHE_DEFAULT_SECONDS


def test_the_cache_expires_entries(http, sign_in_client, cimd, monkeypatch):
    url = serve(cimd, cache_control="max-age=60")
    consent_id(authorize(http, url)[0])
    later = cimd_module.cache_clock() + 61
    monkeypatch.setattr(cimd_module, "cache_clock", lambda: later)
    consent_id(authorize(http, url)[0])
    assert cimd.hits(PATH) == 2


def test_the_cache_is_a_size_capped_lru(http, sign_in_client, cimd, settings):
    settings.BAILING_CIMD_CACHE_SIZE = 2
    urls = [serve(cimd, f"/c{n}.json") for n in range(3)]
    for url in urls[:2]:
        consent_id(authorize(http, url)[0])
    consent_id(authorize(http, urls[0])[0])  # c0 is now the most recently used
    consent_id(authorize(http, urls[2])[0])  # evicts c1
    assert cimd_cache_size() == 2
    consent_id(authorize(http, urls[0])[0])
    consent_id(authorize(http, urls[1])[0])
    assert [cimd.hits(f"/c{n}.json") for n in range(3)] == [1, 2, 1]


def test_a_refused_document_is_not_cached(http, sign_in_client, cimd):
    url = cimd.put(PATH, Answer(status=503, body=b"{}"))
    assert_refused(authorize(http, url)[0], "http_status")
    serve(cimd)
    consent_id(authorize(http, url)[0])
    assert cimd.hits(PATH) == 2


def test_fetches_are_rate_limited_per_caller(http, sign_in_client, cimd, monkeypatch):
    monkeypatch.setattr(cimd_module, "FETCHES_PER_MINUTE", 2)
    url = serve(cimd, cache_control="no-store")
    for _ in range(2):
        consent_id(authorize(http, url)[0])
    response, _ = authorize(http, url)
    assert response.status_code == 429 and response.context["code"] == "rate_limited"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert cimd.hits(PATH) == 2
    # Another caller address has its own budget.
    consent_id(authorize(HttpClient(REMOTE_ADDR="192.0.2.7"), url)[0])


# --- iss stays an OAuth matter ------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_agent_auth_v1_redirects_carry_no_iss(start_hub_login, decision):
    from agent_runtime.services.agent_auth.authorizations import authorization_deny

    login = start_hub_login()
    if decision == "approve":
        redirect = approve(login.authorization.id, routes=("orders",))
    else:
        redirect = authorization_deny(
            authorization_id=login.authorization.id, client=None, actor=Actor("user", "ada")
        )
    query = parse_qs(urlsplit(redirect).query)
    assert "iss" not in query and query["state"] == [login.state]
