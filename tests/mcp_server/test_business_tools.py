"""Business tools over MCP: listing, annotations, meta-tools, and governed calls against real business
processes (the Demo Shop, and the chaos server that counts writes)."""

from __future__ import annotations

import secrets

import pytest

from agent_runtime.models import Route, ToolApproval, ToolInvocation
from tests.mcp_server.support import call_modern, post_legacy, post_modern, text_of
from tests.support.invocations import agent, provider_for, workspace

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
HUB = ["search_knowledge", "ask_knowledge", "find_tools", "call_tool", "resume_invocation", "get_receipt"]
WRITES = ["create_ticket", "request_refund", "cancel_order"]


@pytest.fixture
def token(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=WRITES)
    return agent(route_key=ROUTE)._access


def tools_of(client, token) -> list[dict]:
    response = post_modern(client, ROUTE, token, "tools/list")
    assert response.status_code == 200, response.content
    return response.json()["result"]["tools"]


def _set_agent_client(**values):
    route = Route.objects.get(route_key=ROUTE)
    route.agent_client = {**(route.agent_client or {}), **values}
    route.save(update_fields=["agent_client"])


def test_the_list_is_knowledge_then_meta_tools_then_active_business_tools(client, token):
    names = [tool["name"] for tool in tools_of(client, token)]
    assert names[:6] == HUB
    business = names[6:]
    assert business == sorted(business) and "list_orders" in business and "cancel_order" in business
    assert names == [tool["name"] for tool in tools_of(client, token)]  # deterministic


def test_annotations_come_from_the_tools_acc(client, token):
    by_name = {tool["name"]: tool for tool in tools_of(client, token)}
    read = by_name["list_orders"]
    assert read["annotations"]["readOnlyHint"] is True
    assert read["annotations"]["destructiveHint"] is False
    assert read["inputSchema"]["type"] == "object"
    cancel = by_name["cancel_order"]
    assert cancel["annotations"]["readOnlyHint"] is False
    assert cancel["annotations"]["destructiveHint"] is True  # high risk
    assert cancel["_meta"]["io.bailinghub/approval_required"] is True
    assert "order_id" in cancel["inputSchema"]["properties"]
    for tool in by_name.values():
        assert isinstance(tool["annotations"].get("idempotentHint", False), bool)


def test_at_most_the_active_tool_limit_of_business_tools_is_listed(client, token):
    _set_agent_client(active_tool_limit=2)
    names = [tool["name"] for tool in tools_of(client, token)]
    assert len(names) == len(HUB) + 2
    found = call_modern(client, ROUTE, token, "find_tools", {"query": "refund", "limit": 12})
    assert found["isError"] is False
    found_names = [tool["name"] for tool in found["structuredContent"]["tools"]]
    assert "request_refund" in found_names
    unlisted = next(name for name in found_names if name not in names)
    # An authorized tool that is not in the list can still be called, by name or directly.
    assert unlisted


def test_without_agent_direct_only_the_knowledge_tools_exist(client, token):
    route = Route.objects.get(route_key=ROUTE)
    tools = dict(route.tools)
    tools["agent_direct"] = {**tools.get("agent_direct", {}), "enabled": False}
    route.tools = tools
    route.save(update_fields=["tools"])
    assert [tool["name"] for tool in tools_of(client, token)] == HUB[:2]
    response = post_modern(client, ROUTE, token, "tools/call", {"name": "list_orders", "arguments": {}})
    assert response.json()["error"]["code"] == -32602


def test_a_read_runs_as_a_governed_invocation(client, token):
    result = call_modern(client, ROUTE, token, "list_orders", {})
    assert result["isError"] is False
    assert result["structuredContent"]["state"] == "executed"
    assert result["structuredContent"]["schema_version"] == "bailing.agent-tool-invocation.v1"
    assert "SO-1001" in text_of(result)
    invocation = ToolInvocation.objects.get(invocation_id=result["structuredContent"]["invocation_id"])
    assert invocation.route_key == ROUTE and invocation.tool == "list_orders"


def test_the_same_call_on_the_handshake_wire(client, token):
    body = post_legacy(client, ROUTE, token, "tools/call", {"name": "list_orders", "arguments": {}}).json()
    assert body["result"]["structuredContent"]["state"] == "executed"
    assert "resultType" not in body["result"]


def test_a_write_waits_for_approval_then_resume_runs_it_once(client, token):
    arguments = {"order_id": "SO-1004", "reason": "customer asked"}
    first = call_modern(client, ROUTE, token, "cancel_order", arguments)
    structured = first["structuredContent"]
    assert structured["state"] == "awaiting_approval"
    assert first["isError"] is False
    text = text_of(first)
    invocation_id = structured["invocation_id"]
    assert f"#{structured['approval_id']}" in text
    assert "resume_invocation" in text and invocation_id in text
    approval = ToolApproval.objects.get(pk=structured["approval_id"])
    assert approval.args == arguments
    waiting = call_modern(client, ROUTE, token, "resume_invocation", {"invocation_id": invocation_id})
    assert waiting["structuredContent"]["state"] == "awaiting_approval"
    ToolApproval.objects.filter(pk=approval.pk).update(status="approved")
    done = call_modern(client, ROUTE, token, "resume_invocation", {"invocation_id": invocation_id})
    assert done["structuredContent"]["state"] == "executed", done
    again = call_modern(client, ROUTE, token, "resume_invocation", {"invocation_id": invocation_id})
    assert again["structuredContent"] == done["structuredContent"]
    receipt = call_modern(client, ROUTE, token, "get_receipt", {"invocation_id": invocation_id})
    assert receipt["structuredContent"]["result"]["state"] == "executed"
    assert receipt["structuredContent"]["read_only"] is True


