"""The boundary sweep: every budget in ``bailing.budgets`` at ``limit - 1``, ``limit`` and ``limit + 1``,
end to end on every path it names (docs/budgets.md).

The budgets come from the code's one table; each has a sweep here (a test fails when a budget has
none, or a sweep names no budget), so a new limit cannot go unswept. Each sweep goes through the
real surfaces: the REST API over the test client, the MCP endpoint, the console as a signed-in
approver, the governed call to a live business system (the chaos business, which records the bytes
it received), and the approval webhook to a live Demo Shop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from agent_runtime.models import ApprovalNotification, ToolApproval, ToolInvocation
from agent_runtime.services.clients import client_token_set
from agent_runtime.services.invocations import arguments_hash
from bailing.api.jsjson import js_stringify
from bailing.api.limits import utf16_length
from bailing.audit.actor import Actor
from bailing.budgets import budgets
from tests.budgets.sweeps import DELTAS, SWEPT, limit, sweeps
from tests.mcp_server.support import modern_headers, modern_message, post_raw, text_of
from tests.support.console import signed_in
from tests.support.demo_business import running_demo_business
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    approve,
    console_decision,
    invoke_body,
    post,
    provider_for,
    resume_url,
    sized_arguments,
    workspace,
)
from tests.support.runtime import turn_body

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
ROUTE = "bulk"
TOOL = "chaos_bulk_ok"


# --- the table itself -----------------------------------------------------------------------------------
def test_every_budget_has_a_sweep_and_every_sweep_a_budget():
    import tests.budgets.test_knowledge_sweep  # noqa: F401 - marks its sweeps when imported on its own

    declared = {entry.key for entry in budgets()}
    assert declared == set(SWEPT), {"unswept": declared - set(SWEPT), "unknown": set(SWEPT) - declared}


def test_docs_budgets_md_is_what_the_code_declares(capsys):
    call_command("bailing_budgets", "--markdown")
    assert (ROOT / "docs" / "budgets.md").read_text(encoding="utf-8") == capsys.readouterr().out


# --- helpers ---------------------------------------------------------------------------------------------
def padded(body: dict, size: int) -> bytes:
    """``body`` as JSON padded with trailing whitespace (valid JSON) to exactly ``size`` bytes."""
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def text_of_units(units: int, char: str = "a") -> str:
    text = char * (units // utf16_length(char))
    assert utf16_length(text) == units
    return text


@pytest.fixture
def bulk(chaos_business):
    """A workspace with the chaos business's approval-gated bulk write, and an agent in it."""
    provider_for(
        name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret, timeout_ms=20_000
    )
    workspace(route_key=ROUTE, provider="chaos", write_tools=[TOOL], max_calls=50)
    return agent(route_key=ROUTE), chaos_business


def _approved_result(api_client, session, arguments: dict) -> dict:
    """Invoke the bulk write, approve it, resume it: the executed result."""
    body = invoke_body(session, ROUTE, TOOL, arguments)
    waiting = post(api_client, session, INVOKE_URL, body).json()
    assert waiting["state"] == "awaiting_approval", waiting
    approve(waiting["approval_id"])
    return post(api_client, session, resume_url(body["invocation_id"]), {}).json()


# --- invocation.arguments: REST → approval → console detail → console decision → resume ---------------
@sweeps("invocation.arguments")
@pytest.mark.parametrize("delta", DELTAS)
def test_arguments_budget_through_rest_approval_console_and_resume(api_client, bulk, approver, delta):
    session, chaos = bulk
    size = limit("invocation.arguments") + delta
    arguments = sized_arguments(size)
    body = invoke_body(session, ROUTE, TOOL, arguments)
    response = post(api_client, session, INVOKE_URL, body)
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["limit_scope"]) == (
            413,
            "arguments_too_large",
            "arguments",
        )
        assert response.json()["actual_bytes"] == size
        assert not ToolInvocation.objects.filter(invocation_id=body["invocation_id"]).exists()
        return
    waiting = response.json()
    assert waiting["state"] == "awaiting_approval", waiting
    console = signed_in(approver)
    detail = console.get(reverse("console:approval_detail", args=[waiting["approval_id"]]))
    assert detail.status_code == 200
    snapshot = console.get(reverse("console:approval_args", args=[waiting["approval_id"]]))
    assert snapshot.json() == arguments  # the approver sees exactly what will be sent
    pending = ToolApproval.objects.get(pk=waiting["approval_id"])
    decided = console.post(
        reverse("console:approval_decide", args=[pending.pk]), console_decision(pending, "approved")
    )
    assert decided.status_code == 302
    result = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert result["state"] == "executed", result
    (received,) = chaos.requests(TOOL)
    assert received.body == js_stringify(arguments).encode()
    assert (
        arguments_hash(json.loads(received.body))
        == ToolApproval.objects.get(pk=waiting["approval_id"]).args_hash
    )


