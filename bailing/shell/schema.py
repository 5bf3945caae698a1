"""The OpenAPI document's composition (drf-spectacular hooks; docs/api.md "API reference").

What is in it: Agent Auth v1, Agent API v1 (the knowledge protocol included), the knowledge push API
and the business approval decision and state read. Not in it: the console (HTML), ``/oauth/*`` and the
``.well-known`` metadata (standard OAuth 2.1 / RFC 8414 / RFC 9728 surfaces with their own error
format, described by their RFCs and docs/protocol.md), and ``/mcp/<route>`` (JSON-RPC, described by
the MCP specification).

Every error is the flat envelope ``{error, message, ...extras}`` (the ``Error`` component). Each
operation lists, per status, the exact codes it can answer (an ``enum`` on ``error``), from the table
below plus the codes every endpoint of its kind can answer; ``arguments_too_large`` has its two
shapes (``limit_scope: request_body`` on every body, ``arguments`` on new tool invocations).
``tests/bailing/shell/test_openapi.py`` checks that the table covers ``all_error_classes()``.
"""

from __future__ import annotations

import re
from typing import Any

from bailing.api.errors import ApiError, all_error_classes

DOCUMENTED_PREFIXES = ("/agent-api/v1/", "/agent-auth/v1/", "/kb/", "/approvals/")
_BODY_METHODS = {"post", "put", "patch"}

_ROUTE_GATE = (
    "invalid_route",
    "route_not_allowed",
    "route_unavailable",
    "audience_not_allowed",
    "agent_client_disabled",
)
_KNOWLEDGE = (
    "knowledge_reference_invalid",
    "knowledge_reference_expired",
    "knowledge_scope_changed",
    "knowledge_changed",
    "knowledge_unavailable",
)

# (method, path template) -> codes beyond the common ones. Codes the hub answers outside this document
# (the console, the front, the MCP endpoint) are listed in HUB_ONLY_CODES.
OPERATION_ERRORS: dict[tuple[str, str], tuple[str, ...]] = {
    ("get", "/agent-api/v1/workspaces"): (),
    ("get", "/agent-api/v1/workspaces/{route}/bootstrap"): _ROUTE_GATE,
    ("post", "/agent-api/v1/workspaces/{route}/capabilities/search"): (
        *_ROUTE_GATE,
        "agent_direct_disabled",
        "run_not_found",
    ),
    ("get", "/agent-api/v1/tools"): (*_ROUTE_GATE, "agent_direct_disabled"),
    ("get", "/agent-api/v1/tools/{name}"): (
        *_ROUTE_GATE,
        "agent_direct_disabled",
        "capability_changed",
        "tool_not_found",
    ),
    ("post", "/agent-api/v1/workspaces/{route}/turns"): (
        *_ROUTE_GATE,
        "turn_conflict",
        "page_context_too_large",
        "task_control_unsupported",
        "knowledge_unavailable",
    ),
    ("post", "/agent-api/v1/runs/{run_id}/complete"): (
        "run_not_found",
        "run_completion_conflict",
        "assistant_message_conflict",
    ),
    ("get", "/agent-api/v1/task-control/capabilities"): (),
    ("post", "/agent-api/v1/tool-invocations"): (
        *_ROUTE_GATE,
        "agent_direct_disabled",
        "capability_changed",
        "tool_not_found",
        "invocation_conflict",
        "run_not_found",
    ),
    ("get", "/agent-api/v1/tool-invocations/inspection-capabilities"): (),
    ("post", "/agent-api/v1/tool-invocations/{invocation_id}/resume"): (
        *_ROUTE_GATE,
        "agent_direct_disabled",
        "invocation_not_found",
    ),
    ("get", "/agent-api/v1/tool-invocations/{invocation_id}/receipt"): ("invocation_not_found",),
    ("get", "/agent-api/v1/workspaces/{route}/knowledge/capabilities"): _ROUTE_GATE,
    ("post", "/agent-api/v1/workspaces/{route}/knowledge/search"): (
        *_ROUTE_GATE,
        *_KNOWLEDGE,
        "run_not_found",
    ),
    ("post", "/agent-api/v1/workspaces/{route}/knowledge/read"): (*_ROUTE_GATE, *_KNOWLEDGE),
    ("post", "/agent-auth/v1/authorizations"): (
        "invalid_client",
        "rate_limited",
        "agent_authorize_url_invalid",
    ),
    ("get", "/agent-auth/v1/authorizations/{authorization_id}"): ("not_found",),
    ("post", "/agent-auth/v1/authorizations/{authorization_id}/approve"): (
        "not_found",
        "expired",
        "invalid_state",
        "hub_consent_only",
        "invalid_client",
    ),
    ("post", "/agent-auth/v1/authorizations/{authorization_id}/deny"): (
        "not_found",
        "expired",
        "invalid_state",
        "hub_consent_only",
    ),
    ("post", "/agent-auth/v1/authorizations/{authorization_id}/revoke"): ("not_found", "invalid_state"),
    ("post", "/agent-auth/v1/token"): ("invalid_client", "invalid_grant", "unsupported_grant_type"),
    ("get", "/agent-auth/v1/session"): (),
    ("post", "/agent-auth/v1/revoke"): ("invalid_client", "invalid_grant"),
    ("get", "/agent-auth/v1/sessions"): ("not_found",),
    ("post", "/agent-auth/v1/sessions/{session_id}/revoke"): ("not_found",),
    ("get", "/kb/{kb_id}/docs"): ("forbidden", "not_found", "rate_limited"),
    ("put", "/kb/{kb_id}/docs/{source_key}"): ("forbidden", "not_found", "rate_limited"),
    ("delete", "/kb/{kb_id}/docs/{source_key}"): ("forbidden", "not_found", "rate_limited"),
    ("post", "/approvals/{approval_id}/decision"): ("not_found", "forbidden", "approval_conflict"),
    ("get", "/approvals/{approval_id}"): ("not_found",),
}

