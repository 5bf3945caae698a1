"""Config validation (clients, routes, documents) and the effective route view. Pure: no database."""

from __future__ import annotations

import copy

import pytest

from agent_runtime.config import (
    ConfigError,
    route_effective,
    validate_client_config,
    validate_document,
    validate_route_config,
)
from agent_runtime.models import Route

CLIENT = {"app_id": "demo-agent", "name": "Demo agent"}
ROUTE = {"route_key": "demo", "name": "Demo"}
DIRECT = {"enabled": True, "write_tools": ["create_ticket", "cancel_order", "refund_order"]}


def _with(base: dict, patch: dict) -> dict:
    """``base`` with ``patch`` merged one level deep into nested dicts (``None`` deletes a key)."""
    data = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def _client_error(patch: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_client_config(_with(CLIENT, patch), path="clients[0]")
    return info.value


def _route_error(patch: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_route_config(_with(ROUTE, patch), path="routes[0]")
    return info.value


# --- Clients ------------------------------------------------------------------------------------------
def test_client_defaults_are_the_model_columns():
    assert validate_client_config(dict(CLIENT), path="clients[0]") == {
        "app_id": "demo-agent",
        "name": "Demo agent",
        "description": "",
        "enabled": True,
        "allowed_routes": [],
        "allowed_channels": [],
        "rate_limit_per_min": 60,
        "budget": None,
        "agent_authorize_url": "",
        "hub_consent": False,
        "mcp_sign_in": False,
    }


def test_client_accepts_every_documented_field():
    data = {
        **CLIENT,
        "description": "Line one\nline two\tTabbed",
        "enabled": False,
        "allowed_routes": ["*", "Orders.Desk:v2"],
        "allowed_channels": ["wecom", "email"],
        "rate_limit_per_min": 0,
        "budget": {
            "enabled": True,
            "window": "month",
            "window_hours": 8784,
            "hard_cost_usd": 0.01,
            "hard_tokens": 1,
        },
        "agent_authorize_url": "http://127.0.0.1:8080/agent/authorize",
        "hub_consent": True,
        "mcp_sign_in": True,
    }
    result = validate_client_config(data, path="clients[0]")
    assert result == data


@pytest.mark.parametrize(
    "consent", [{"hub_consent": True}, {"agent_authorize_url": "https://shop.example.com/agent/authorize"}]
)
def test_client_mcp_sign_in_needs_an_agent_client(consent):
    assert validate_client_config({**CLIENT, **consent, "mcp_sign_in": True}, path="clients[0]")[
        "mcp_sign_in"
    ]


def test_a_document_gives_mcp_sign_in_to_one_client_at_most():
    one = {**CLIENT, "hub_consent": True, "mcp_sign_in": True}
    two = {**one, "app_id": "other-agent"}
    with pytest.raises(ConfigError) as info:
        validate_document({"clients": [one, {**two, "mcp_sign_in": False}, {**two, "app_id": "third"}]})
    assert info.value.path == "clients[2].mcp_sign_in"
    assert "clients[0]" in info.value.reason


def test_client_budget_may_be_null_for_round_trips():
    assert validate_client_config({**CLIENT, "budget": None}, path="clients[0]")["budget"] is None


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"app_id": None}, "clients[0].app_id"),
        ({"name": None}, "clients[0].name"),
        ({"app_id": "x"}, "clients[0].app_id"),
        ({"app_id": "Demo"}, "clients[0].app_id"),
        ({"app_id": "-demo"}, "clients[0].app_id"),
        ({"app_id": "a" * 65}, "clients[0].app_id"),
        ({"app_id": 12}, "clients[0].app_id"),
        ({"name": ""}, "clients[0].name"),
        ({"name": "n" * 129}, "clients[0].name"),
        ({"name": "two\nlines"}, "clients[0].name"),
        ({"name": "lone \ud800 surrogate"}, "clients[0].name"),
        ({"name": 5}, "clients[0].name"),
        ({"description": "d" * 1001}, "clients[0].description"),
        ({"description": "nul \x00"}, "clients[0].description"),
        ({"enabled": "true"}, "clients[0].enabled"),
        ({"enabled": 1}, "clients[0].enabled"),
        ({"allowed_routes": "demo"}, "clients[0].allowed_routes"),
        ({"allowed_routes": ["demo", "demo"]}, "clients[0].allowed_routes[1]"),
        ({"allowed_routes": ["demo", "bad key"]}, "clients[0].allowed_routes[1]"),
        ({"allowed_routes": [""]}, "clients[0].allowed_routes[0]"),
        ({"allowed_channels": ["wecom", "wecom"]}, "clients[0].allowed_channels[1]"),
        ({"allowed_channels": [""]}, "clients[0].allowed_channels[0]"),
        ({"allowed_channels": [3]}, "clients[0].allowed_channels[0]"),
        ({"rate_limit_per_min": -1}, "clients[0].rate_limit_per_min"),
        ({"rate_limit_per_min": True}, "clients[0].rate_limit_per_min"),
        ({"rate_limit_per_min": 60.0}, "clients[0].rate_limit_per_min"),
        ({"rate_limit_per_min": "60"}, "clients[0].rate_limit_per_min"),
        ({"rate_limit_per_min": 2**31}, "clients[0].rate_limit_per_min"),
        ({"budget": "daily"}, "clients[0].budget"),
        ({"budget": {"window": "week"}}, "clients[0].budget.window"),
        ({"budget": {"window_hours": 0}}, "clients[0].budget.window_hours"),
        ({"budget": {"window_hours": 8785}}, "clients[0].budget.window_hours"),
        ({"budget": {"hard_cost_usd": 0}}, "clients[0].budget.hard_cost_usd"),
        ({"budget": {"hard_cost_usd": float("nan")}}, "clients[0].budget.hard_cost_usd"),
        ({"budget": {"hard_cost_usd": "5"}}, "clients[0].budget.hard_cost_usd"),
        ({"budget": {"hard_tokens": 0}}, "clients[0].budget.hard_tokens"),
        ({"budget": {"enabled": "yes"}}, "clients[0].budget.enabled"),
        ({"budget": {"soft_cost_usd": 1}}, "clients[0].budget.soft_cost_usd"),
        ({"agent_authorize_url": "http://shop.example.com/authorize"}, "clients[0].agent_authorize_url"),
        ({"agent_authorize_url": "http://127.0.0.1/authorize"}, "clients[0].agent_authorize_url"),
        ({"agent_authorize_url": "https://user:pw@shop.example.com/a"}, "clients[0].agent_authorize_url"),
        ({"agent_authorize_url": "https://shop.example.com/a#frag"}, "clients[0].agent_authorize_url"),
        ({"agent_authorize_url": ""}, "clients[0].agent_authorize_url"),
        ({"agent_authorize_url": "https://shop.example.com/\n"}, "clients[0].agent_authorize_url"),
        ({"hub_consent": "yes"}, "clients[0].hub_consent"),
        ({"mcp_sign_in": "yes"}, "clients[0].mcp_sign_in"),
        # Only an agent client (hub consent or a business consent page) may take MCP sign-ins.
        ({"mcp_sign_in": True}, "clients[0].mcp_sign_in"),
        ({"mcp_sign_in": True, "hub_consent": False}, "clients[0].mcp_sign_in"),
        ({"colour": "blue"}, "clients[0].colour"),
        ({"allowed_routs": ["demo"]}, "clients[0].allowed_routs"),
    ],
)
def test_client_rule_violations_name_the_path(patch, path):
    assert _client_error(patch).path == path


