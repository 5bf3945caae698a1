"""Error codes of the MCP surface (HTTP level; JSON-RPC errors are the protocol's own numbers)."""

from bailing.api.errors import ApiError


class OriginNotAllowed(ApiError):
    code = "origin_not_allowed"
    http_status = 403
    default_message = "Requests from this web origin are not accepted."
