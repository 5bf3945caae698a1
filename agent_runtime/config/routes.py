"""Validation of a ``routes[]`` item: scalar columns with defaults, JSON blocks exactly as written."""

from __future__ import annotations

import re
from typing import Any

from agent_runtime.config.clients import _budget
from agent_runtime.config.data_policy import validate_data_policy_config
from agent_runtime.config.defaults import (
    AUDIENCE_DEFAULTS,
    FUSION_DEFAULTS,
    KNOWLEDGE_DEFAULTS,
    MEMORY_DEFAULTS,
    RETRIEVAL_DEFAULTS,
)
from agent_runtime.config.fields import (
    ConfigError,
    field_path,
    item_path,
    line_reader,
    read_boolean,
    read_choice,
    read_description_enabled,
    read_freeform_object,
    read_integer,
    read_list,
    read_number,
    read_object,
    read_resource_name,
    read_string,
    read_url,
    read_webhook_url,
    require_keys,
)
from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS, ROUTE_KEY_CONFIG
from bailing.api.limits import SHORT_TEXT_MAX_CHARS

_ROUTE_KEY_RE = re.compile(ROUTE_KEY_CONFIG)
_AGENT_ROUTE_RE = re.compile(AGENT_ROUTE)
_OPERATION_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_APPROVAL_TYPE_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")
# A tool scope is free text (short text); the only wildcard forms are "*" and a trailing ".*".
_SCOPE_MAX = SHORT_TEXT_MAX_CHARS
_WEBHOOK_APPROVAL_TYPES = frozenset({"business_webhook", "approval_webhook", "webhook"})

# --- Route --------------------------------------------------------------------------------------------
_RUN_KEYS = (
    "project",
    "profile",
    "session_policy",
    "session_fixed_id",
    "session_key_field",
    "default_callback_url",
    "delivery",
    "retry",
    "budget",
)
# The Route columns a config file controls, in one place: validation returns exactly these (plus the
# key) and ``bailing_apply`` compares and writes exactly these. ``run_config`` gathers the /run-only
# keys of the file.
ROUTE_FIELDS = (
    "name",
    "description",
    "enabled",
    "target",
    "target_config",
    "permission",
    "audience",
    "memory",
    "knowledge",
    "tools",
    "agent_client",
    "data_policy",
    "run_config",
)
_ROUTE_KEYS = ("route_key", *(name for name in ROUTE_FIELDS if name != "run_config"), *_RUN_KEYS)
_PERMISSIONS = ("readonly", "readwrite", "full")
_SESSION_POLICIES = ("new", "fixed", "per_key", "passthrough")
_MEMORY_RANGES = {
    "recent_messages": (1, 50),
    "recent_budget_chars": (200, 40_000),
    "per_message_chars": (50, 12_000),
    "summary_trigger_chars": (500, 40_000),
    "summary_keep_recent": (0, 40),
    "summary_max_chars": (200, 8000),
}


def _route_key(value: Any, path: str) -> str:
    key = read_string(
        value,
        path,
        max_len=128,
        pattern=_ROUTE_KEY_RE,
        pattern_reason="must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$",
    )
    if key.lower() in RESERVED_ROUTE_KEYS:
        raise ConfigError(path, "is reserved")
    return key


def _target_config(value: Any, path: str) -> dict:
    result = read_freeform_object(value, path)
    if "system_prompt" in result:
        read_string(
            result["system_prompt"],
            field_path(path, "system_prompt"),
            max_len=40_000,
            min_len=0,
            multiline=True,
        )
    return result


def _audience(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=tuple(AUDIENCE_DEFAULTS))
    result: dict[str, Any] = {}
    for key, raw in data.items():
        field = field_path(path, key)
        if key in ("enabled", "auto", "anonymous"):
            result[key] = read_boolean(raw, field)
        elif key == "priority":
            result[key] = read_integer(raw, field, lo=-1000, hi=1000)
        else:
            result[key] = read_list(raw, field, line_reader(SHORT_TEXT_MAX_CHARS), max_items=100)
    return result


