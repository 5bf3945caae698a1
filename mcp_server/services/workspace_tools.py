"""One workspace's MCP tools for one signed-in agent: knowledge, business tools and meta-tools.

``tools/list`` (deterministic order; of these, what the session's OAuth scopes cover — an Agent Auth
v1 session sees everything, docs/protocol.md "Scopes"):

1. ``search_knowledge``, ``ask_knowledge``;
2. with the route's ``tools.agent_direct`` on: ``find_tools`` (capability search over the whole
   authorized catalog), ``call_tool`` (any authorized tool by name), ``resume_invocation`` and
   ``get_receipt``;
3. then the route's active business tools: the authorized catalog in its own order (by name), at
   most ``active_tool_limit`` of them — the set bootstrap counts — each with its typed input schema
   and annotations from its ACC: ``readOnlyHint`` = readonly, ``destructiveHint`` = high risk,
   ``idempotentHint`` = idempotent, ``openWorldHint`` = true (it acts on a business system). A
   business tool whose name is one of the hub's own tools is reachable through ``call_tool`` only.

Every business call is a governed invocation (:func:`agent_runtime.services.invocations.invocation_create`):
the same budgets, approvals bound to the exact arguments, journal, reconciliation and audit as the
REST API. MCP has no invocation id, so the hub draws a fresh one per call unless the caller names
one — ``invocation_id`` of ``call_tool``, or ``_meta["io.bailinghub/invocation_id"]`` of a direct
call (64 lowercase hex) — which makes a retried call a replay, never a second write. The result
text says what happened; waiting for approval names the approval, what the approver sees and how
to resume; an unknown outcome says ``reconciliation_required`` and that the call must not be
repeated. The structured content is the invocation result itself (``bailing.agent-tool-invocation.v1``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

from agent_runtime.errors import InsufficientScope
from agent_runtime.identity import SCOPE_KNOWLEDGE_READ, SCOPE_TOOLS_CALL, SCOPE_TOOLS_READ, AgentIdentity
from agent_runtime.models import ToolApproval
from agent_runtime.selectors.catalog import Catalog, CatalogTool, capability_search, route_catalog
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.services.invocations import (
    InvocationRequest,
    invocation_create,
    invocation_lock_free,
    invocation_receipt_release,
    invocation_resume,
    tool_arguments,
)
from bailing.api.errors import ApiError
from mcp_server.errors import UnknownTool
from mcp_server.services import tasks as tasks_module
from mcp_server.services.knowledge_tools import (
    ASK_TOOL,
    SEARCH_TOOL,
    ask_knowledge_call,
    knowledge_tool_definitions,
    search_knowledge_call,
    tool_failed,
)

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
RESUME_INVOCATION = "resume_invocation"
GET_RECEIPT = "get_receipt"
META_TOOLS = (FIND_TOOLS, CALL_TOOL, RESUME_INVOCATION, GET_RECEIPT)
# The scope each hub tool needs (docs/protocol.md "Scopes"); a business tool needs tools:call.
HUB_TOOL_SCOPES = {
    SEARCH_TOOL: SCOPE_KNOWLEDGE_READ,
    ASK_TOOL: SCOPE_KNOWLEDGE_READ,
    FIND_TOOLS: SCOPE_TOOLS_READ,
    CALL_TOOL: SCOPE_TOOLS_CALL,
    RESUME_INVOCATION: SCOPE_TOOLS_CALL,
    GET_RECEIPT: SCOPE_TOOLS_CALL,
}
# tools/list _meta: the capability revision of the catalog the listed business tools come from (the
# bootstrap's capability_revision for the same session and workspace).
CAPABILITY_REVISION_META_KEY = "io.bailinghub/capability_revision"
HUB_TOOLS = frozenset({SEARCH_TOOL, ASK_TOOL, *META_TOOLS})

INVOCATION_ID_META_KEY = "io.bailinghub/invocation_id"
_INVOCATION_ID_RE = re.compile(r"[0-9a-f]{64}")
FIND_LIMIT_MAX = 12

# Result states the agent must read as "this did not do what you asked" (isError), as opposed to
# executed, waiting for approval or still in progress.
_ERROR_STATES = frozenset(
    {"rejected_before_dispatch", "denied", "business_rejected", "reconciliation_required"}
)

_INVOCATION_ID_SCHEMA = {
    "type": "string",
    "pattern": "^[0-9a-f]{64}$",
    "description": "The invocation id a tool call answered with.",
}


def _meta_tool_definitions() -> list[dict[str, Any]]:
    return [
        {
            "name": FIND_TOOLS,
            "title": "Find business tools",
            "description": (
                "Search every business tool this workspace authorizes you to use (not only the ones "
                "listed here) and get their names, descriptions, risk, approval rule and input schema. "
                "Call a found tool with call_tool."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": FIND_LIMIT_MAX},
                },
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
        },
        {
            "name": CALL_TOOL,
            "title": "Call a business tool",
            "description": (
                "Call any authorized business tool by name (see find_tools) as a governed invocation: "
                "writes may wait for a human approval bound to these exact arguments. Pass "
                "invocation_id to make a retry of the same call a replay instead of a new call."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                    "invocation_id": {
                        **_INVOCATION_ID_SCHEMA,
                        "description": "Optional idempotency key (64 lowercase hex).",
                    },
                },
                "required": ["name"],
            },
            "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
        },
        {
            "name": RESUME_INVOCATION,
            "title": "Resume an invocation",
            "description": (
                "Continue a tool call that was waiting for approval (or learn how it ended). Never "
                "sends a business request twice."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {"invocation_id": _INVOCATION_ID_SCHEMA},
                "required": ["invocation_id"],
            },
            "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
        },
        {
            "name": GET_RECEIPT,
            "title": "Get an invocation receipt",
            "description": "Read what the hub knows about a tool call, without changing anything.",
            "inputSchema": {
                "type": "object",
                "properties": {"invocation_id": _INVOCATION_ID_SCHEMA},
                "required": ["invocation_id"],
            },
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False},
        },
    ]


def _business_description(tool: CatalogTool) -> str:
    projection = tool.projection
    traits = ["read-only" if tool.readonly else "write", f"risk {projection['risk']}"]
    if tool.approval_required:
        traits.append("needs human approval")
    description = projection.get("description") or tool.name
    return f"{description}\n\n[{', '.join(traits)}]"


def business_tool_definition(tool: CatalogTool) -> dict[str, Any]:
    """A catalog tool as ``tools/list`` shows it."""
    projection = tool.public()
    schema = projection["input_schema"] if isinstance(projection["input_schema"], dict) else {}
    if schema.get("type") != "object":
        schema = {"type": "object", **{k: v for k, v in schema.items() if k != "type"}}
    return {
        "name": tool.name,
        "description": _business_description(tool),
        "inputSchema": schema,
        "annotations": {
            "readOnlyHint": tool.readonly,
            "destructiveHint": projection["risk"] == "high",
            "idempotentHint": bool(projection["idempotent"]),
            "openWorldHint": True,
        },
        "_meta": {
            "io.bailinghub/risk": projection["risk"],
            "io.bailinghub/approval_required": tool.approval_required,
            "io.bailinghub/scope": projection["scope"],
        },
    }


def _text(text: str, structured: dict[str, Any], *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": error}


def api_failure(exc: ApiError) -> dict[str, Any]:
    """A hub refusal (route gate, changed capability, unknown invocation …) as a failed tool call."""
    payload = exc.payload()
    return _text(f"Tool failed: {exc.code}: {exc.message}", payload, error=True)


def _approval_text(result: dict[str, Any]) -> str:
    approval = (
        ToolApproval.objects.filter(pk=result["approval_id"])
        .values("summary", "reason", "method", "path")
        .first()
    )
    summary = (approval or {}).get("summary") or f"{result['tool']}"
    reason = (approval or {}).get("reason") or ""
    sees = f"The approver sees: {summary.strip()}"
    if reason:
        sees += f" (rule: {reason})"
    return (
        f"Awaiting approval #{result['approval_id']}. Nothing was sent to the business system yet. "
        f"{sees}, with these exact arguments. After the approver decides, call {RESUME_INVOCATION} "
        f'with {{"invocation_id": "{result["invocation_id"]}"}}; do not call the tool again.'
    )


def invocation_call_result(result: dict[str, Any]) -> dict[str, Any]:
    """A governed invocation's result as the agent reads it over MCP."""
    state = result["state"]
    if state == "awaiting_approval":
        text = _approval_text(result)
    elif state == "reconciliation_required":
        text = f"reconciliation_required: {result['text']}"
    elif state == "in_progress":
        text = (
            f"{result['text']} Call {RESUME_INVOCATION} with "
            f'{{"invocation_id": "{result["invocation_id"]}"}} later.'
        )
    else:
        text = result["text"]
    text = f"{text}\n\ninvocation_id: {result['invocation_id']} · state: {state}"
    policy = result.get("data_policy")
    if policy:
        # Counts only, as in the structured content (the workspace's data policy touched the answer).
        counts = ", ".join(f"{name} {count}" for name, count in policy["findings"].items())
        text += f" · data_policy: {policy['action']} ({counts})"
    return _text(text, result, error=state in _ERROR_STATES)


