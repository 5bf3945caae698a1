"""Requests to the MCP endpoint as the two protocol eras send them (Django test client, real database)."""

from __future__ import annotations

import itertools
import json
from typing import Any

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
_ids = itertools.count(1)


def mcp_url(route: str) -> str:
    return f"/mcp/{route}"


def modern_message(method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A 2026-07-28 request: the per-request envelope in ``params._meta``."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hub-tests", "version": "1"},
        **meta,
    }
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}


def modern_headers(message: dict[str, Any]) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": message["method"]}
    name = (message.get("params") or {}).get("name")
    if message["method"] == "tools/call" and isinstance(name, str):
        headers["Mcp-Name"] = name
    return headers


def post_raw(
    client,
    route: str,
    body: bytes | str,
    *,
    token: str | None,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
):
    extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in (headers or {}).items()}
    if token is not None:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    extra.setdefault("HTTP_ACCEPT", "application/json, text/event-stream")
    return client.post(mcp_url(route), data=body, content_type=content_type, **extra)


def post_modern(
    client, route: str, token: str, method: str, params: dict[str, Any] | None = None, **headers_over
):
    message = modern_message(method, params)
    headers = {**modern_headers(message), **headers_over}
    return post_raw(client, route, json.dumps(message), token=token, headers=headers)


def post_legacy(
    client,
    route: str,
    token: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    version: str | None = HANDSHAKE,
    request_id: Any = None,
):
    message = {"jsonrpc": "2.0", "id": next(_ids) if request_id is None else request_id, "method": method}
    if params is not None:
        message["params"] = params
    headers = {} if version is None else {"MCP-Protocol-Version": version}
    return post_raw(client, route, json.dumps(message), token=token, headers=headers)


def call_modern(client, route: str, token: str, name: str, arguments: dict[str, Any] | None = None, **meta):
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    message = modern_message("tools/call", params, **meta)
    response = post_raw(client, route, json.dumps(message), token=token, headers=modern_headers(message))
    assert response.status_code == 200, response.content
    body = response.json()
    assert "result" in body, body
    return body["result"]


def text_of(result: dict[str, Any]) -> str:
    assert [block["type"] for block in result["content"]] == ["text"]
    return result["content"][0]["text"]


# --- the tasks extension (io.modelcontextprotocol/tasks) ----------------------------------------------
TASKS = "io.modelcontextprotocol/tasks"
TASKS_CAPABILITY = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}


def call_with_tasks(client, route: str, token: str, name: str, arguments: dict[str, Any] | None = None):
    """``tools/call`` declaring the tasks extension in its per-request capabilities."""
    return call_modern(client, route, token, name, arguments, **TASKS_CAPABILITY)


def post_task(
    client,
    route: str,
    token: str,
    method: str,
    task_id: str,
    *,
    declare: bool = True,
    mcp_name: str | None = None,
    **params: Any,
):
    """A ``tasks/get|update|cancel`` request as the extension's clients send it: the capability in
    ``_meta`` (unless ``declare`` is false) and ``Mcp-Name`` set to the task id (or ``mcp_name``)."""
    message = modern_message(method, {"taskId": task_id, **params}, **(TASKS_CAPABILITY if declare else {}))
    headers = {**modern_headers(message), "Mcp-Name": task_id if mcp_name is None else mcp_name}
    return post_raw(client, route, json.dumps(message), token=token, headers=headers)


def task_result(client, route: str, token: str, method: str, task_id: str, **params: Any) -> dict[str, Any]:
    response = post_task(client, route, token, method, task_id, **params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert "result" in body, body
    return body["result"]
