"""Validation of a ``clients[]`` item (config files and the console's client form)."""

from __future__ import annotations

import re
from typing import Any

from agent_runtime.config.fields import (
    URL_MAX,
    ConfigError,
    field_path,
    item_path,
    line_reader,
    read_boolean,
    read_choice,
    read_description_enabled,
    read_integer,
    read_list,
    read_number,
    read_object,
    read_rate_limit_per_min,
    read_resource_name,
    read_string,
    require_keys,
)
from agent_runtime.patterns import ROUTE_KEY_CONFIG
from agent_runtime.validation import authorize_url_problem

CLIENT_DEFAULT_RATE_LIMIT = 60
# window_hours up to one leap year, as BailingHub's budget validation allows.
_BUDGET_WINDOW_HOURS_MAX = 8784
_ROUTE_KEY_RE = re.compile(ROUTE_KEY_CONFIG)

# --- Client -------------------------------------------------------------------------------------------
# The Client columns a config file controls (token columns never: a Client Token is issued only by
# ``bailing_client_token`` and never read from or compared with a file).
CLIENT_FIELDS = (
    "name",
    "description",
    "enabled",
    "allowed_routes",
    "allowed_channels",
    "rate_limit_per_min",
    "budget",
    "agent_authorize_url",
    "hub_consent",
    "mcp_sign_in",
)
_CLIENT_KEYS = ("app_id", *CLIENT_FIELDS)
_BUDGET_KEYS = ("enabled", "window", "window_hours", "hard_cost_usd", "hard_tokens")


def _allowed_route(value: Any, path: str) -> str:
    if value == "*":
        return value
    return read_string(
        value,
        path,
        max_len=128,
        pattern=_ROUTE_KEY_RE,
        pattern_reason='must be "*" or a route key matching ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$',
    )


def _budget(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=_BUDGET_KEYS)
    result: dict[str, Any] = {}
    if "enabled" in data:
        result["enabled"] = read_boolean(data["enabled"], field_path(path, "enabled"))
    if "window" in data:
        result["window"] = read_choice(data["window"], field_path(path, "window"), ("hour", "day", "month"))
    if "window_hours" in data:
        result["window_hours"] = read_integer(
            data["window_hours"], field_path(path, "window_hours"), lo=1, hi=_BUDGET_WINDOW_HOURS_MAX
        )
    if "hard_cost_usd" in data:
        result["hard_cost_usd"] = read_number(
            data["hard_cost_usd"], field_path(path, "hard_cost_usd"), lo=0, exclusive_lo=True
        )
    if "hard_tokens" in data:
        result["hard_tokens"] = read_integer(data["hard_tokens"], field_path(path, "hard_tokens"), lo=1)
    return result


def validate_client_config(data: dict, *, path: str) -> dict:
    """Validate one ``clients[]`` item; return it as ``Client`` column values with defaults applied.

    The result is the complete desired state of the row's configuration (absent optional fields take
    their defaults), so applying a file is declarative: removing a line resets the field.
    """
    data = read_object(data, path, allowed=_CLIENT_KEYS)
    require_keys(data, path, ("app_id", "name"))
    result: dict[str, Any] = {
        "app_id": read_resource_name(data["app_id"], field_path(path, "app_id")),
        "name": read_string(data["name"], field_path(path, "name"), max_len=128, display=True),
        "description": "",
        "enabled": True,
        "allowed_routes": [],
        "allowed_channels": [],
        "rate_limit_per_min": CLIENT_DEFAULT_RATE_LIMIT,
        "budget": None,
        "agent_authorize_url": "",
        "hub_consent": False,
        "mcp_sign_in": False,
    }
    read_description_enabled(data, path, result)
    if "allowed_routes" in data:
        result["allowed_routes"] = read_list(
            data["allowed_routes"], field_path(path, "allowed_routes"), _allowed_route
        )
    if "allowed_channels" in data:
        result["allowed_channels"] = read_list(
            data["allowed_channels"], field_path(path, "allowed_channels"), line_reader(128)
        )
    if "rate_limit_per_min" in data:
        result["rate_limit_per_min"] = read_rate_limit_per_min(
            data["rate_limit_per_min"], field_path(path, "rate_limit_per_min")
        )
    if "budget" in data:
        # null is accepted because the column is nullable: an exported client without a budget
        # round-trips.
        result["budget"] = (
            None if data["budget"] is None else _budget(data["budget"], field_path(path, "budget"))
        )
    if "agent_authorize_url" in data:
        url_path = field_path(path, "agent_authorize_url")
        url = read_string(data["agent_authorize_url"], url_path, max_len=URL_MAX)
        problem = authorize_url_problem(url)
        if problem:
            raise ConfigError(url_path, problem)
        result["agent_authorize_url"] = url
    if "hub_consent" in data:
        result["hub_consent"] = read_boolean(data["hub_consent"], field_path(path, "hub_consent"))
    if "mcp_sign_in" in data:
        sign_in_path = field_path(path, "mcp_sign_in")
        result["mcp_sign_in"] = read_boolean(data["mcp_sign_in"], sign_in_path)
        if result["mcp_sign_in"] and not (result["hub_consent"] or result["agent_authorize_url"]):
            raise ConfigError(sign_in_path, "needs an agent client: set hub_consent or agent_authorize_url")
    return result


def check_clients_config(items: list[dict]) -> None:
    """Checks across the validated ``clients[]`` of one document: at most one has ``mcp_sign_in``."""
    first: int | None = None
    for i, item in enumerate(items):
        if item["mcp_sign_in"]:
            if first is not None:
                raise ConfigError(
                    field_path(item_path("clients", i), "mcp_sign_in"),
                    f"only one client may have it (first at clients[{first}])",
                )
            first = i
