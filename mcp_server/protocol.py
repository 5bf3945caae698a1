"""One MCP message in, one reply out: the JSON-RPC envelope of the Streamable HTTP endpoint.

The endpoint holds no protocol session. Two eras share it, told apart by the request itself:

* **2026-07-28 and later** ("modern"): every request is self-contained. Its ``params._meta`` carries
  the protocol version and client capabilities, the ``MCP-Protocol-Version`` / ``Mcp-Method`` /
  ``Mcp-Name`` headers must agree with the body, and ``server/discover`` replaces the handshake.
  The checks are the official SDK's own ladder (``mcp.shared.inbound.classify_inbound_request``),
  errors carry the HTTP status the SDK's table assigns, and every result gets ``resultType``, the
  cache hints of cacheable methods and the ``serverInfo`` stamp.
* **2025-03-26 … 2025-11-25** ("handshake"): ``initialize`` negotiates a version, later requests name
  it in ``MCP-Protocol-Version`` (absent means 2025-03-26, as the transport spec says). The endpoint
  never issues ``Mcp-Session-Id``, which tells these clients that there is no session to keep.

**Tasks** (the ``io.modelcontextprotocol/tasks`` extension, modern era only): ``server/discover``
advertises it; a ``tools/call`` whose ``_meta`` client capabilities declare it may be answered with a
``CreateTaskResult`` (``resultType: "task"``) — the host decides — and ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` are served to requests that declare it (else ``-32021``), with
``Mcp-Name`` equal to ``params.taskId`` (else ``-32020``) and ``-32602`` for an unknown task. A request
that does not declare it is answered as before, whatever earlier requests declared.

Parameters are validated against the exact per-version wire models of the SDK
(``mcp_types.methods.validate_client_request``) and results are serialised through them
(``serialize_server_result``), so a field a version does not know never reaches its clients. The
tools themselves are the caller's (:class:`ToolHost`); this module knows no hub model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    decode_header_value,
    unsupported_protocol_version_rejection,
)
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    SERVER_INFO_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_types import methods as wire
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_server.errors import UnknownTask, UnknownTool

# Streamable HTTP exists since 2025-03-26; the 2024-11-05 revision used the older HTTP+SSE transport.
HANDSHAKE_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = tuple(MODERN_PROTOCOL_VERSIONS)
SUPPORTED_VERSIONS = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
# "If the server does not receive an MCP-Protocol-Version header … it SHOULD assume 2025-03-26."
DEFAULT_HANDSHAKE_VERSION = "2025-03-26"

# How long a client may reuse tools/list and server/discover (2026-07-28 cache hints). The list is
# per session ("private") and follows the workspace's catalog, so it is kept short.
CACHE_TTL_MS = 30_000

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
SERVED_METHODS = frozenset(
    {"initialize", "ping", "server/discover", "tools/list", "tools/call", *TASK_METHODS}
)


class ToolHost(Protocol):
    """What the endpoint serves: one workspace's tools, as one signed-in agent sees them."""

    server_name: str
    server_version: str
    instructions: str

    def list_tools(self) -> list[dict[str, Any]]:
        """``Tool`` objects in wire form (camelCase keys), in a deterministic order."""

    def list_meta(self) -> dict[str, Any]:
        """Extra ``_meta`` entries of the ``tools/list`` result (namespaced keys)."""

    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: Mapping[str, Any], *, tasks: bool
    ) -> dict[str, Any]:
        """A ``CallToolResult`` in wire form; raise :class:`UnknownTool` for a name not listed. With
        ``tasks`` (declared on this request) it may be a ``CreateTaskResult`` (``resultType: "task"``)."""

    def task_get(self, task_id: str) -> dict[str, Any]:
        """The ``DetailedTask`` of ``task_id`` (its ``result`` a wire ``CallToolResult``); raise
        :class:`UnknownTask` for an id this caller has no task of."""

    def task_update(self, task_id: str) -> None:
        """Acknowledge ``tasks/update`` (raise :class:`UnknownTask` as ``task_get``)."""

    def task_cancel(self, task_id: str) -> None:
        """Acknowledge ``tasks/cancel`` after acting on it (raise :class:`UnknownTask` as ``task_get``)."""


@dataclass(frozen=True)
class Reply:
    """What the view sends: an HTTP status and a JSON-RPC message, or ``None`` for 202 (no body)."""

    status: int
    body: dict[str, Any] | None


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _error(request_id: Any, code: int, message: str, *, data: Any = None, modern: bool) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    # The 2026-07-28 HTTP binding maps error codes onto statuses; the handshake era answers every
    # JSON-RPC error with 200 (only transport-level failures are 4xx there).
    status = ERROR_CODE_HTTP_STATUS.get(code, 200) if modern else 200
    return Reply(status, {"jsonrpc": "2.0", "id": request_id, "error": error})


