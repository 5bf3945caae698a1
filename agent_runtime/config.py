"""Validation of clients and routes as configuration (config files, console forms) and effective defaults.

Pure functions, no database. A config item is validated field by field and either returned in the
shape of the model's columns (nothing defaulted into the JSON blocks: defaults are applied when read,
by :func:`route_effective`) or rejected with a :class:`ConfigError` that names the exact path of the
first bad value (``routes[2].tools.agent_direct.write_tools[1]``).

Rules that hold everywhere (research §A.2.2, §A.2.7, §F.5; spec "Write and approval semantics"):

* Unknown keys are rejected, except inside ``target_config`` and ``delivery`` (adapter-specific, kept
  as written but never exposed to agents).
* Integers are JSON integers (never booleans, floats or numeric strings); numbers are finite.
* Strings never contain lone surrogates or control characters (TAB/LF/CR are allowed only in
  multi-line text: descriptions, prompts, instructions). Lengths are counted in UTF-16 code units,
  as the upstream console and JavaScript clients count them (research §H4).
* Nothing is trimmed, truncated or normalized: invalid input is an error.
* Secrets never come from a file: a Client Token is issued only by ``manage.py bailing_client_token``.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from datetime import date, datetime, time
from typing import Any
from urllib.parse import urlsplit

from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS, RESOURCE_NAME, ROUTE_KEY_CONFIG
from agent_runtime.validation import authorize_url_problem
from bailing.api.limits import compact_json_utf8_bytes, utf16_length
from bailing.api.text import has_control_chars, has_lone_surrogate

__all__ = [
    "AGENT_CLIENT_DEFAULTS",
    "AUDIENCE_DEFAULTS",
    "CONFIG_SECTIONS",
    "FUSION_DEFAULTS",
    "KNOWLEDGE_DEFAULTS",
    "MEMORY_DEFAULTS",
    "PROVIDER_SPEC_MAX_BYTES",
    "RETRIEVAL_DEFAULTS",
    "TOOLS_DEFAULTS",
    "ConfigError",
    "route_effective",
    "validate_client_config",
    "validate_document",
    "validate_knowledge_base_config",
    "validate_route_config",
    "validate_tool_provider_config",
]


class ConfigError(Exception):
    """A configuration value is invalid.

    ``path`` locates the value (``clients[0].budget.window``); ``reason`` is short fixed text. Neither
    ever contains the offending value, so an error message can be printed or logged even when the
    value was a pasted secret.
    """

    def __init__(self, path: str, reason: str):
        self.path = path or "(document)"
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


# --- Defaults applied when reading (research §A.2.7, §F.1 R26) ------------------------------------------
AUDIENCE_LIST_KEYS = ("keywords", "clients", "channels", "tenants", "roles", "principals", "audiences")
AUDIENCE_DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "auto": False,
    "priority": 0,
    **{key: [] for key in AUDIENCE_LIST_KEYS},
    "anonymous": False,
}
MEMORY_DEFAULTS: dict[str, Any] = {
    "recent_messages": 12,
    "recent_budget_chars": 8000,
    "per_message_chars": 2000,
    "summary_enabled": False,
    "summary_trigger_chars": 4000,
    "summary_keep_recent": 6,
    "summary_max_chars": 1200,
    "summary_model": None,
}
# Hybrid retrieval fusion (knowledge issue §2): reciprocal rank fusion with k = 60 by default, or
# "normalized" (min-max normalised lane scores, weighted sum). Weights apply to both methods.
FUSION_DEFAULTS: dict[str, Any] = {"method": "rrf", "rrf_k": 60, "lexical_weight": 1.0, "vector_weight": 1.0}
KNOWLEDGE_DEFAULTS: dict[str, Any] = {
    "top_k": 5,
    "min_score": 0.35,
    "inject": "chunk",
    "max_docs": 4,
    "page_boost": False,
    "fusion": FUSION_DEFAULTS,
}
# Semantic tool retrieval is opt-in per source: without it capability search stays lexical and
# deterministic (spec: one source lacking semantic retrieval makes the whole search lexical).
RETRIEVAL_DEFAULTS: dict[str, Any] = {"enabled": False, "min_score": 0.3, "max_tools": 15}
TOOLS_DEFAULTS: dict[str, Any] = {"max_calls": 5}
AGENT_CLIENT_DEFAULTS: dict[str, Any] = {"enabled": False, "instructions": "", "active_tool_limit": 8}

CLIENT_DEFAULT_RATE_LIMIT = 60
# Client.rate_limit_per_min is a PostgreSQL integer column.
_PG_INT_MAX = 2_147_483_647
# window_hours up to one leap year, as upstream's budget validation allows (research §C.8).
_BUDGET_WINDOW_HOURS_MAX = 8784
# Free-form adapter settings (target_config, delivery) are bounded so a config file cannot store
# megabytes of JSON per route; the 40,000-character system prompt still fits with room to spare.
_FREEFORM_MAX_BYTES = 256 * 1024
_FREEFORM_MAX_DEPTH = 32
_URL_MAX = 2048

_RESOURCE_NAME_RE = re.compile(RESOURCE_NAME)
_ROUTE_KEY_RE = re.compile(ROUTE_KEY_CONFIG)
_AGENT_ROUTE_RE = re.compile(AGENT_ROUTE)
_OPERATION_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_APPROVAL_TYPE_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")
# A tool scope is free text upstream (≤191); the only wildcard forms are "*" and a trailing ".*".
_SCOPE_MAX = 191
_SAFE_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SECRET_KEYS = frozenset({"token", "token_hash", "token_prefix", "client_token", "secret", "api_key"})
_WEBHOOK_APPROVAL_TYPES = frozenset({"business_webhook", "approval_webhook", "webhook"})


# --- Path helpers -------------------------------------------------------------------------------------
def _key(path: str, key: Any) -> str:
    # Keys are echoed into error paths, so anything unusual is JSON-quoted and cut short rather than
    # printed raw (a key could carry control characters or be very long).
    if isinstance(key, str) and _SAFE_KEY_RE.fullmatch(key):
        segment = f".{key}" if path else key
    else:
        text = key if isinstance(key, str) else repr(key)
        text = text[:64].encode("unicode_escape").decode("ascii").replace('"', '\\"')
        segment = f'["{text}"]'
    return f"{path}{segment}"


def _index(path: str, index: int) -> str:
    return f"{path}[{index}]"


# --- Typed readers ------------------------------------------------------------------------------------
def _mapping(value: Any, path: str, *, allowed: tuple[str, ...] | frozenset[str] | None = None) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(path, "must be an object")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(_key(path, key), "object keys must be strings")
        if allowed is not None and key not in allowed:
            if key in _SECRET_KEYS:
                raise ConfigError(
                    _key(path, key),
                    "secrets cannot be set from configuration; use manage.py bailing_client_token",
                )
            raise ConfigError(_key(path, key), "unknown field")
    return value


def _string(
    value: Any,
    path: str,
    *,
    max_len: int,
    min_len: int = 1,
    multiline: bool = False,
    pattern: re.Pattern[str] | None = None,
    pattern_reason: str = "has an invalid format",
) -> str:
    if not isinstance(value, str):
        raise ConfigError(path, "must be a string")
    if has_lone_surrogate(value):
        raise ConfigError(path, "contains an unpaired surrogate")
    if has_control_chars(value, multiline=multiline):
        raise ConfigError(path, "contains control characters")
    length = utf16_length(value)
    if length < min_len:
        raise ConfigError(
            path, "must not be empty" if min_len == 1 else f"must be at least {min_len} characters"
        )
    if length > max_len:
        raise ConfigError(path, f"must be at most {max_len} characters")
    if pattern is not None and not pattern.fullmatch(value):
        raise ConfigError(path, pattern_reason)
    return value


def _integer(value: Any, path: str, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, "must be an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(path, _range_text(lo, hi))
    return value


def _number(
    value: Any, path: str, *, lo: float, hi: float | None = None, exclusive_lo: bool = False
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, "must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(path, "must be a finite number")
    if exclusive_lo and value <= lo:
        raise ConfigError(path, f"must be greater than {lo:g}")
    if value < lo or (hi is not None and value > hi):
        raise ConfigError(path, _range_text(lo, hi))
    return value


def _range_text(lo: float | None, hi: float | None) -> str:
    if hi is None:
        return f"must be at least {lo:g}"
    if lo is None:
        return f"must be at most {hi:g}"
    return f"must be between {lo:g} and {hi:g}"


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, "must be true or false")
    return value


def _choice(value: Any, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(path, "must be one of " + ", ".join(choices))
    return value


def _list(
    value: Any,
    path: str,
    item: Callable[[Any, str], Any],
    *,
    min_items: int = 0,
    max_items: int | None = None,
    unique: bool = True,
) -> list:
    if not isinstance(value, list):
        raise ConfigError(path, "must be a list")
    if len(value) < min_items:
        raise ConfigError(
            path, "must not be empty" if min_items == 1 else f"needs at least {min_items} items"
        )
    if max_items is not None and len(value) > max_items:
        raise ConfigError(path, f"must have at most {max_items} items")
    result = []
    for i, raw in enumerate(value):
        checked = item(raw, _index(path, i))
        if unique and checked in result:
            raise ConfigError(_index(path, i), "duplicate value")
        result.append(checked)
    return result


def _url(value: Any, path: str) -> str:
    """An outbound http(s) URL (callbacks, approval webhooks): host required, no userinfo/fragment."""
    text = _string(value, path, max_len=_URL_MAX)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise ConfigError(path, "is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(path, "must be an http or https URL with a host")
    if "@" in parts.netloc:
        raise ConfigError(path, "must not contain userinfo")
    if parts.fragment or "#" in text:
        raise ConfigError(path, "must not contain a fragment")
    if any(ch.isspace() for ch in text):
        raise ConfigError(path, "must not contain whitespace")
    return text


def _freeform(value: Any, path: str, depth: int = 0) -> Any:
    """Any JSON value PostgreSQL ``jsonb`` can store and read back unchanged."""
    if depth > _FREEFORM_MAX_DEPTH:
        raise ConfigError(path, "is nested too deeply")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(path, "must be a finite number")
        return value
    if isinstance(value, str):
        # jsonb cannot store NUL; other controls are refused as everywhere else.
        return _string(value, path, max_len=10**7, min_len=0, multiline=True)
    if isinstance(value, list):
        return [_freeform(item, _index(path, i), depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(_key(path, key), "object keys must be strings")
            _string(key, _key(path, key), max_len=256, min_len=0)
            result[key] = _freeform(item, _key(path, key), depth + 1)
        return result
    raise ConfigError(path, "must be a JSON value (string, number, boolean, null, list or object)")


def _freeform_object(value: Any, path: str) -> dict:
    _mapping(value, path)
    result = _freeform(value, path)
    if compact_json_utf8_bytes(result) > _FREEFORM_MAX_BYTES:
        raise ConfigError(path, f"must be at most {_FREEFORM_MAX_BYTES} bytes as JSON")
    return result


def _resource_name(value: Any, path: str) -> str:
    return _string(
        value,
        path,
        max_len=64,
        pattern=_RESOURCE_NAME_RE,
        pattern_reason="must match ^[a-z0-9][a-z0-9_-]{1,63}$",
    )


def _line(max_len: int) -> Callable[[Any, str], str]:
    return lambda value, path: _string(value, path, max_len=max_len)


# --- Client -------------------------------------------------------------------------------------------
_CLIENT_KEYS = (
    "app_id",
    "name",
    "description",
    "enabled",
    "allowed_routes",
    "allowed_channels",
    "rate_limit_per_min",
    "budget",
    "agent_authorize_url",
    "hub_consent",
)
_BUDGET_KEYS = ("enabled", "window", "window_hours", "hard_cost_usd", "hard_tokens")


def _allowed_route(value: Any, path: str) -> str:
    if value == "*":
        return value
    return _string(
        value,
        path,
        max_len=128,
        pattern=_ROUTE_KEY_RE,
        pattern_reason='must be "*" or a route key matching ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$',
    )


def _budget(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=_BUDGET_KEYS)
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "window" in data:
        result["window"] = _choice(data["window"], _key(path, "window"), ("hour", "day", "month"))
    if "window_hours" in data:
        result["window_hours"] = _integer(
            data["window_hours"], _key(path, "window_hours"), lo=1, hi=_BUDGET_WINDOW_HOURS_MAX
        )
    if "hard_cost_usd" in data:
        result["hard_cost_usd"] = _number(
            data["hard_cost_usd"], _key(path, "hard_cost_usd"), lo=0, exclusive_lo=True
        )
    if "hard_tokens" in data:
        result["hard_tokens"] = _integer(data["hard_tokens"], _key(path, "hard_tokens"), lo=1)
    return result


def validate_client_config(data: dict, *, path: str) -> dict:
    """Validate one ``clients[]`` item; return it as ``Client`` column values with defaults applied.

    The result is the complete desired state of the row's configuration (absent optional fields take
    their defaults), so applying a file is declarative: removing a line resets the field.
    """
    data = _mapping(data, path, allowed=_CLIENT_KEYS)
    for required in ("app_id", "name"):
        if required not in data:
            raise ConfigError(_key(path, required), "is required")
    result: dict[str, Any] = {
        "app_id": _resource_name(data["app_id"], _key(path, "app_id")),
        "name": _string(data["name"], _key(path, "name"), max_len=128),
        "description": "",
        "enabled": True,
        "allowed_routes": [],
        "allowed_channels": [],
        "rate_limit_per_min": CLIENT_DEFAULT_RATE_LIMIT,
        "budget": None,
        "agent_authorize_url": "",
        "hub_consent": False,
    }
    if "description" in data:
        result["description"] = _string(
            data["description"], _key(path, "description"), max_len=1000, min_len=0, multiline=True
        )
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "allowed_routes" in data:
        result["allowed_routes"] = _list(data["allowed_routes"], _key(path, "allowed_routes"), _allowed_route)
    if "allowed_channels" in data:
        result["allowed_channels"] = _list(
            data["allowed_channels"], _key(path, "allowed_channels"), _line(128)
        )
    if "rate_limit_per_min" in data:
        result["rate_limit_per_min"] = _integer(
            data["rate_limit_per_min"], _key(path, "rate_limit_per_min"), lo=0, hi=_PG_INT_MAX
        )
    if "budget" in data:
        # null is accepted because the column is nullable: an exported client without a budget
        # round-trips.
        result["budget"] = None if data["budget"] is None else _budget(data["budget"], _key(path, "budget"))
    if "agent_authorize_url" in data:
        url_path = _key(path, "agent_authorize_url")
        url = _string(data["agent_authorize_url"], url_path, max_len=_URL_MAX)
        problem = authorize_url_problem(url)
        if problem:
            raise ConfigError(url_path, problem)
        result["agent_authorize_url"] = url
    if "hub_consent" in data:
        result["hub_consent"] = _boolean(data["hub_consent"], _key(path, "hub_consent"))
    return result


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
_ROUTE_KEYS = (
    "route_key",
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
    *_RUN_KEYS,
)
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
    key = _string(
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
    result = _freeform_object(value, path)
    if "system_prompt" in result:
        _string(
            result["system_prompt"], _key(path, "system_prompt"), max_len=40_000, min_len=0, multiline=True
        )
    return result


def _audience(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=tuple(AUDIENCE_DEFAULTS))
    result: dict[str, Any] = {}
    for key, raw in data.items():
        field = _key(path, key)
        if key in ("enabled", "auto", "anonymous"):
            result[key] = _boolean(raw, field)
        elif key == "priority":
            result[key] = _integer(raw, field, lo=-1000, hi=1000)
        else:
            result[key] = _list(raw, field, _line(191), max_items=100)
    return result


def _memory(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=tuple(MEMORY_DEFAULTS))
    result: dict[str, Any] = {}
    for key, raw in data.items():
        field = _key(path, key)
        if key == "summary_enabled":
            result[key] = _boolean(raw, field)
        elif key == "summary_model":
            result[key] = _string(raw, field, max_len=100)
        else:
            lo, hi = _MEMORY_RANGES[key]
            result[key] = _integer(raw, field, lo=lo, hi=hi)
    return result


def _fusion(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=tuple(FUSION_DEFAULTS))
    result: dict[str, Any] = {}
    if "method" in data:
        result["method"] = _choice(data["method"], _key(path, "method"), ("rrf", "normalized"))
    if "rrf_k" in data:
        result["rrf_k"] = _integer(data["rrf_k"], _key(path, "rrf_k"), lo=1, hi=1000)
    for name in ("lexical_weight", "vector_weight"):
        if name in data:
            result[name] = float(_number(data[name], _key(path, name), lo=0, hi=10))
    weights = {**FUSION_DEFAULTS, **result}
    if weights["lexical_weight"] == 0 and weights["vector_weight"] == 0:
        raise ConfigError(path, "at least one lane weight must be above 0")
    return result


def _knowledge(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("kb_id", "kb_ids", *KNOWLEDGE_DEFAULTS))
    if not data:
        return {}
    if "kb_id" in data and "kb_ids" in data:
        raise ConfigError(_key(path, "kb_ids"), "set either kb_id or kb_ids, not both")
    if "kb_id" not in data and "kb_ids" not in data:
        raise ConfigError(path, "needs kb_id or kb_ids")
    result: dict[str, Any] = {}
    if "kb_id" in data:
        result["kb_id"] = _resource_name(data["kb_id"], _key(path, "kb_id"))
    if "kb_ids" in data:
        result["kb_ids"] = _list(data["kb_ids"], _key(path, "kb_ids"), _resource_name, min_items=1)
    if "top_k" in data:
        result["top_k"] = _integer(data["top_k"], _key(path, "top_k"), lo=1, hi=20)
    if "min_score" in data:
        result["min_score"] = _number(data["min_score"], _key(path, "min_score"), lo=0, hi=1)
    if "inject" in data:
        result["inject"] = _choice(data["inject"], _key(path, "inject"), ("chunk", "doc"))
    if "max_docs" in data:
        result["max_docs"] = _integer(data["max_docs"], _key(path, "max_docs"), lo=1, hi=20)
    if "page_boost" in data:
        result["page_boost"] = _boolean(data["page_boost"], _key(path, "page_boost"))
    if "fusion" in data:
        result["fusion"] = _fusion(data["fusion"], _key(path, "fusion"))
    return result


def _scope(value: Any, path: str) -> str:
    scope = _string(value, path, max_len=_SCOPE_MAX)
    if any(ch.isspace() for ch in scope):
        raise ConfigError(path, "must not contain whitespace")
    if "*" in scope and not (
        scope == "*" or (scope.endswith(".*") and scope.count("*") == 1 and len(scope) > 2)
    ):
        raise ConfigError(path, 'wildcards are only allowed as "*" or a trailing ".*"')
    return scope


def _retrieval(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=tuple(RETRIEVAL_DEFAULTS))
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "min_score" in data:
        result["min_score"] = _number(data["min_score"], _key(path, "min_score"), lo=0, hi=1)
    if "max_tools" in data:
        result["max_tools"] = _integer(data["max_tools"], _key(path, "max_tools"), lo=1, hi=40)
    return result


def _tool_source(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("provider", "allow", "subject_field", "retrieval"))
    for required in ("provider", "allow"):
        if required not in data:
            raise ConfigError(_key(path, required), "is required")
    result: dict[str, Any] = {
        "provider": _resource_name(data["provider"], _key(path, "provider")),
        "allow": _list(data["allow"], _key(path, "allow"), _scope, min_items=1),
    }
    if "subject_field" in data:
        result["subject_field"] = _string(data["subject_field"], _key(path, "subject_field"), max_len=128)
    if "retrieval" in data:
        result["retrieval"] = _retrieval(data["retrieval"], _key(path, "retrieval"))
    return result


def _approval(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("type", "url", "to"))
    if "type" not in data:
        raise ConfigError(_key(path, "type"), "is required")
    result: dict[str, Any] = {
        "type": _string(
            data["type"],
            _key(path, "type"),
            max_len=64,
            pattern=_APPROVAL_TYPE_RE,
            pattern_reason="must match ^[a-z][a-z0-9_-]{0,63}$",
        )
    }
    if "url" in data:
        result["url"] = _url(data["url"], _key(path, "url"))
    elif result["type"] in _WEBHOOK_APPROVAL_TYPES:
        raise ConfigError(_key(path, "url"), "is required for webhook approval types")
    if "to" in data:
        result["to"] = _string(data["to"], _key(path, "to"), max_len=191)
    return result


def _builtin(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("send_message",))
    result: dict[str, Any] = {}
    if "send_message" in data:
        send_path = _key(path, "send_message")
        send = _mapping(data["send_message"], send_path, allowed=("channels",))
        if "channels" not in send:
            raise ConfigError(_key(send_path, "channels"), "is required")
        result["send_message"] = {
            "channels": _list(send["channels"], _key(send_path, "channels"), _line(128), min_items=1)
        }
    return result


def _operation_id(value: Any, path: str) -> str:
    if isinstance(value, str) and "*" in value:
        raise ConfigError(path, "wildcards are not allowed; list exact operation IDs")
    return _string(
        value,
        path,
        max_len=64,
        pattern=_OPERATION_ID_RE,
        pattern_reason="must be an exact operation ID matching ^[A-Za-z_][A-Za-z0-9_]{0,63}$",
    )


def _agent_direct(value: Any, path: str) -> dict:
    data = _mapping(
        value, path, allowed=("enabled", "write_tools", "force_approval_tools", "unattended_write_tools")
    )
    if "enabled" not in data:
        raise ConfigError(_key(path, "enabled"), "is required")
    result: dict[str, Any] = {"enabled": _boolean(data["enabled"], _key(path, "enabled"))}
    for key in ("write_tools", "force_approval_tools", "unattended_write_tools"):
        if key in data:
            result[key] = _list(data[key], _key(path, key), _operation_id)
    if "force_approval_tools" in result and "unattended_write_tools" in result:
        # Spec: the deprecated field stays readable for migration but is never combined with its
        # replacement; convert with force_approval_tools = write_tools − unattended_write_tools.
        raise ConfigError(
            _key(path, "unattended_write_tools"),
            "is deprecated and cannot be combined with force_approval_tools; "
            "convert it to force_approval_tools = write_tools minus unattended_write_tools",
        )
    writes = result.get("write_tools", [])
    for key in ("force_approval_tools", "unattended_write_tools"):
        for i, name in enumerate(result.get(key, [])):
            if name not in writes:
                raise ConfigError(_index(_key(path, key), i), "must also be listed in write_tools")
    return result


def _tools(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("sources", "max_calls", "builtin", "approval", "agent_direct"))
    result: dict[str, Any] = {}
    if "sources" in data:
        sources_path = _key(path, "sources")
        sources = _list(data["sources"], sources_path, _tool_source, min_items=1, unique=False)
        seen: set[str] = set()
        for i, source in enumerate(sources):
            if source["provider"] in seen:
                raise ConfigError(_key(_index(sources_path, i), "provider"), "provider is listed twice")
            seen.add(source["provider"])
        result["sources"] = sources
    if "max_calls" in data:
        result["max_calls"] = _integer(data["max_calls"], _key(path, "max_calls"), lo=1, hi=50)
    if "builtin" in data:
        result["builtin"] = _builtin(data["builtin"], _key(path, "builtin"))
    if "approval" in data:
        result["approval"] = _approval(data["approval"], _key(path, "approval"))
    if "agent_direct" in data:
        result["agent_direct"] = _agent_direct(data["agent_direct"], _key(path, "agent_direct"))
    return result


def _system_info(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("name", "summary", "domains", "boundaries"))
    result: dict[str, Any] = {}
    if "name" in data:
        result["name"] = _string(data["name"], _key(path, "name"), max_len=120)
    if "summary" in data:
        result["summary"] = _string(data["summary"], _key(path, "summary"), max_len=400, multiline=True)
    if "domains" in data:
        result["domains"] = _list(data["domains"], _key(path, "domains"), _line(120), max_items=6)
    if "boundaries" in data:
        result["boundaries"] = _list(data["boundaries"], _key(path, "boundaries"), _line(160), max_items=6)
    return result


def _agent_client(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("enabled", "instructions", "active_tool_limit", "system_info"))
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "instructions" in data:
        result["instructions"] = _string(
            data["instructions"], _key(path, "instructions"), max_len=20_000, min_len=0, multiline=True
        )
    if "active_tool_limit" in data:
        result["active_tool_limit"] = _integer(
            data["active_tool_limit"], _key(path, "active_tool_limit"), lo=1, hi=12
        )
    if "system_info" in data:
        result["system_info"] = _system_info(data["system_info"], _key(path, "system_info"))
    return result


def _delivery(value: Any, path: str) -> dict:
    # Delivery is adapter-specific upstream (extra keys allowed); the known keys are typed and the
    # type-dependent requirements of upstream's /run delivery are kept.
    data = _freeform_object(value, path)
    if "type" not in data:
        raise ConfigError(_key(path, "type"), "is required")
    kind = _string(data["type"], _key(path, "type"), max_len=64)
    if "url" in data:
        _url(data["url"], _key(path, "url"))
    for key in ("channel", "to", "to_field"):
        if key in data:
            _string(data[key], _key(path, key), max_len=191)
    if kind == "webhook" and "url" not in data:
        raise ConfigError(_key(path, "url"), "is required when type is webhook")
    if kind == "channel" and "channel" not in data:
        raise ConfigError(_key(path, "channel"), "is required when type is channel")
    if kind not in ("webhook", "none") and "to" not in data and "to_field" not in data:
        raise ConfigError(_key(path, "to"), "to or to_field is required for this delivery type")
    return data


def _retry(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=("max", "backoff_ms"))
    result: dict[str, Any] = {}
    if "max" in data:
        result["max"] = _integer(data["max"], _key(path, "max"), lo=0, hi=5)
    if "backoff_ms" in data:
        result["backoff_ms"] = _integer(data["backoff_ms"], _key(path, "backoff_ms"), lo=500, hi=300_000)
    return result


def _run_config(data: dict, path: str) -> dict:
    """The ``/run``-only fields: checked so exported configs round-trip, never read by agent surfaces."""
    result: dict[str, Any] = {}
    if "project" in data:
        result["project"] = _string(data["project"], _key(path, "project"), max_len=128)
    if "profile" in data:
        result["profile"] = _string(data["profile"], _key(path, "profile"), max_len=64)
    if "session_policy" in data:
        result["session_policy"] = _choice(
            data["session_policy"], _key(path, "session_policy"), _SESSION_POLICIES
        )
    for key in ("session_fixed_id", "session_key_field"):
        if key in data:
            result[key] = _string(data[key], _key(path, key), max_len=191)
    if result.get("session_policy") == "fixed" and "session_fixed_id" not in result:
        raise ConfigError(_key(path, "session_fixed_id"), "is required when session_policy is fixed")
    if result.get("session_policy") == "per_key" and "session_key_field" not in result:
        raise ConfigError(_key(path, "session_key_field"), "is required when session_policy is per_key")
    if "default_callback_url" in data:
        result["default_callback_url"] = _url(
            data["default_callback_url"], _key(path, "default_callback_url")
        )
    if "delivery" in data:
        result["delivery"] = _delivery(data["delivery"], _key(path, "delivery"))
    if "retry" in data:
        result["retry"] = _retry(data["retry"], _key(path, "retry"))
    if "budget" in data:
        result["budget"] = _budget(data["budget"], _key(path, "budget"))
    return result


def validate_route_config(data: dict, *, path: str) -> dict:
    """Validate one ``routes[]`` item; return it as ``Route`` column values.

    Scalar columns get their defaults; the JSON blocks are returned exactly as written (validated,
    not filled in) so that a later change of a default reaches every route that did not set it.
    """
    data = _mapping(data, path, allowed=_ROUTE_KEYS)
    for required in ("route_key", "name"):
        if required not in data:
            raise ConfigError(_key(path, required), "is required")
    result: dict[str, Any] = {
        "route_key": _route_key(data["route_key"], _key(path, "route_key")),
        "name": _string(data["name"], _key(path, "name"), max_len=128),
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
        "run_config": {},
    }
    if "description" in data:
        result["description"] = _string(
            data["description"], _key(path, "description"), max_len=1000, min_len=0, multiline=True
        )
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "target" in data:
        result["target"] = _resource_name(data["target"], _key(path, "target"))
    if "target_config" in data:
        result["target_config"] = _target_config(data["target_config"], _key(path, "target_config"))
    if "permission" in data and data["permission"] is not None:
        result["permission"] = _choice(data["permission"], _key(path, "permission"), _PERMISSIONS)
    if "audience" in data:
        result["audience"] = _audience(data["audience"], _key(path, "audience"))
    if "memory" in data:
        result["memory"] = _memory(data["memory"], _key(path, "memory"))
    if "knowledge" in data:
        result["knowledge"] = _knowledge(data["knowledge"], _key(path, "knowledge"))
    if "tools" in data:
        result["tools"] = _tools(data["tools"], _key(path, "tools"))
    if "agent_client" in data:
        result["agent_client"] = _agent_client(data["agent_client"], _key(path, "agent_client"))
        # Agent surfaces accept only resource-name route keys (research §A.2.7): a workspace under
        # any other key could never be reached, so say so now rather than at sign-in.
        if result["agent_client"].get("enabled") and not _AGENT_ROUTE_RE.fullmatch(result["route_key"]):
            raise ConfigError(
                _key(_key(path, "agent_client"), "enabled"),
                "agent workspaces need a route_key matching ^[a-z0-9][a-z0-9_-]{1,63}$",
            )
    result["run_config"] = _run_config(data, path)
    return result


# --- Tool provider ----------------------------------------------------------------------------------
# A provider's HMAC secret never appears in a config file: the file names where to read it at apply
# time (``secret_env`` or ``secret_file``), and ``agent_runtime.services.config_apply`` reads it,
# compares it with the stored (sealed) secret and seals it. Leaving both out means the file does not
# manage the secret (it is kept as it is, e.g. as set in the console).
PROVIDER_DEFAULT_SPEC_URL = "/.well-known/bailing/tools.json"
PROVIDER_DEFAULT_TIMEOUT_MS = 10_000
PROVIDER_DEFAULT_RATE_LIMIT = 120
# Inline specs and fetched specs share one budget (compact JSON / raw response bytes).
PROVIDER_SPEC_MAX_BYTES = 5 * 1024 * 1024
_PROVIDER_KEYS = (
    "name",
    "description",
    "enabled",
    "base_url",
    "spec_source",
    "spec_url",
    "spec",
    "spec_access_policy",
    "timeout_ms",
    "rate_limit_per_min",
    "auto_refresh_min",
    "secret_env",
    "secret_file",
)
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Signed paths travel in headers and in the signed string: printable ASCII only (bailing.signing).
_PRINTABLE_ASCII_RE = re.compile(r"[\x21-\x7e]+")
# RFC 3986 path and query characters: an HTTP client sends them unchanged, so the path the business
# receives is byte for byte the path that was signed.
_URI_PATH_RE = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]+")
_SPEC_MAX_DEPTH = 256


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _provider_base_url(value: Any, path: str) -> str:
    """Where the hub reaches the business system: https, or plain http only to a loopback host.

    No userinfo (credentials belong in the provider secret, never in a URL that is displayed and
    logged), no query and no fragment (tool and spec paths are appended to it).
    """
    text = _string(value, path, max_len=_URL_MAX)
    if not _PRINTABLE_ASCII_RE.fullmatch(text):
        raise ConfigError(path, "must be printable ASCII without spaces (use punycode for host names)")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise ConfigError(path, "is not a valid URL") from None
    if "@" in parts.netloc:
        raise ConfigError(path, "must not contain userinfo")
    if "?" in text:
        raise ConfigError(path, "must not contain a query")
    if "#" in text:
        raise ConfigError(path, "must not contain a fragment")
    if not parts.hostname:
        raise ConfigError(path, "must be an http or https URL with a host")
    if parts.scheme == "https":
        return text
    if parts.scheme == "http" and _is_loopback_host(parts.hostname):
        return text
    raise ConfigError(path, "must be https, or http to a loopback host (127.0.0.1, ::1, localhost)")


def _provider_spec_url(value: Any, path: str) -> str:
    """A path (with optional query) on ``base_url``'s origin.

    Absolute URLs are refused: the signed spec fetch must never be sent to a host other than the
    provider's, and the signature covers exactly this path and query.
    """
    text = _string(value, path, max_len=_URL_MAX)
    if not _URI_PATH_RE.fullmatch(text):
        raise ConfigError(path, "must use only URI characters (percent-encode anything else)")
    if not text.startswith("/") or text.startswith("//"):
        raise ConfigError(path, "must be a path starting with / on base_url's origin (no absolute URLs)")
    # HTTP clients resolve "." and ".." segments before sending, which would change the signed path.
    if any(segment in (".", "..") for segment in text.split("?", 1)[0].split("/")):
        raise ConfigError(path, 'must not contain "." or ".." segments')
    return text


def _spec_value(value: Any, path: str, depth: int) -> Any:
    # YAML gives integer keys for unquoted status codes (200:) and dates for unquoted ISO dates; they
    # become strings exactly as the compiler's YAML reader does, so a spec means the same whether it
    # is inline here or fetched as YAML. Anything else that is not JSON is an error.
    if depth > _SPEC_MAX_DEPTH:
        raise ConfigError(path, "is nested too deeply")
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(path, "must be a finite number")
        return value
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        return [_spec_value(item, _index(path, i), depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if isinstance(key, bool):
                key = "true" if key else "false"
            elif isinstance(key, int):
                key = str(key)
            elif not isinstance(key, str):
                raise ConfigError(_key(path, key), "object keys must be strings")
            result[key] = _spec_value(item, _key(path, key), depth + 1)
        return result
    raise ConfigError(path, "must be a JSON value (string, number, boolean, null, list or object)")


def _provider_spec(value: Any, path: str) -> dict:
    _mapping(value, path)
    result = _spec_value(value, path, 0)
    try:
        size = compact_json_utf8_bytes(result)
    except ValueError:  # lone surrogates cannot be encoded; the compiler would refuse them too
        raise ConfigError(path, "contains an unpaired surrogate") from None
    if size > PROVIDER_SPEC_MAX_BYTES:
        raise ConfigError(path, f"must be at most {PROVIDER_SPEC_MAX_BYTES} bytes as JSON")
    return result


def _secret_reference(data: dict, path: str) -> dict[str, str]:
    """Where a secret is read from at apply/use time: ``secret_env`` (a variable name) or
    ``secret_file`` (a path), at most one of them; the secret itself is never in a config file."""
    if "secret_env" in data and "secret_file" in data:
        raise ConfigError(_key(path, "secret_file"), "set either secret_env or secret_file, not both")
    result: dict[str, str] = {}
    if "secret_env" in data:
        result["secret_env"] = _string(
            data["secret_env"],
            _key(path, "secret_env"),
            max_len=128,
            pattern=_ENV_NAME_RE,
            pattern_reason="must be an environment variable name matching ^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        )
    if "secret_file" in data:
        result["secret_file"] = _string(data["secret_file"], _key(path, "secret_file"), max_len=1024)
    return result


def validate_tool_provider_config(data: dict, *, path: str) -> dict:
    """Validate one ``tool_providers[]`` item; return ``ToolProvider`` column values plus the secret
    reference (``secret_env`` / ``secret_file``, not columns; ``None`` when absent).

    Like clients, the result is the complete desired configuration: absent fields take their
    defaults. The inline spec is only checked for JSON-ness and size here; whether it compiles is
    decided by ``config_apply`` (the compiler), before anything is written.
    """
    if isinstance(data, dict) and "secret" in data:
        raise ConfigError(
            _key(path, "secret"),
            "secrets are never written in configuration files; use secret_env or secret_file",
        )
    data = _mapping(data, path, allowed=_PROVIDER_KEYS)
    for required in ("name", "base_url"):
        if required not in data:
            raise ConfigError(_key(path, required), "is required")
    result: dict[str, Any] = {
        "name": _resource_name(data["name"], _key(path, "name")),
        "description": "",
        "enabled": True,
        "base_url": _provider_base_url(data["base_url"], _key(path, "base_url")),
        "spec_source": "url",
        "spec_url": PROVIDER_DEFAULT_SPEC_URL,
        "spec_inline": None,
        "spec_access_policy": "signed_required",
        "timeout_ms": PROVIDER_DEFAULT_TIMEOUT_MS,
        "rate_limit_per_min": PROVIDER_DEFAULT_RATE_LIMIT,
        "auto_refresh_min": 0,
        "secret_env": None,
        "secret_file": None,
    }
    if "description" in data:
        result["description"] = _string(
            data["description"], _key(path, "description"), max_len=1000, min_len=0, multiline=True
        )
    if "enabled" in data:
        result["enabled"] = _boolean(data["enabled"], _key(path, "enabled"))
    if "spec_source" in data:
        result["spec_source"] = _choice(data["spec_source"], _key(path, "spec_source"), ("url", "inline"))
    if result["spec_source"] == "url":
        if "spec" in data:
            raise ConfigError(_key(path, "spec"), "is only allowed with spec_source: inline")
        if "spec_url" in data:
            result["spec_url"] = _provider_spec_url(data["spec_url"], _key(path, "spec_url"))
    else:
        if "spec_url" in data:
            raise ConfigError(_key(path, "spec_url"), "is only allowed with spec_source: url")
        if "spec" not in data:
            raise ConfigError(_key(path, "spec"), "is required when spec_source is inline")
        result["spec_inline"] = _provider_spec(data["spec"], _key(path, "spec"))
    if "spec_access_policy" in data:
        result["spec_access_policy"] = _choice(
            data["spec_access_policy"],
            _key(path, "spec_access_policy"),
            ("signed_required", "public_allowed"),
        )
    if "timeout_ms" in data:
        result["timeout_ms"] = _integer(data["timeout_ms"], _key(path, "timeout_ms"), lo=1000, hi=60_000)
    if "rate_limit_per_min" in data:
        result["rate_limit_per_min"] = _integer(
            data["rate_limit_per_min"], _key(path, "rate_limit_per_min"), lo=0, hi=_PG_INT_MAX
        )
    if "auto_refresh_min" in data:
        result["auto_refresh_min"] = _integer(
            data["auto_refresh_min"], _key(path, "auto_refresh_min"), lo=0, hi=1440
        )
    result.update(_secret_reference(data, path))
    return result


# --- Knowledge bases (research §A.2.17) ---------------------------------------------------------------
KB_EMBEDDING_PROVIDERS = ("local", "openai", "none")
# The local provider's model and dimension (knowledge.embeddings); repeated here so validating a
# config file never loads the ONNX runtime.
KB_LOCAL_MODEL = "all-MiniLM-L6-v2-onnx-int8"
KB_LOCAL_DIM = 384
_KB_KEYS = ("kb_id", "name", "description", "enabled", "embedding", "writers")
_KB_EMBEDDING_KEYS = ("provider", "model", "dim", "base_url", "secret_env", "secret_file", "timeout_seconds")


def _kb_embedding(value: Any, path: str) -> dict:
    data = _mapping(value, path, allowed=_KB_EMBEDDING_KEYS)
    provider = _choice(data.get("provider", "local"), _key(path, "provider"), KB_EMBEDDING_PROVIDERS)
    result: dict[str, Any] = {"provider": provider, "model": "", "dim": 0, "config": {}}
    if provider == "local":
        for name in ("base_url", "secret_env", "secret_file", "timeout_seconds"):
            if name in data:
                raise ConfigError(_key(path, name), "is only for the openai provider")
        if "model" in data and data["model"] != KB_LOCAL_MODEL:
            raise ConfigError(_key(path, "model"), f"the local provider serves {KB_LOCAL_MODEL} only")
        if "dim" in data and data["dim"] != KB_LOCAL_DIM:
            raise ConfigError(_key(path, "dim"), f"the local model has {KB_LOCAL_DIM} dimensions")
        result.update(model=KB_LOCAL_MODEL, dim=KB_LOCAL_DIM)
    elif provider == "none":
        for name in _KB_EMBEDDING_KEYS[1:]:
            if name in data:
                raise ConfigError(_key(path, name), "a knowledge base without embeddings takes no settings")
    else:
        for required in ("model", "dim", "base_url"):
            if required not in data:
                raise ConfigError(_key(path, required), "is required for the openai provider")
        result["model"] = _string(data["model"], _key(path, "model"), max_len=128)
        result["dim"] = _integer(data["dim"], _key(path, "dim"), lo=1, hi=16_000)
        config: dict[str, Any] = {"base_url": _provider_base_url(data["base_url"], _key(path, "base_url"))}
        config.update(_secret_reference(data, path))
        if "timeout_seconds" in data:
            config["timeout_seconds"] = _integer(
                data["timeout_seconds"], _key(path, "timeout_seconds"), lo=1, hi=300
            )
        result["config"] = config
    return result


def validate_knowledge_base_config(data: dict, *, path: str) -> dict:
    """Validate one ``knowledge_bases[]`` item; return ``KnowledgeBase`` column values plus ``writers``
    (client app ids). The embedding provider, model, dimension and endpoint are locked once the knowledge
    base exists (``config_apply`` refuses a change); ``writers`` name clients that may push documents
    with their Client Token.
    """
    if isinstance(data, dict) and isinstance(data.get("embedding"), dict) and "api_key" in data["embedding"]:
        raise ConfigError(
            _key(_key(path, "embedding"), "api_key"),
            "secrets are never written in configuration files; use secret_env or secret_file",
        )
    data = _mapping(data, path, allowed=_KB_KEYS)
    for required in ("kb_id", "name"):
        if required not in data:
            raise ConfigError(_key(path, required), "is required")
    embedding = _kb_embedding(data.get("embedding", {}), _key(path, "embedding"))
    return {
        "kb_id": _resource_name(data["kb_id"], _key(path, "kb_id")),
        "name": _string(data["name"], _key(path, "name"), max_len=128),
        "description": _string(
            data.get("description", ""), _key(path, "description"), max_len=1000, min_len=0, multiline=True
        ),
        "enabled": _boolean(data.get("enabled", True), _key(path, "enabled")),
        "embedding_provider": embedding["provider"],
        "embedding_model": embedding["model"],
        "embedding_dim": embedding["dim"],
        "embedding_config": embedding["config"],
        "writers": _list(data.get("writers", []), _key(path, "writers"), _resource_name),
    }


# --- Document -----------------------------------------------------------------------------------------
# Section name → (key field, item validator), in apply order. Later sections (knowledge_bases) are
# added here and in ``agent_runtime.services.config_apply``. Tool providers come before routes, which
# name them in ``tools.sources``.
CONFIG_SECTIONS: dict[str, tuple[str, Callable[..., dict]]] = {
    "clients": ("app_id", validate_client_config),
    "tool_providers": ("name", validate_tool_provider_config),
    "knowledge_bases": ("kb_id", validate_knowledge_base_config),
    "routes": ("route_key", validate_route_config),
}


def validate_document(document: Any) -> dict[str, list[dict]]:
    """Validate a whole config document; return ``{section: [validated items]}`` for every section.

    Every item is checked before anything is applied, so one bad item anywhere means nothing is
    written. A key listed twice in a section is an error at the second occurrence.
    """
    data = _mapping(document, "", allowed=tuple(CONFIG_SECTIONS))
    result: dict[str, list[dict]] = {}
    for section, (key_field, validate) in CONFIG_SECTIONS.items():
        items = data.get(section, [])
        if not isinstance(items, list):
            raise ConfigError(section, "must be a list")
        validated: list[dict] = []
        first_seen: dict[str, int] = {}
        for i, item in enumerate(items):
            item_path = _index(section, i)
            checked = validate(item, path=item_path)
            key = checked[key_field]
            if key in first_seen:
                raise ConfigError(
                    _key(item_path, key_field),
                    f"duplicate {key_field} (first used at {section}[{first_seen[key]}])",
                )
            first_seen[key] = i
            validated.append(checked)
        result[section] = validated
    return result


# --- Effective view -----------------------------------------------------------------------------------
def _field(route: Any, name: str, default: Any = None) -> Any:
    if isinstance(route, Mapping):
        return route.get(name, default)
    return getattr(route, name, default)


def _block(route: Any, name: str) -> Mapping:
    value = _field(route, name)
    return value if isinstance(value, Mapping) else {}


def _effective_sources(tools: Mapping) -> list[dict]:
    sources = []
    for source in tools.get("sources") or []:
        sources.append(
            {
                "provider": source["provider"],
                "allow": list(source["allow"]),
                "subject_field": source.get("subject_field"),
                "retrieval": {**RETRIEVAL_DEFAULTS, **(source.get("retrieval") or {})},
            }
        )
    return sources


def _effective_agent_direct(direct: Mapping) -> dict:
    writes = list(direct.get("write_tools") or [])
    unattended = direct.get("unattended_write_tools")
    if direct.get("force_approval_tools") is not None:
        force = list(direct["force_approval_tools"])
    elif unattended is not None:
        # Deprecated meaning: every direct write needed approval unless listed as unattended. The
        # equivalent strict list is the difference, in write_tools order (spec "Write and approval
        # semantics").
        force = [name for name in writes if name not in unattended]
    else:
        force = []
    return {
        "enabled": bool(direct.get("enabled", False)),
        "write_tools": writes,
        "force_approval_tools": force,
        "deprecated_unattended_write_tools": list(unattended or []),
    }


def route_effective(route: Any) -> dict:
    """The route with every default applied, as bootstrap, turns and the console read it.

    Accepts a ``Route`` or a dict of its columns (e.g. :func:`validate_route_config`'s result). Only
    ``target_config.system_prompt`` is taken from the target configuration: model, credential and
    other adapter settings never leave the hub.
    """
    target_config = _block(route, "target_config")
    knowledge = _block(route, "knowledge")
    tools = _block(route, "tools")
    agent_client = _block(route, "agent_client")

    if knowledge.get("kb_ids") is not None:
        kb_ids = list(knowledge["kb_ids"])
    elif knowledge.get("kb_id"):
        kb_ids = [knowledge["kb_id"]]
    else:
        kb_ids = []

    audience = {**AUDIENCE_DEFAULTS, **_block(route, "audience")}
    for key in AUDIENCE_LIST_KEYS:
        audience[key] = list(audience[key])

    system_info = agent_client.get("system_info")
    if isinstance(system_info, Mapping):
        system_info = {
            "name": system_info.get("name", ""),
            "summary": system_info.get("summary", ""),
            "domains": list(system_info.get("domains", [])),
            "boundaries": list(system_info.get("boundaries", [])),
        }
    else:
        system_info = None

    return {
        "route_key": _field(route, "route_key"),
        "name": _field(route, "name"),
        "description": _field(route, "description", "") or "",
        "enabled": bool(_field(route, "enabled", True)),
        "permission": _field(route, "permission") or "full",
        "system_prompt": target_config.get("system_prompt", ""),
        "audience": audience,
        "memory": {**MEMORY_DEFAULTS, **_block(route, "memory")},
        "knowledge": {
            "kb_ids": kb_ids,
            **{key: knowledge.get(key, value) for key, value in KNOWLEDGE_DEFAULTS.items()},
            "fusion": {**FUSION_DEFAULTS, **(knowledge.get("fusion") or {})},
        },
        "tools": {
            "sources": _effective_sources(tools),
            "max_calls": tools.get("max_calls", TOOLS_DEFAULTS["max_calls"]),
            "agent_direct": _effective_agent_direct(tools.get("agent_direct") or {}),
        },
        "agent_client": {
            "enabled": bool(agent_client.get("enabled", AGENT_CLIENT_DEFAULTS["enabled"])),
            "instructions": agent_client.get("instructions", AGENT_CLIENT_DEFAULTS["instructions"]),
            "active_tool_limit": agent_client.get(
                "active_tool_limit", AGENT_CLIENT_DEFAULTS["active_tool_limit"]
            ),
            "system_info": system_info,
        },
    }
