"""The OpenAPI + ACC tool compiler (agent_runtime.tools): pure functions, no database."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agent_runtime.tools import (
    ACC_SCHEMA,
    ApprovalConditionError,
    CompiledTool,
    CompileResult,
    SpecParseError,
    approval_required_for,
    capability_material,
    compile_spec,
    compile_spec_text,
    execution_fingerprint,
    guidance_digest,
    parse_spec_text,
    projection_digest,
    public_projection,
)
from tests.support.tool_specs import MIXED_SPEC_CAVEATS, MIXED_SPEC_TOOLS, MIXED_SPEC_WARNINGS, mixed_spec

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"

PROJECTION_KEYS = [
    "name",
    "description",
    "description_truncated",
    "input_schema",
    "scope",
    "risk",
    "approval_required",
    "readonly",
    "idempotent",
    "usage_guidance_available",
]


def load(name: str) -> dict[str, Any]:
    return parse_spec_text((SPECS / name).read_text(encoding="utf-8"))


def compiled(name: str) -> CompileResult:
    return compile_spec(load(name), provider="orders")


def tool_named(result: CompileResult, name: str) -> CompiledTool:
    tool = result.tool(name)
    assert tool is not None, (name, result.warnings)
    return tool


def codes_for(result: CompileResult, tool: str) -> list[str]:
    return [warning.code for warning in result.warnings if warning.tool == tool]


def one_operation_spec(operation: dict[str, Any], *, path: str = "/things", method: str = "post") -> dict:
    operation = {"operationId": "thing_op", "summary": "Do the thing.", **operation}
    operation.setdefault("x-agent-capability", {"version": 1, "enabled": True, "scope": "thing.write"})
    return {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {path: {method: operation}}}


def body(schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"requestBody": {"content": {"application/json": {"schema": schema}}, **extra}}


def nested_object(levels: int) -> dict[str, Any]:
    """A body property schema whose deepest node sits at depth ``levels`` (the property is depth 1)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        schema = {"type": "object", "properties": {"child": schema}}
    return schema


# --- ACC schema --------------------------------------------------------------------------------------
def test_acc_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(ACC_SCHEMA)


def test_every_emitted_warning_code_is_documented():
    import re

    from agent_runtime.tools import acc, compiler

    sources = Path(compiler.__file__).read_text() + Path(acc.__file__).read_text()
    emitted = set(re.findall(r'(?:_Problem|CompileWarning|AccProblem|caveat)\(\s*"([a-z_]+)"', sources))
    documented = set(re.findall(r"^``([a-z_]+)``\s+(?:fatal|error|warning)\s", compiler.__doc__, re.M))

    assert "spec_invalid" in emitted and "tool_usage_guidance_truncated" in emitted
    assert emitted == documented


# --- clean 3.1 spec ----------------------------------------------------------------------------------
def undescribed(result: CompileResult) -> list[tuple[str | None, str]]:
    """``(tool, spec location)`` of every ``param_missing_description`` caveat, in order."""
    return [(w.tool, w.path) for w in result.warnings if w.code == "param_missing_description"]


def test_clean_spec_compiles_declared_operations_with_only_description_caveats():
    result = compiled("clean_31.json")

    assert not result.fatal
    # The fixture leaves some inputs undescribed: one caveat each, and nothing is refused for it.
    assert {(w.code, w.severity) for w in result.warnings} == {("param_missing_description", "warning")}
    refund_body = "#/paths/~1refunds/post/requestBody/content/application~1json; charset=utf-8/schema"
    assert undescribed(result) == [
        ("order_get", "#/paths/~1orders~1{order_id}/get/parameters/1"),
        ("order_get", "#/paths/~1orders~1{order_id}/get/parameters/2"),
        ("refund_create", "#/paths/~1refunds/post/parameters/0"),
        *(
            ("refund_create", f"{refund_body}/properties/{name}")
            for name in ("amount", "channel", "tags", "note", "customer")
        ),
        ("staff_delete", "#/paths/~1staff~1{staff_id}/delete/parameters/0"),
        (
            "order_search",
            "#/paths/~1orders~1search/post/requestBody/content/application~1json/schema/properties/query",
        ),
        (
            "order_search",
            "#/paths/~1orders~1search/post/requestBody/content/application~1json/schema/properties/limit",
        ),
        (
            "ticket_create",
            "#/paths/~1tickets/post/requestBody/content/application~1json/schema/properties/title",
        ),
    ]
    # No ACC (health_get), enabled: false (report_list) and TRACE (report_trace) are never tools.
    assert [tool.name for tool in result.tools] == [
        "order_get",
        "refund_create",
        "staff_delete",
        "order_search",
        "ticket_create",
    ]
    assert all(tool.provider == "orders" for tool in result.tools)


