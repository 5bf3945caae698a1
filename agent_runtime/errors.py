"""Error codes of the Agent Auth v1 and Agent API v1 surfaces (research §B.4, §C.1, §F.4).

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


class AgentAuthorizeUrlInvalid(ApiError):
    code = "agent_authorize_url_invalid"
    http_status = 503
    default_message = "The client's agent authorization page is misconfigured."


class SessionInactive(ApiError):
    code = "session_inactive"
    http_status = 409
    default_message = "The agent session is revoked or expired."


# --- Agent API v1: route gate (research §C.1) ---------------------------------------------------------
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


class AgentClientDisabled(ApiError):
    code = "agent_client_disabled"
    http_status = 403
    default_message = "The workspace does not offer the Agent Client Runtime."


class AgentDirectDisabled(ApiError):
    code = "agent_direct_disabled"
    http_status = 403
    default_message = "The workspace does not expose business tools to local agents."


# --- Agent API v1: business tool surfaces (spec "Read usage guidance by tool name", research §C.1) ---
class CapabilityChanged(ApiError):
    code = "capability_changed"
    http_status = 409
    default_message = "The capability catalog changed; refresh it before using this tool."


class ToolNotFound(ApiError):
    code = "tool_not_found"
    http_status = 404
    default_message = "The tool is not available in the current capability catalog."


from agent_runtime.runtime_errors import *  # noqa: E402, F403
