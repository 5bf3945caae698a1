"""``/mcp/<route>``: the workspace's MCP Streamable HTTP endpoint, and its OAuth resource metadata.

``POST`` answers one JSON-RPC message with ``application/json`` (never a stream, never a session
id). ``GET`` (a server-to-client event stream) and ``DELETE`` (ending a session) are 405: this
server keeps neither. The agent bearer is Agent Auth v1's, revalidated on every request exactly as
the REST API does, then the route gate; without a usable bearer the answer is 401 whose
``WWW-Authenticate`` points at the endpoint's protected-resource metadata (RFC 9728), so a generic
MCP client can discover the hub's OAuth sign-in (``/.well-known/oauth-authorization-server``).

Body rules: ``Content-Type: application/json``; at most 2 MiB read (past that 413
``arguments_too_large`` with ``limit_scope: request_body`` before the body is parsed, as the REST
invocation endpoint); duplicate keys, lone surrogates and NaN are a JSON-RPC parse error.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from agent_runtime.api.authentication import AgentBearerAuthentication
from agent_runtime.selectors.routes import agent_route_key_valid, route_for_identity
from agent_runtime.services.agent_auth.oauth import OAUTH_SCOPE, mcp_resource_url
from bailing.api.authentication import bearer_token
from bailing.api.errors import (
    ApiError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    RequestBodyTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from bailing.api.exception_handler import api_error_response
from bailing.api.parsers import parse_json_bytes, read_budgeted
from mcp_server.budgets import MCP_BODY_MAX_BYTES
from mcp_server.errors import OriginNotAllowed
from mcp_server.protocol import exchange, parse_error
from mcp_server.services.workspace_tools import WorkspaceTools

SCOPES = [OAUTH_SCOPE]

try:
    SERVER_VERSION = version("bailing-hub")
except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
    SERVER_VERSION = "0"


def resource_metadata_url(route: str) -> str:
    return f"{settings.BAILING_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp/{route}"


def _unauthorized(route: str, *, token_presented: bool) -> HttpResponse:
    challenge = f'Bearer resource_metadata="{resource_metadata_url(route)}", scope="{" ".join(SCOPES)}"'
    if token_presented:
        challenge += ', error="invalid_token"'
    response = api_error_response(Unauthorized())
    response["WWW-Authenticate"] = challenge
    return response


def _headers(request) -> dict[str, str]:
    """Request headers keyed by lowercase name (as the SDK's inbound checks expect)."""
    return {name.lower(): value for name, value in request.headers.items()}


def _json(body: dict, status: int) -> HttpResponse:
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return HttpResponse(data, status=status, content_type="application/json")


@method_decorator(csrf_exempt, name="dispatch")
class McpEndpoint(View):
    http_method_names = ["get", "post", "delete"]
    body_max_bytes = MCP_BODY_MAX_BYTES

    def _not_allowed(self) -> HttpResponse:
        response = api_error_response(
            MethodNotAllowed("This endpoint answers POST only: it keeps no stream and no session.")
        )
        response["Allow"] = "POST"
        return response

    def get(self, request, route: str):
        return self._not_allowed()

    def delete(self, request, route: str):
        return self._not_allowed()

    def post(self, request, route: str):
        if not agent_route_key_valid(route):
            return api_error_response(NotFound())
        origin = request.headers.get("Origin")
        if origin is not None and origin != _public_origin():
            # DNS rebinding: a page of another origin must never drive the endpoint (MCP transport
            # rules). Native clients send no Origin; the console's own origin is the hub's.
            return api_error_response(OriginNotAllowed())
        try:
            authenticated = AgentBearerAuthentication().authenticate(request)
        except ApiError:
            return _unauthorized(route, token_presented=bearer_token(request) is not None)
        identity = authenticated[1]
        try:
            access = route_for_identity(identity=identity, route_key=route)
        except ApiError as exc:
            return api_error_response(exc)
        content_type = request.META.get("CONTENT_TYPE", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return api_error_response(UnsupportedMediaType())
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return api_error_response(InvalidRequest("The Content-Length is not a number."))
        if declared > self.body_max_bytes:
            return api_error_response(
                RequestBodyTooLarge(max_bytes=self.body_max_bytes, observed_bytes=declared)
            )
        try:
            raw = read_budgeted(request, self.body_max_bytes)
        except RequestBodyTooLarge as exc:
            return api_error_response(exc)
        try:
            message = parse_json_bytes(raw)
        except InvalidRequest:
            reply = parse_error()
        else:
            host = WorkspaceTools(identity=identity, access=access, server_version=SERVER_VERSION)
            reply = exchange(message, _headers(request), host)
        if reply.body is None:
            return HttpResponse(status=202)
        return _json(reply.body, reply.status)


def _public_origin() -> str:
    parts = urlsplit(settings.BAILING_PUBLIC_URL)
    return f"{parts.scheme}://{parts.netloc}"


def protected_resource_metadata(request, route: str):
    """RFC 9728 metadata of ``/mcp/<route>`` (any well-formed route key: existence is not revealed)."""
    if request.method != "GET":
        response = api_error_response(MethodNotAllowed("GET only."))
        response["Allow"] = "GET"
        return response
    if not agent_route_key_valid(route):
        return api_error_response(NotFound())
    response = JsonResponse(
        {
            "resource": mcp_resource_url(route),
            "authorization_servers": [settings.BAILING_PUBLIC_URL],
            "scopes_supported": SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": f"Bailing Hub workspace {route}",
        }
    )
    response["Cache-Control"] = "no-store"
    return response
