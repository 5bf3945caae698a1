"""Contract of ``/mcp/<route>``: sign-in challenge, envelope and both protocol eras, over HTTP.

Real PostgreSQL and the real agent bearer; JSON-RPC codes and HTTP statuses are asserted, never
message texts. The SDK-driven end-to-end flows are in ``test_sdk_client.py``.
"""

from __future__ import annotations

import json

import pytest
from mcp_types import methods as wire

from agent_runtime.models import Route
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory
from tests.mcp_server.support import (
    HANDSHAKE,
    MODERN,
    mcp_url,
    modern_headers,
    modern_message,
    post_legacy,
    post_modern,
    post_raw,
)

pytestmark = pytest.mark.django_db

ROUTE = "handbook"
PUBLIC = "http://hub.test"


@pytest.fixture(autouse=True)
def public_url(settings):
    settings.BAILING_PUBLIC_URL = PUBLIC


@pytest.fixture
def route():
    return RouteFactory(route_key=ROUTE)


@pytest.fixture
def session(route):
    client = ClientFactory(hub_consent=True, allowed_routes=[ROUTE])
    return AgentSessionFactory(client=client, allowed_routes=[ROUTE])


@pytest.fixture
def token(session):
    return session._access


# --- sign-in ---------------------------------------------------------------------------------------


def test_without_a_bearer_the_answer_points_at_the_protected_resource_metadata(client, route):
    response = post_raw(client, ROUTE, json.dumps(modern_message("tools/list")), token=None)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{PUBLIC}/.well-known/oauth-protected-resource/mcp/{ROUTE}"' in challenge
    assert "invalid_token" not in challenge
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("bad", ["bha_" + "x" * 40, "not-a-token"])
def test_a_wrong_bearer_is_an_invalid_token_challenge(client, route, bad):
    response = post_raw(client, ROUTE, json.dumps(modern_message("tools/list")), token=bad)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_a_revoked_session_is_refused_on_the_next_request(client, session, token):
    assert post_modern(client, ROUTE, token, "tools/list").status_code == 200
    from django.utils import timezone

    type(session).objects.filter(pk=session.pk).update(revoked_at=timezone.now())
    assert post_modern(client, ROUTE, token, "tools/list").status_code == 401


def test_protected_resource_metadata(client):
    response = client.get(f"/.well-known/oauth-protected-resource/mcp/{ROUTE}")
    assert response.status_code == 200
    body = response.json()
    assert body["resource"] == f"{PUBLIC}/mcp/{ROUTE}"
    assert body["authorization_servers"] == [PUBLIC]
    assert body["scopes_supported"] == ["knowledge:read", "tools:read", "tools:call"]
    assert body["bearer_methods_supported"] == ["header"]


def test_protected_resource_metadata_refuses_a_malformed_route(client):
    assert client.get("/.well-known/oauth-protected-resource/mcp/%20x").status_code == 404


@pytest.mark.parametrize(
    ("setup", "status", "code"),
    [
        ("not_allowed", 403, "route_not_allowed"),
        ("disabled", 404, "route_unavailable"),
        ("runtime_off", 403, "agent_client_disabled"),
    ],
)
def test_the_route_gate_runs_before_any_message(client, session, token, setup, status, code):
    if setup == "not_allowed":
        type(session).objects.filter(pk=session.pk).update(allowed_routes=["elsewhere"])
    elif setup == "disabled":
        Route.objects.filter(route_key=ROUTE).update(enabled=False)
    else:
        Route.objects.filter(route_key=ROUTE).update(agent_client={"enabled": False})
    response = post_modern(client, ROUTE, token, "tools/list")
    assert response.status_code == status
    assert response.json()["error"] == code


# --- HTTP envelope ---------------------------------------------------------------------------------


