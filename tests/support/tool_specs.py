"""OpenAPI fixture specs shared by compiler, catalog and provider tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SPECS = Path(__file__).resolve().parents[1] / "agent_runtime" / "fixtures" / "specs"


def load_json_spec(name: str) -> dict[str, Any]:
    return json.loads((SPECS / name).read_text(encoding="utf-8"))


def mixed_spec(version: str) -> dict[str, Any]:
    """``$ref`` chains, ref cycles and malformed ACC declarations in one document of ``version``
    (``3.0.x`` or ``3.1.x``): five operations compile, every other one is a warning."""
    spec = load_json_spec("ref_chains.json")
    for extra in (load_json_spec("malformed_acc.json"), load_json_spec("cyclic_ref.json")):
        spec["paths"].update(extra["paths"])
        for section, members in extra.get("components", {}).items():
            spec["components"].setdefault(section, {}).update(members)
    spec["openapi"] = version
    return spec


MIXED_SPEC_TOOLS = ["category_get", "good_read", "good_write", "order_get", "order_update"]
MIXED_SPEC_WARNINGS = {
    "bad_enabled_type": ["acc_invalid"],
    "bad_missing_scope": ["acc_invalid"],
    "bad_not_object": ["acc_invalid"],
    "bad_risk_value": ["acc_invalid"],
    "bad_unknown_field": ["acc_invalid"],
    "bad_version": ["acc_unsupported_version"],
    "bad_wrong_type": ["acc_invalid"],
    "category_create": ["ref_cycle"],
    "dangling_ref": ["ref_unresolved"],
    "external_ref": ["ref_unresolved"],
    "loop_get": ["ref_cycle"],
    "param_loop_get": ["ref_cycle"],
}
# Caveats (severity ``warning``) of tools that still compiled: input properties without a description.
MIXED_SPEC_CAVEATS = {
    "category_get": ["param_missing_description"],
    "good_write": ["param_missing_description"],
    "order_get": ["param_missing_description"],
    "order_update": ["param_missing_description"],
}