def test_parameters_become_one_input_schema_with_locations():
    tool = tool_named(compiled("clean_31.json"), "order_get")

    assert (tool.method, tool.path) == ("GET", "/orders/{order_id}")
    # Accept is ignored as OpenAPI says; the other header parameter is kept.
    assert tool.param_locations == {"order_id": "path", "expand": "query", "X-Tenant": "header"}
    assert tool.param_styles == {"expand": {"style": "form", "explode": False}}
    assert tool.request_body is None
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^SO[0-9]+$", "description": "Order ID"},
            "expand": {"type": "array", "items": {"type": "string", "enum": ["items", "customer"]}},
            "X-Tenant": {"type": "string"},
        },
        "required": ["order_id", "X-Tenant"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(tool.input_schema)


def test_json_body_properties_are_merged_at_top_level_with_body_location():
    tool = tool_named(compiled("clean_31.json"), "refund_create")

    assert tool.param_locations == {
        "dry_run": "query",
        "order_id": "body",
        "amount": "body",
        "channel": "body",
        "tags": "body",
        "note": "body",
        "customer": "body",
    }
    assert tool.request_body == {"media_type": "application/json; charset=utf-8", "required": True}
    schema = tool.input_schema
    assert schema["required"] == ["order_id", "amount"]
    assert schema["additionalProperties"] is False
    # $ref resolved, 3.1 type arrays kept, extensions and examples dropped.
    assert schema["properties"]["amount"] == {"type": "number", "exclusiveMinimum": 0}
    assert schema["properties"]["note"] == {"type": ["string", "null"], "maxLength": 500}
    assert schema["properties"]["order_id"] == {"type": "string", "description": "Order to refund"}


def test_body_that_allows_extra_keys_opens_the_top_level_schema():
    result = compiled("clean_31.json")

    assert tool_named(result, "ticket_create").input_schema["additionalProperties"] is True
    assert tool_named(result, "order_search").input_schema["additionalProperties"] is False
    assert tool_named(result, "order_search").request_body == {
        "media_type": "application/json",
        "required": False,
    }


def test_governance_defaults_and_declared_values():
    result = compiled("clean_31.json")
    order_get = tool_named(result, "order_get")
    refund = tool_named(result, "refund_create")
    staff_delete = tool_named(result, "staff_delete")
    search = tool_named(result, "order_search")
    ticket = tool_named(result, "ticket_create")

    # GET without risk/readonly: low, read-only, idempotent.
    assert (order_get.risk, order_get.readonly, order_get.idempotent) == ("low", True, True)
    assert order_get.requires_subject is True and order_get.approval_required is False
    # Undeclared write: medium.
    assert (refund.risk, refund.readonly, refund.idempotent) == ("medium", False, False)
    assert (ticket.risk, ticket.approval_required) == ("medium", True)
    assert (staff_delete.risk, staff_delete.readonly, staff_delete.approval_required) == ("high", False, True)
    # POST declared read-only: low risk.
    assert (search.risk, search.readonly, search.idempotent) == ("low", True, True)
    assert refund.subject_field == "operator_uid"
    assert refund.sensitive is True
    assert refund.timeout_ms == 15000
    assert refund.rate_limit == {"count": 30, "window": "1m"}
    assert refund.outcome == {"result": "A refund request in pending state.", "side_effect": "write"}
    assert refund.approval.prompt == "Approve refund of {amount} for {order_id}?"
    assert len(refund.approval.when) == 5
    assert order_get.context == ("customer-service",)
    assert order_get.extensions == {"x-business-owner": "trade-team"}


def test_get_with_explicit_readonly_false_defaults_to_medium():
    spec = one_operation_spec(
        {
            "parameters": [{"name": "id", "in": "query", "schema": {"type": "string"}}],
            "x-agent-capability": {
                "version": 1,
                "enabled": True,
                "scope": "x",
                "execution": {"readonly": False},
            },
        },
        method="get",
    )
    tool = compile_spec(spec, provider="p").tools[0]

    assert (tool.risk, tool.readonly, tool.idempotent) == ("medium", False, True)


# --- OpenAPI 3.0 -------------------------------------------------------------------------------------
def test_openapi_30_nullable_and_path_level_parameters():
    result = compile_spec_text((SPECS / "nullable_30.yaml").read_text(encoding="utf-8"), provider="shop")

    assert {w.code for w in result.warnings} == {"param_missing_description"}
    update_body = "#/paths/~1shops~1{shop_id}~1items/patch/requestBody/content/application~1json/schema"
    # A path-level parameter without a description is reported for every operation that uses it.
    assert undescribed(result) == [
        ("shop_item_list", "#/paths/~1shops~1{shop_id}~1items/parameters/2"),
        ("shop_item_update", "#/paths/~1shops~1{shop_id}~1items/parameters/2"),
        *(
            ("shop_item_update", f"{update_body}/properties/{name}")
            for name in ("item_id", "price", "discount", "comment")
        ),
    ]
    listing = tool_named(result, "shop_item_list")
    assert listing.param_locations == {"shop_id": "path", "locale": "query", "currency": "query"}
    properties = listing.input_schema["properties"]
    # The operation-level definition of (locale, query) overrides the path-level one.
    assert properties["locale"] == {
        "type": "string",
        "enum": ["en", "zh"],
        "description": "Operation-level locale",
    }
    assert listing.input_schema["required"] == ["shop_id", "locale"]
    assert properties["shop_id"] == {"type": "integer", "description": "Shop identifier (path level)"}
    assert properties["currency"] == {"type": ["string", "null"], "enum": ["CNY", "USD", None]}

    update = tool_named(result, "shop_item_update")
    body_properties = update.input_schema["properties"]
    assert update.param_locations["price"] == "body"
    assert update.param_locations["locale"] == "query"
    assert body_properties["locale"]["description"] == "Path-level locale (overridden below)"
    assert body_properties["price"] == {"type": "number", "exclusiveMinimum": 0}
    assert body_properties["discount"] == {"type": ["number", "null"], "maximum": 1}
    assert body_properties["comment"] == {"type": ["string", "null"]}
    assert body_properties["legacy"] == {"description": "nullable without a type has no effect in 3.0"}
    assert update.input_schema["required"] == ["shop_id", "item_id", "price"]
    for tool in result.tools:
        Draft202012Validator.check_schema(tool.input_schema)


def test_yaml_integer_keys_and_dates_become_strings():
    spec = load("nullable_30.yaml")

    assert spec["info"]["version"] == "2024-01-01"
    assert set(spec["paths"]["/shops/{shop_id}/items"]["patch"]["responses"]) == {"200", "404"}


def test_nullable_is_not_a_keyword_in_openapi_31():
    spec = one_operation_spec(
        body({"type": "object", "properties": {"x": {"type": "string", "nullable": True}}})
    )

    tool = compile_spec(spec, provider="p").tools[0]

    assert tool.input_schema["properties"]["x"] == {"type": "string"}


# --- $ref --------------------------------------------------------------------------------------------
def test_ref_chains_param_to_schema_to_schema_are_resolved():
    result = compiled("ref_chains.json")
    order_get = tool_named(result, "order_get")
    update = tool_named(result, "order_update")

    order_id = {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$", "maxLength": 32, "description": "Order ID"}
    assert order_get.input_schema["properties"] == {
        "order_id": order_id,
        "fields": {"type": "array", "items": {"type": "string", "enum": ["status", "amount"]}},
    }
    assert order_get.param_locations == {"order_id": "path", "fields": "query"}
    assert update.param_locations == {"order_id": "path", "status": "body", "shipping": "body"}
    assert update.request_body == {"media_type": "application/json", "required": True}
    properties = update.input_schema["properties"]
    assert properties["status"] == {
        "type": "string",
        "enum": ["open", "closed"],
        "description": "New status (overrides the referenced description)",
    }
    assert properties["shipping"]["properties"]["address"]["properties"]["country"] == {
        "type": "string",
        "minLength": 2,
        "maxLength": 2,
    }
    assert "$ref" not in json.dumps([tool.input_schema for tool in result.tools])


def test_external_and_dangling_refs_disable_only_their_tool():
    result = compiled("ref_chains.json")

    assert [tool.name for tool in result.tools] == ["order_get", "order_update"]
    assert codes_for(result, "external_ref") == ["ref_unresolved"]
    assert codes_for(result, "dangling_ref") == ["ref_unresolved"]


def test_ref_cycles_disable_their_tool_and_terminate():
    result = compiled("cyclic_ref.json")

    assert [tool.name for tool in result.tools] == ["category_get"]
    assert codes_for(result, "category_create") == ["ref_cycle"]
    assert codes_for(result, "loop_get") == ["ref_cycle"]
    assert codes_for(result, "param_loop_get") == ["ref_cycle"]


def test_shared_ref_used_twice_is_not_a_cycle():
    spec = one_operation_spec(
        body(
            {
                "type": "object",
                "properties": {
                    "billing": {"$ref": "#/components/schemas/Address"},
                    "shipping": {"$ref": "#/components/schemas/Address"},
                },
            }
        )
    )
    spec["components"] = {
        "schemas": {
            "Address": {
                "type": "object",
                "description": "A postal address.",
                "properties": {"city": {"type": "string"}},
            }
        }
    }

    result = compile_spec(spec, provider="p")

    assert result.warnings == []
    properties = result.tools[0].input_schema["properties"]
    assert properties["billing"] == properties["shipping"]


def test_openapi_31_ref_siblings_apply_while_30_ignores_them():
    schema = {"type": "object", "properties": {"n": {"$ref": "#/components/schemas/N", "maximum": 9}}}
    spec = one_operation_spec(body(schema))
    spec["components"] = {"schemas": {"N": {"type": "integer"}}}

    modern = compile_spec(spec, provider="p").tools[0]
    spec["openapi"] = "3.0.3"
    legacy = compile_spec(spec, provider="p").tools[0]

    assert modern.input_schema["properties"]["n"] == {"maximum": 9, "allOf": [{"type": "integer"}]}
    assert legacy.input_schema["properties"]["n"] == {"type": "integer"}


# --- ACC validation ----------------------------------------------------------------------------------
def test_malformed_acc_disables_only_the_bad_tools():
    result = compiled("malformed_acc.json")

    assert [tool.name for tool in result.tools] == ["good_read", "good_write"]
    assert codes_for(result, "bad_risk_value") == ["acc_invalid"]
    assert codes_for(result, "bad_unknown_field") == ["acc_invalid"]
    assert codes_for(result, "bad_wrong_type") == ["acc_invalid"]
    assert codes_for(result, "bad_missing_scope") == ["acc_invalid"]
    assert codes_for(result, "bad_not_object") == ["acc_invalid"]
    assert codes_for(result, "bad_enabled_type") == ["acc_invalid"]
    assert codes_for(result, "bad_version") == ["acc_unsupported_version"]
    assert codes_for(result, "good_read") == []
    assert codes_for(result, "good_write") == ["param_missing_description"]  # a caveat, still compiled
    # Unknown fields on the declaration and its open sections are ignored (ACC requires it).
    assert tool_named(result, "good_read").risk == "low"
    assert all(warning.severity == "error" for warning in result.warnings if warning.tool != "good_write")


@pytest.mark.parametrize(
    ("version", "status_description"),
    [
        # 3.0 ignores siblings of $ref; 3.1 applies them.
        ("3.0.3", "Referenced description"),
        ("3.1.0", "New status (overrides the referenced description)"),
    ],
)
def test_mixed_spec_compiles_with_warnings_in_both_openapi_versions(version, status_description):
    result = compile_spec(mixed_spec(version), provider="orders")

    assert not result.fatal
    assert sorted(tool.name for tool in result.tools) == MIXED_SPEC_TOOLS
    by_tool: dict[str, list[str]] = {}
    caveats: dict[str, list[str]] = {}
    for warning in result.warnings:
        (caveats if warning.severity == "warning" else by_tool).setdefault(warning.tool, []).append(
            warning.code
        )
    assert by_tool == MIXED_SPEC_WARNINGS
    assert caveats == MIXED_SPEC_CAVEATS
    assert all(warning.severity == "error" for warning in result.warnings if warning.tool in by_tool)
    update = tool_named(result, "order_update")
    assert update.input_schema["properties"]["status"]["description"] == status_description
    address = update.input_schema["properties"]["shipping"]["properties"]["address"]
    assert address["properties"]["country"] == {"type": "string", "minLength": 2, "maxLength": 2}
    assert update.approval_required is True
    assert "$ref" not in json.dumps([tool.input_schema for tool in result.tools])


def test_acc_warning_points_at_the_failing_field_without_echoing_its_value():
    result = compiled("malformed_acc.json")
    warning = next(w for w in result.warnings if w.tool == "bad_risk_value")

    assert warning.path == "#/paths/~1a/post/x-agent-capability/risk/level"
    assert "urgent" not in warning.detail


@pytest.mark.parametrize(
    "rule",
    [
        {"param": "amount", "op": ">", "value": "500"},
        {"param": "amount", "op": ">", "value": True},
        {"param": "amount", "op": "=="},
        {"param": "amount", "op": "in", "value": 5},
        {"param": "amount", "op": "between", "value": [1, 2]},
        {"param": "", "op": "exists"},
        {"param": "amount", "op": "exists", "label": ""},
    ],
)
def test_malformed_approval_rules_are_acc_invalid(rule):
    spec = one_operation_spec(
        {
            **body({"type": "object", "properties": {"amount": {"type": "number"}}}),
            "x-agent-capability": {"version": 1, "enabled": True, "scope": "s", "approval": {"when": [rule]}},
        }
    )

    result = compile_spec(spec, provider="p")

    assert result.tools == []
    assert result.warning_codes() == ["acc_invalid"]


@pytest.mark.parametrize(
    "rule",
    [
        {"param": "missing", "op": "exists"},
        {"param": "anything", "op": "exists"},
        {"param": "name", "op": ">", "value": 5},
        {"param": "amount", "op": "contains", "value": "x"},
        {"param": "name", "op": "in", "value": [1, 2]},
        {"param": "flag", "op": "==", "value": "true"},
    ],
)
def test_approval_rules_that_cannot_apply_to_the_schema_disable_the_tool(rule):
    properties = {
        "amount": {"type": "number"},
        "name": {"type": "string"},
        "flag": {"type": "boolean"},
        "anything": {"description": "untyped"},
    }
    spec = one_operation_spec(
        {
            **body({"type": "object", "properties": properties}),
            "x-agent-capability": {"version": 1, "enabled": True, "scope": "s", "approval": {"when": [rule]}},
        }
    )

    result = compile_spec(spec, provider="p")

    assert result.tools == []
    assert result.warning_codes() == ["approval_when_invalid"]


# --- descriptions and guidance -----------------------------------------------------------------------
def test_long_description_is_cut_at_500_code_points_with_astral_characters():
    result = compiled("long_description.json")
    tool = tool_named(result, "long_description")
    source = load("long_description.json")["paths"]["/a"]["get"]["description"]

    assert len(source) == 600
    assert tool.description == source[:500]
    assert len(tool.description) == 500
    assert tool.description.endswith("\U0001f600\U0001f600")  # whole astral code points, no halves
    assert tool.description_truncated is True
    assert codes_for(result, "long_description") == ["tool_description_truncated"]
    assert [w.severity for w in result.warnings if w.tool == "long_description"] == ["warning"]
    # The full text stays readable in the guidance.
    assert tool.usage_guidance.text == source
    assert tool.usage_guidance.truncated is False
    assert tool.usage_guidance_available is True
    projection = public_projection(tool)
    assert projection["description_truncated"] is True
    assert projection["usage_guidance_available"] is True


def test_description_of_exactly_500_code_points_is_not_truncated():
    result = compiled("long_description.json")
    tool = tool_named(result, "exact_description")

    assert len(tool.description) == 500
    assert tool.description_truncated is False
    assert codes_for(result, "exact_description") == []
    assert tool.usage_guidance_available is False


def test_summary_is_the_short_description_and_both_texts_stay_in_guidance():
    result = compiled("long_description.json")
    tool = tool_named(result, "summary_and_long_description")
    source = load("long_description.json")["paths"]["/c"]["get"]["description"]

    assert tool.description == "Short summary."
    assert tool.description_truncated is False
    assert codes_for(result, "summary_and_long_description") == []
    assert tool.usage_guidance.text == "Short summary.\n\n" + source
    assert tool.usage_guidance_available is True


def test_guidance_over_65536_bytes_is_cut_by_bytes_at_a_character_boundary():
    result = compiled("long_guidance.json")
    tool = tool_named(result, "guidance_over_bytes")
    full = "Multi-byte guidance.\n\n" + "中" * 22000 + "\n\nWhen to use: Never reached after the cut."
    guidance = tool.usage_guidance.as_dict()

    assert guidance["source_chars"] == len(full)
    assert guidance["source_bytes"] == len(full.encode("utf-8")) > 65536
    assert guidance["source_chars"] < 32768  # so the byte budget is the one reached first
    assert guidance["truncated"] is True
    assert (guidance["max_chars"], guidance["max_bytes"]) == (32768, 65536)
    encoded = guidance["text"].encode("utf-8")
    assert len(encoded) <= 65536
    assert len(encoded) > 65536 - 3  # the longest whole-character prefix
    assert full.startswith(guidance["text"])
    assert codes_for(result, "guidance_over_bytes") == ["tool_usage_guidance_truncated"]
    assert tool.description == "Multi-byte guidance."
    assert tool.description_truncated is False


def test_guidance_over_32768_code_points_is_cut_by_characters():
    result = compiled("long_guidance.json")
    tool = tool_named(result, "guidance_over_chars")
    full = "ASCII guidance.\n\n" + "a" * 40000
    guidance = tool.usage_guidance.as_dict()

    assert (guidance["source_chars"], guidance["source_bytes"]) == (len(full), len(full))
    assert guidance["text"] == full[:32768]
    assert guidance["truncated"] is True
    assert codes_for(result, "guidance_over_chars") == ["tool_usage_guidance_truncated"]


def test_guidance_combines_summary_description_acc_texts_and_only_the_first_example():
    tool = tool_named(compiled("clean_31.json"), "order_get")

    assert tool.usage_guidance.text == (
        "Query one order by ID.\n\n"
        "Returns status, amount and fulfilment state of a single order.\n\n"
        "When to use: Use when the user asks about one order.\n\n"
        "Returns: Order status, amount, customer and fulfilment state.\n\n"
        'Example arguments: {"order_id":"SO202607001"}'
    )
    assert "SO-SECOND-EXAMPLE" not in tool.usage_guidance.text
    assert tool.description == "Query one order by ID."
    assert tool.usage_guidance_available is True


def test_guidance_control_characters_are_cleaned_before_counting():
    spec = one_operation_spec(
        {
            "summary": "Line\r\none\x01two\x1b[31m\u0085\u202eevil\u2069",
            "description": "  \tTabbed\rnext\u2028last\x7f ",
            "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
        },
        method="get",
    )

    tool = compile_spec(spec, provider="p").tools[0]

    summary = "Line\none two [31m evil"
    assert tool.description == summary
    assert tool.usage_guidance.text == summary + "\n\n" + "Tabbed\nnext\nlast"
    assert tool.usage_guidance.source_chars == len(tool.usage_guidance.text)


def test_only_a_summary_means_no_separate_guidance():
    tool = tool_named(compiled("clean_31.json"), "staff_delete")

    assert tool.usage_guidance.text == tool.description == "Delete a staff member."
    assert tool.usage_guidance_available is False


def test_missing_summary_and_description_fall_back_to_scope():
    spec = one_operation_spec(
        {
            "summary": None,
            **body({"type": "object", "properties": {"x": {"type": "string", "description": "An x."}}}),
        }
    )
    del spec["paths"]["/things"]["post"]["summary"]

    result = compile_spec(spec, provider="p")

    assert result.tools[0].description == "thing.write"
    assert result.warning_codes() == ["tool_description_missing"]


# --- operation ids -----------------------------------------------------------------------------------
def test_duplicate_missing_and_invalid_operation_ids_are_skipped():
    result = compiled("duplicate_ids.json")

    assert result.tools == []
    assert codes_for(result, "order_list") == ["operation_id_duplicate", "operation_id_duplicate"]
    # A duplicate with an undeclared operation still makes the name ambiguous.
    assert codes_for(result, "order_count") == ["operation_id_duplicate"]
    assert sorted(w.code for w in result.warnings if w.tool is None) == [
        "operation_id_invalid",
        "operation_id_missing",
    ]


def test_operation_id_with_trailing_newline_is_invalid():
    spec = one_operation_spec(
        {"operationId": "thing_op\n", **body({"type": "object", "properties": {"x": {"type": "string"}}})}
    )

    assert compile_spec(spec, provider="p").warning_codes() == ["operation_id_invalid"]


# --- schema limits -----------------------------------------------------------------------------------
def test_schema_depth_16_compiles_and_17_is_disabled():
    ok = compile_spec(
        one_operation_spec(body({"type": "object", "properties": {"a": nested_object(16)}})), provider="p"
    )
    deep = compile_spec(
        one_operation_spec(body({"type": "object", "properties": {"a": nested_object(17)}})), provider="p"
    )

    assert [tool.name for tool in ok.tools] == ["thing_op"]
    assert deep.tools == []
    assert deep.warning_codes() == ["schema_too_deep"]


def test_twenty_alternatives_compile_and_twenty_one_are_disabled():
    def spec(count: int) -> dict[str, Any]:
        branches = [{"const": i} for i in range(count)]
        return one_operation_spec(body({"type": "object", "properties": {"a": {"anyOf": branches}}}))

    assert len(compile_spec(spec(20), provider="p").tools) == 1
    refused = compile_spec(spec(21), provider="p")
    assert refused.tools == []
    assert refused.warning_codes() == ["schema_too_many_alternatives"]


def test_exponential_ref_expansion_is_bounded():
    schemas = {"L0": {"type": "string"}}
    for level in range(1, 16):
        schemas[f"L{level}"] = {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/L{level - 1}"},
                "b": {"$ref": f"#/components/schemas/L{level - 1}"},
            },
        }
    spec = one_operation_spec(body({"$ref": "#/components/schemas/L15"}))
    spec["components"] = {"schemas": schemas}

    result = compile_spec(spec, provider="p")

    assert result.tools == []
    assert result.warning_codes() == ["schema_too_large"]


def test_schema_failing_the_metaschema_is_disabled():
    spec = one_operation_spec(
        body({"type": "object", "properties": {"a": {"type": "text", "minLength": "3"}}})
    )

    assert compile_spec(spec, provider="p").warning_codes() == ["schema_invalid"]


# --- parameters and bodies ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("operation", "code"),
    [
        (
            {
                "parameters": [{"name": "id", "in": "query", "schema": {"type": "string"}}],
                **body({"type": "object", "properties": {"id": {"type": "string"}}}),
            },
            "parameter_conflict",
        ),
        (
            {
                "parameters": [
                    {"name": "id", "in": "query", "schema": {"type": "string"}},
                    {"name": "id", "in": "header", "schema": {"type": "string"}},
                ]
            },
            "parameter_conflict",
        ),
        (
            {
                "parameters": [
                    {"name": "X-Bailing-On-Behalf-Of", "in": "header", "schema": {"type": "string"}}
                ]
            },
            "parameter_reserved",
        ),
        (
            {"parameters": [{"name": "Host", "in": "header", "schema": {"type": "string"}}]},
            "parameter_reserved",
        ),
        (
            {"parameters": [{"name": "sid", "in": "cookie", "required": True, "schema": {"type": "string"}}]},
            "parameter_unsupported",
        ),
        ({"parameters": [{"name": "x", "in": "body", "schema": {"type": "string"}}]}, "parameter_invalid"),
        ({"parameters": {"name": "x"}}, "operation_invalid"),
        (
            {"requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}}},
            "unsupported_request_body",
        ),
        (body({"type": "array", "items": {"type": "string"}}), "unsupported_request_body"),
        (
            body({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]}),
            "unsupported_request_body",
        ),
        ({}, "write_without_input"),
    ],
)
def test_operations_that_cannot_be_dispatched_are_disabled(operation, code):
    result = compile_spec(one_operation_spec(operation), provider="p")

    assert result.tools == []
    assert result.warning_codes() == [code]


