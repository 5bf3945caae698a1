"""Validation of a route's ``data_policy`` block (issue 23, docs/data-policy.md).

Keys, exactly::

    data_policy:
      detectors: [secrets, email, phone, payment_card, iban, cn_resident_id, ip_address, injection,
                  external_media]
      action: redact            # redact | block | flag — every detector not named in `actions`
      actions: {secrets: block, injection: flag}
      custom:                   # the workspace's own detectors: a name and a regular expression
        - {name: employee_id, pattern: "EMP-[0-9]{6}"}
      apply_to: [tool_results, knowledge]   # default: both

The block is returned exactly as written (validated, not filled in), like every route block;
``agent_runtime.data_policy.data_policy_from_config`` applies the defaults when it is read. ``null``
or no block means no policy. Errors name the field and never echo a pattern or a value.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.config.fields import (
    ConfigError,
    field_path,
    item_path,
    read_choice,
    read_list,
    read_object,
    read_string,
)
from agent_runtime.data_policy import (
    ACTIONS,
    BUILTIN_DETECTORS,
    CUSTOM_MAX_DETECTORS,
    CUSTOM_NAME_RE,
    CUSTOM_PATTERN_MAX_CHARS,
    SURFACES,
    CustomPatternError,
    custom_pattern_compile,
)

DATA_POLICY_KEYS = ("detectors", "action", "actions", "custom", "apply_to")


def _detector(value: Any, path: str) -> str:
    if not isinstance(value, str) or value not in BUILTIN_DETECTORS:
        raise ConfigError(path, "is not a built-in detector; one of " + ", ".join(BUILTIN_DETECTORS))
    return value


def _custom(value: Any, path: str) -> dict:
    data = read_object(value, path, allowed=("name", "pattern"))
    for required in ("name", "pattern"):
        if required not in data:
            raise ConfigError(field_path(path, required), "is required")
    name = read_string(
        data["name"],
        field_path(path, "name"),
        max_len=40,
        pattern=CUSTOM_NAME_RE,
        pattern_reason="must match ^[a-z][a-z0-9_]{0,39}$",
    )
    if name in BUILTIN_DETECTORS:
        raise ConfigError(field_path(path, "name"), "is the name of a built-in detector")
    pattern_path = field_path(path, "pattern")
    pattern = read_string(data["pattern"], pattern_path, max_len=CUSTOM_PATTERN_MAX_CHARS)
    try:
        custom_pattern_compile(pattern)
    except CustomPatternError as error:
        raise ConfigError(pattern_path, error.reason) from None
    return {"name": name, "pattern": pattern}


def validate_data_policy_config(value: Any, path: str) -> dict:
    """Validate a ``data_policy`` block; return it as written (``{}`` for ``null``: no policy)."""
    if value is None:
        return {}
    data = read_object(value, path, allowed=DATA_POLICY_KEYS)
    detectors: list[str] = []
    if "detectors" in data:
        detectors = read_list(data["detectors"], field_path(path, "detectors"), _detector)
    custom: list[dict] = []
    if "custom" in data:
        custom_path = field_path(path, "custom")
        custom = read_list(data["custom"], custom_path, _custom, max_items=CUSTOM_MAX_DETECTORS, unique=False)
        seen: set[str] = set()
        for i, item in enumerate(custom):
            if item["name"] in seen:
                raise ConfigError(field_path(item_path(custom_path, i), "name"), "is listed twice")
            seen.add(item["name"])
    if not detectors and not custom:
        where = field_path(path, "detectors") if "detectors" in data else path
        raise ConfigError(where, "needs at least one detector (built-in in detectors, or custom)")
    if "action" in data:
        read_choice(data["action"], field_path(path, "action"), ACTIONS)
    if "actions" in data:
        actions_path = field_path(path, "actions")
        actions = read_object(data["actions"], actions_path)
        enabled = {*detectors, *(item["name"] for item in custom)}
        for name, action in actions.items():
            where = field_path(actions_path, name)
            if name not in enabled:
                reason = (
                    "names a built-in detector that is not listed in detectors"
                    if name in BUILTIN_DETECTORS
                    else "names no detector of this policy"
                )
                raise ConfigError(where, reason)
            read_choice(action, where, ACTIONS)
    if "apply_to" in data:
        read_list(
            data["apply_to"],
            field_path(path, "apply_to"),
            lambda item, where: read_choice(item, where, SURFACES),
            min_items=1,
        )
    return data
