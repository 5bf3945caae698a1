"""``POST /approvals/:id/decision`` (``bailing.approval-decision.v1``): auth by Client Token or signed
body, exact match with the frozen call, idempotent by ``decision_id``, conflicts and races."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agent_runtime.models import ToolApproval
from bailing.audit.models import AuditEvent
from bailing.signing import sign_callback
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    call_awaiting_approval,
    invoke_body,
    post,
    resume_url,
)

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"


@pytest.fixture
def pending(demo_shop, api_client):
    """A pending approval of alice's cancellation of SO-1004, and her session."""
    return call_awaiting_approval(
        api_client, demo_shop, tool="cancel_order", arguments={"order_id": "SO-1004", "reason": "duplicate"}
    )


def decision(approval: ToolApproval, **overrides):
    body = {
        "kind": "tool_approval_decision",
        "schema_version": "bailing.approval-decision.v1",
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
        "decision": "approved",
        "decision_id": f"biz-{approval.pk}-approved",
        "approver": "manager-7",
    }
    body.update(overrides)
    return body


def send(approval, body, *, token=None, signed_with=None, raw=None, path_id=None):
    client = APIClient(raise_request_exception=False)
    raw = raw if raw is not None else json.dumps(body).encode()
    headers = {}
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    if signed_with is not None:
        signed = sign_callback(secret=signed_with, body=raw)
        headers.update({f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()})
    return client.post(
        f"/approvals/{path_id or approval.pk}/decision", raw, content_type="application/json", **headers
    )


def test_a_bearer_decision_is_recorded_and_the_agent_resume_dispatches_once(pending, api_client, demo_shop):
    session, body, approval = pending
    response = send(approval, decision(approval, comment="ok by me"), token=session._client_token)
    assert response.status_code == 200, response.content
    assert response.json() == {
        "ok": True,
        "id": approval.pk,
        "status": "approved",
        "decision_id": f"biz-{approval.pk}-approved",
        "idempotent": False,
        "rerun": False,
    }
    assert response["Cache-Control"] == "no-store"
    approval.refresh_from_db()
    assert (approval.decided_by, approval.decision_source, approval.decision_comment) == (
        "manager-7",
        "business:client_token",
        "ok by me",
    )
    assert approval.consumed_at is None  # a decision executes nothing
    done = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed"
    assert (
        AuditEvent.objects.filter(action="approvals.request.approved", target_id=str(approval.pk)).count()
        == 1
    )


def test_a_signed_decision_and_its_idempotent_replay(pending):
    session, _, approval = pending
    raw = json.dumps(decision(approval, decision="denied", decision_id="sig-1", operator="m")).encode()
    body = json.loads(raw)
    del body["approver"]
    raw = json.dumps(body).encode()
    first = send(approval, None, raw=raw, signed_with=session._client_token)
    assert first.status_code == 200, first.content
    assert (first.json()["status"], first.json()["idempotent"]) == ("denied", False)
    again = send(approval, None, raw=raw, signed_with=session._client_token)
    assert (again.status_code, again.json()["idempotent"]) == (200, True)
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decision_source) == (
        "denied",
        "m",
        "business:signed",
    )