def _memory(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=tuple(MEMORY_DEFAULTS))
    result: dict[str, Any] = {}
    for key, raw in data.items():
        field = field_path(path, key)
        if key == "summary_enabled":
            result[key] = read_boolean(raw, field)
        elif key == "summary_model":
            result[key] = read_string(raw, field, max_len=100)
        else:
            lo, hi = _MEMORY_RANGES[key]
            result[key] = read_integer(raw, field, lo=lo, hi=hi)
    return result


def _fusion(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=tuple(FUSION_DEFAULTS))
    result: dict[str, Any] = {}
    if "method" in data:
        result["method"] = read_choice(data["method"], field_path(path, "method"), ("rrf", "normalized"))
    if "rrf_k" in data:
        result["rrf_k"] = read_integer(data["rrf_k"], field_path(path, "rrf_k"), lo=1, hi=1000)
    for name in ("lexical_weight", "vector_weight"):
        if name in data:
            result[name] = float(read_number(data[name], field_path(path, name), lo=0, hi=10))
    weights = {**FUSION_DEFAULTS, **result}
    if weights["lexical_weight"] == 0 and weights["vector_weight"] == 0:
        raise ConfigError(path, "at least one lane weight must be above 0")
    return result


def _knowledge(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("kb_id", "kb_ids", *KNOWLEDGE_DEFAULTS))
    if not data:
        return {}
    if "kb_id" in data and "kb_ids" in data:
        raise ConfigError(field_path(path, "kb_ids"), "set either kb_id or kb_ids, not both")
    if "kb_id" not in data and "kb_ids" not in data:
        raise ConfigError(path, "needs kb_id or kb_ids")
    result: dict[str, Any] = {}
    if "kb_id" in data:
        result["kb_id"] = read_resource_name(data["kb_id"], field_path(path, "kb_id"))
    if "kb_ids" in data:
        result["kb_ids"] = read_list(
            data["kb_ids"], field_path(path, "kb_ids"), read_resource_name, min_items=1
        )
    if "top_k" in data:
        result["top_k"] = read_integer(data["top_k"], field_path(path, "top_k"), lo=1, hi=20)
    if "min_score" in data:
        result["min_score"] = read_number(data["min_score"], field_path(path, "min_score"), lo=0, hi=1)
    if "inject" in data:
        result["inject"] = read_choice(data["inject"], field_path(path, "inject"), ("chunk", "doc"))
    if "max_docs" in data:
        result["max_docs"] = read_integer(data["max_docs"], field_path(path, "max_docs"), lo=1, hi=20)
    if "page_boost" in data:
        result["page_boost"] = read_boolean(data["page_boost"], field_path(path, "page_boost"))
    if "fusion" in data:
        result["fusion"] = _fusion(data["fusion"], field_path(path, "fusion"))
    return result


def _scope(value: Any, path: str) -> str:
    scope = read_string(value, path, max_len=_SCOPE_MAX)
    if any(ch.isspace() for ch in scope):
        raise ConfigError(path, "must not contain whitespace")
    if "*" in scope and not (
        scope == "*" or (scope.endswith(".*") and scope.count("*") == 1 and len(scope) > 2)
    ):
        raise ConfigError(path, 'wildcards are only allowed as "*" or a trailing ".*"')
    return scope


def _retrieval(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=tuple(RETRIEVAL_DEFAULTS))
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = read_boolean(data["enabled"], field_path(path, "enabled"))
    if "min_score" in data:
        result["min_score"] = read_number(data["min_score"], field_path(path, "min_score"), lo=0, hi=1)
    if "max_tools" in data:
        result["max_tools"] = read_integer(data["max_tools"], field_path(path, "max_tools"), lo=1, hi=40)
    return result


