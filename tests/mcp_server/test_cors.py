"""CORS for browser-based MCP clients: off by default; with ``BAILING_MCP_CORS_ORIGINS`` only the listed
origins, only on the MCP, OAuth and metadata endpoints, never ``*`` and never credentials."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from bailing.settings import MCP_CORS_URLS_REGEX, _cors_origins
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory
from tests.mcp_server.support import modern_headers, modern_message, post_raw

pytestmark = pytest.mark.django_db
ROUTE = "handbook"
PUBLIC = "http://hub.test"
ALLOWED = "https://inspector.example"
ELSEWHERE = "https://evil.example"
PREFLIGHT = {
    "HTTP_ORIGIN": ALLOWED,
    "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST",
    "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "authorization, content-type, mcp-protocol-version",
}


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def cors(settings):
    """What BAILING_MCP_CORS_ORIGINS=https://inspector.example makes of the settings."""
    settings.CORS_ALLOWED_ORIGINS = _cors_origins([ALLOWED])
    settings.CORS_URLS_REGEX = MCP_CORS_URLS_REGEX


def _listed(value: str) -> set[str]:
    return {item.strip().lower() for item in value.split(",")}


def test_a_preflight_from_a_listed_origin_is_answered(client, cors):
    response = client.options(f"/mcp/{ROUTE}", **PREFLIGHT)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert {"post", "get", "options"} >= _listed(response["Access-Control-Allow-Methods"]) >= {"post"}
    assert _listed(response["Access-Control-Allow-Headers"]) >= {
        "authorization",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "mcp-method",
        "mcp-name",
    }
    assert "Access-Control-Allow-Credentials" not in response
    assert "origin" in _listed(response["Vary"])


def test_answers_to_a_listed_origin_expose_the_mcp_headers(client, cors):
    RouteFactory(route_key=ROUTE)
    message = modern_message("tools/list")
    response = post_raw(client, ROUTE, json.dumps(message), token=None, headers={"Origin": ALLOWED})
    assert response.status_code == 401  # the origin passes the DNS-rebinding check; the bearer does not
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert _listed(response["Access-Control-Expose-Headers"]) == {
        "www-authenticate",
        "mcp-session-id",
        "mcp-protocol-version",
    }
    assert "Access-Control-Allow-Credentials" not in response
    assert "origin" in _listed(response["Vary"])


def test_a_listed_origin_drives_the_endpoint_with_a_bearer(client, cors):
    RouteFactory(route_key=ROUTE)
    session = AgentSessionFactory(
        client=ClientFactory(hub_consent=True, allowed_routes=[ROUTE]), allowed_routes=[ROUTE]
    )
    message = modern_message("tools/list")
    headers = {**modern_headers(message), "Origin": ALLOWED}
    response = post_raw(client, ROUTE, json.dumps(message), token=session._access, headers=headers)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ALLOWED


def test_an_origin_not_listed_gets_no_cors_headers(client, cors):
    RouteFactory(route_key=ROUTE)
    preflight = client.options(f"/mcp/{ROUTE}", **{**PREFLIGHT, "HTTP_ORIGIN": ELSEWHERE})
    assert "Access-Control-Allow-Origin" not in preflight
    assert "Access-Control-Allow-Methods" not in preflight
    message = modern_message("tools/list")
    response = post_raw(client, ROUTE, json.dumps(message), token=None, headers={"Origin": ELSEWHERE})
    assert response.status_code == 403 and response.json()["error"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in response


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-authorization-server",
        f"/.well-known/oauth-protected-resource/mcp/{ROUTE}",
    ],
)
def test_the_metadata_is_readable_from_a_listed_origin(client, cors, path):
    response = client.get(path, HTTP_ORIGIN=ALLOWED)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == ALLOWED


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/register", "/oauth/revoke"])
def test_the_oauth_endpoints_answer_a_listed_origin(client, cors, path):
    assert client.options(path, **PREFLIGHT)["Access-Control-Allow-Origin"] == ALLOWED
    response = client.post(path, "x=1", content_type="application/x-www-form-urlencoded", HTTP_ORIGIN=ALLOWED)
    assert response.status_code in (400, 401)  # an error, readable by the browser client
    assert response["Access-Control-Allow-Origin"] == ALLOWED


@pytest.mark.parametrize("path", ["/console/", "/agent-api/v1/workspaces", "/oauth/authorize", "/healthz"])
def test_nothing_else_speaks_cors(client, cors, path):
    response = client.get(path, HTTP_ORIGIN=ALLOWED)
    assert "Access-Control-Allow-Origin" not in response


def test_off_by_default(client, settings):
    assert settings.CORS_ALLOWED_ORIGINS == []
    RouteFactory(route_key=ROUTE)
    preflight = client.options(f"/mcp/{ROUTE}", **PREFLIGHT)
    assert preflight.status_code == 405  # as without CORS: the endpoint answers POST only
    assert "Access-Control-Allow-Origin" not in preflight
    assert "Vary" not in preflight or "origin" not in _listed(preflight["Vary"])
    metadata = client.get("/.well-known/oauth-authorization-server", HTTP_ORIGIN=ALLOWED)
    assert "Access-Control-Allow-Origin" not in metadata


@pytest.mark.parametrize(
    "origin",
    [
        "*",
        "https://*.example.com",
        "null",
        "https://app.example/",
        "https://app.example/path",
        "HTTPS://APP.EXAMPLE",
        "ftp://app.example",
        "app.example",
        "https://user@app.example",
    ],
)
def test_only_exact_origins_are_accepted(origin):
    with pytest.raises(ImproperlyConfigured):
        _cors_origins([origin])


def test_exact_origins_with_ports_are_kept():
    assert _cors_origins(["https://app.example", " http://localhost:6274 ", ""]) == [
        "https://app.example",
        "http://localhost:6274",
    ]
