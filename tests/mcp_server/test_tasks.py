"""Approvals as MCP tasks (``io.modelcontextprotocol/tasks``), through the real HTTP endpoint: the
``CreateTaskResult`` of a call that waits for approval, every status ``tasks/get`` reports, the
withdrawal by ``tasks/cancel`` (raced against a decision and against the dispatch), the ids' binding
to session and workspace, and the protocol errors of the extension."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client as DjangoClient
from django.utils import timezone

from agent_runtime.models import ToolApproval, ToolInvocation
from approvals.errors import ApprovalConflict
from bailing.audit.models import AuditEvent
from tests.mcp_server.support import (
    TASKS,
    call_modern,
    call_with_tasks,
    post_legacy,
    post_modern,
    post_task,
    task_result,
    text_of,
)
from tests.support.invocations import agent, approve, post, provider_for, resume_url, workspace

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
# Small refunds, each waiting for approval (the workspace forces it): the module's one Demo Shop keeps
# every refund, and the order's remaining amount must outlast them all.
REFUND = {"order_id": "SO-1002", "amount": 5, "reason": "Broken jug"}
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def session(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(
        route_key=ROUTE,
        provider="demo-shop",
        write_tools=["request_refund", "cancel_order"],
        force_approval=["request_refund"],
    )
    return agent(route_key=ROUTE)


@pytest.fixture
def token(session):
    return session._access


@pytest.fixture
def refunds(demo_shop):
    """How many refunds the Demo Shop (one process for the module) recorded since the test began."""
    before = len(demo_shop.records()["refunds"])
    return lambda: len(demo_shop.records()["refunds"]) - before


def _task(client, token, tool="request_refund", arguments=None):
    created = call_with_tasks(client, ROUTE, token, tool, REFUND if arguments is None else arguments)
    assert created["resultType"] == "task", created
    invocation = ToolInvocation.objects.get(job_id=created["taskId"])
    return created, invocation, ToolApproval.objects.get(invocation=invocation)


def _deny(approval_id: int) -> None:
    from approvals.services.decisions import approval_decide
    from bailing.audit.actor import Actor

    approval_decide(
        approval_id=approval_id,
        decision="denied",
        decision_id=f"tests-deny-{approval_id}",
        approver="manager-1",
        comment="",
        source="console",
        actor=Actor.system("tests"),
    )


# --- discovery and creation ---------------------------------------------------------------------------


def test_server_discover_advertises_the_extension_and_the_handshake_does_not(client, token):
    discovered = post_modern(client, ROUTE, token, "server/discover").json()["result"]
    assert discovered["capabilities"]["extensions"] == {TASKS: {}}
    initialized = post_legacy(
        client,
        ROUTE,
        token,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    ).json()["result"]
    assert "extensions" not in initialized["capabilities"]


def test_a_call_that_needs_approval_is_a_task_naming_the_approval_and_what_the_approver_sees(
    client, token, refunds
):
    created, invocation, approval = _task(client, token)
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "statusMessage",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert created["status"] == "working"
    assert created["taskId"] == str(invocation.job_id)  # the invocation itself: survives a restart
    assert f"#{approval.pk}" in created["statusMessage"]
    assert f"The approver sees: {approval.summary.strip()}" in created["statusMessage"]
    assert ISO.match(created["createdAt"]) and ISO.match(created["lastUpdatedAt"])
    assert created["ttlMs"] is None and created["pollIntervalMs"] == 5000
    assert created["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bailing-hub"
    assert invocation.status == "awaiting_approval" and approval.status == "pending"

    polled = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert polled["resultType"] == "complete"
    assert (polled["status"], polled["taskId"]) == ("working", created["taskId"])
    assert polled["createdAt"] == created["createdAt"]
    assert "result" not in polled
    # Polling a pending approval writes nothing (no "resumed" milestone per poll).
    assert not AuditEvent.objects.filter(action="agent_runtime.invocation.resumed").exists()
    assert refunds() == 0


def test_call_tool_by_name_becomes_a_task_too(client, token):
    created = call_with_tasks(
        client, ROUTE, token, "call_tool", {"name": "request_refund", "arguments": REFUND}
    )
    assert (created["resultType"], created["status"]) == ("task", "working")


def test_without_the_capability_on_that_request_the_call_answers_as_before(client, token):
    _task(client, token)  # an earlier request declared it: it does not carry over
    waiting = call_modern(client, ROUTE, token, "request_refund", {**REFUND, "amount": 4})
    assert waiting["resultType"] == "complete"
    assert waiting["structuredContent"]["state"] == "awaiting_approval"
    assert "resume_invocation" in text_of(waiting)
    legacy = post_legacy(
        client,
        ROUTE,
        token,
        "tools/call",
        {
            "name": "request_refund",
            "arguments": {**REFUND, "amount": 3},
            "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}},
        },
    ).json()["result"]
    assert legacy["structuredContent"]["state"] == "awaiting_approval"  # tasks are a modern-era thing


def test_a_call_that_needs_no_approval_is_answered_at_once_even_when_tasks_are_declared(client, token):
    done = call_with_tasks(client, ROUTE, token, "list_orders", {})
    assert done["resultType"] == "complete" and done["structuredContent"]["state"] == "executed"


# --- tasks/get: every outcome ---------------------------------------------------------------------------


def test_approved_the_task_completes_with_the_result_and_the_call_is_sent_once(client, token, refunds):
    created, invocation, approval = _task(client, token)
    approve(approval.pk)
    done = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert done["status"] == "completed", done
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["state"] == "executed"
    assert done["result"]["content"][0]["type"] == "text"
    # The CallToolResult tools/call would have answered on this wire, resultType included.
    assert done["result"]["resultType"] == "complete"
    assert done["lastUpdatedAt"] >= done["createdAt"]
    again = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert again["status"] == "completed"
    assert again["result"]["structuredContent"] == done["result"]["structuredContent"]
    assert refunds() == 1
    # The same invocation as resume_invocation sees it: one operation, one service.
    resumed = call_modern(
        client, ROUTE, token, "resume_invocation", {"invocation_id": invocation.invocation_id}
    )
    assert resumed["structuredContent"] == done["result"]["structuredContent"]
    assert refunds() == 1


def test_denied_the_task_completes_as_a_tool_error(client, token, refunds):
    created, _, approval = _task(client, token)
    _deny(approval.pk)
    done = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["structuredContent"]["state"] == "denied"
    assert refunds() == 0


def test_expired_the_task_completes_as_a_tool_error(client, token, refunds):
    created, _, approval = _task(client, token)
    ToolApproval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    done = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["structuredContent"]["state"] == "denied"
    assert "expired" in done["result"]["structuredContent"]["text"]
    assert refunds() == 0


@pytest.fixture
def chaos_token(chaos_business):
    provider_for(name="chaos", base_url=chaos_business.base_url, secret=chaos_business.secret)
    workspace(
        route_key="chaos",
        provider="chaos",
        write_tools=["chaos_drop_after_write", "chaos_bulk_ok"],
        force_approval=["chaos_drop_after_write"],
    )
    return agent(route_key="chaos")._access


def test_a_business_refusal_completes_the_task_as_a_tool_error(client, chaos_token, chaos_business):
    created = call_with_tasks(
        client, "chaos", chaos_token, "chaos_bulk_ok", {"note": "n", "reply": {"status": 422, "text": "no"}}
    )
    assert created["resultType"] == "task", created
    approve(ToolApproval.objects.get(invocation__job_id=created["taskId"]).pk)
    done = task_result(client, "chaos", chaos_token, "tasks/get", created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    assert done["result"]["structuredContent"]["state"] == "business_rejected"
    assert chaos_business.writes("chaos_bulk_ok") == 1


def test_an_unknown_outcome_completes_with_reconciliation_required_and_is_never_sent_again(
    client, chaos_token, chaos_business
):
    created = call_with_tasks(client, "chaos", chaos_token, "chaos_drop_after_write", {"note": "task"})
    assert created["resultType"] == "task", created
    approve(ToolApproval.objects.get(invocation__job_id=created["taskId"]).pk)
    for _ in range(3):
        done = task_result(client, "chaos", chaos_token, "tasks/get", created["taskId"])
        assert done["status"] == "completed"
        assert done["result"]["isError"] is True
        assert done["result"]["structuredContent"]["state"] == "reconciliation_required"
        assert done["result"]["content"][0]["text"].startswith("reconciliation_required: ")
    assert chaos_business.writes("chaos_drop_after_write") == 1


# --- tasks/cancel ---------------------------------------------------------------------------------------


def test_cancel_withdraws_a_pending_approval_and_the_task_ends_cancelled(
    client, api_client, session, token, refunds
):
    created, invocation, approval = _task(client, token)
    ack = task_result(client, ROUTE, token, "tasks/cancel", created["taskId"])
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    approval.refresh_from_db()
    assert approval.status == "withdrawn" and approval.withdrawn_at is not None
    invocation.refresh_from_db()
    assert (invocation.status, invocation.reason_code) == ("rejected_before_dispatch", "approval_withdrawn")
    event = AuditEvent.objects.get(action="agent_runtime.approval.withdrawn")
    assert (event.target_type, event.target_id) == ("tool_approval", str(approval.pk))
    assert event.data["previous_status"] == "pending"

    cancelled = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert cancelled["status"] == "cancelled"
    assert "withdrawn" in cancelled["statusMessage"] and "result" not in cancelled
    # A second cancel is acknowledged and changes nothing; the approver can no longer decide it.
    task_result(client, ROUTE, token, "tasks/cancel", created["taskId"])
    with pytest.raises(ApprovalConflict):
        approve(approval.pk)
    # The REST resume of the same invocation agrees, and nothing was ever sent.
    rest = post(api_client, session, resume_url(invocation.invocation_id), {}).json()
    assert rest["state"] == "rejected_before_dispatch" and "withdrawn" in rest["text"]
    assert refunds() == 0


def test_cancel_after_approval_but_before_dispatch_still_withdraws(client, token, refunds):
    created, _, approval = _task(client, token)
    approve(approval.pk)
    task_result(client, ROUTE, token, "tasks/cancel", created["taskId"])
    assert task_result(client, ROUTE, token, "tasks/get", created["taskId"])["status"] == "cancelled"
    approval.refresh_from_db()
    assert (approval.status, approval.consumed_at) == ("withdrawn", None)
    assert refunds() == 0


def test_after_dispatch_cancel_is_acknowledged_and_changes_nothing(client, token, refunds):
    created, _, approval = _task(client, token)
    approve(approval.pk)
    assert task_result(client, ROUTE, token, "tasks/get", created["taskId"])["status"] == "completed"
    ack = task_result(client, ROUTE, token, "tasks/cancel", created["taskId"])
    assert ack["resultType"] == "complete"
    after = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    assert after["status"] == "completed" and after["result"]["isError"] is False
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.consumed_at is not None
    assert not AuditEvent.objects.filter(action="agent_runtime.approval.withdrawn").exists()
    assert refunds() == 1


def _race(*jobs):
    """Run ``jobs`` at once on threads of their own (each with its own database connection)."""
    barrier = threading.Barrier(len(jobs))
    outcomes: list = [None] * len(jobs)

    def run(index, job):
        try:
            barrier.wait(timeout=10)
            try:
                outcomes[index] = job()
            except Exception as exc:  # the outcome is what the test asserts
                outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n, job)) for n, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("attempt", range(4))
def test_cancel_racing_a_decision_ends_withdrawn_and_nothing_is_sent(client, token, refunds, attempt):
    created, _, approval = _task(client, token, arguments={**REFUND, "amount": 6 + attempt})

    def cancel():
        return post_task(DjangoClient(), ROUTE, token, "tasks/cancel", created["taskId"]).status_code

    def decide():
        approve(approval.pk, decision_id=f"race-{attempt}")
        return "approved"

    cancelled, decided = _race(cancel, decide)
    assert cancelled == 200
    # The decision either came first (and the withdrawal took it back before anything was sent) or
    # second (409 approval_conflict): never both a withdrawal and a dispatch.
    assert decided == "approved" or isinstance(decided, ApprovalConflict), decided
    approval.refresh_from_db()
    assert approval.status == "withdrawn" and approval.consumed_at is None
    assert task_result(client, ROUTE, token, "tasks/get", created["taskId"])["status"] == "cancelled"
    assert AuditEvent.objects.filter(action="agent_runtime.approval.withdrawn").count() == 1
    assert refunds() == 0


@pytest.mark.parametrize("attempt", range(4))
def test_cancel_racing_the_dispatch_either_sends_once_or_never(client, token, refunds, attempt):
    created, _, approval = _task(client, token, arguments={**REFUND, "amount": 6 + attempt})
    approve(approval.pk)

    def cancel():
        return post_task(DjangoClient(), ROUTE, token, "tasks/cancel", created["taskId"]).status_code

    def get():
        return post_task(DjangoClient(), ROUTE, token, "tasks/get", created["taskId"]).json()["result"][
            "status"
        ]

    cancelled, seen = _race(cancel, get)
    assert cancelled == 200 and seen in {"working", "completed", "cancelled"}, seen
    final = task_result(client, ROUTE, token, "tasks/get", created["taskId"])
    approval.refresh_from_db()
    if final["status"] == "completed":
        assert approval.status == "approved" and approval.consumed_at is not None
        assert final["result"]["structuredContent"]["state"] == "executed"
        assert refunds() == 1
    else:
        assert final["status"] == "cancelled", final
        assert approval.status == "withdrawn" and approval.consumed_at is None
        assert refunds() == 0


# --- ids and protocol errors ------------------------------------------------------------------------------


def _error(response):
    body = response.json()
    assert "error" in body, body
    return response.status_code, body["error"]["code"]


def test_a_task_id_is_bound_to_its_session_and_workspace(client, token, refunds):
    created, invocation, _ = _task(client, token)
    task_id = created["taskId"]
    other = agent(route_key=ROUTE)._access
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        extra = {"inputResponses": {}} if method == "tasks/update" else {}
        assert _error(post_task(client, ROUTE, other, method, task_id, **extra)) == (400, -32602)
    # The same session on another workspace's endpoint does not find it either.
    workspace(
        route_key="shop2",
        provider="demo-shop",
        write_tools=["request_refund"],
        force_approval=["request_refund"],
    )
    invocation.session.allowed_routes = [ROUTE, "shop2"]
    invocation.session.save(update_fields=["allowed_routes"])
    invocation.client.allowed_routes = [ROUTE, "shop2"]
    invocation.client.save(update_fields=["allowed_routes"])
    assert _error(post_task(client, "shop2", token, "tasks/get", task_id)) == (400, -32602)
    # Unguessable and never a near miss: another spelling, a random id, the invocation id.
    for wrong in (task_id.upper(), "00000000-0000-4000-8000-000000000000", invocation.invocation_id, "x"):
        assert _error(post_task(client, ROUTE, token, "tasks/get", wrong)) == (400, -32602)
    # The other session's cancel did nothing; the owner still polls a pending approval.
    assert task_result(client, ROUTE, token, "tasks/get", task_id)["status"] == "working"
    assert ToolApproval.objects.get(invocation=invocation).status == "pending"


def test_a_call_that_never_waited_for_approval_is_no_task(client, token):
    done = call_with_tasks(client, ROUTE, token, "list_orders", {})
    job_id = ToolInvocation.objects.get(invocation_id=done["structuredContent"]["invocation_id"]).job_id
    assert _error(post_task(client, ROUTE, token, "tasks/get", str(job_id))) == (400, -32602)


def test_tasks_methods_need_the_capability_the_routing_header_and_their_params(client, token):
    created, _, _ = _task(client, token)
    task_id = created["taskId"]
    undeclared = post_task(client, ROUTE, token, "tasks/get", task_id, declare=False)
    assert _error(undeclared) == (400, -32021)
    assert undeclared.json()["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert _error(post_task(client, ROUTE, token, "tasks/cancel", task_id, declare=False)) == (400, -32021)
    assert _error(post_task(client, ROUTE, token, "tasks/get", task_id, mcp_name="other")) == (400, -32020)
    assert _error(post_task(client, ROUTE, token, "tasks/get", "")) == (400, -32602)
    assert _error(post_task(client, ROUTE, token, "tasks/update", task_id)) == (
        400,
        -32602,
    )  # no inputResponses
    # The handshake era has no such methods here (its own 2025-11-25 tasks are not served).
    legacy = post_legacy(client, ROUTE, token, "tasks/get", {"taskId": task_id}).json()
    assert legacy["error"]["code"] == -32601
    # Nothing above changed the task.
    assert task_result(client, ROUTE, token, "tasks/get", task_id)["status"] == "working"


def test_tasks_update_is_acknowledged_and_ignores_responses_to_nothing_outstanding(client, token):
    created, _, approval = _task(client, token)
    ack = task_result(
        client,
        ROUTE,
        token,
        "tasks/update",
        created["taskId"],
        inputResponses={"never-issued": {"action": "accept"}},
    )
    assert ack["resultType"] == "complete" and set(ack) == {"resultType", "_meta"}
    assert task_result(client, ROUTE, token, "tasks/get", created["taskId"])["status"] == "working"
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_the_rest_surface_keeps_its_shape_for_a_task_invocation(client, api_client, session, token):
    _, invocation, _ = _task(client, token)
    body = post(api_client, session, resume_url(invocation.invocation_id), {}).json()
    assert body["state"] == "awaiting_approval" and body["approval_id"] == invocation.approval.pk