@pytest.mark.parametrize("key", ["token", "token_hash", "client_token", "secret"])
def test_client_tokens_cannot_come_from_a_file(key):
    secret = "bct_" + "S" * 43
    error = _client_error({key: secret})
    assert error.path == f"clients[0].{key}"
    assert "bailing_client_token" in error.reason
    assert secret not in str(error)


def test_client_item_must_be_an_object():
    with pytest.raises(ConfigError) as info:
        validate_client_config(["demo"], path="clients[3]")
    assert info.value.path == "clients[3]"


def test_error_text_never_echoes_the_value():
    secret = "sk-live-" + "Z" * 30
    for patch in ({"name": secret + "\x07"}, {"rate_limit_per_min": secret}, {"budget": {"window": secret}}):
        assert secret not in str(_client_error(patch))


def test_unusual_keys_are_quoted_in_the_path():
    error = _client_error({"bad\nkey": 1})
    assert "\n" not in error.path
    assert error.path.startswith("clients[0][")


def test_names_are_measured_in_utf16_code_units():
    # U+1F600 is two UTF-16 code units: 64 of them are exactly 128 characters as clients count them.
    assert validate_client_config({**CLIENT, "name": "😀" * 64}, path="clients[0]")["name"] == "😀" * 64
    assert _client_error({"name": "😀" * 64 + "a"}).path == "clients[0].name"