def test_path_template_must_match_path_parameters():
    spec = one_operation_spec(
        {"parameters": [{"name": "id", "in": "query", "schema": {"type": "string"}}]},
        path="/things/{id}",
        method="get",
    )

    assert compile_spec(spec, provider="p").warning_codes() == ["path_parameter_mismatch"]


def test_optional_cookie_parameter_is_dropped_with_a_warning():
    spec = one_operation_spec(
        {
            "parameters": [
                {"name": "sid", "in": "cookie", "schema": {"type": "string"}},
                {"name": "q", "in": "query", "description": "Search text.", "schema": {"type": "string"}},
            ]
        },
        method="get",
    )

    result = compile_spec(spec, provider="p")

    assert result.tools[0].param_locations == {"q": "query"}
    assert [(w.code, w.severity) for w in result.warnings] == [("parameter_ignored", "warning")]


# --- input descriptions ----------------------------------------------------------------------------
def test_every_undescribed_input_property_is_one_warning_and_the_tool_still_compiles():
    spec = one_operation_spec(
        {
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "q", "in": "query", "schema": {"type": "string"}},
                {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
            ],
            **body({"type": "object", "properties": {"a": {"type": "string"}, "b": True}}),
        },
        path="/things/{id}",
    )

    result = compile_spec(spec, provider="p")

    assert [tool.name for tool in result.tools] == ["thing_op"]
    schema_at = "#/paths/~1things~1{id}/post/requestBody/content/application~1json/schema/properties"
    assert [w.as_dict() for w in result.warnings] == [
        {
            "code": "param_missing_description",
            "severity": "warning",
            "tool": "thing_op",
            "path": path,
            "detail": detail,
        }
        for path, detail in [
            ("#/paths/~1things~1{id}/post/parameters/0", "path parameter without a description"),
            ("#/paths/~1things~1{id}/post/parameters/1", "query parameter without a description"),
            ("#/paths/~1things~1{id}/post/parameters/2", "header parameter without a description"),
            (f"{schema_at}/a", "body property without a description"),
            (f"{schema_at}/b", "body property without a description"),
        ]
    ]


