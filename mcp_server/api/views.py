"""``/mcp/<route>``: the workspace's MCP Streamable HTTP endpoint, and its OAuth resource metadata.

``POST`` answers one JSON-RPC message with ``application/json`` (never a stream, never a session
id). ``GET`` (a server-to-client event stream) and ``DELETE`` (ending a session) are 405: this
server keeps neither. Both views are DRF views on the REST surfaces' machinery: the agent bearer
(:class:`~agent_runtime.api.base.AgentApiView`, revalidated on every request), the budgeted JSON
parser and the one exception handler; only the MCP transport's own answers are this module's:

* without a usable bearer the answer is 401 whose ``WWW-Authenticate`` points at the endpoint's
  protected-resource metadata (RFC 9728), so a generic MCP client can discover the hub's OAuth
  sign-in (``/.well-known/oauth-authorization-server``);
* a request from a foreign web ``Origin`` is 403 ``origin_not_allowed`` (DNS rebinding);
* a body that is not JSON (duplicate keys, lone surrogates and NaN included, or no body at all) is
  the JSON-RPC parse error, not 400 ``invalid_request``; a notification is 202 without a body;
* the answer is JSON whatever ``Accept`` lists (MCP clients list ``text/event-stream`` too).

Body rules are the REST ones: ``Content-Type: application/json`` (else 415); at most 2 MiB read (past
that 413 ``arguments_too_large`` with ``limit_scope: request_body`` before the body is parsed, as
the REST invocation endpoint). Checks run in this order: method, route key, ``Origin``, bearer,
route gate, body.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.api.base import AgentApiView
from agent_runtime.errors import InsufficientScope
from agent_runtime.identity import SCOPES
from agent_runtime.selectors.routes import agent_route_key_valid, route_for_identity
from agent_runtime.services.agent_auth.oauth import mcp_resource_url
from bailing.api.authentication import bearer_token
from bailing.api.errors import InvalidRequest, MethodNotAllowed, NotFound, Unauthorized
from bailing.api.parsers import BudgetedJSONParser, parse_json_bytes
from mcp_server.budgets import MCP_BODY_MAX_BYTES
from mcp_server.errors import OriginNotAllowed
from mcp_server.services.workspace_tools import WorkspaceTools

try:
    SERVER_VERSION = version("bailing-hub")
except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
    SERVER_VERSION = "0"

# What the JSON-RPC parser returns for a body that is not JSON.
NOT_JSON: Any = object()


def resource_metadata_url(route: str) -> str:
    return f"{settings.BAILING_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp/{route}"


class JsonRpcParser(BudgetedJSONParser):
    """The REST surfaces' parser (same byte budget, same strict JSON), except that a body that is
    not JSON is :data:`NOT_JSON`, answered with the JSON-RPC parse error."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = self.read(stream, parser_context)
        try:
            return parse_json_bytes(raw)
        except InvalidRequest:
            return NOT_JSON


class AnswerJson(DefaultContentNegotiation):
    """Parsers are chosen by ``Content-Type`` as everywhere (else 415); the answer is always JSON."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class McpEndpoint(AgentApiView):
    http_method_names = ["post"]
    body_max_bytes = MCP_BODY_MAX_BYTES
    parser_classes = [JsonRpcParser]
    content_negotiation_class = AnswerJson
    # Checked per MCP method and tool (mcp_server.services.workspace_tools).
    required_scopes = ()

    def initial(self, request, *args, **kwargs):
        # Before the bearer is read: what the endpoint refuses whoever asks.
        if request.method != "POST":
            raise MethodNotAllowed("This endpoint answers POST only: it keeps no stream and no session.")
        if not agent_route_key_valid(kwargs["route"]):
            raise NotFound()
        origin = request.headers.get("Origin")
        if origin is not None and origin != _public_origin() and origin not in settings.CORS_ALLOWED_ORIGINS:
            # DNS rebinding: a page of another origin must never drive the endpoint (MCP transport
            # rules). Native clients send no Origin; the console's own origin is the hub's, and a
            # browser-based client's origin must be on BAILING_MCP_CORS_ORIGINS.
            raise OriginNotAllowed()
        super().initial(request, *args, **kwargs)
        resource = self.identity.session.resource
        if resource and resource != mcp_resource_url(kwargs["route"]):
            # RFC 8707 audience: a token issued for another workspace's MCP endpoint (or for this
            # one under another public URL) is not a token of this endpoint (docs/protocol.md
            # "Audience"). Agent Auth v1 tokens have no resource: the route gate decides for them.
            raise Unauthorized()

    def handle_exception(self, exc):
        metadata = f'resource_metadata="{resource_metadata_url(self.kwargs["route"])}"'
        if isinstance(exc, Unauthorized):
            challenge = f'Bearer {metadata}, scope="{" ".join(SCOPES)}"'
            if bearer_token(self.request) is not None:
                challenge += ', error="invalid_token"'
            exc.headers["WWW-Authenticate"] = challenge
        elif isinstance(exc, InsufficientScope):
            # MCP "Scope challenge handling": every scope the operation needs, in one challenge.
            required = " ".join(exc.extra["required_scopes"])
            exc.headers["WWW-Authenticate"] = (
                f'Bearer {metadata}, error="insufficient_scope", scope="{required}"'
            )
        return super().handle_exception(exc)

    def post(self, request, route: str):
        # The protocol layer (and with it the MCP SDK's types, ~0.7 s to import) is loaded on the first
        # MCP request, not with the URLconf: a management command's system checks load every view.
        # A server loads it before its workers fork (bailing/wsgi.py).
        from mcp_server.protocol import exchange, parse_error

        access = route_for_identity(identity=self.identity, route_key=route)
        message = request.data
        # DRF hands no parser an empty body; empty is not JSON either.
        if message is NOT_JSON or request.stream is None:
            reply = parse_error()
        else:
            host = WorkspaceTools(identity=self.identity, access=access, server_version=SERVER_VERSION)
            reply = exchange(message, _headers(request), host)
        if reply.body is None:
            return Response(status=202)
        return Response(reply.body, status=reply.status)


def _headers(request) -> dict[str, str]:
    """Request headers keyed by lowercase name (as the SDK's inbound checks expect)."""
    return {name.lower(): value for name, value in request.headers.items()}


def _public_origin() -> str:
    parts = urlsplit(settings.BAILING_PUBLIC_URL)
    return f"{parts.scheme}://{parts.netloc}"


class McpResourceMetadataApi(APIView):
    """RFC 9728 metadata of ``/mcp/<route>`` (any well-formed route key: existence is not revealed)."""

    http_method_names = ["get"]
    content_negotiation_class = AnswerJson

    def get(self, request, route: str):
        if not agent_route_key_valid(route):
            raise NotFound()
        response = Response(
            {
                "resource": mcp_resource_url(route),
                "authorization_servers": [settings.BAILING_PUBLIC_URL],
                "scopes_supported": list(SCOPES),
                "bearer_methods_supported": ["header"],
                "resource_name": f"Bailing Hub workspace {route}",
            }
        )
        response["Cache-Control"] = "no-store"
        return response
