"""Validation of a ``tool_providers[]`` item."""

from __future__ import annotations

import math
import re
from datetime import date, datetime, time
from typing import Any

from agent_runtime.config.fields import (
    URL_MAX,
    ConfigError,
    field_path,
    item_path,
    read_base_url,
    read_choice,
    read_description_enabled,
    read_integer,
    read_object,
    read_rate_limit_per_min,
    read_resource_name,
    read_secret_reference,
    read_string,
    require_keys,
)
from agent_runtime.tools.compiler import MAX_SPEC_DEPTH, spec_json_key
from bailing.api.limits import compact_json_utf8_bytes

# --- Tool provider ----------------------------------------------------------------------------------
# A provider's HMAC secret never appears in a config file: the file names where to read it at apply
# time (``secret_env`` or ``secret_file``), and ``agent_runtime.services.config_apply`` reads it,
# compares it with the stored (sealed) secret and seals it. Leaving both out means the file does not
# manage the secret (it is kept as it is, e.g. as set in the console).
PROVIDER_DEFAULT_SPEC_URL = "/.well-known/bailing/tools.json"
PROVIDER_DEFAULT_TIMEOUT_MS = 10_000
PROVIDER_DEFAULT_RATE_LIMIT = 120
# The highest bulkhead a provider may set: no hub process runs more threads than this.
PROVIDER_MAX_CONCURRENT_CALLS = 256
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
    "max_concurrent_calls",
    "auto_refresh_min",
    "secret_env",
    "secret_file",
)
# RFC 3986 path and query characters: an HTTP client sends them unchanged, so the path the business
# receives is byte for byte the path that was signed.
_URI_PATH_RE = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]+")


def origin_path_problem(text: str) -> str | None:
    """Why ``text`` cannot be a signed request target on a provider's origin, or None.

    The rule of ``spec_url`` and of a spec's ``x-bailing-authz-probe`` path: a path (with optional
    query) of URI characters only, so an HTTP client sends it byte for byte as signed; never an
    absolute or scheme-relative URL, so a signed request cannot be sent to another host.
    """
    if not _URI_PATH_RE.fullmatch(text):
        return "must use only URI characters (percent-encode anything else)"
    if not text.startswith("/") or text.startswith("//"):
        return "must be a path starting with / on base_url's origin (no absolute URLs)"
    # HTTP clients resolve "." and ".." segments before sending, which would change the signed path.
    if any(segment in (".", "..") for segment in text.split("?", 1)[0].split("/")):
        return 'must not contain "." or ".." segments'
    return None


def _provider_spec_url(value: Any, path: str) -> str:
    """A path (with optional query) on ``base_url``'s origin (:func:`origin_path_problem`)."""
    text = read_string(value, path, max_len=URL_MAX)
    problem = origin_path_problem(text)
    if problem:
        raise ConfigError(path, problem)
    return text


def _spec_value(value: Any, path: str, depth: int) -> Any:
    # YAML gives integer keys for unquoted status codes (200:) and dates for unquoted ISO dates; they
    # become strings by the compiler's own rule (spec_json_key), so a spec means the same whether it
    # is inline here or fetched as YAML. Anything else that is not JSON is an error.
    if depth > MAX_SPEC_DEPTH:
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
        return [_spec_value(item, item_path(path, i), depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            json_key = spec_json_key(key)
            if json_key is None:
                raise ConfigError(field_path(path, key), "object keys must be strings")
            result[json_key] = _spec_value(item, field_path(path, json_key), depth + 1)
        return result
    raise ConfigError(path, "must be a JSON value (string, number, boolean, null, list or object)")


def _provider_spec(value: Any, path: str) -> dict:
    read_object(value, path)
    result = _spec_value(value, path, 0)
    try:
        size = compact_json_utf8_bytes(result)
    except ValueError:  # lone surrogates cannot be encoded; the compiler would refuse them too
        raise ConfigError(path, "contains an unpaired surrogate") from None
    if size > PROVIDER_SPEC_MAX_BYTES:
        raise ConfigError(path, f"must be at most {PROVIDER_SPEC_MAX_BYTES} bytes as JSON")
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
            field_path(path, "secret"),
            "secrets are never written in configuration files; use secret_env or secret_file",
        )
    data = read_object(data, path, allowed=_PROVIDER_KEYS)
    require_keys(data, path, ("name", "base_url"))
    result: dict[str, Any] = {
        "name": read_resource_name(data["name"], field_path(path, "name")),
        "description": "",
        "enabled": True,
        "base_url": read_base_url(data["base_url"], field_path(path, "base_url")),
        "spec_source": "url",
        "spec_url": PROVIDER_DEFAULT_SPEC_URL,
        "spec_inline": None,
        "spec_access_policy": "signed_required",
        "timeout_ms": PROVIDER_DEFAULT_TIMEOUT_MS,
        "rate_limit_per_min": PROVIDER_DEFAULT_RATE_LIMIT,
        "max_concurrent_calls": None,
        "auto_refresh_min": 0,
        "secret_env": None,
        "secret_file": None,
    }
    read_description_enabled(data, path, result)
    if "spec_source" in data:
        result["spec_source"] = read_choice(
            data["spec_source"], field_path(path, "spec_source"), ("url", "inline")
        )
    if result["spec_source"] == "url":
        if "spec" in data:
            raise ConfigError(field_path(path, "spec"), "is only allowed with spec_source: inline")
        if "spec_url" in data:
            result["spec_url"] = _provider_spec_url(data["spec_url"], field_path(path, "spec_url"))
    else:
        if "spec_url" in data:
            raise ConfigError(field_path(path, "spec_url"), "is only allowed with spec_source: url")
        if "spec" not in data:
            raise ConfigError(field_path(path, "spec"), "is required when spec_source is inline")
        result["spec_inline"] = _provider_spec(data["spec"], field_path(path, "spec"))
    if "spec_access_policy" in data:
        result["spec_access_policy"] = read_choice(
            data["spec_access_policy"],
            field_path(path, "spec_access_policy"),
            ("signed_required", "public_allowed"),
        )
    if "timeout_ms" in data:
        result["timeout_ms"] = read_integer(
            data["timeout_ms"], field_path(path, "timeout_ms"), lo=1000, hi=60_000
        )
    if "rate_limit_per_min" in data:
        result["rate_limit_per_min"] = read_rate_limit_per_min(
            data["rate_limit_per_min"], field_path(path, "rate_limit_per_min")
        )
    if "max_concurrent_calls" in data:
        # The provider's bulkhead (agent_runtime.services.invocations.locks): calls in flight per hub
        # process; left out, the hub's BAILING_PROVIDER_MAX_CONCURRENT_CALLS.
        result["max_concurrent_calls"] = read_integer(
            data["max_concurrent_calls"],
            field_path(path, "max_concurrent_calls"),
            lo=1,
            hi=PROVIDER_MAX_CONCURRENT_CALLS,
        )
    if "auto_refresh_min" in data:
        result["auto_refresh_min"] = read_integer(
            data["auto_refresh_min"], field_path(path, "auto_refresh_min"), lo=0, hi=1440
        )
    result.update(read_secret_reference(data, path))
    return result