def test_a_description_on_the_parameter_its_schema_or_a_referenced_schema_counts():
    spec = one_operation_spec(
        {
            "parameters": [
                {
                    "name": "p1",
                    "in": "query",
                    "description": "On the parameter.",
                    "schema": {"type": "string"},
                },
                {"name": "p2", "in": "query", "schema": {"type": "string", "description": "In the schema."}},
                {"$ref": "#/components/parameters/Shared"},
                {"name": "Accept", "in": "header", "schema": {"type": "string"}},  # ignored, never an input
            ],
            **body(
                {
                    "type": "object",
                    "properties": {
                        "b1": {"type": "integer", "description": "Inline."},
                        "b2": {"$ref": "#/components/schemas/Described"},
                    },
                }
            ),
        }
    )
    spec["components"] = {
        "parameters": {
            "Shared": {"name": "p3", "in": "query", "schema": {"$ref": "#/components/schemas/Described"}}
        },
        "schemas": {"Described": {"type": "string", "description": "Behind a $ref."}},
    }

    result = compile_spec(spec, provider="p")

    assert result.tools[0].param_locations == {
        "p1": "query",
        "p2": "query",
        "p3": "query",
        "b1": "body",
        "b2": "body",
    }
    assert result.warnings == []


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "spaces"])
def test_a_blank_description_is_no_description(blank):
    spec = one_operation_spec(
        {
            "parameters": [{"name": "q", "in": "query", "description": blank, "schema": {"type": "string"}}],
            **body({"type": "object", "properties": {"x": {"type": "string", "description": blank}}}),
        }
    )

    result = compile_spec(spec, provider="p")

    assert result.warning_codes("thing_op") == ["param_missing_description"] * 2


