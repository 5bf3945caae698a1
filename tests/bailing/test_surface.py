"""The agent surfaces' plumbing, endpoint by endpoint as the URLconf lists them: the flat error envelope
(DRF's and Django's own errors included), ``Cache-Control: no-store`` on every response,
``Pragma: no-cache`` on the token endpoint, raw body budgets, and bad input that is never a 500.

The endpoint list is read from the URLconf, so a new endpoint under ``/agent-api/`` or ``/agent-auth/``
is covered without touching this file.
"""

from __future__ import annotations

import json
import re
import types
import uuid

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from agent_runtime.api.authentication import AgentBearerAuthentication, ClientTokenAuthentication
from bailing.api.parsers import MAX_JSON_DEPTH, body_budget
from bailing.api.views import ApiNotFound
from tests.factories import AgentSessionFactory, RouteFactory
from tests.support.module_rows import module_rows

pytestmark = pytest.mark.django_db

METHODS = ["get", "post", "put", "patch", "delete", "options", "head"]
ROUTE = "demo"
ANY_ID = str(uuid.UUID(int=1))
TOKEN_PATH = "/agent-auth/v1/token"


def _walk(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback


def _concrete(route: str) -> str:
    """A request path for a URLconf route: the workspace key is the fixture's route, ids are UUIDs."""

    def value(match: re.Match) -> str:
        return ROUTE if match.group("name") == "route" else ANY_ID

    return "/" + re.sub(r"<(?:\w+:)?(?P<name>\w+)>", value, route)


def agent_endpoints() -> list[tuple[str, type]]:
    endpoints = []
    for route, callback in _walk(get_resolver().url_patterns):
        view_class = getattr(callback, "view_class", None)
        if not route.startswith(("agent-api/", "agent-auth/")) or view_class is None:
            continue
        if view_class is ApiNotFound:
            continue
        endpoints.append((_concrete(route), view_class))
    return endpoints


ENDPOINTS = agent_endpoints()
POST_ENDPOINTS = [(path, view) for path, view in ENDPOINTS if hasattr(view, "post")]
IDS = [path for path, _ in ENDPOINTS]
POST_IDS = [path for path, _ in POST_ENDPOINTS]


def test_the_urlconf_lists_the_agent_auth_and_agent_api_endpoints():
    paths = set(IDS)
    assert TOKEN_PATH in paths
    assert "/agent-auth/v1/authorizations" in paths
    assert f"/agent-api/v1/workspaces/{ROUTE}/bootstrap" in paths
    assert len(POST_ENDPOINTS) >= 8


@pytest.fixture(scope="module")
def _credentials(django_db_setup, django_db_blocker):
    """One route and agent session for the module's hundreds of cases (tests/support/module_rows):
    the session's access token and its client's Client Token."""
    with module_rows(django_db_blocker):
        RouteFactory(route_key=ROUTE)
        session = AgentSessionFactory(allowed_routes=[ROUTE])
        yield types.SimpleNamespace(
            _access=session._access, client=types.SimpleNamespace(_token=session.client._token)
        )


@pytest.fixture
def caller(_credentials):
    """An API client that authenticates as each endpoint expects (agent bearer, Client Token, none)."""
    session = _credentials

    class Caller:
        def __init__(self):
            self.client = APIClient(raise_request_exception=False)
            self.session = session

        def headers(self, view) -> dict[str, str]:
            classes = getattr(view, "authentication_classes", [])
            if AgentBearerAuthentication in classes:
                return {"HTTP_AUTHORIZATION": f"Bearer {session._access}"}
            if ClientTokenAuthentication in classes:
                return {"HTTP_AUTHORIZATION": f"Bearer {session.client._token}"}
            return {}

        def send(self, method, path, view=None, body=None, content_type="application/json", **extra):
            headers = {**self.headers(view), **extra}
            if body is None:
                return getattr(self.client, method)(path, **headers)
            return self.client.generic(method.upper(), path, body, content_type=content_type, **headers)

    return Caller()


def assert_envelope(response, status=None, code=None):
    if status is not None:
        assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) >= {"error", "message"} and isinstance(body["message"], str)
    if code is not None:
        assert body["error"] == code
    return body