def test_a_foreign_web_origin_is_refused_and_the_hubs_own_is_not(client, token):
    message = json.dumps(modern_message("tools/list"))
    headers = modern_headers(json.loads(message))
    foreign = post_raw(client, ROUTE, message, token=token, headers={**headers, "Origin": "http://evil.test"})
    assert foreign.status_code == 403
    assert foreign.json()["error"] == "origin_not_allowed"
    own = post_raw(client, ROUTE, message, token=token, headers={**headers, "Origin": PUBLIC})
    assert own.status_code == 200


@pytest.mark.parametrize("method", ["get", "delete"])
def test_no_stream_and_no_session_to_delete(client, token, method):
    response = getattr(client, method)(mcp_url(ROUTE), HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405
    assert response["Allow"] == "POST"


@pytest.mark.parametrize("method", ["get", "put"])
def test_other_methods_are_refused_before_the_bearer_is_read(client, method):
    response = getattr(client, method)(mcp_url(ROUTE))
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"
    assert response["Allow"] == "POST"


def test_an_empty_body_is_a_parse_error(client, token):
    # The test client sends no Content-Type with an empty body unless told to.
    response = client.generic(
        "POST", mcp_url(ROUTE), b"", CONTENT_TYPE="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_the_answer_is_json_whatever_accept_lists(client, token):
    message = json.dumps(modern_message("tools/list"))
    headers = {**modern_headers(json.loads(message)), "Accept": "text/event-stream"}
    response = post_raw(client, ROUTE, message, token=token, headers=headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["result"]["tools"]


def test_the_body_must_be_json(client, token):
    response = post_raw(client, ROUTE, "x=1", token=token, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"


def test_an_oversized_body_is_refused_before_it_is_parsed(client, token):
    big = json.dumps(modern_message("tools/list", {"pad": "x" * (2 * 1024 * 1024)}))
    response = post_raw(client, ROUTE, big, token=token)
    assert response.status_code == 413
    assert response.json()["error"] == "arguments_too_large"


@pytest.mark.parametrize("raw", ["{", '{"a": 1, "a": 2}', "[NaN]", '"\\ud800"'])
def test_unparseable_json_is_a_parse_error(client, token, raw):
    response = post_raw(client, ROUTE, raw, token=token)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}],
        {"jsonrpc": "1.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": True, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]},
        {"jsonrpc": "2.0", "id": 1},
    ],
)
def test_not_a_single_request_is_an_invalid_request(client, token, body):
    response = post_raw(client, ROUTE, json.dumps(body), token=token)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_notifications_and_responses_are_acknowledged_without_a_body(client, token):
    for body in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}},
        {"jsonrpc": "2.0", "id": 9, "result": {}},
    ):
        response = post_raw(client, ROUTE, json.dumps(body), token=token)
        assert response.status_code == 202
        assert response.content == b""
    assert not response.has_header("Mcp-Session-Id")


# --- the 2026-07-28 wire -----------------------------------------------------------------------------


def test_discover_names_every_supported_revision(client, token):
    response = post_modern(client, ROUTE, token, "server/discover")
    assert response.status_code == 200
    result = response.json()["result"]
    wire.validate_server_result("server/discover", MODERN, result)
    assert set(result["supportedVersions"]) == {"2025-03-26", "2025-06-18", "2025-11-25", MODERN}
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "private" and result["ttlMs"] >= 0
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bailing-hub"
    assert not response.has_header("Mcp-Session-Id")


def test_tools_list_on_the_modern_wire_is_valid_and_cacheable_privately(client, token):
    response = post_modern(client, ROUTE, token, "tools/list")
    result = response.json()["result"]
    wire.validate_server_result("tools/list", MODERN, result)
    assert [tool["name"] for tool in result["tools"]] == ["search_knowledge", "ask_knowledge"]
    assert result["cacheScope"] == "private"