def test_a_refused_operation_gets_no_description_caveats():
    spec = one_operation_spec(
        {
            "parameters": [{"name": "x", "in": "query", "schema": {"type": "string"}}],
            **body({"type": "object", "properties": {"x": {"type": "string"}}}),
        }
    )

    assert compile_spec(spec, provider="p").warning_codes() == ["parameter_conflict"]


def test_deprecated_operations_are_not_exposed():
    spec = one_operation_spec(
        {"deprecated": True, **body({"type": "object", "properties": {"x": {"type": "string"}}})}
    )

    assert compile_spec(spec, provider="p").warning_codes() == ["operation_deprecated"]


# --- whole-document failures -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        None,
        [],
        "openapi: 3.1.0",
        {"swagger": "2.0", "paths": {}},
        {"openapi": "4.0.0", "paths": {}},
        {"openapi": 3.1, "paths": {}},
        {"openapi": "3.1.0", "paths": []},
        {"openapi": "3.1.0", "paths": {}, "x": float("nan")},
        {"openapi": "3.1.0", "paths": {}, "x": "lone \ud800 surrogate"},
        {"openapi": "3.1.0", "paths": {}, "x": "nul \x00"},
        {"openapi": "3.1.0", "paths": {200: {}}},
        {"openapi": "3.1.0", "paths": {}, "x": {1, 2}},
    ],
)
def test_documents_that_are_not_openapi_3_are_fatal(spec):
    result = compile_spec(spec, provider="p")

    assert result.fatal
    assert result.tools == []
    assert [(w.code, w.severity) for w in result.warnings] == [("spec_invalid", "fatal")]