# --- Routes -------------------------------------------------------------------------------------------
def test_route_defaults_are_the_model_columns():
    assert validate_route_config(dict(ROUTE), path="routes[0]") == {
        "route_key": "demo",
        "name": "Demo",
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


def test_route_blocks_are_stored_as_written_not_filled_in():
    data = {
        **ROUTE,
        "description": "Multi\nline",
        "target": "claude-code",
        "target_config": {
            "credential": "main",
            "model": "m",
            "temperature": 0.2,
            "system_prompt": "Be brief.\n",
        },
        "permission": "readonly",
        "audience": {"enabled": True, "priority": -1000, "roles": ["staff"], "anonymous": False},
        "memory": {"recent_messages": 50, "summary_model": "small"},
        "knowledge": {"kb_ids": ["kb-one", "kb-two"], "min_score": 0, "page_boost": True},
        "tools": {
            "sources": [
                {
                    "provider": "orders",
                    "allow": ["order.*", "*"],
                    "retrieval": {"enabled": True, "max_tools": 40},
                },
                {"provider": "shipping", "allow": ["shipment.read"], "subject_field": "operator_uid"},
            ],
            "max_calls": 50,
            "builtin": {"send_message": {"channels": ["wecom"]}},
            "approval": {"type": "business_webhook", "url": "https://biz.example.com/approvals", "to": "ops"},
            "agent_direct": {"enabled": True, "write_tools": ["a_b"], "force_approval_tools": ["a_b"]},
        },
        "agent_client": {
            "enabled": True,
            "instructions": "x" * 20_000,
            "active_tool_limit": 12,
            "system_info": {
                "name": "n" * 120,
                "summary": "s" * 400,
                "domains": ["d" * 120] * 1,
                "boundaries": [],
            },
        },
    }
    result = validate_route_config(copy.deepcopy(data), path="routes[0]")
    for key, value in data.items():
        assert result[key] == value
    assert result["run_config"] == {}


def test_run_only_fields_are_kept_under_run_config():
    run = {
        "project": "shop",
        "profile": "default",
        "session_policy": "fixed",
        "session_fixed_id": "s-1",
        "default_callback_url": "https://biz.example.com/callback",
        "delivery": {"type": "webhook", "url": "https://biz.example.com/hook", "x-extra": {"kept": True}},
        "retry": {"max": 5, "backoff_ms": 300_000},
        "budget": {"window": "hour", "hard_cost_usd": 1.5},
    }
    result = validate_route_config({**ROUTE, **run}, path="routes[0]")
    assert result["run_config"] == run
    assert set(result) == {
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
        "data_policy",
        "run_config",
    }


def test_permission_null_means_unset():
    assert validate_route_config({**ROUTE, "permission": None}, path="routes[0]")["permission"] is None


def test_system_prompt_limit_is_inclusive():
    prompt = "p" * 40_000
    result = validate_route_config({**ROUTE, "target_config": {"system_prompt": prompt}}, path="routes[0]")
    assert result["target_config"]["system_prompt"] == prompt


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        # identity and scalar columns
        ({"route_key": None}, "routes[0].route_key"),
        ({"name": None}, "routes[0].name"),
        ({"route_key": "auto"}, "routes[0].route_key"),
        ({"route_key": "AUTO"}, "routes[0].route_key"),
        ({"route_key": "-demo"}, "routes[0].route_key"),
        ({"route_key": "has space"}, "routes[0].route_key"),
        ({"route_key": "k" * 129}, "routes[0].route_key"),
        ({"name": "n" * 129}, "routes[0].name"),
        ({"description": "d" * 1001}, "routes[0].description"),
        ({"enabled": "false"}, "routes[0].enabled"),
        ({"target": "LLM"}, "routes[0].target"),
        ({"permission": "admin"}, "routes[0].permission"),
        ({"permission": ""}, "routes[0].permission"),
        ({"unknown": 1}, "routes[0].unknown"),
        # target_config
        ({"target_config": "llm"}, "routes[0].target_config"),
        ({"target_config": {"system_prompt": "p" * 40_001}}, "routes[0].target_config.system_prompt"),
        ({"target_config": {"system_prompt": 1}}, "routes[0].target_config.system_prompt"),
        ({"target_config": {"system_prompt": "bell \x07"}}, "routes[0].target_config.system_prompt"),
        ({"target_config": {"temperature": float("inf")}}, "routes[0].target_config.temperature"),
        ({"target_config": {"input": {"note": "nul \x00"}}}, "routes[0].target_config.input.note"),
        ({"target_config": {"big": "x" * 300_000}}, "routes[0].target_config"),
        # audience
        ({"audience": []}, "routes[0].audience"),
        ({"audience": {"priority": 1001}}, "routes[0].audience.priority"),
        ({"audience": {"priority": -1001}}, "routes[0].audience.priority"),
        ({"audience": {"priority": 1.5}}, "routes[0].audience.priority"),
        ({"audience": {"enabled": 1}}, "routes[0].audience.enabled"),
        ({"audience": {"keywords": [f"k{i}" for i in range(101)]}}, "routes[0].audience.keywords"),
        ({"audience": {"roles": "staff"}}, "routes[0].audience.roles"),
        ({"audience": {"roles": ["a", "a"]}}, "routes[0].audience.roles[1]"),
        ({"audience": {"tenants": [""]}}, "routes[0].audience.tenants[0]"),
        ({"audience": {"groups": []}}, "routes[0].audience.groups"),
        # memory
        ({"memory": {"recent_messages": 0}}, "routes[0].memory.recent_messages"),
        ({"memory": {"recent_messages": 51}}, "routes[0].memory.recent_messages"),
        ({"memory": {"recent_budget_chars": 199}}, "routes[0].memory.recent_budget_chars"),
        ({"memory": {"recent_budget_chars": 40_001}}, "routes[0].memory.recent_budget_chars"),
        ({"memory": {"per_message_chars": 49}}, "routes[0].memory.per_message_chars"),
        ({"memory": {"per_message_chars": 12_001}}, "routes[0].memory.per_message_chars"),
        ({"memory": {"summary_enabled": "no"}}, "routes[0].memory.summary_enabled"),
        ({"memory": {"summary_trigger_chars": 499}}, "routes[0].memory.summary_trigger_chars"),
        ({"memory": {"summary_keep_recent": -1}}, "routes[0].memory.summary_keep_recent"),
        ({"memory": {"summary_keep_recent": 41}}, "routes[0].memory.summary_keep_recent"),
        ({"memory": {"summary_max_chars": 199}}, "routes[0].memory.summary_max_chars"),
        ({"memory": {"summary_max_chars": 8001}}, "routes[0].memory.summary_max_chars"),
        ({"memory": {"summary_model": "m" * 101}}, "routes[0].memory.summary_model"),
        ({"memory": {"window": 3}}, "routes[0].memory.window"),
        # knowledge
        ({"knowledge": {"kb_id": "a", "kb_ids": ["b"]}}, "routes[0].knowledge.kb_ids"),
        ({"knowledge": {"kb_id": "kb", "kb_ids": ["kb2"]}}, "routes[0].knowledge.kb_ids"),
        ({"knowledge": {"top_k": 3}}, "routes[0].knowledge"),
        ({"knowledge": {"kb_ids": []}}, "routes[0].knowledge.kb_ids"),
        ({"knowledge": {"kb_ids": ["kb", "kb"]}}, "routes[0].knowledge.kb_ids[1]"),
        ({"knowledge": {"kb_id": "KB"}}, "routes[0].knowledge.kb_id"),
        ({"knowledge": {"kb_id": "kb", "top_k": 0}}, "routes[0].knowledge.top_k"),
        ({"knowledge": {"kb_id": "kb", "top_k": 21}}, "routes[0].knowledge.top_k"),
        ({"knowledge": {"kb_id": "kb", "min_score": 1.01}}, "routes[0].knowledge.min_score"),
        ({"knowledge": {"kb_id": "kb", "min_score": -0.1}}, "routes[0].knowledge.min_score"),
        ({"knowledge": {"kb_id": "kb", "inject": "page"}}, "routes[0].knowledge.inject"),
        ({"knowledge": {"kb_id": "kb", "max_docs": 0}}, "routes[0].knowledge.max_docs"),
        ({"knowledge": {"kb_id": "kb", "max_docs": 21}}, "routes[0].knowledge.max_docs"),
        ({"knowledge": {"kb_id": "kb", "page_boost": "true"}}, "routes[0].knowledge.page_boost"),
        ({"knowledge": {"kb_id": "kb", "fusion": "rrf"}}, "routes[0].knowledge.fusion"),
        # tools
        ({"tools": {"sources": []}}, "routes[0].tools.sources"),
        ({"tools": {"sources": [{"provider": "orders"}]}}, "routes[0].tools.sources[0].allow"),
        ({"tools": {"sources": [{"allow": ["x"]}]}}, "routes[0].tools.sources[0].provider"),
        (
            {"tools": {"sources": [{"provider": "Orders", "allow": ["x"]}]}},
            "routes[0].tools.sources[0].provider",
        ),
        ({"tools": {"sources": [{"provider": "orders", "allow": []}]}}, "routes[0].tools.sources[0].allow"),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["order.*", "order.*"]}]}},
            "routes[0].tools.sources[0].allow[1]",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["ord*"]}]}},
            "routes[0].tools.sources[0].allow[0]",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["*.read"]}]}},
            "routes[0].tools.sources[0].allow[0]",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": [".*"]}]}},
            "routes[0].tools.sources[0].allow[0]",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["a b"]}]}},
            "routes[0].tools.sources[0].allow[0]",
        ),
        (
            {
                "tools": {
                    "sources": [
                        {"provider": "orders", "allow": ["x"]},
                        {"provider": "orders", "allow": ["y"]},
                    ]
                }
            },
            "routes[0].tools.sources[1].provider",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "subject_field": ""}]}},
            "routes[0].tools.sources[0].subject_field",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "retrieval": {"max_tools": 41}}]}},
            "routes[0].tools.sources[0].retrieval.max_tools",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "retrieval": {"max_tools": 0}}]}},
            "routes[0].tools.sources[0].retrieval.max_tools",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "retrieval": {"min_score": 2}}]}},
            "routes[0].tools.sources[0].retrieval.min_score",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "retrieval": {"model": "m"}}]}},
            "routes[0].tools.sources[0].retrieval.model",
        ),
        (
            {"tools": {"sources": [{"provider": "orders", "allow": ["x"], "secret": "s"}]}},
            "routes[0].tools.sources[0].secret",
        ),
        ({"tools": {"max_calls": 0}}, "routes[0].tools.max_calls"),
        ({"tools": {"max_calls": 51}}, "routes[0].tools.max_calls"),
        ({"tools": {"provider": "orders"}}, "routes[0].tools.provider"),
        (
            {"tools": {"builtin": {"send_message": {"channels": []}}}},
            "routes[0].tools.builtin.send_message.channels",
        ),
        ({"tools": {"builtin": {"send_message": {}}}}, "routes[0].tools.builtin.send_message.channels"),
        ({"tools": {"builtin": {"notify": {}}}}, "routes[0].tools.builtin.notify"),
        ({"tools": {"approval": {}}}, "routes[0].tools.approval.type"),
        ({"tools": {"approval": {"type": ""}}}, "routes[0].tools.approval.type"),
        ({"tools": {"approval": {"type": "business_webhook"}}}, "routes[0].tools.approval.url"),
        (
            {"tools": {"approval": {"type": "webhook", "url": "ftp://x.example.com/"}}},
            "routes[0].tools.approval.url",
        ),
        (
            {"tools": {"approval": {"type": "console", "url": "https://u@x.example.com/"}}},
            "routes[0].tools.approval.url",
        ),
        # agent_direct
        ({"tools": {"agent_direct": {}}}, "routes[0].tools.agent_direct.enabled"),
        ({"tools": {"agent_direct": {"enabled": "yes"}}}, "routes[0].tools.agent_direct.enabled"),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["create_ticket", "orders.*"]}}},
            "routes[0].tools.agent_direct.write_tools[1]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["*"]}}},
            "routes[0].tools.agent_direct.write_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["create_*"]}}},
            "routes[0].tools.agent_direct.write_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["create_ticket", "create_ticket"]}}},
            "routes[0].tools.agent_direct.write_tools[1]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["create-ticket"]}}},
            "routes[0].tools.agent_direct.write_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["9lives"]}}},
            "routes[0].tools.agent_direct.write_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": ["t" * 65]}}},
            "routes[0].tools.agent_direct.write_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {"enabled": True, "write_tools": "create_ticket"}}},
            "routes[0].tools.agent_direct.write_tools",
        ),
        (
            {
                "tools": {
                    "agent_direct": {**DIRECT, "force_approval_tools": ["cancel_order", "delete_everything"]}
                }
            },
            "routes[0].tools.agent_direct.force_approval_tools[1]",
        ),
        (
            {"tools": {"agent_direct": {**DIRECT, "force_approval_tools": ["cancel_order", "cancel_order"]}}},
            "routes[0].tools.agent_direct.force_approval_tools[1]",
        ),
        (
            {"tools": {"agent_direct": {**DIRECT, "force_approval_tools": ["cancel_*"]}}},
            "routes[0].tools.agent_direct.force_approval_tools[0]",
        ),
        (
            {"tools": {"agent_direct": {**DIRECT, "unattended_write_tools": ["delete_everything"]}}},
            "routes[0].tools.agent_direct.unattended_write_tools[0]",
        ),
        (
            {
                "tools": {
                    "agent_direct": {
                        **DIRECT,
                        "force_approval_tools": ["cancel_order"],
                        "unattended_write_tools": ["create_ticket"],
                    }
                }
            },
            "routes[0].tools.agent_direct.unattended_write_tools",
        ),
        (
            {"tools": {"agent_direct": {**DIRECT, "force_approval_tools": [], "unattended_write_tools": []}}},
            "routes[0].tools.agent_direct.unattended_write_tools",
        ),
        (
            {"tools": {"agent_direct": {**DIRECT, "read_tools": []}}},
            "routes[0].tools.agent_direct.read_tools",
        ),
        # agent_client
        ({"agent_client": {"enabled": "true"}}, "routes[0].agent_client.enabled"),
        ({"agent_client": {"instructions": "i" * 20_001}}, "routes[0].agent_client.instructions"),
        ({"agent_client": {"instructions": "esc \x1b[31m"}}, "routes[0].agent_client.instructions"),
        ({"agent_client": {"active_tool_limit": 0}}, "routes[0].agent_client.active_tool_limit"),
        ({"agent_client": {"active_tool_limit": 13}}, "routes[0].agent_client.active_tool_limit"),
        ({"agent_client": {"active_tool_limit": "8"}}, "routes[0].agent_client.active_tool_limit"),
        ({"agent_client": {"system_info": {"name": "n" * 121}}}, "routes[0].agent_client.system_info.name"),
        (
            {"agent_client": {"system_info": {"summary": "s" * 401}}},
            "routes[0].agent_client.system_info.summary",
        ),
        (
            {"agent_client": {"system_info": {"domains": [f"d{i}" for i in range(7)]}}},
            "routes[0].agent_client.system_info.domains",
        ),
        (
            {"agent_client": {"system_info": {"domains": ["d" * 121]}}},
            "routes[0].agent_client.system_info.domains[0]",
        ),
        (
            {"agent_client": {"system_info": {"boundaries": ["ok", "b" * 161]}}},
            "routes[0].agent_client.system_info.boundaries[1]",
        ),
        ({"agent_client": {"system_info": {"owner": "x"}}}, "routes[0].agent_client.system_info.owner"),
        ({"agent_client": {"artifacts": {}}}, "routes[0].agent_client.artifacts"),
        ({"route_key": "Orders.Desk", "agent_client": {"enabled": True}}, "routes[0].agent_client.enabled"),
        # /run-only fields
        ({"project": ""}, "routes[0].project"),
        ({"project": "p" * 129}, "routes[0].project"),
        ({"profile": "p" * 65}, "routes[0].profile"),
        ({"session_policy": "sticky"}, "routes[0].session_policy"),
        ({"session_policy": "fixed"}, "routes[0].session_fixed_id"),
        ({"session_policy": "per_key"}, "routes[0].session_key_field"),
        ({"session_key_field": "k" * 192}, "routes[0].session_key_field"),
        ({"default_callback_url": "not a url"}, "routes[0].default_callback_url"),
        ({"delivery": {"url": "https://x.example.com"}}, "routes[0].delivery.type"),
        ({"delivery": {"type": "webhook"}}, "routes[0].delivery.url"),
        ({"delivery": {"type": "channel", "to": "ops"}}, "routes[0].delivery.channel"),
        ({"delivery": {"type": "channel", "channel": "wecom"}}, "routes[0].delivery.to"),
        ({"retry": {"max": 6}}, "routes[0].retry.max"),
        ({"retry": {"max": -1}}, "routes[0].retry.max"),
        ({"retry": {"backoff_ms": 499}}, "routes[0].retry.backoff_ms"),
        ({"retry": {"backoff_ms": 300_001}}, "routes[0].retry.backoff_ms"),
        ({"retry": {"jitter": True}}, "routes[0].retry.jitter"),
        ({"budget": {"window": "year"}}, "routes[0].budget.window"),
    ],
)
def test_route_rule_violations_name_the_path(patch, path):
    assert _route_error(patch).path == path


