"""Text the console and consent pages display refuses bidirectional embeddings, overrides and isolates
(U+202A–U+202E, U+2066–U+2069) as it refuses control characters: they reorder what a reader sees. The
same rule covers the console's own client form, which validates through these readers."""

from __future__ import annotations

import pytest

from agent_runtime.config import (
    ConfigError,
    validate_client_config,
    validate_route_config,
    validate_tool_provider_config,
)

BIDI_CONTROLS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
BIDI_IDS = [f"U+{ord(c):04X}" for c in BIDI_CONTROLS]

CASES = [
    (validate_client_config, {"app_id": "desk", "name": "Desk"}, "name"),
    (validate_client_config, {"app_id": "desk", "name": "Desk"}, "description"),
    (validate_route_config, {"route_key": "demo", "name": "Demo"}, "name"),
    (validate_route_config, {"route_key": "demo", "name": "Demo"}, "description"),
    (validate_tool_provider_config, {"name": "shop", "base_url": "https://shop.example.com"}, "description"),
]


@pytest.mark.parametrize("char", BIDI_CONTROLS, ids=BIDI_IDS)
@pytest.mark.parametrize(("validate", "item", "field"), CASES, ids=[f"{v.__name__}-{f}" for v, _, f in CASES])
def test_displayed_config_text_refuses_bidi_controls(validate, item, field, char):
    with pytest.raises(ConfigError) as info:
        validate({**item, field: f"Shop{char}txt.exe"}, path="x")
    assert info.value.path == f"x.{field}"
    assert info.value.reason == "contains control characters"


@pytest.mark.parametrize(("validate", "item", "field"), CASES[:1])
def test_right_to_left_names_are_accepted(validate, item, field):
    assert validate({**item, field: "חנות \u200fمتجر"}, path="x")[field] == "חנות \u200fمتجر"