def _mcp_call(client, token: str, name: str, arguments: dict) -> dict:
    """``tools/call`` as MCP clients send it: compact UTF-8 JSON (not ASCII escapes)."""
    message = modern_message("tools/call", {"name": name, "arguments": arguments})
    raw = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    response = post_raw(client, ROUTE, raw, token=token, headers=modern_headers(message))
    assert response.status_code == 200, response.content[:300]
    return response.json()["result"]


@pytest.mark.parametrize("delta", DELTAS)
def test_arguments_budget_through_mcp_call_tool_and_resume_invocation(client, bulk, delta):
    session, chaos = bulk
    size = limit("invocation.arguments") + delta
    arguments = sized_arguments(size)
    result = _mcp_call(client, session._access, "call_tool", {"name": TOOL, "arguments": arguments})
    if delta > 0:
        assert result["isError"] is True
        assert (result["structuredContent"]["error"], result["structuredContent"]["actual_bytes"]) == (
            "arguments_too_large",
            size,
        )
        assert chaos.calls(TOOL) == 0
        return
    approval = ToolApproval.objects.get()
    assert f"#{approval.pk}" in text_of(result)
    approve(approval.pk)
    done = _mcp_call(
        client, session._access, "resume_invocation", {"invocation_id": approval.invocation.invocation_id}
    )
    assert done["isError"] is False, done
    assert done["structuredContent"]["state"] == "executed"
    (received,) = chaos.requests(TOOL)
    assert received.body == js_stringify(arguments).encode()


# --- raw bodies: the invocation envelope, resume, turns, decisions, MCP ---------------------------------
@sweeps("invocation.request_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_invocation_body_budget(api_client, bulk, delta):
    session, _ = bulk
    size = limit("invocation.request_body") + delta
    body = invoke_body(session, ROUTE, TOOL, sized_arguments(1000))
    response = api_client.post(
        INVOKE_URL,
        padded(body, size),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._access}",
    )
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
        assert response.json()["max_bytes"] == limit("invocation.request_body")
    else:
        assert (response.status_code, response.json()["state"]) == (200, "awaiting_approval")


@sweeps("invocation.resume_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_resume_body_budget(api_client, bulk, delta):
    session, _ = bulk
    body = invoke_body(session, ROUTE, TOOL, sized_arguments(100))
    post(api_client, session, INVOKE_URL, body)
    response = api_client.post(
        resume_url(body["invocation_id"]),
        padded({}, limit("invocation.resume_body") + delta),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._access}",
    )
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
    else:
        assert (response.status_code, response.json()["state"]) == (200, "awaiting_approval")


@sweeps("turn.request_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_turn_body_budget(api_client, bulk, delta):
    session, _ = bulk
    size = limit("turn.request_body") + delta
    response = api_client.post(
        f"/agent-api/v1/workspaces/{ROUTE}/turns",
        padded(turn_body(delta + 2), size),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._access}",
    )
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
    else:
        assert response.status_code == 200, response.content


@sweeps("mcp.request_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_mcp_body_budget(client, bulk, delta):
    session, _ = bulk
    message = modern_message("tools/list")
    raw = padded(message, limit("mcp.request_body") + delta)
    response = post_raw(client, ROUTE, raw, token=session._access, headers=modern_headers(message))
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["limit_scope"]) == (
            413,
            "arguments_too_large",
            "request_body",
        )
    else:
        assert response.status_code == 200
        assert "tools" in response.json()["result"]


# --- turns: client text and page context ---------------------------------------------------------------
@sweeps("turn.client_text")
@pytest.mark.parametrize("delta", DELTAS)
def test_turn_text_budget_counts_utf16_units(api_client, bulk, delta):
    session, _ = bulk
    units = limit("turn.client_text") + delta
    text = text_of_units(units - 1) + "é" if units % 2 else text_of_units(units, "🔑")
    response = post(
        api_client, session, f"/agent-api/v1/workspaces/{ROUTE}/turns", turn_body(1, user_input=text)
    )
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["field"]) == (
            400,
            "invalid_request",
            "user_input",
        )
    else:
        assert response.status_code == 200, response.content