@pytest.mark.parametrize(
    "direct",
    [
        {"enabled": False},
        {"enabled": True, "write_tools": []},
        {**DIRECT, "force_approval_tools": ["cancel_order"]},
        {**DIRECT, "unattended_write_tools": ["create_ticket"]},
    ],
)
def test_agent_direct_valid_shapes(direct):
    result = validate_route_config({**ROUTE, "tools": {"agent_direct": direct}}, path="routes[0]")
    assert result["tools"]["agent_direct"] == direct


def test_both_approval_fields_is_an_error_even_when_consistent():
    # force_approval_tools == write_tools − unattended_write_tools, yet configuring both is refused.
    error = _route_error(
        {
            "tools": {
                "agent_direct": {
                    **DIRECT,
                    "force_approval_tools": ["cancel_order", "refund_order"],
                    "unattended_write_tools": ["create_ticket"],
                }
            }
        }
    )
    assert error.path == "routes[0].tools.agent_direct.unattended_write_tools"


def test_agent_workspace_accepts_resource_name_keys():
    result = validate_route_config(
        {**ROUTE, "route_key": "order-desk", "agent_client": {"enabled": True}}, path="r"
    )
    assert result["agent_client"] == {"enabled": True}
    # Non-workspace routes may still use the wider config pattern.
    assert (
        validate_route_config({**ROUTE, "route_key": "Orders.Desk:v2"}, path="r")["route_key"]
        == "Orders.Desk:v2"
    )


