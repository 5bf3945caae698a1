"""Error codes of the MCP surface (HTTP level; JSON-RPC errors are the protocol's own numbers), and
the two exceptions a tool host raises for the protocol layer to answer as JSON-RPC ``-32602``
(here, not in ``mcp_server.protocol``, so that the services need not import the MCP SDK's types)."""

from bailing.api.errors import ApiError


class UnknownTool(Exception):
    """``tools/call`` named a tool this caller was not offered: JSON-RPC ``-32602``."""


class UnknownTask(Exception):
    """``tasks/*`` named a task this caller has none of: JSON-RPC ``-32602``."""


class OriginNotAllowed(ApiError):
    code = "origin_not_allowed"
    http_status = 403
    default_message = "Requests from this web origin are not accepted."