def _tool_source(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("provider", "allow", "subject_field", "retrieval"))
    for required in ("provider", "allow"):
        if required not in data:
            raise ConfigError(field_path(path, required), "is required")
    result: dict[str, Any] = {
        "provider": read_resource_name(data["provider"], field_path(path, "provider")),
        "allow": read_list(data["allow"], field_path(path, "allow"), _scope, min_items=1),
    }
    if "subject_field" in data:
        result["subject_field"] = read_string(
            data["subject_field"], field_path(path, "subject_field"), max_len=128
        )
    if "retrieval" in data:
        result["retrieval"] = _retrieval(data["retrieval"], field_path(path, "retrieval"))
    return result


def _approval(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("type", "url", "to"))
    if "type" not in data:
        raise ConfigError(field_path(path, "type"), "is required")
    result: dict[str, Any] = {
        "type": read_string(
            data["type"],
            field_path(path, "type"),
            max_len=64,
            pattern=_APPROVAL_TYPE_RE,
            pattern_reason="must match ^[a-z][a-z0-9_-]{0,63}$",
        )
    }
    if "url" in data:
        # The hub posts approval notifications here: the outbound target rules apply.
        result["url"] = read_webhook_url(data["url"], field_path(path, "url"))
    elif result["type"] in _WEBHOOK_APPROVAL_TYPES:
        raise ConfigError(field_path(path, "url"), "is required for webhook approval types")
    if "to" in data:
        result["to"] = read_string(data["to"], field_path(path, "to"), max_len=SHORT_TEXT_MAX_CHARS)
    return result


def _builtin(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("send_message",))
    result: dict[str, Any] = {}
    if "send_message" in data:
        send_path = field_path(path, "send_message")
        send = read_object(data["send_message"], send_path, allowed=("channels",))
        if "channels" not in send:
            raise ConfigError(field_path(send_path, "channels"), "is required")
        result["send_message"] = {
            "channels": read_list(
                send["channels"], field_path(send_path, "channels"), line_reader(128), min_items=1
            )
        }
    return result


def _operation_id(value: Any, path: str) -> str:
    if isinstance(value, str) and "*" in value:
        raise ConfigError(path, "wildcards are not allowed; list exact operation IDs")
    return read_string(
        value,
        path,
        max_len=64,
        pattern=_OPERATION_ID_RE,
        pattern_reason="must be an exact operation ID matching ^[A-Za-z_][A-Za-z0-9_]{0,63}$",
    )


def _agent_direct(value: Any, path: str) -> dict:
    data = read_object(
        value, path, allowed=("enabled", "write_tools", "force_approval_tools", "unattended_write_tools")
    )
    if "enabled" not in data:
        raise ConfigError(field_path(path, "enabled"), "is required")
    result: dict[str, Any] = {"enabled": read_boolean(data["enabled"], field_path(path, "enabled"))}
    for key in ("write_tools", "force_approval_tools", "unattended_write_tools"):
        if key in data:
            result[key] = read_list(data[key], field_path(path, key), _operation_id)
    if "force_approval_tools" in result and "unattended_write_tools" in result:
        # Spec: the deprecated field stays readable for migration but is never combined with its
        # replacement; convert with force_approval_tools = write_tools − unattended_write_tools.
        raise ConfigError(
            field_path(path, "unattended_write_tools"),
            "is deprecated and cannot be combined with force_approval_tools; "
            "convert it to force_approval_tools = write_tools minus unattended_write_tools",
        )
    writes = result.get("write_tools", [])
    for key in ("force_approval_tools", "unattended_write_tools"):
        for i, name in enumerate(result.get(key, [])):
            if name not in writes:
                raise ConfigError(item_path(field_path(path, key), i), "must also be listed in write_tools")
    return result