# --- Documents ----------------------------------------------------------------------------------------
def test_document_sections_are_optional():
    assert validate_document({}) == {"clients": [], "tool_providers": [], "knowledge_bases": [], "routes": []}


@pytest.mark.parametrize(
    ("document", "path"),
    [
        (None, "(document)"),
        ([], "(document)"),
        ({"tool_providerz": []}, "tool_providerz"),
        ({"clients": {"app_id": "x"}}, "clients"),
        ({"routes": "demo"}, "routes"),
        ({"clients": [CLIENT, {**CLIENT, "name": "Other"}]}, "clients[1].app_id"),
        (
            {"routes": [ROUTE, {**ROUTE, "route_key": "two"}, {**ROUTE, "name": "Again"}]},
            "routes[2].route_key",
        ),
        ({"clients": [CLIENT], "routes": [ROUTE, {**ROUTE, "route_key": "x", "name": ""}]}, "routes[1].name"),
    ],
)
def test_document_errors_name_the_path(document, path):
    with pytest.raises(ConfigError) as info:
        validate_document(document)
    assert info.value.path == path


# --- Effective view -----------------------------------------------------------------------------------
EFFECTIVE_DEFAULTS = {
    "route_key": "demo",
    "name": "Demo",
    "description": "",
    "enabled": True,
    "permission": "full",
    "system_prompt": "",
    "audience": {
        "enabled": False,
        "auto": False,
        "priority": 0,
        "keywords": [],
        "clients": [],
        "channels": [],
        "tenants": [],
        "roles": [],
        "principals": [],
        "audiences": [],
        "anonymous": False,
    },
    "memory": {
        "recent_messages": 12,
        "recent_budget_chars": 8000,
        "per_message_chars": 2000,
        "summary_enabled": False,
        "summary_trigger_chars": 4000,
        "summary_keep_recent": 6,
        "summary_max_chars": 1200,
        "summary_model": None,
    },
    "knowledge": {
        "kb_ids": [],
        "top_k": 5,
        "min_score": 0.35,
        "inject": "chunk",
        "max_docs": 4,
        "page_boost": False,
        "fusion": {"method": "rrf", "rrf_k": 60, "lexical_weight": 1.0, "vector_weight": 1.0},
    },
    "tools": {
        "sources": [],
        "max_calls": 5,
        "agent_direct": {
            "enabled": False,
            "write_tools": [],
            "force_approval_tools": [],
            "deprecated_unattended_write_tools": [],
        },
        "approval": None,
    },
    "agent_client": {"enabled": False, "instructions": "", "active_tool_limit": 8, "system_info": None},
}