def parse_error() -> Reply:
    """The body is not JSON (answered 400 in both eras: there is no id to answer)."""
    return Reply(
        400, {"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": "Parse error"}}
    )


def _is_modern(message: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
    """The request speaks the per-request envelope: by its header, or by what it asks for."""
    if headers.get(MCP_PROTOCOL_VERSION_HEADER) in MODERN_VERSIONS:
        return True
    if message.get("method") == "server/discover":
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and "io.modelcontextprotocol/protocolVersion" in meta


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def exchange(message: Any, headers: Mapping[str, str], host: ToolHost) -> Reply:
    """Answer one decoded POST body. ``headers`` are keyed by lowercase name."""
    if isinstance(message, list):
        # JSON-RPC batches were removed from MCP in 2025-06-18 and never existed on the modern wire.
        return _error(None, INVALID_REQUEST, "Batches are not supported", modern=True)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(None, INVALID_REQUEST, "Not a JSON-RPC 2.0 message", modern=True)
    if "method" not in message:
        # A response to a server-to-client request; this server never sends one.
        if "id" in message and ("result" in message or "error" in message):
            return Reply(202, None)
        return _error(None, INVALID_REQUEST, "Not a JSON-RPC request", modern=True)
    if not isinstance(message["method"], str):
        return _error(None, INVALID_REQUEST, "The method must be a string", modern=True)
    if "id" not in message:
        return _notification(message, headers)
    request_id = message["id"]
    if not _valid_id(request_id):
        return _error(None, INVALID_REQUEST, "The id must be a string or an integer", modern=True)
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return _error(request_id, INVALID_REQUEST, "params must be an object", modern=True)

    modern = _is_modern(message, headers)
    if modern:
        verdict = classify_inbound_request(
            message, headers=headers, supported_modern_versions=MODERN_VERSIONS
        )
        if isinstance(verdict, InboundLadderRejection):
            return _error(request_id, verdict.code, verdict.message, data=verdict.data, modern=True)
        version = verdict.protocol_version
    else:
        version = _handshake_version(message, headers)
        if version is None:
            return Reply(
                400,
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {
                        "code": UNSUPPORTED_PROTOCOL_VERSION,
                        "message": "Unsupported protocol version",
                        "data": {
                            "supported": list(SUPPORTED_VERSIONS),
                            "requested": headers.get(MCP_PROTOCOL_VERSION_HEADER),
                        },
                    },
                },
            )
    method = message["method"]
    try:
        if method in TASK_METHODS and modern:
            _check_task_request(params or {}, headers)
        result = _dispatch(method, version, params, host, modern=modern)
    except _RpcError as exc:
        return _error(request_id, exc.code, exc.message, data=exc.data, modern=modern)
    return Reply(
        200, {"jsonrpc": "2.0", "id": request_id, "result": _serialize(method, version, result, host)}
    )


def _notification(message: Mapping[str, Any], headers: Mapping[str, str]) -> Reply:
    """Notifications are acknowledged (202) and dropped: a stateless server has nothing to update
    (``notifications/initialized``, ``notifications/cancelled`` …). A version header naming a revision
    this server does not speak is still refused, as a request would be."""
    requested = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if requested is not None and requested not in SUPPORTED_VERSIONS:
        rejection = unsupported_protocol_version_rejection(requested, MODERN_VERSIONS)
        if rejection is not None:
            return _error(None, rejection.code, rejection.message, data=rejection.data, modern=True)
    return Reply(202, None)


def _handshake_version(message: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    """The revision a handshake-era request is served at, or ``None`` for an unsupported header."""
    if message.get("method") == "initialize":
        params = message.get("params") if isinstance(message.get("params"), Mapping) else {}
        offered = params.get("protocolVersion")
        # The server answers with the client's revision when it speaks it, else with its latest one
        # (the client then decides whether it can go on).
        return offered if offered in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
    header = headers.get(MCP_PROTOCOL_VERSION_HEADER)
    if header is None:
        return DEFAULT_HANDSHAKE_VERSION
    return header if header in HANDSHAKE_VERSIONS else None


def _validate(method: str, version: str, params: Mapping[str, Any] | None) -> None:
    try:
        wire.validate_client_request(method, version, params)
    except KeyError:
        raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method}") from None
    except ValidationError as exc:
        # Field locations only: pydantic's messages echo the input.
        where = sorted({".".join(str(part) for part in error["loc"]) for error in exc.errors()})[:5]
        raise _RpcError(INVALID_PARAMS, "Invalid params", data={"fields": where}) from None


def _capabilities(*, modern: bool = False) -> dict[str, Any]:
    capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
    if modern:
        capabilities["extensions"] = {TASKS_EXTENSION: {}}
    return capabilities