@sweeps("turn.page_context")
@pytest.mark.parametrize("delta", DELTAS)
def test_page_context_budget(api_client, bulk, delta):
    session, _ = bulk
    size = limit("turn.page_context") + delta
    context = {"title": "t", "notes": ""}
    context["notes"] = "€" * ((size - len(js_stringify(context).encode())) // 3)
    context["notes"] += "n" * (size - len(js_stringify(context).encode()))
    assert len(js_stringify(context).encode()) == size
    response = post(
        api_client, session, f"/agent-api/v1/workspaces/{ROUTE}/turns", turn_body(1, page_context=context)
    )
    if delta > 0:
        assert (response.status_code, response.json()["error"], response.json()["actual_bytes"]) == (
            413,
            "page_context_too_large",
            size,
        )
    else:
        assert response.status_code == 200, response.content


# --- business answers kept as evidence -----------------------------------------------------------------
@sweeps("invocation.result_text")
@pytest.mark.parametrize("delta", DELTAS)
def test_result_text_budget_keeps_the_answer_up_to_the_limit_never_splitting_a_pair(api_client, bulk, delta):
    session, _ = bulk
    cap = limit("invocation.result_text")
    answer = text_of_units(cap + delta)
    result = _approved_result(
        api_client, session, {"note": "answer", "reply": {"status": 200, "text": answer}}
    )
    assert (result["state"], result["text"]) == ("executed", answer[:cap])
    journal = ToolInvocation.objects.get(invocation_id=result["invocation_id"]).journal
    assert journal.text == answer[:cap]
    # An astral character straddling the limit is left out whole.
    if delta == 1:
        straddling = text_of_units(cap - 1) + "🔑"
        result = _approved_result(
            api_client, session, {"note": "astral", "reply": {"status": 200, "text": straddling}}
        )
        assert result["text"] == straddling[: cap - 1]


@sweeps("business.error_text")
@pytest.mark.parametrize("delta", DELTAS)
def test_error_text_budget(api_client, bulk, delta):
    session, _ = bulk
    cap = limit("business.error_text")
    answer = text_of_units(cap + delta, "e")
    result = _approved_result(
        api_client, session, {"note": "error", "reply": {"status": 500, "text": answer}}
    )
    assert (result["state"], result["business_status"]) == ("business_rejected", 500)
    assert result["text"] == "HTTP 500: " + answer[:cap]


# --- approvals: the webhook's snapshot, the console's inline arguments, decisions ------------------------
def _webhook_bytes(approval: ToolApproval, *, with_args: bool) -> int:
    from agent_runtime.services.approval_requests import _notification_body

    return len(js_stringify(_notification_body(approval, "business_webhook", args_fit=with_args)).encode())


@sweeps("approval.webhook_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_webhook_body_budget_to_the_demo_shop(api_client, chaos_business, live_server, settings, delta):
    """The arguments appear twice in a webhook (the body and its intent), so the body grows in steps of
    two bytes: the sweep takes the largest size at or under ``limit - 1`` and ``limit`` and the
    smallest over ``limit``."""
    settings.BAILING_APPROVAL_NOTIFY_DELAYS = [0]
    provider_for(name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret)
    session = agent(route_key=ROUTE)
    token = "sweep-client-token-" + "x" * 24
    client_token_set(client=session.client, token=token, actor=Actor.system("tests"))
    cap = limit("approval.webhook_body")
    if delta > 0:
        # This case also takes the path where the measured approval's id has fewer digits (99 -> 100).
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT setval(pg_get_serial_sequence(%s, 'id'), 98)", [ToolApproval._meta.db_table]
            )
    with running_demo_business(
        extra_env={"DEMO_HUB_URL": live_server.url, "DEMO_CLIENT_TOKEN": token}
    ) as shop:
        workspace(
            route_key=ROUTE,
            provider="chaos",
            write_tools=[TOOL],
            approval={"type": "business_webhook", "url": shop.url("/approvals")},
        )
        # A first approval gives the overhead of everything but the arguments; it depends on the
        # approval id's digits, so when the next id has more digits, that approval is measured instead.
        probe_size = 1000
        probe = post(
            api_client, session, INVOKE_URL, invoke_body(session, ROUTE, TOOL, sized_arguments(probe_size))
        ).json()
        approval = ToolApproval.objects.get(pk=probe["approval_id"])
        target = cap + delta
        for _ in range(3):
            overhead = _webhook_bytes(approval, with_args=True) - 2 * probe_size
            size = (target - overhead) // 2 if delta <= 0 else -(-(target - overhead) // 2)
            arguments = sized_arguments(size)
            waiting = post(
                api_client, session, INVOKE_URL, invoke_body(session, ROUTE, TOOL, arguments)
            ).json()
            measured, approval = approval, ToolApproval.objects.get(pk=waiting["approval_id"])
            if len(str(approval.pk)) == len(str(measured.pk)):
                break
            probe_size = size
        full = _webhook_bytes(approval, with_args=True)
        assert full == overhead + 2 * size
        assert (
            (full <= cap - 1)
            if delta < 0
            else (cap - 1 <= full <= cap)
            if delta == 0
            else (cap < full <= cap + 2)
        )
        for _ in range(200):
            notification = ApprovalNotification.objects.get(approval_id=approval.pk)
            if notification.status != ApprovalNotification.Status.PENDING:
                break
            time.sleep(0.05)
        assert notification.status == ApprovalNotification.Status.DELIVERED, notification.last_error
        stored = {
            a["approval_id"]: a for a in shop.client.get(shop.url("/approvals.json")).json()["approvals"]
        }
    record = stored[approval.pk]
    received = record.get("request", record)
    if delta > 0:
        assert "args" not in received and received["args_omitted"] is True and received["args_bytes"] == size
    else:
        assert received["args"] == arguments and "args_omitted" not in received
    assert received["args_hash"] == arguments_hash(arguments)


@sweeps("approval.console_inline_args")
@pytest.mark.parametrize("delta", DELTAS)
def test_console_inline_args_budget(api_client, bulk, approver, delta):
    session, _ = bulk
    arguments = sized_arguments(limit("approval.console_inline_args") + delta)
    waiting = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, TOOL, arguments)).json()
    console = signed_in(approver)
    detail = console.get(reverse("console:approval_detail", args=[waiting["approval_id"]]))
    assert detail.status_code == 200
    assert detail.context["args_inline"] is (delta <= 0)
    assert console.get(reverse("console:approval_args", args=[waiting["approval_id"]])).json() == arguments