def test_effective_defaults_of_a_bare_route():
    assert route_effective(validate_route_config(dict(ROUTE), path="r")) == EFFECTIVE_DEFAULTS


def test_effective_view_of_a_model_instance():
    route = Route(
        route_key="demo", name="Demo", target_config={"system_prompt": "Hi", "api_key": "sk-secret"}
    )
    effective = route_effective(route)
    assert effective["system_prompt"] == "Hi"
    assert effective["permission"] == "full"
    assert "sk-secret" not in repr(effective)
    assert effective["memory"] == EFFECTIVE_DEFAULTS["memory"]


def test_effective_view_merges_stored_values_over_defaults():
    data = validate_route_config(
        {
            **ROUTE,
            "permission": "readwrite",
            "enabled": False,
            "audience": {"enabled": True, "roles": ["staff"]},
            "memory": {"recent_messages": 3, "summary_model": "tiny"},
            "knowledge": {"kb_id": "handbook", "inject": "doc"},
            "tools": {
                "sources": [
                    {"provider": "orders", "allow": ["order.*"], "retrieval": {"enabled": True}},
                    {"provider": "shipping", "allow": ["shipment.read"], "subject_field": "uid"},
                ],
                "max_calls": 9,
                "agent_direct": {**DIRECT, "force_approval_tools": ["refund_order"]},
            },
            "agent_client": {
                "enabled": True,
                "instructions": "Be careful.",
                "active_tool_limit": 4,
                "system_info": {"name": "Desk"},
            },
        },
        path="r",
    )
    effective = route_effective(data)
    assert effective["permission"] == "readwrite"
    assert effective["enabled"] is False
    assert effective["audience"] == {**EFFECTIVE_DEFAULTS["audience"], "enabled": True, "roles": ["staff"]}
    assert effective["memory"] == {
        **EFFECTIVE_DEFAULTS["memory"],
        "recent_messages": 3,
        "summary_model": "tiny",
    }
    assert effective["knowledge"] == {
        **EFFECTIVE_DEFAULTS["knowledge"],
        "kb_ids": ["handbook"],
        "inject": "doc",
    }
    assert effective["tools"]["sources"] == [
        {
            "provider": "orders",
            "allow": ["order.*"],
            "subject_field": None,
            "retrieval": {"enabled": True, "min_score": 0.3, "max_tools": 15},
        },
        {
            "provider": "shipping",
            "allow": ["shipment.read"],
            "subject_field": "uid",
            "retrieval": {"enabled": False, "min_score": 0.3, "max_tools": 15},
        },
    ]
    assert effective["tools"]["max_calls"] == 9
    assert effective["tools"]["agent_direct"] == {
        "enabled": True,
        "write_tools": ["create_ticket", "cancel_order", "refund_order"],
        "force_approval_tools": ["refund_order"],
        "deprecated_unattended_write_tools": [],
    }
    assert effective["agent_client"] == {
        "enabled": True,
        "instructions": "Be careful.",
        "active_tool_limit": 4,
        "system_info": {"name": "Desk", "summary": "", "domains": [], "boundaries": []},
    }


