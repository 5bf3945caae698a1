"""Error codes of the Agent Auth v1 and Agent API v1 surfaces: auth, the route gate, tool surfaces,
turns and runs (docs/errors.md "Error codes" lists every code with its HTTP status).

Declared once here; services raise them, the shared exception handler renders them.
"""

from __future__ import annotations

from bailing.api.errors import ApiError


# --- Agent Auth v1 ---------------------------------------------------------------------------------
class InvalidClient(ApiError):
    code = "invalid_client"
    http_status = 400
    default_message = "The client is unknown, disabled, not an agent client or not allowed these routes."


class InvalidGrant(ApiError):
    code = "invalid_grant"
    http_status = 400
    default_message = "The grant is invalid, expired or already used."


class UnsupportedGrantType(ApiError):
    code = "unsupported_grant_type"
    http_status = 400
    default_message = "grant_type must be authorization_code or refresh_token."


class AuthorizationExpired(ApiError):
    code = "expired"
    http_status = 410
    default_message = "The authorization request has expired."


class InvalidState(ApiError):
    code = "invalid_state"
    http_status = 409
    default_message = "The authorization request is no longer pending."


class HubConsentOnly(ApiError):
    """A hub-consent client (``hub_consent`` and no ``agent_authorize_url``) tried the business
    approve/deny endpoints: its sign-ins are decided on the hub's consent page, where the principal
    is the signed-in hub user, never one its Client Token vouches for."""

    code = "hub_consent_only"
    http_status = 403
    default_message = (
        "This client's sign-ins are approved on the hub's consent page, not with its Client Token."
    )


class AgentAuthorizeUrlInvalid(ApiError):
    code = "agent_authorize_url_invalid"
    http_status = 503
    default_message = "The client's agent authorization page is misconfigured."


class ClientExists(ApiError):
    """A client with this App ID already exists (creating never overwrites; config files upsert)."""

    code = "client_exists"
    http_status = 409
    default_message = "A client with this App ID already exists."


# --- Agent API v1: route gate (docs/protocol.md "Route gate") ---------------------------------------
class InvalidRoute(ApiError):
    code = "invalid_route"
    http_status = 400
    default_message = "The workspace key is not a valid route key."


class RouteNotAllowed(ApiError):
    code = "route_not_allowed"
    http_status = 403
    default_message = "This session or client is not allowed to use that workspace."


class RouteUnavailable(ApiError):
    code = "route_unavailable"
    http_status = 404
    default_message = "The workspace does not exist or is disabled."


class AudienceNotAllowed(ApiError):
    code = "audience_not_allowed"
    http_status = 403
    default_message = "The workspace's audience policy does not admit this principal."


class InsufficientScope(ApiError):
    """An OAuth (MCP) session's token lacks a scope the operation needs (RFC 6750 §3.1; docs/protocol.md
    "Scopes"). ``required_scopes`` lists every scope the operation needs, also in the
    ``WWW-Authenticate`` challenge the surface adds."""

    code = "insufficient_scope"
    http_status = 403
    default_message = "This sign-in was not granted the scope this operation needs."
    extras = ("required_scopes",)

    def __init__(self, required: list[str], *, challenge: str = 'Bearer realm="bailing"'):
        scope = " ".join(required)
        super().__init__(
            headers={"WWW-Authenticate": f'{challenge}, error="insufficient_scope", scope="{scope}"'},
            required_scopes=list(required),
        )


class AgentClientDisabled(ApiError):
    code = "agent_client_disabled"
    http_status = 403
    default_message = "The workspace does not offer the Agent Client Runtime."


class AgentDirectDisabled(ApiError):
    code = "agent_direct_disabled"
    http_status = 403
    default_message = "The workspace does not expose business tools to local agents."


# --- Agent API v1: business tool surfaces (docs/protocol.md "Capability revision and execution fingerprint")
class CapabilityChanged(ApiError):
    code = "capability_changed"
    http_status = 409
    default_message = "The capability catalog changed; refresh it before using this tool."


class ToolNotFound(ApiError):
    code = "tool_not_found"
    http_status = 404
    default_message = "The tool is not available in the current capability catalog."


# --- Agent Client Runtime: turns and runs (docs/protocol.md "Turn idempotency", "Run completion") ----
class TurnConflict(ApiError):
    """The turn key or the user message id is already bound to a different turn input (see
    docs/protocol.md "Turn idempotency")."""

    code = "turn_conflict"
    http_status = 409
    default_message = "This turn id or user message id is already bound to a different input."


class PageContextTooLarge(ApiError):
    """``page_context`` over 16 KiB of compact UTF-8 JSON (docs/protocol.md "Page context")."""

    code = "page_context_too_large"
    http_status = 413
    default_message = "page_context exceeds 16 KiB."
    extras = ("max_bytes", "actual_bytes")

    def __init__(self, *, max_bytes: int, actual_bytes: int, message: str | None = None):
        super().__init__(message, max_bytes=max_bytes, actual_bytes=actual_bytes)


class TaskControlUnsupported(ApiError):
    """A turn carried ``task_binding`` but this hub does not implement task control: the binding is
    refused, never silently ignored (docs/protocol.md "Task control")."""

    code = "task_control_unsupported"
    http_status = 400
    default_message = "Task control is not supported by this hub; task_binding cannot be honoured."


class RunNotFound(ApiError):
    code = "run_not_found"
    http_status = 404
    default_message = "The run was not found for this agent session and workspace."


class RunCompletionConflict(ApiError):
    code = "run_completion_conflict"
    http_status = 409
    default_message = "The run was already completed with a different result."


class AssistantMessageConflict(ApiError):
    code = "assistant_message_conflict"
    http_status = 409
    default_message = "assistant_message_id is already bound to a different run."


# --- Agent API v1: governed tool invocations (spec "Tool invocation and recovery") ------------------------
class InvocationConflict(ApiError):
    """The ``invocation_id`` is already bound to a different call (route, tool, arguments, revision or
    run): an invocation id names one call forever."""

    code = "invocation_conflict"
    http_status = 409
    default_message = "This invocation_id is already bound to a different call."


class InvocationNotFound(ApiError):
    code = "invocation_not_found"
    http_status = 404
    default_message = "The invocation was not found for this agent session."