def declares_tasks(params: Mapping[str, Any] | None) -> bool:
    """Does this request's ``_meta`` client capabilities declare the tasks extension?"""
    meta = (params or {}).get("_meta")
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def _check_task_request(params: Mapping[str, Any], headers: Mapping[str, str]) -> None:
    """A ``tasks/*`` request (after the envelope ladder): declared extension, ``taskId``, the
    routing header, and ``inputResponses`` of ``tasks/update``."""
    if not declares_tasks(params):
        raise _RpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise _RpcError(INVALID_PARAMS, "Invalid params", data={"fields": ["taskId"]})
    try:
        routed = decode_header_value(headers.get(MCP_NAME_HEADER))
    except ValueError:
        routed = None
    if routed != task_id:
        raise _RpcError(
            HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the request body's 'taskId'"
        )


def _dispatch(
    method: str, version: str, params: Mapping[str, Any] | None, host: ToolHost, *, modern: bool
) -> dict[str, Any]:
    if method not in SERVED_METHODS or (method in TASK_METHODS and not modern):
        raise _RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
    if method in TASK_METHODS:
        return _task_method(method, params or {}, host)
    _validate(method, version, params)
    params = params or {}
    if method == "initialize":
        return {
            "protocolVersion": version,
            "capabilities": _capabilities(),
            "serverInfo": {"name": host.server_name, "version": host.server_version},
            "instructions": host.instructions,
        }
    if method == "server/discover":
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": _capabilities(modern=True),
            "instructions": host.instructions,
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        if params.get("cursor") is not None:
            # One page holds every tool (the list is bounded by the workspace's active tool limit).
            raise _RpcError(INVALID_PARAMS, "Invalid cursor")
        result: dict[str, Any] = {"tools": host.list_tools()}
        meta = host.list_meta()
        if meta:
            result["_meta"] = meta
        return result
    # tools/call
    arguments = params.get("arguments") or {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), Mapping) else {}
    # Only a request that declares the extension may get a task (never one of an earlier request).
    tasks = modern and declares_tasks(params)
    try:
        return host.call_tool(params["name"], dict(arguments), meta, tasks=tasks)
    except UnknownTool:
        raise _RpcError(INVALID_PARAMS, f"Unknown tool: {params['name']}") from None


def _task_method(method: str, params: Mapping[str, Any], host: ToolHost) -> dict[str, Any]:
    task_id = params["taskId"]  # checked by _check_task_request
    if method == "tasks/update" and not isinstance(params.get("inputResponses"), Mapping):
        raise _RpcError(INVALID_PARAMS, "Invalid params", data={"fields": ["inputResponses"]})
    try:
        if method == "tasks/get":
            return host.task_get(task_id)
        if method == "tasks/update":
            host.task_update(task_id)
        else:
            host.task_cancel(task_id)
    except UnknownTask:
        raise _RpcError(INVALID_PARAMS, "Task not found") from None
    return {}


def _serialize(method: str, version: str, result: dict[str, Any], host: ToolHost) -> dict[str, Any]:
    """The result as ``version`` shapes it (fields it does not know are dropped by the SDK's model)."""
    modern = version in MODERN_VERSIONS
    if modern and (method in TASK_METHODS or result.get("resultType") == "task"):
        return _stamp(_task_shaped(method, version, result), host)
    if modern:
        result = {"resultType": "complete", **result}
        if method in wire.CACHEABLE_METHODS:
            result = {"ttlMs": CACHE_TTL_MS, "cacheScope": "private", **result}
    try:
        shaped = wire.serialize_server_result(method, version, result)
    except (KeyError, ValidationError) as exc:
        raise RuntimeError(f"the {method} result does not fit MCP {version}") from exc
    if modern:
        shaped = _stamp(shaped, host)
    return shaped


def _stamp(shaped: dict[str, Any], host: ToolHost) -> dict[str, Any]:
    meta = dict(shaped.get("_meta") or {})
    meta.setdefault(SERVER_INFO_META_KEY, {"name": host.server_name, "version": host.server_version})
    shaped["_meta"] = meta
    return shaped


def _task_shaped(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    """A task result (the SDK has no wire model of the extension): a ``CreateTaskResult`` keeps its
    ``resultType: "task"``; ``tasks/*`` results are ``"complete"``, and the ``CallToolResult`` a
    completed task carries goes through the SDK's ``tools/call`` model of ``version`` and keeps its
    ``resultType: "complete"``: it is the result ``tools/call`` would have answered on that wire (the
    extension's own TypeScript client validates it as such and refuses it without)."""
    shaped = {"resultType": "complete", **result} if method in TASK_METHODS else dict(result)
    inner = shaped.get("result")
    if isinstance(inner, dict):
        try:
            call = wire.serialize_server_result("tools/call", version, {"resultType": "complete", **inner})
        except (KeyError, ValidationError) as exc:
            raise RuntimeError(f"the task's tools/call result does not fit MCP {version}") from exc
        shaped["result"] = call
    return shaped


__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "Reply",
    "ToolHost",
    "UnknownTask",
    "UnknownTool",
    "declares_tasks",
    "exchange",
    "parse_error",
]