def test_kb_ids_are_kept_in_order():
    data = validate_route_config({**ROUTE, "knowledge": {"kb_ids": ["b-kb", "a-kb"]}}, path="r")
    assert route_effective(data)["knowledge"]["kb_ids"] == ["b-kb", "a-kb"]


def test_deprecated_unattended_list_converts_to_force_approval_in_write_order():
    data = validate_route_config(
        {**ROUTE, "tools": {"agent_direct": {**DIRECT, "unattended_write_tools": ["cancel_order"]}}}, path="r"
    )
    direct = route_effective(data)["tools"]["agent_direct"]
    assert direct["force_approval_tools"] == ["create_ticket", "refund_order"]
    assert direct["deprecated_unattended_write_tools"] == ["cancel_order"]
    assert direct["write_tools"] == ["create_ticket", "cancel_order", "refund_order"]


def test_deprecated_empty_unattended_list_means_every_write_needs_approval():
    data = validate_route_config(
        {**ROUTE, "tools": {"agent_direct": {**DIRECT, "unattended_write_tools": []}}}, path="r"
    )
    assert route_effective(data)["tools"]["agent_direct"]["force_approval_tools"] == DIRECT["write_tools"]


def test_without_either_list_no_write_is_forced_to_approval():
    data = validate_route_config({**ROUTE, "tools": {"agent_direct": DIRECT}}, path="r")
    assert route_effective(data)["tools"]["agent_direct"]["force_approval_tools"] == []


def test_effective_view_does_not_share_lists_with_the_stored_route():
    route = Route(
        route_key="demo", name="Demo", tools={"agent_direct": dict(DIRECT)}, audience={"roles": ["a"]}
    )
    effective = route_effective(route)
    effective["tools"]["agent_direct"]["write_tools"].append("x")
    effective["audience"]["roles"].append("b")
    assert route.tools["agent_direct"]["write_tools"] == DIRECT["write_tools"]
    assert route.audience["roles"] == ["a"]