# Operations authenticated by nothing but their body (the sign-in start and the code exchange).
_UNAUTHENTICATED = {("post", "/agent-auth/v1/authorizations"), ("post", "/agent-auth/v1/token")}
# Tool invocations also budget their ``arguments`` (413 limit_scope: arguments).
_ARGUMENT_BUDGET = {("post", "/agent-api/v1/tool-invocations")}

# Codes the hub answers only on surfaces outside this document.
HUB_ONLY_CODES = {
    "origin_not_allowed": "the MCP endpoint (/mcp/<route>)",
    "not_implemented": "the HTTP front, before any endpoint",
    "client_exists": "the console's client form",
    "reconciliation_not_needed": "the console's reconciliation page",
    "answer_not_sealed": "the console's raw-answer reveal",
    "answer_unavailable": "the console's raw-answer reveal",
}

_COMMON = ("invalid_request", "method_not_allowed", "internal_error", "service_unavailable")
_BODY = ("unsupported_media_type", "arguments_too_large")


def include_documented_paths(endpoints: list) -> list:
    """Preprocessing hook: only the agent, auth and business APIs (not the bench endpoint)."""
    return [
        endpoint
        for endpoint in endpoints
        if endpoint[0].startswith(DOCUMENTED_PREFIXES) and "/_bench/" not in endpoint[0]
    ]


def operation_codes(method: str, path: str, view: type | None = None) -> list[str]:
    codes = list(_COMMON)
    if (method, path) not in _UNAUTHENTICATED:
        codes.append("unauthorized")
    if view is not None and _needs_scopes(view):
        codes.append("insufficient_scope")
    if method in _BODY_METHODS:
        codes.extend(_BODY)
    codes.extend(OPERATION_ERRORS.get((method, path), ()))
    # GET/HEAD answer 404 under an API prefix for a path parameter the converters refuse.
    if re.search(r"\{[a-z_]+\}", path):
        codes.append("not_found")
    return list(dict.fromkeys(codes))


def _needs_scopes(view: type) -> bool:
    """An agent view that names OAuth scopes (``required_scopes``; None means all of them) refuses an
    OAuth (MCP) session without them: 403 ``insufficient_scope`` (docs/protocol.md "Scopes")."""
    if not hasattr(view, "required_scopes"):
        return False
    return view.required_scopes is None or bool(view.required_scopes)


def _error_classes() -> dict[str, type[ApiError]]:
    return {cls.code: cls for cls in all_error_classes()}


_EXTRA_TYPES = {
    "field": {"type": "string"},
    "retry_after_seconds": {"type": "integer"},
    "max_bytes": {"type": "integer"},
    "observed_bytes": {"type": "integer"},
    "actual_bytes": {"type": "integer"},
    "origin": {"type": "string"},
    "dispatch": {"type": "string"},
    "limit_scope": {"type": "string"},
}