# --- every endpoint, every method ---------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("path", "view"), ENDPOINTS, ids=IDS)
def test_every_response_is_no_store_and_every_error_the_envelope(caller, path, view, method):
    response = caller.send(method, path, view)
    assert response.status_code < 500, response.content
    assert response["Cache-Control"] == "no-store"
    if path == TOKEN_PATH:
        assert response["Pragma"] == "no-cache"
    if method == "head":
        assert response.content == b""
    elif response.status_code >= 400:
        body = assert_envelope(response)
        if response.status_code == 405:
            assert body["error"] == "method_not_allowed"
            assert method.upper() not in response["Allow"]


@pytest.mark.parametrize(("path", "view"), ENDPOINTS, ids=IDS)
def test_options_is_405_and_reveals_nothing_about_the_view(caller, path, view):
    response = caller.send("options", path, view)
    assert_envelope(response, 405, "method_not_allowed")
    assert view.__name__ not in response.content.decode()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "path",
    [
        "/agent-api",
        "/agent-auth",
        "/agent-api/",
        "/agent-auth/",
        "/agent-api/v1/nope",
        "/agent-auth/v1/nope",
        "/agent-api/v2/workspaces",
        "/agent-auth/v1/token/",
        f"/agent-api/v1/workspaces/{ROUTE}/bootstrap/",
        "/agent-api/v1/workspaces/%FF/bootstrap/x",
    ],
)
def test_unknown_paths_answer_the_json_404_for_every_method(path, method):
    response = getattr(APIClient(), method)(path)
    assert response.status_code == 404
    assert response["Cache-Control"] == "no-store"
    if method != "head":
        assert_envelope(response, 404, "not_found")


@pytest.mark.parametrize("prefix", ["/agent-api/v1/workspaces", "/agent-auth/v1/session"])
def test_djangos_own_errors_become_the_envelope(prefix):
    # A Host header outside ALLOWED_HOSTS is refused by Django before any view runs.
    response = APIClient().get(prefix, HTTP_HOST="attacker.example")
    assert_envelope(response, 400, "invalid_request")


# --- bodies -------------------------------------------------------------------------------------------