def _tools(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("sources", "max_calls", "builtin", "approval", "agent_direct"))
    result: dict[str, Any] = {}
    if "sources" in data:
        sources_path = field_path(path, "sources")
        sources = read_list(data["sources"], sources_path, _tool_source, min_items=1, unique=False)
        seen: set[str] = set()
        for i, source in enumerate(sources):
            if source["provider"] in seen:
                raise ConfigError(
                    field_path(item_path(sources_path, i), "provider"), "provider is listed twice"
                )
            seen.add(source["provider"])
        result["sources"] = sources
    if "max_calls" in data:
        result["max_calls"] = read_integer(data["max_calls"], field_path(path, "max_calls"), lo=1, hi=50)
    if "builtin" in data:
        result["builtin"] = _builtin(data["builtin"], field_path(path, "builtin"))
    if "approval" in data:
        result["approval"] = _approval(data["approval"], field_path(path, "approval"))
    if "agent_direct" in data:
        result["agent_direct"] = _agent_direct(data["agent_direct"], field_path(path, "agent_direct"))
    return result


def _system_info(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("name", "summary", "domains", "boundaries"))
    result: dict[str, Any] = {}
    if "name" in data:
        result["name"] = read_string(data["name"], field_path(path, "name"), max_len=120)
    if "summary" in data:
        result["summary"] = read_string(
            data["summary"], field_path(path, "summary"), max_len=400, multiline=True
        )
    if "domains" in data:
        result["domains"] = read_list(
            data["domains"], field_path(path, "domains"), line_reader(120), max_items=6
        )
    if "boundaries" in data:
        result["boundaries"] = read_list(
            data["boundaries"], field_path(path, "boundaries"), line_reader(160), max_items=6
        )
    return result


def _agent_client(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("enabled", "instructions", "active_tool_limit", "system_info"))
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = read_boolean(data["enabled"], field_path(path, "enabled"))
    if "instructions" in data:
        result["instructions"] = read_string(
            data["instructions"], field_path(path, "instructions"), max_len=20_000, min_len=0, multiline=True
        )
    if "active_tool_limit" in data:
        result["active_tool_limit"] = read_integer(
            data["active_tool_limit"], field_path(path, "active_tool_limit"), lo=1, hi=12
        )
    if "system_info" in data:
        result["system_info"] = _system_info(data["system_info"], field_path(path, "system_info"))
    return result


def _delivery(value: Any, path: str) -> dict:
    # Delivery is adapter-specific in BailingHub (extra keys allowed); the known keys are typed and the
    # type-dependent requirements of its /run delivery are kept (docs/compatibility.md "Workspaces and
    # turns").
    data = read_freeform_object(value, path)
    if "type" not in data:
        raise ConfigError(field_path(path, "type"), "is required")
    kind = read_string(data["type"], field_path(path, "type"), max_len=64)
    if "url" in data:
        read_url(data["url"], field_path(path, "url"))
    for key in ("channel", "to", "to_field"):
        if key in data:
            read_string(data[key], field_path(path, key), max_len=SHORT_TEXT_MAX_CHARS)
    if kind == "webhook" and "url" not in data:
        raise ConfigError(field_path(path, "url"), "is required when type is webhook")
    if kind == "channel" and "channel" not in data:
        raise ConfigError(field_path(path, "channel"), "is required when type is channel")
    if kind not in ("webhook", "none") and "to" not in data and "to_field" not in data:
        raise ConfigError(field_path(path, "to"), "to or to_field is required for this delivery type")
    return data


def _retry(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("max", "backoff_ms"))
    result: dict[str, Any] = {}
    if "max" in data:
        result["max"] = read_integer(data["max"], field_path(path, "max"), lo=0, hi=5)
    if "backoff_ms" in data:
        result["backoff_ms"] = read_integer(
            data["backoff_ms"], field_path(path, "backoff_ms"), lo=500, hi=300_000
        )
    return result