def _decision(approval: ToolApproval, **extra) -> dict:
    return {
        "kind": "tool_approval_decision",
        "schema_version": "bailing.approval-decision.v1",
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
        "decision": "approved",
        "decision_id": f"sweep-{approval.pk}",
        "approver": "manager-7",
        **extra,
    }


def _pending(api_client, session) -> ToolApproval:
    waiting = post(
        api_client, session, INVOKE_URL, invoke_body(session, ROUTE, TOOL, sized_arguments(200))
    ).json()
    return ToolApproval.objects.get(pk=waiting["approval_id"])


@sweeps("approval.decision_body")
@pytest.mark.parametrize("delta", DELTAS)
def test_decision_body_budget(api_client, bulk, delta):
    session, _ = bulk
    approval = _pending(api_client, session)
    raw = padded(_decision(approval), limit("approval.decision_body") + delta)
    response = api_client.post(
        f"/approvals/{approval.pk}/decision",
        raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._client_token}",
    )
    approval.refresh_from_db()
    if delta > 0:
        assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")
        assert approval.status == "pending"
    else:
        assert response.status_code == 200, response.content
        assert approval.status == "approved"


@sweeps("approval.decision_comment")
@pytest.mark.parametrize("delta", DELTAS)
def test_decision_comment_budget_through_the_api_and_the_console(api_client, bulk, approver, delta):
    session, _ = bulk
    units = limit("approval.decision_comment") + delta
    comment = text_of_units(units - 1) + "c" if units % 2 else text_of_units(units, "🔑")
    by_api, by_console = _pending(api_client, session), _pending(api_client, session)
    response = api_client.post(
        f"/approvals/{by_api.pk}/decision",
        _decision(by_api, comment=comment),
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {session._client_token}",
    )
    signed_in(approver).post(
        reverse("console:approval_decide", args=[by_console.pk]),
        console_decision(by_console, "approved", comment=comment),
    )
    by_api.refresh_from_db()
    by_console.refresh_from_db()
    if delta > 0:
        assert (response.status_code, response.json()["field"]) == (400, "comment")
        assert (by_api.status, by_console.status) == ("pending", "pending")
    else:
        assert response.status_code == 200, response.content
        assert (by_api.decision_comment, by_console.decision_comment) == (comment, comment)
