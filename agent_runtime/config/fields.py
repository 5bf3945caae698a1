"""Typed readers of configuration values, shared by every config section (and by knowledge bases).

Pure functions, no database. A reader checks one value and returns it unchanged, or raises a
:class:`ConfigError` that names the exact path of the value (``routes[2].tools.agent_direct.
write_tools[1]``) and never the value itself. Rules that hold everywhere:

* Unknown keys are rejected (:func:`read_object` with ``allowed``), except inside free-form
  adapter settings (:func:`read_freeform_object`), which are kept as written but never exposed.
* Integers are JSON integers (never booleans, floats or numeric strings); numbers are finite.
* Strings never contain lone surrogates or control characters (TAB/LF/CR are allowed only in
  multi-line text). Lengths are counted in UTF-16 code units, as JavaScript clients count them
  (docs/protocol.md "Counting characters").
* Nothing is trimmed, truncated or normalized: invalid input is an error.
* Secrets never come from a file: a file names where a secret is read (:func:`read_secret_reference`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from agent_runtime.patterns import RESOURCE_NAME
from agent_runtime.validation import is_loopback_host
from bailing.api.limits import compact_json_utf8_bytes, utf16_length
from bailing.api.text import has_control_chars, has_lone_surrogate
from bailing.outbound import literal_host_problem
from bailing.outbound_targets import PRIVATE


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


# Client.rate_limit_per_min and similar columns are PostgreSQL integers.
PG_INT_MAX = 2_147_483_647
URL_MAX = 2048
# Free-form adapter settings (target_config, delivery) are bounded so a config file cannot store
# megabytes of JSON per route; the 40,000-character system prompt still fits with room to spare.
_FREEFORM_MAX_BYTES = 256 * 1024
_FREEFORM_MAX_DEPTH = 32
_RESOURCE_NAME_RE = re.compile(RESOURCE_NAME)
_SAFE_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SECRET_KEYS = frozenset({"token", "token_hash", "token_prefix", "client_token", "secret", "api_key"})
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# Signed paths travel in headers and in the signed string: printable ASCII only (bailing.signing).
_PRINTABLE_ASCII_RE = re.compile(r"[\x21-\x7e]+")


# --- Path helpers -------------------------------------------------------------------------------------
def field_path(path: str, key: Any) -> str:
    # Keys are echoed into error paths, so anything unusual is JSON-quoted and cut short rather than
    # printed raw (a key could carry control characters or be very long).
    if isinstance(key, str) and _SAFE_KEY_RE.fullmatch(key):
        segment = f".{key}" if path else key
    else:
        text = key if isinstance(key, str) else repr(key)
        text = text[:64].encode("unicode_escape").decode("ascii").replace('"', '\\"')
        segment = f'["{text}"]'
    return f"{path}{segment}"


def item_path(path: str, index: int) -> str:
    return f"{path}[{index}]"


# --- Typed readers ------------------------------------------------------------------------------------
def read_object(value: Any, path: str, *, allowed: tuple[str, ...] | frozenset[str] | None = None) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(path, "must be an object")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(field_path(path, key), "object keys must be strings")
        if allowed is not None and key not in allowed:
            if key in _SECRET_KEYS:
                raise ConfigError(
                    field_path(path, key),
                    "secrets cannot be set from configuration; use manage.py bailing_client_token",
                )
            raise ConfigError(field_path(path, key), "unknown field")
    return value


def read_string(
    value: Any,
    path: str,
    *,
    max_len: int,
    min_len: int = 1,
    multiline: bool = False,
    display: bool = False,
    pattern: re.Pattern[str] | None = None,
    pattern_reason: str = "has an invalid format",
) -> str:
    """A string of ``min_len``..``max_len`` UTF-16 units without lone surrogates or control
    characters; ``display`` text (names and descriptions the console shows) also without
    bidirectional controls."""
    if not isinstance(value, str):
        raise ConfigError(path, "must be a string")
    if has_lone_surrogate(value):
        raise ConfigError(path, "contains an unpaired surrogate")
    if has_control_chars(value, multiline=multiline, display=display):
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


def read_integer(value: Any, path: str, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, "must be an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ConfigError(path, _range_text(lo, hi))
    return value


def read_number(
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


def read_boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(path, "must be true or false")
    return value


def read_choice(value: Any, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ConfigError(path, "must be one of " + ", ".join(choices))
    return value


def read_list(
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
        checked = item(raw, item_path(path, i))
        if unique and checked in result:
            raise ConfigError(item_path(path, i), "duplicate value")
        result.append(checked)
    return result


def read_url(value: Any, path: str) -> str:
    """An outbound http(s) URL (callbacks, approval webhooks): host required, no userinfo/fragment."""
    text = read_string(value, path, max_len=URL_MAX)
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


def read_freeform(value: Any, path: str, depth: int = 0) -> Any:
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
        return read_string(value, path, max_len=10**7, min_len=0, multiline=True)
    if isinstance(value, list):
        return [read_freeform(item, item_path(path, i), depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(field_path(path, key), "object keys must be strings")
            read_string(key, field_path(path, key), max_len=256, min_len=0)
            result[key] = read_freeform(item, field_path(path, key), depth + 1)
        return result
    raise ConfigError(path, "must be a JSON value (string, number, boolean, null, list or object)")


def read_freeform_object(value: Any, path: str) -> dict:
    read_object(value, path)
    result = read_freeform(value, path)
    if compact_json_utf8_bytes(result) > _FREEFORM_MAX_BYTES:
        raise ConfigError(path, f"must be at most {_FREEFORM_MAX_BYTES} bytes as JSON")
    return result


def read_resource_name(value: Any, path: str) -> str:
    return read_string(
        value,
        path,
        max_len=64,
        pattern=_RESOURCE_NAME_RE,
        pattern_reason="must match ^[a-z0-9][a-z0-9_-]{1,63}$",
    )


def line_reader(max_len: int) -> Callable[[Any, str], str]:
    return lambda value, path: read_string(value, path, max_len=max_len)


def read_base_url(value: Any, path: str) -> str:
    """Where the hub reaches the business system: https, or plain http only to a loopback host.

    No userinfo (credentials belong in the provider secret, never in a URL that is displayed and
    logged), no query and no fragment (tool and spec paths are appended to it).
    """
    text = read_string(value, path, max_len=URL_MAX)
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
    _check_outbound_target(parts.scheme, parts.hostname, path)
    return text


def read_webhook_url(value: Any, path: str) -> str:
    """A URL the hub posts to (approval webhooks): :func:`read_url`, under the same outbound rules
    as a provider's ``base_url`` — https, or plain http only to a loopback host, and never a literal
    address the outbound target policy refuses."""
    text = read_url(value, path)
    parts = urlsplit(text)
    _check_outbound_target(parts.scheme, parts.hostname or "", path)
    return text


def _check_outbound_target(scheme: str, host: str, path: str) -> None:
    """The config-time half of docs/protocol.md "Outbound targets": plain http only to loopback, and
    a host written as an IP address must be one the hub may call. Host names are judged when they
    are resolved, on every connection (``bailing.outbound``)."""
    if not (scheme == "https" or (scheme == "http" and is_loopback_host(host))):
        raise ConfigError(path, "must be https, or http to a loopback host (127.0.0.1, ::1, localhost)")
    kind = literal_host_problem(host)
    if kind == PRIVATE:
        raise ConfigError(
            path, "points at a private address; list its network in BAILING_OUTBOUND_ALLOWED_NETWORKS"
        )
    if kind:
        raise ConfigError(path, f"points at a {kind.replace('_', '-')} address, which the hub never calls")


def require_keys(data: dict, path: str, keys: tuple[str, ...]) -> None:
    """Raise for the first of ``keys`` missing from a config item."""
    for key in keys:
        if key not in data:
            raise ConfigError(field_path(path, key), "is required")


def read_description_enabled(data: dict, path: str, result: dict) -> None:
    """Read the ``description`` and ``enabled`` fields every configured row has into ``result``
    (which holds their defaults already)."""
    if "description" in data:
        result["description"] = read_string(
            data["description"],
            field_path(path, "description"),
            max_len=1000,
            min_len=0,
            multiline=True,
            display=True,
        )
    if "enabled" in data:
        result["enabled"] = read_boolean(data["enabled"], field_path(path, "enabled"))


def read_rate_limit_per_min(value: Any, path: str) -> int:
    """A row's calls-per-minute limit (0 = none); the column is a PostgreSQL integer."""
    return read_integer(value, path, lo=0, hi=PG_INT_MAX)


def read_secret_reference(data: dict, path: str) -> dict[str, str]:
    """Where a secret is read from at apply/use time: ``secret_env`` (a variable name) or
    ``secret_file`` (a path), at most one of them; the secret itself is never in a config file."""
    if "secret_env" in data and "secret_file" in data:
        raise ConfigError(field_path(path, "secret_file"), "set either secret_env or secret_file, not both")
    result: dict[str, str] = {}
    if "secret_env" in data:
        result["secret_env"] = read_string(
            data["secret_env"],
            field_path(path, "secret_env"),
            max_len=128,
            pattern=_ENV_NAME_RE,
            pattern_reason="must be an environment variable name matching ^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        )
    if "secret_file" in data:
        result["secret_file"] = read_string(
            data["secret_file"], field_path(path, "secret_file"), max_len=1024
        )
    return result