def test_self_referencing_document_is_fatal_not_a_hang():
    spec: dict[str, Any] = {"openapi": "3.1.0", "paths": {}}
    spec["loop"] = spec

    assert compile_spec(spec, provider="p").warning_codes() == ["spec_invalid"]


@pytest.mark.parametrize("text", ["", "{", "- just\n- a list\n", "key: [unclosed", "a: &x [*x]\n"])
def test_unparseable_text_is_fatal(text):
    result = compile_spec_text(text, provider="p")

    assert result.fatal
    assert result.warning_codes() == ["spec_invalid"]


def test_parse_spec_text_refuses_non_objects():
    with pytest.raises(SpecParseError):
        parse_spec_text("[1, 2]")


ACC = {"version": 1, "enabled": True, "scope": "s"}


@pytest.mark.parametrize(
    ("paths", "code"),
    [
        ({"relative": {"get": {}}}, "path_item_invalid"),
        ({"/a": "not an object"}, "path_item_invalid"),
        ({"/a": {"get": "not an operation"}}, "operation_invalid"),
        ({"/a": {"$ref": "#/nowhere"}}, "ref_unresolved"),
        (
            {"/a": {"get": {"operationId": "a", "x-agent-capability": ACC, "parameters": [7]}}},
            "parameter_invalid",
        ),
        (
            {
                "/a": {
                    "get": {
                        "operationId": "a",
                        "x-agent-capability": ACC,
                        "parameters": [{"name": "q", "in": "query", "schema": 5}],
                    }
                }
            },
            "schema_invalid",
        ),
        (
            {
                "/a": {
                    "post": {
                        "operationId": "a",
                        "x-agent-capability": ACC,
                        "requestBody": {"content": {"application/json": "x"}},
                    }
                }
            },
            "unsupported_request_body",
        ),
        (
            {
                "/a": {
                    "post": {
                        "operationId": "a",
                        "x-agent-capability": ACC,
                        "requestBody": {"content": {"application/json": {"schema": {"$ref": 5}}}},
                    }
                }
            },
            "ref_unresolved",
        ),
        (
            {"/a": {"post": {"operationId": "a", "x-agent-capability": ACC, "requestBody": "x"}}},
            "unsupported_request_body",
        ),
        (
            {
                "/a": {
                    "get": {
                        "operationId": "a",
                        "x-agent-capability": ACC,
                        "parameters": [{"$ref": "#/paths/~1a/get/x/9"}],
                    }
                }
            },
            "ref_unresolved",
        ),
    ],
)
def test_broken_operations_warn_without_raising(paths, code):
    result = compile_spec({"openapi": "3.1.0", "paths": paths}, provider="p")

    assert not result.fatal
    assert result.tools == []
    assert result.warning_codes() == [code]