class WorkspaceTools:
    """The :class:`mcp_server.protocol.ToolHost` of one MCP request."""

    server_name = "bailing-hub"

    def __init__(self, *, identity: AgentIdentity, access: WorkspaceAccess, server_version: str):
        self.identity = identity
        self.access = access
        self.server_version = server_version
        self._catalog: Catalog | None = None

    @property
    def instructions(self) -> str:
        effective = self.access.effective
        name = effective.get("name") or self.access.route_key
        text = f"Bailing Hub workspace {name!r}. search_knowledge and ask_knowledge read its knowledge base. "
        if self._direct:
            text += (
                "Business tools are governed: writes may wait for a human approval bound to the exact "
                "arguments; then call resume_invocation, never the tool again. An outcome reported as "
                "reconciliation_required must not be retried. find_tools searches every authorized tool."
            )
        return text

    @property
    def _direct(self) -> bool:
        return bool(self.access.effective["tools"]["agent_direct"]["enabled"])

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = route_catalog(
                route=self.access.route, identity=self.identity, effective=self.access.effective
            )
        return self._catalog

    # --- tools/list ---------------------------------------------------------------------------------
    def list_tools(self) -> list[dict[str, Any]]:
        """What the session's scopes let it see: the knowledge tools with ``knowledge:read``;
        ``find_tools`` and the business tools with ``tools:read``; ``call_tool``,
        ``resume_invocation`` and ``get_receipt`` with ``tools:call``."""
        has = self.identity.has_scope
        tools = knowledge_tool_definitions() if has(SCOPE_KNOWLEDGE_READ) else []
        if not self._direct:
            return tools
        tools.extend(tool for tool in _meta_tool_definitions() if has(HUB_TOOL_SCOPES[tool["name"]]))
        if has(SCOPE_TOOLS_READ):
            catalog = self.catalog()
            active = [tool for tool in catalog.tools[: catalog.active_limit] if tool.name not in HUB_TOOLS]
            tools.extend(business_tool_definition(tool) for tool in active)
        return tools

    def list_meta(self) -> dict[str, Any]:
        """``tools/list`` ``_meta``: the capability revision, when business tools were listed."""
        if self._direct and self.identity.has_scope(SCOPE_TOOLS_READ):
            return {CAPABILITY_REVISION_META_KEY: self.catalog().revision}
        return {}

    def _require(self, scope: str) -> None:
        if not self.identity.has_scope(scope):
            raise InsufficientScope([scope])

    def _business_tool(self, name: str) -> CatalogTool | None:
        """Any authorized tool may be called directly, listed or not (the list is the active few)."""
        return None if name in HUB_TOOLS else self.catalog().tool(name)

    # --- tools/call ---------------------------------------------------------------------------------
    def call_tool(
        self, name: str, arguments: dict[str, Any], meta: Mapping[str, Any], *, tasks: bool = False
    ) -> dict[str, Any]:
        """A tool call, once the session's scopes allow it (:class:`InsufficientScope` otherwise: any
        name but the hub's own tools is a business tool and needs ``tools:call``, known or not); with
        ``tasks`` (the client declared the tasks extension on this request) a call that waits for
        approval is a ``CreateTaskResult`` instead."""
        if name in (SEARCH_TOOL, ASK_TOOL):
            self._require(SCOPE_KNOWLEDGE_READ)
            call = search_knowledge_call if name == SEARCH_TOOL else ask_knowledge_call
            return call(identity=self.identity, access=self.access, arguments=arguments)
        if not self._direct:
            raise UnknownTool(name)
        self._require(HUB_TOOL_SCOPES.get(name, SCOPE_TOOLS_CALL))
        try:
            if name == FIND_TOOLS:
                return self._find(arguments)
            if name == CALL_TOOL:
                return self._call_by_name(arguments, tasks=tasks)
            if name == RESUME_INVOCATION:
                return self._resume(arguments)
            if name == GET_RECEIPT:
                return self._receipt(arguments)
            tool = self._business_tool(name)
            if tool is None:
                raise UnknownTool(name)
            invocation_id = meta.get(INVOCATION_ID_META_KEY)
            return self._invoke(tool.name, arguments, invocation_id, tasks=tasks)
        except ApiError as exc:
            return api_failure(exc)

    def _find(self, arguments: dict[str, Any]) -> dict[str, Any]:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return tool_failed("Tool failed: `query` must be a non-empty string")
        limit = arguments.get("limit")
        if isinstance(limit, bool) or not isinstance(limit, int):
            limit = None
        else:
            limit = max(1, min(FIND_LIMIT_MAX, limit))
        found = capability_search(
            identity=self.identity, route_key=self.access.route_key, query=query, limit=limit
        )
        if not found["tools"]:
            return _text("No authorized tool matches.", found)
        lines = []
        for tool in found["tools"]:
            traits = ["read-only" if tool["readonly"] else "write", f"risk {tool['risk']}"]
            if tool["approval_required"]:
                traits.append("needs approval")
            lines.append(f"- {tool['name']} ({', '.join(traits)}): {tool['description']}")
        more = found["discovery"]["authorized_total"] - len(found["tools"])
        text = "\n".join(lines)
        if more > 0:
            text += f"\n\n{more} more authorized tools; refine the query to see others."
        text += f"\n\nCall one with {CALL_TOOL} (its input_schema is in the structured content)."
        return _text(text, found)

    def _call_by_name(self, arguments: dict[str, Any], *, tasks: bool) -> dict[str, Any]:
        name = arguments.get("name")
        if not isinstance(name, str) or not name:
            return tool_failed("Tool failed: `name` must be a non-empty string")
        tool_arguments = arguments.get("arguments", {})
        if tool_arguments is None:
            tool_arguments = {}
        if not isinstance(tool_arguments, dict):
            return tool_failed("Tool failed: `arguments` must be an object")
        return self._invoke(name, tool_arguments, arguments.get("invocation_id"), tasks=tasks)

    def _invoke(
        self, tool: str, arguments: dict[str, Any], invocation_id: Any, *, tasks: bool
    ) -> dict[str, Any]:
        if invocation_id is None:
            invocation_id = secrets.token_hex(32)
        elif not isinstance(invocation_id, str) or not _INVOCATION_ID_RE.fullmatch(invocation_id):
            return tool_failed("Tool failed: `invocation_id` must be 64 lowercase hexadecimal characters")
        # The same measure, budget and control-character rule as the REST view (413 / 400 as a
        # failed tool call with the error's fields in structuredContent); nothing is stored.
        normalized = tool_arguments(arguments)
        catalog = self.catalog()
        result = invocation_create(
            identity=self.identity,
            request=InvocationRequest(
                invocation_id=invocation_id,
                route=self.access.route_key,
                tool=tool,
                arguments=normalized,
                capability_revision=catalog.revision,
            ),
        )
        if tasks and result["state"] == "awaiting_approval":
            return tasks_module.task_created(identity=self.identity, invocation_id=result["invocation_id"])
        return invocation_call_result(result)

    def _invocation_id(self, arguments: dict[str, Any]) -> str | None:
        value = arguments.get("invocation_id")
        return value if isinstance(value, str) and _INVOCATION_ID_RE.fullmatch(value) else None

    def _resume(self, arguments: dict[str, Any]) -> dict[str, Any]:
        invocation_id = self._invocation_id(arguments)
        if invocation_id is None:
            return tool_failed("Tool failed: `invocation_id` must be 64 lowercase hexadecimal characters")
        return invocation_call_result(invocation_resume(identity=self.identity, invocation_id=invocation_id))

    def _receipt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        invocation_id = self._invocation_id(arguments)
        if invocation_id is None:
            return tool_failed("Tool failed: `invocation_id` must be 64 lowercase hexadecimal characters")
        alive = not invocation_lock_free(self.identity.session.pk, invocation_id)
        receipt = invocation_receipt_release(
            identity=self.identity, invocation_id=invocation_id, holder_alive=alive
        )
        result = receipt["result"]
        if result is None:
            text = f"No outcome recorded yet (journal: {receipt['journal_state']})."
        else:
            text = f"{result['state']}: {result['text']}"
        approval = receipt["approval"]
        if approval["status"] != "none":
            text += f"\nApproval #{approval['approval_id']}: {approval['status']}."
        return _text(text, receipt)

    # --- tasks/get, tasks/update, tasks/cancel (approvals as tasks) ----------------------------------------
    @staticmethod
    def _task_call_result(outcome: dict[str, Any] | ApiError) -> dict[str, Any]:
        if isinstance(outcome, ApiError):
            return api_failure(outcome)
        return invocation_call_result(outcome)

    # A task is a business call: its methods need what the call needed (``tools:call``).
    def task_get(self, task_id: str) -> dict[str, Any]:
        self._require(SCOPE_TOOLS_CALL)
        return tasks_module.task_get(
            identity=self.identity,
            route_key=self.access.route_key,
            task_id=task_id,
            call_result=self._task_call_result,
        )

    def task_update(self, task_id: str) -> None:
        self._require(SCOPE_TOOLS_CALL)
        tasks_module.task_update(identity=self.identity, route_key=self.access.route_key, task_id=task_id)

    def task_cancel(self, task_id: str) -> None:
        self._require(SCOPE_TOOLS_CALL)
        tasks_module.task_cancel(identity=self.identity, route_key=self.access.route_key, task_id=task_id)