@pytest.mark.parametrize(
    "headers",
    [
        {"MCP-Protocol-Version": "2025-11-25"},  # disagrees with the envelope (a legacy header)
        {"Mcp-Method": "tools/call"},
    ],
)
def test_headers_that_disagree_with_the_envelope_are_a_header_mismatch(client, token, headers):
    message = modern_message("tools/list")
    # A handshake-era header with a modern envelope: the envelope decides the era, the header mismatches.
    merged = {**modern_headers(message), **headers}
    response = post_raw(client, ROUTE, json.dumps(message), token=token, headers=merged)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_a_wrong_mcp_name_header_is_a_header_mismatch(client, token):
    message = modern_message("tools/call", {"name": "search_knowledge", "arguments": {"query": "x"}})
    headers = {**modern_headers(message), "Mcp-Name": "ask_knowledge"}
    response = post_raw(client, ROUTE, json.dumps(message), token=token, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_a_missing_envelope_key_is_invalid_params(client, token):
    message = modern_message("tools/list")
    del message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    response = post_raw(client, ROUTE, json.dumps(message), token=token, headers=modern_headers(message))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_an_unknown_modern_revision_is_unsupported_with_the_supported_list(client, token):
    message = modern_message("tools/list", **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    headers = {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"}
    response = post_raw(client, ROUTE, json.dumps(message), token=token, headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"]["supported"] == [MODERN] and error["data"]["requested"] == "2099-01-01"


def test_handshake_only_methods_do_not_exist_on_the_modern_wire(client, token):
    for method in ("initialize", "ping"):
        params = {"protocolVersion": MODERN, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        response = post_modern(client, ROUTE, token, method, params if method == "initialize" else None)
        assert response.status_code == 404, method
        assert response.json()["error"]["code"] == -32601


def test_an_unserved_method_is_method_not_found(client, token):
    response = post_modern(client, ROUTE, token, "resources/list")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


def test_malformed_tool_call_params_are_invalid_params(client, token):
    response = post_modern(client, ROUTE, token, "tools/call", {"name": "search_knowledge", "arguments": "x"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_an_unknown_tool_is_invalid_params(client, token):
    response = post_modern(client, ROUTE, token, "tools/call", {"name": "nope", "arguments": {}})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_a_cursor_is_refused_because_one_page_holds_every_tool(client, token):
    response = post_modern(client, ROUTE, token, "tools/list", {"cursor": "abc"})
    assert response.json()["error"]["code"] == -32602


# --- the handshake era (2025-03-26 … 2025-11-25) -----------------------------------------------------


@pytest.mark.parametrize(
    ("offered", "answered"),
    [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", HANDSHAKE),
    ],
)
def test_initialize_answers_the_clients_revision_or_the_latest(client, token, offered, answered):
    params = {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = post_legacy(client, ROUTE, token, "initialize", params, version=None)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["protocolVersion"] == answered
    assert result["serverInfo"]["name"] == "bailing-hub"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert "resultType" not in result
    assert not response.has_header("Mcp-Session-Id")
    wire.validate_server_result("initialize", answered, result)


def test_handshake_requests_need_no_session(client, token):
    assert post_legacy(client, ROUTE, token, "ping").json()["result"] == {}
    result = post_legacy(client, ROUTE, token, "tools/list").json()["result"]
    assert "ttlMs" not in result and "resultType" not in result
    wire.validate_server_result("tools/list", HANDSHAKE, result)
    # No header at all means 2025-03-26.
    assert post_legacy(client, ROUTE, token, "tools/list", version=None).status_code == 200


def test_an_unsupported_version_header_is_400(client, token):
    response = post_legacy(client, ROUTE, token, "tools/list", version="1999-01-01")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32022


def test_handshake_errors_are_json_rpc_errors_with_200(client, token):
    response = post_legacy(client, ROUTE, token, "resources/list")
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32601
    response = post_legacy(client, ROUTE, token, "tools/call", {"name": "nope"})
    assert response.json()["error"]["code"] == -32602


def test_the_request_id_is_echoed_as_sent(client, token):
    for request_id in ("abc", 0, 2**40):
        body = post_legacy(client, ROUTE, token, "ping", request_id=request_id).json()
        assert body["id"] == request_id