# --- projection and hashes ---------------------------------------------------------------------------
def test_public_projection_is_an_allowlist_without_leaks():
    result = compiled("clean_31.json")

    for tool in result.tools:
        projection = public_projection(tool)
        assert list(projection) == PROJECTION_KEYS
        dumped = json.dumps(projection)
        assert "internal.example.test" not in dumped
        assert "x-b" not in dumped and "x_future_hint" not in dumped
        assert "operator_uid" not in dumped and "Approve refund" not in dumped
        assert tool.path not in dumped

    refund = public_projection(tool_named(result, "refund_create"))
    assert refund == {
        "name": "refund_create",
        "description": "Create a refund request.",
        "description_truncated": False,
        "input_schema": tool_named(result, "refund_create").input_schema,
        "scope": "refund.request.create",
        "risk": "medium",
        "approval_required": True,
        "readonly": False,
        "idempotent": False,
        "usage_guidance_available": False,
    }


def test_projection_is_a_copy():
    tool = tool_named(compiled("clean_31.json"), "order_get")

    public_projection(tool)["input_schema"]["properties"].clear()

    assert tool.input_schema["properties"]


def fingerprint_of(spec: dict[str, Any], name: str = "refund_create") -> str:
    return execution_fingerprint(tool_named(compile_spec(spec, provider="orders"), name))


def test_execution_fingerprint_ignores_guidance_only_changes():
    spec = load("clean_31.json")
    base = tool_named(compile_spec(spec, provider="orders"), "order_get")
    changed = copy.deepcopy(spec)
    operation = changed["paths"]["/orders/{order_id}"]["get"]
    operation["summary"] = "A different summary."
    operation["description"] = "A different description."
    operation["x-agent-capability"]["guidance"] = {
        "when_to_use": "Other.",
        "returns": "Other.",
        "examples": [{}],
    }
    other = tool_named(compile_spec(changed, provider="orders"), "order_get")

    assert execution_fingerprint(other) == execution_fingerprint(base)
    # ...while everything discovery caches depend on moves.
    assert guidance_digest(other) != guidance_digest(base)
    assert projection_digest(other) != projection_digest(base)
    assert capability_material(other) != capability_material(base)


def test_execution_fingerprint_is_stable_and_a_sha256():
    spec = load("clean_31.json")

    first, second = fingerprint_of(spec), fingerprint_of(copy.deepcopy(spec))

    assert first == second
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(
            lambda s: s["paths"]["/refunds"].__setitem__("put", s["paths"]["/refunds"].pop("post")),
            id="method",
        ),
        pytest.param(lambda s: s["paths"].__setitem__("/v2/refunds", s["paths"].pop("/refunds")), id="path"),
        pytest.param(
            lambda s: s["components"]["schemas"]["RefundRequest"]["properties"]["amount"].__setitem__(
                "maximum", 10
            ),
            id="schema",
        ),
        pytest.param(
            lambda s: s["paths"]["/refunds"]["post"]["x-agent-capability"].__setitem__(
                "risk", {"level": "high"}
            ),
            id="risk",
        ),
        pytest.param(
            lambda s: s["paths"]["/refunds"]["post"]["x-agent-capability"]["approval"].__setitem__(
                "required", True
            ),
            id="approval",
        ),
        pytest.param(
            lambda s: s["paths"]["/refunds"]["post"]["parameters"][0].__setitem__("in", "header"),
            id="location",
        ),
    ],
)
def test_execution_fingerprint_changes_with_execution_fields(mutate):
    spec = load("clean_31.json")
    changed = copy.deepcopy(spec)
    mutate(changed)

    assert fingerprint_of(changed) != fingerprint_of(spec)