def test_call_tool_reaches_any_authorized_tool_and_its_invocation_id_makes_a_retry_a_replay(client, token):
    invocation_id = secrets.token_hex(32)
    arguments = {
        "name": "create_ticket",
        "arguments": {"subject": "MCP", "body": "hello"},
        "invocation_id": invocation_id,
    }
    first = call_modern(client, ROUTE, token, "call_tool", arguments)
    second = call_modern(client, ROUTE, token, "call_tool", arguments)
    assert first["structuredContent"]["invocation_id"] == invocation_id
    assert second["structuredContent"] == first["structuredContent"]
    assert ToolInvocation.objects.filter(invocation_id=invocation_id).count() == 1


def test_a_direct_call_takes_its_invocation_id_from_meta(client, token):
    invocation_id = secrets.token_hex(32)
    meta = {"io.bailinghub/invocation_id": invocation_id}
    first = call_modern(client, ROUTE, token, "list_orders", {}, **meta)
    assert first["structuredContent"]["invocation_id"] == invocation_id
    # Same id, different arguments: the hub refuses instead of guessing.
    conflict = call_modern(client, ROUTE, token, "list_orders", {"status": "shipped"}, **meta)
    assert conflict["isError"] is True
    assert conflict["structuredContent"]["error"] == "invocation_conflict"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("call_tool", {"name": "create_ticket", "arguments": {}, "invocation_id": "nothex"}),
        ("call_tool", {"name": ""}),
        ("call_tool", {"name": "create_ticket", "arguments": [1]}),
        ("resume_invocation", {"invocation_id": "x"}),
        ("get_receipt", {}),
        ("find_tools", {"query": " "}),
    ],
)
def test_malformed_meta_tool_arguments_fail_the_tool(client, token, tool, arguments):
    result = call_modern(client, ROUTE, token, tool, arguments)
    assert result["isError"] is True
    assert text_of(result).startswith("Tool failed: ")


def test_an_unknown_invocation_is_a_failed_tool_with_the_hub_code(client, token):
    result = call_modern(client, ROUTE, token, "resume_invocation", {"invocation_id": "a" * 64})
    assert result["isError"] is True
    assert result["structuredContent"]["error"] == "invocation_not_found"


def test_arguments_that_do_not_match_the_schema_are_rejected_before_dispatch(client, token):
    result = call_modern(client, ROUTE, token, "cancel_order", {"order_id": 5})
    assert result["isError"] is True
    assert result["structuredContent"]["state"] == "rejected_before_dispatch"


def test_oversized_arguments_are_refused_and_nothing_is_stored(client, token):
    before = ToolInvocation.objects.count()
    result = call_modern(client, ROUTE, token, "create_ticket", {"subject": "x", "body": "y" * (1024 * 1024)})
    assert result["isError"] is True
    assert "arguments_too_large" in text_of(result)
    assert result["structuredContent"]["error"] == "arguments_too_large"
    assert result["structuredContent"]["actual_bytes"] > result["structuredContent"]["max_bytes"]
    assert ToolInvocation.objects.count() == before


@pytest.mark.parametrize("tool", ["create_ticket", "call_tool"])
def test_a_control_character_in_the_arguments_fails_the_tool_naming_it_and_stores_nothing(
    client, token, tool
):
    before = ToolInvocation.objects.count()
    arguments = {"subject": "nul\x00", "message": "m"}
    if tool == "call_tool":
        arguments = {"name": "create_ticket", "arguments": arguments}
    result = call_modern(client, ROUTE, token, tool, arguments)
    assert result["isError"] is True
    assert (result["structuredContent"]["error"], result["structuredContent"]["field"]) == (
        "invalid_request",
        "arguments.subject",
    )
    assert ToolInvocation.objects.count() == before


# --- an unknown outcome over MCP ---------------------------------------------------------------------


@pytest.fixture
def chaos_token(chaos_business):
    provider_for(name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret)
    workspace(route_key="chaos", provider="chaos", write_tools=["chaos_drop_after_write"])
    return agent(route_key="chaos")._access


def test_an_unknown_outcome_says_reconciliation_required_and_is_never_sent_again(
    client, chaos_token, chaos_business
):
    invocation_id = secrets.token_hex(32)
    arguments = {
        "name": "chaos_drop_after_write",
        "arguments": {"note": "mcp"},
        "invocation_id": invocation_id,
    }
    result = call_modern(client, "chaos", chaos_token, "call_tool", arguments)
    assert result["isError"] is True
    assert result["structuredContent"]["state"] == "reconciliation_required"
    assert result["structuredContent"]["auto_retry_allowed"] is False
    assert text_of(result).startswith("reconciliation_required: ")
    for _ in range(2):
        again = call_modern(client, "chaos", chaos_token, "call_tool", arguments)
        assert again["structuredContent"]["state"] == "reconciliation_required"
        resumed = call_modern(
            client, "chaos", chaos_token, "resume_invocation", {"invocation_id": invocation_id}
        )
        assert resumed["structuredContent"]["state"] == "reconciliation_required"
    assert chaos_business.writes("chaos_drop_after_write") == 1