def _run_config(data: dict, path: str) -> dict:
    """The ``/run``-only fields: checked so exported configs round-trip, never read by agent surfaces."""
    result: dict[str, Any] = {}
    if "project" in data:
        result["project"] = read_string(data["project"], field_path(path, "project"), max_len=128)
    if "profile" in data:
        result["profile"] = read_string(data["profile"], field_path(path, "profile"), max_len=64)
    if "session_policy" in data:
        result["session_policy"] = read_choice(
            data["session_policy"], field_path(path, "session_policy"), _SESSION_POLICIES
        )
    for key in ("session_fixed_id", "session_key_field"):
        if key in data:
            result[key] = read_string(data[key], field_path(path, key), max_len=SHORT_TEXT_MAX_CHARS)
    if result.get("session_policy") == "fixed" and "session_fixed_id" not in result:
        raise ConfigError(field_path(path, "session_fixed_id"), "is required when session_policy is fixed")
    if result.get("session_policy") == "per_key" and "session_key_field" not in result:
        raise ConfigError(field_path(path, "session_key_field"), "is required when session_policy is per_key")
    if "default_callback_url" in data:
        result["default_callback_url"] = read_url(
            data["default_callback_url"], field_path(path, "default_callback_url")
        )
    if "delivery" in data:
        result["delivery"] = _delivery(data["delivery"], field_path(path, "delivery"))
    if "retry" in data:
        result["retry"] = _retry(data["retry"], field_path(path, "retry"))
    if "budget" in data:
        result["budget"] = _budget(data["budget"], field_path(path, "budget"))
    return result


def validate_route_config(data: dict, *, path: str) -> dict:
    """Validate one ``routes[]`` item; return it as ``Route`` column values.

    Scalar columns get their defaults; the JSON blocks are returned exactly as written (validated,
    not filled in) so that a later change of a default reaches every route that did not set it.
    """
    data = read_object(data, path, allowed=_ROUTE_KEYS)
    require_keys(data, path, ("route_key", "name"))
    result: dict[str, Any] = {
        "route_key": _route_key(data["route_key"], field_path(path, "route_key")),
        "name": read_string(data["name"], field_path(path, "name"), max_len=128, display=True),
        "description": "",
        "enabled": True,
        "target": "llm",
        "target_config": {},
        "permission": None,
        "audience": {},
        "memory": {},
        "knowledge": {},
        "tools": {},
        "agent_client": {},
        "data_policy": {},
        "run_config": {},
    }
    read_description_enabled(data, path, result)
    if "target" in data:
        result["target"] = read_resource_name(data["target"], field_path(path, "target"))
    if "target_config" in data:
        result["target_config"] = _target_config(data["target_config"], field_path(path, "target_config"))
    if "permission" in data and data["permission"] is not None:
        result["permission"] = read_choice(data["permission"], field_path(path, "permission"), _PERMISSIONS)
    if "audience" in data:
        result["audience"] = _audience(data["audience"], field_path(path, "audience"))
    if "memory" in data:
        result["memory"] = _memory(data["memory"], field_path(path, "memory"))
    if "knowledge" in data:
        result["knowledge"] = _knowledge(data["knowledge"], field_path(path, "knowledge"))
    if "tools" in data:
        result["tools"] = _tools(data["tools"], field_path(path, "tools"))
    if "agent_client" in data:
        result["agent_client"] = _agent_client(data["agent_client"], field_path(path, "agent_client"))
        # Agent surfaces accept only resource-name route keys (docs/protocol.md "Identifiers"): a
        # workspace under any other key could never be reached, so say so now rather than at sign-in.
        if result["agent_client"].get("enabled") and not _AGENT_ROUTE_RE.fullmatch(result["route_key"]):
            raise ConfigError(
                field_path(field_path(path, "agent_client"), "enabled"),
                "agent workspaces need a route_key matching ^[a-z0-9][a-z0-9_-]{1,63}$",
            )
    if "data_policy" in data:
        result["data_policy"] = validate_data_policy_config(
            data["data_policy"], field_path(path, "data_policy")
        )
    result["run_config"] = _run_config(data, path)
    return result