def _error_component(classes: dict[str, type[ApiError]]) -> dict[str, Any]:
    extras = sorted({extra for cls in classes.values() for extra in cls.extras})
    return {
        "type": "object",
        "description": 'The flat error envelope (docs/errors.md "Error codes"). Messages are fixed texts.',
        "properties": {
            "error": {"type": "string", "enum": sorted(classes)},
            "message": {"type": "string"},
            **{extra: _EXTRA_TYPES.get(extra, {}) for extra in extras},
        },
        "required": ["error", "message"],
        "additionalProperties": True,
    }


def _too_large(limit_scope: str, size_key: str) -> dict[str, Any]:
    """One of the two 413 shapes: the raw body (``observed_bytes``) or the tool arguments
    (``actual_bytes``)."""
    return {
        "type": "object",
        "properties": {
            "error": {"const": "arguments_too_large"},
            "message": {"type": "string"},
            "origin": {"const": "core"},
            "dispatch": {"const": "not_dispatched"},
            "limit_scope": {"const": limit_scope},
            "max_bytes": {"type": "integer"},
            size_key: {"type": "integer"},
        },
        "required": ["error", "message", "origin", "dispatch", "limit_scope", "max_bytes", size_key],
    }


_TOO_LARGE_REQUEST_BODY = _too_large("request_body", "observed_bytes")
_TOO_LARGE_ARGUMENTS = _too_large("arguments", "actual_bytes")


def _status_schema(codes: list[str], method: str, path: str) -> dict[str, Any]:
    shapes: list[dict[str, Any]] = []
    plain = [code for code in codes if code != "arguments_too_large"]
    if plain:
        shapes.append(
            {
                "allOf": [
                    {"$ref": "#/components/schemas/Error"},
                    {"properties": {"error": {"enum": sorted(plain)}}},
                ]
            }
        )
    if "arguments_too_large" in codes:
        shapes.append({"$ref": "#/components/schemas/ErrorRequestBodyTooLarge"})
        if (method, path) in _ARGUMENT_BUDGET:
            shapes.append({"$ref": "#/components/schemas/ErrorArgumentsTooLarge"})
    return shapes[0] if len(shapes) == 1 else {"oneOf": shapes}


def _describe(status: int, codes: list[str], classes: dict[str, type[ApiError]]) -> str:
    lines = [f"`{code}`: {classes[code].default_message}" for code in sorted(codes)]
    return "Error envelope. " + " ".join(lines)


def add_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Postprocessing hook: the Error components, every operation's error responses, the bearer scheme."""
    classes = _error_classes()
    components = result.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Error"] = _error_component(classes)
    schemas["ErrorRequestBodyTooLarge"] = _TOO_LARGE_REQUEST_BODY
    schemas["ErrorArgumentsTooLarge"] = _TOO_LARGE_ARGUMENTS
    components["securitySchemes"] = {
        "agentBearer": {"type": "http", "scheme": "bearer", "description": "An Agent Auth v1 `bha_` token."},
        "clientToken": {
            "type": "http",
            "scheme": "bearer",
            "description": "A business client's Client Token (or its signature, on the approval endpoints).",
        },
    }
    views = {
        (method.lower(), path): getattr(callback, "cls", None)
        for path, _regex, method, callback in getattr(generator, "endpoints", None) or ()
    }
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            by_status: dict[int, list[str]] = {}
            for code in operation_codes(method, path, views.get((method, path))):
                by_status.setdefault(classes[code].http_status, []).append(code)
            for status, codes in sorted(by_status.items()):
                operation["responses"][str(status)] = {
                    "description": _describe(status, codes, classes),
                    "content": {"application/json": {"schema": _status_schema(codes, method, path)}},
                }
            operation["security"] = _security(method, path)
    return result


def _security(method: str, path: str) -> list[dict[str, list]]:
    if (method, path) in _UNAUTHENTICATED:
        return []
    if path.startswith(("/kb/", "/approvals/")) or (
        path.startswith("/agent-auth/v1/") and path not in {"/agent-auth/v1/session", "/agent-auth/v1/revoke"}
    ):
        return [{"clientToken": []}]
    if path == "/agent-auth/v1/revoke":
        return [{"agentBearer": []}, {}]
    return [{"agentBearer": []}]