def test_guidance_truncation_changes_the_capability_material():
    result = compiled("long_guidance.json")
    a, b = result.tools

    assert guidance_digest(a) != guidance_digest(b)
    assert capability_material(a)["usage_guidance"]["truncated"] is True


def test_compiled_tool_round_trips_through_its_storage_form():
    for tool in compiled("clean_31.json").tools:
        stored = json.loads(json.dumps(tool.as_dict()))
        restored = CompiledTool.from_dict(stored)

        assert restored == tool
        assert execution_fingerprint(restored) == execution_fingerprint(tool)
        assert capability_material(restored) == capability_material(tool)


# --- approval_required_for ---------------------------------------------------------------------------
REFUND_ARGS = {"order_id": "SO1", "amount": 100, "channel": "card", "tags": ["new"]}


@pytest.fixture
def refund() -> CompiledTool:
    return tool_named(compiled("clean_31.json"), "refund_create")


def test_high_risk_and_required_approval_always_need_approval():
    result = compiled("clean_31.json")

    assert approval_required_for(tool_named(result, "staff_delete"), {"staff_id": 1}) is True
    assert approval_required_for(tool_named(result, "ticket_create"), {"title": "x"}) is True
    assert (
        approval_required_for(tool_named(result, "order_get"), {"order_id": "SO1", "X-Tenant": "t"}) is False
    )


def test_when_rules_that_do_not_match_need_no_approval(refund):
    assert approval_required_for(refund, REFUND_ARGS) is False
    assert approval_required_for(refund, {**REFUND_ARGS, "amount": 500}) is False
    assert approval_required_for(refund, {**REFUND_ARGS, "note": None}) is False


@pytest.mark.parametrize(
    "extra",
    [
        {"amount": 500.5},
        {"channel": "wire"},
        {"tags": ["new", "vip"]},
        {"customer": {"tier": "gold"}},
        {"note": "call me"},
    ],
)
def test_any_matching_when_rule_needs_approval(refund, extra):
    assert approval_required_for(refund, {**REFUND_ARGS, **extra}) is True


def test_required_approval_is_not_lifted_by_non_matching_rules(refund):
    strict = CompiledTool.from_dict(
        {**refund.as_dict(), "approval": {**refund.approval.as_dict(), "required": True}}
    )

    assert approval_required_for(strict, REFUND_ARGS) is True


@pytest.mark.parametrize(
    "extra",
    [
        {"amount": "900"},
        {"amount": True},
        {"amount": None},
        {"channel": 1},
        {"tags": "vip"},
        {"customer": {"tier": 3}},
    ],
)
def test_arguments_of_the_wrong_type_are_rejected_not_treated_as_no_match(refund, extra):
    with pytest.raises(ApprovalConditionError) as raised:
        approval_required_for(refund, {**REFUND_ARGS, **extra})

    assert raised.value.code == "confirm_when_argument_type"


def test_non_object_arguments_are_rejected(refund):
    with pytest.raises(ApprovalConditionError) as raised:
        approval_required_for(refund, [1])

    assert raised.value.code == "arguments_not_object"


def test_type_errors_are_raised_even_when_risk_is_high(refund):
    high = CompiledTool.from_dict({**refund.as_dict(), "risk": "high"})

    with pytest.raises(ApprovalConditionError):
        approval_required_for(high, {**REFUND_ARGS, "amount": "1"})


def when_tool(rule: dict[str, Any], properties: dict[str, Any]) -> CompiledTool:
    described = {name: {**schema, "description": f"The {name}."} for name, schema in properties.items()}
    spec = one_operation_spec(
        {
            **body({"type": "object", "properties": described}),
            "x-agent-capability": {"version": 1, "enabled": True, "scope": "s", "approval": {"when": [rule]}},
        }
    )
    result = compile_spec(spec, provider="p")
    assert result.warnings == []
    return result.tools[0]


@pytest.mark.parametrize(
    ("rule", "arguments", "expected"),
    [
        ({"param": "n", "op": "!=", "value": 1}, {}, True),  # absent matches != (as in BailingHub)
        ({"param": "n", "op": "!=", "value": 1}, {"n": 1.0}, False),  # 1 == 1.0
        ({"param": "n", "op": "==", "value": 1}, {}, False),
        ({"param": "n", "op": "<", "value": 0}, {}, False),
        ({"param": "n", "op": "<=", "value": 0}, {"n": -0.5}, True),
        ({"param": "n", "op": ">=", "value": 2}, {"n": 2}, True),
        ({"param": "n", "op": "in", "value": [1, 2]}, {"n": 2.0}, True),
        ({"param": "n", "op": "exists"}, {"n": 0}, True),
        ({"param": "n", "op": "exists"}, {}, False),
        ({"param": "s", "op": "contains", "value": "vip"}, {"s": "a vip order"}, True),
        ({"param": "s", "op": "contains", "value": "vip"}, {}, False),
        ({"param": "b", "op": "==", "value": False}, {"b": False}, True),
        ({"param": "b", "op": "!=", "value": False}, {"b": True}, True),
    ],
)
def test_when_rule_semantics(rule, arguments, expected):
    tool = when_tool(rule, {"n": {"type": "number"}, "s": {"type": "string"}, "b": {"type": "boolean"}})

    assert approval_required_for(tool, arguments) is expected


def test_in_rule_without_a_candidate_of_the_argument_type_is_rejected():
    tool = when_tool(
        {"param": "v", "op": "in", "value": [1, "one"]}, {"v": {"type": ["integer", "string", "boolean"]}}
    )

    assert approval_required_for(tool, {"v": "one"}) is True
    with pytest.raises(ApprovalConditionError) as raised:
        approval_required_for(tool, {"v": True})
    assert raised.value.code == "confirm_when_argument_type"