MALFORMED = {
    "truncated": b'{"a":',
    "not_json": b"hello",
    "trailing_garbage": b"{} {}",
    "not_utf8": b'{"a":"\xff\xfe"}',
    "utf16": '{"a":1}'.encode("utf-16"),
    "array": b"[]",
    "array_of_objects": b'[{"a":1}]',
    "string": b'"x"',
    "number": b"1",
    "null": b"null",
    "nan": b'{"a":NaN}',
    "infinity": b'{"a":-Infinity}',
    "overflowing_number": b'{"a":1e999}',
    "overflowing_negative": b'{"a":{"b":[-1e999]}}',
    "huge_integer": b'{"a":' + b"9" * 4000 + b"}",
    "duplicate_key": b'{"a":1,"a":2}',
    "lone_surrogate_value": b'{"a":"\\ud800"}',
    "lone_surrogate_key": b'{"\\udc00":1}',
    "lone_surrogate_nested_key": b'{"a":{"b":[{"\\ud800x":1}]}}',
    "duplicate_lone_surrogate_key": b'{"\\ud800":1,"\\ud800":2}',
    # Bodies stay under 4 KiB (a smaller budget answers 413): deeper than the recursion limit, and
    # deeper than the parser's nesting limit but within the recursion limit.
    "deep_arrays": b"[" * 1800 + b"]" * 1800,
    "deep_objects": b'{"a":' * 600 + b"1" + b"}" * 600,
    "deep_just_over_the_limit": b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
@pytest.mark.parametrize(("path", "view"), POST_ENDPOINTS, ids=POST_IDS)
def test_malformed_bodies_are_invalid_request_never_a_500(caller, path, view, kind):
    response = caller.send("post", path, view, body=MALFORMED[kind])
    if len(MALFORMED[kind]) > body_budget(view):
        # Smaller budgets than the bodies (resume takes at most 1 KiB): the budget answers first.
        assert_envelope(response, 413, "arguments_too_large")
        return
    body = assert_envelope(response, 400, "invalid_request")
    assert "\\ud800" not in response.content.decode() and "\ud800" not in json.dumps(body)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/jsonx",
    ],
)
@pytest.mark.parametrize(("path", "view"), POST_ENDPOINTS, ids=POST_IDS)
def test_a_body_that_is_not_json_is_415(caller, path, view, content_type):
    response = caller.send("post", path, view, body=b'{"a":1}', content_type=content_type)
    assert_envelope(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(("path", "view"), POST_ENDPOINTS, ids=POST_IDS)
def test_a_body_over_the_endpoint_budget_is_413_before_parsing(caller, path, view):
    budget = body_budget(view)
    # Valid JSON would be accepted by a parser that ran first; the budget decides alone.
    raw = b'{"a":"' + b"x" * budget + b'"}'
    response = caller.send("post", path, view, body=raw)
    body = assert_envelope(response, 413, "arguments_too_large")
    assert body["origin"] == "core"
    assert body["dispatch"] == "not_dispatched"
    assert body["limit_scope"] == "request_body"
    assert body["max_bytes"] == budget
    assert budget < body["observed_bytes"] <= len(raw)
    assert "actual_bytes" not in body
    if path == TOKEN_PATH:
        assert response["Pragma"] == "no-cache"


def test_budgets_are_the_documented_ones():
    budgets = {path: body_budget(view) for path, view in POST_ENDPOINTS}
    assert budgets["/agent-auth/v1/authorizations"] == 16 * 1024
    assert budgets[TOKEN_PATH] == 8 * 1024
    assert budgets[f"/agent-api/v1/workspaces/{ROUTE}/turns"] == 512 * 1024
    assert budgets[f"/agent-api/v1/runs/{ANY_ID}/complete"] == 512 * 1024
    assert body_budget(None) == settings.BAILING_JSON_BODY_MAX_BYTES


# --- headers ------------------------------------------------------------------------------------------


# Endpoints that read a bearer: the authenticated ones, and self-revoke (an optional access token).
BEARER_ENDPOINTS = [
    (path, view)
    for path, view in ENDPOINTS
    if getattr(view, "authentication_classes", []) or path == "/agent-auth/v1/revoke"
]


@pytest.mark.parametrize("size", [300, 64 * 1024])
@pytest.mark.parametrize(("path", "view"), BEARER_ENDPOINTS, ids=[path for path, _ in BEARER_ENDPOINTS])
def test_huge_or_malformed_credentials_are_401(caller, path, view, size):
    method = "post" if hasattr(view, "post") else "get"
    for token in ("bha_" + "x" * size, "bct_" + "é" * size, "x" * size):
        response = caller.send(method, path, None, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert_envelope(response, 401, "unauthorized")
        if path != "/agent-auth/v1/revoke":
            assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize("accept", ["text/html", "text/event-stream", "image/png", "*/*", "application/json"])
@pytest.mark.parametrize(
    "path", ["/agent-api/v1/workspaces", "/agent-auth/v1/sessions/current", "/approvals/1/decision"]
)
def test_an_accept_header_the_api_cannot_honour_still_gets_the_json_answer(client, accept, path):
    # Before, DRF's NotAcceptable reached the handler as an unknown exception: a 500.
    response = client.get(path, HTTP_ACCEPT=accept)
    assert response.status_code < 500
    assert response["Content-Type"].startswith("application/json")
    assert "error" in response.json()