@pytest.mark.parametrize(
    "how",
    ["none", "wrong_token", "other_clients_token", "bad_signature", "stale_signature"],
)
def test_without_valid_auth_it_is_401_or_404_and_nothing_changes(pending, how):
    session, _, approval = pending
    other = agent(route_key=ROUTE, app_id="other-agent")
    body = decision(approval)
    if how == "none":
        response = send(approval, body)
    elif how == "wrong_token":
        response = send(approval, body, token="x" * 43)
    elif how == "other_clients_token":
        response = send(approval, body, token=other._client_token)
    elif how == "bad_signature":
        response = send(approval, body, signed_with=other._client_token)
    else:
        raw = json.dumps(body).encode()
        headers = sign_callback(secret=session._client_token, body=raw, timestamp_ms=1)
        response = APIClient().post(
            f"/approvals/{approval.pk}/decision",
            raw,
            content_type="application/json",
            HTTP_X_BAILING_TIMESTAMP=headers["X-Bailing-Timestamp"],
            HTTP_X_BAILING_SIGNATURE=headers["X-Bailing-Signature"],
        )
    expected = {"other_clients_token": (404, "not_found")}.get(how, (401, "unauthorized"))
    assert (response.status_code, response.json()["error"]) == expected
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"job_id": "00000000-0000-4000-8000-000000000000"}, "job_id"),
        ({"request_id": "agent-tool:x"}, "request_id"),
        ({"args_hash": "0" * 64}, "args_hash"),
        ({"approval_id": 999999}, "approval_id"),
        ({"approval_id": "1"}, "approval_id"),
        ({"decision": "approve"}, "decision"),
        ({"decision_id": "has space"}, "decision_id"),
        ({"approver": "x" * 65}, "approver"),
        ({"comment": "c" * 1001}, "comment"),
        ({"comment": "fine \u202eby me"}, "comment"),
        ({"comment": "fine\n\u2066by me\u2069"}, "comment"),
        ({"approver": "ops\u202e"}, "approver"),
        ({"kind": "tool_approval"}, "kind"),
        ({"schema_version": "bailing.approval-decision.v2"}, "schema_version"),
        ({"extra": True}, "extra"),
    ],
)
def test_a_decision_that_does_not_match_the_frozen_call_is_400(pending, override, field):
    session, _, approval = pending
    response = send(approval, decision(approval, **override), token=session._client_token)
    assert response.status_code == 400, response.content
    assert (response.json()["error"], response.json()["field"]) == ("invalid_request", field)
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_missing_approver_and_unknown_approval(pending):
    session, _, approval = pending
    body = decision(approval)
    del body["approver"]
    response = send(approval, body, token=session._client_token)
    assert (response.status_code, response.json()["field"]) == (400, "approver")
    unknown = send(
        approval, decision(approval, approval_id=424242), token=session._client_token, path_id=424242
    )
    assert (unknown.status_code, unknown.json()["error"]) == (404, "not_found")
    bad_path = APIClient().post("/approvals/abc/decision", b"{}", content_type="application/json")
    assert (bad_path.status_code, bad_path["Content-Type"]) == (404, "application/json")


def test_a_conflicting_decision_and_a_reused_decision_id_are_409(pending, api_client):
    session, _, approval = pending
    assert send(approval, decision(approval), token=session._client_token).status_code == 200
    conflict = send(
        approval, decision(approval, decision="denied", decision_id="d2"), token=session._client_token
    )
    assert (conflict.status_code, conflict.json()["error"]) == (409, "approval_conflict")
    # The same decision_id on another approval.
    body = invoke_body(
        session, ROUTE, "request_refund", {"order_id": "SO-1002", "amount": 800, "reason": "r"}
    )
    second = ToolApproval.objects.get(pk=post(api_client, session, INVOKE_URL, body).json()["approval_id"])
    reused = send(
        second, decision(second, decision_id=f"biz-{approval.pk}-approved"), token=session._client_token
    )
    assert (reused.status_code, reused.json()["error"]) == (409, "approval_conflict")
    second.refresh_from_db()
    assert second.status == "pending"


def test_a_body_over_64_kib_is_413(pending):
    session, _, approval = pending
    raw = json.dumps(decision(approval, comment="c" * 70_000)).encode()
    response = send(approval, None, raw=raw, token=session._client_token)
    assert (response.status_code, response.json()["limit_scope"]) == (413, "request_body")


def test_parallel_decisions_one_wins(pending):
    session, _, approval = pending
    barrier = threading.Barrier(6)
    results: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def decide(n: int) -> None:
        try:
            barrier.wait(timeout=10)
            choice = "approved" if n % 2 else "denied"
            response = send(
                approval,
                decision(approval, decision=choice, decision_id=f"race-{n}"),
                token=session._client_token,
            )
            with lock:
                results.append((response.status_code, response.json().get("status")))
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(status for status, _ in results) == [200, 409, 409, 409, 409, 409]
    approval.refresh_from_db()
    winner = next(state for status, state in results if status == 200)
    assert approval.status == winner
    assert (
        AuditEvent.objects.filter(target_type="tool_approval", target_id=str(approval.pk))
        .filter(action__startswith="approvals.request.")
        .count()
        == 1
    )
