"""``GET /approvals/:id`` (``bailing.approval-state.v1``, this hub's addition): a business system reads
where its approval stands, authenticated exactly like its decisions (Client Token or signature)."""

from __future__ import annotations

import json
from datetime import UTC, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from agent_runtime.models import ToolApproval
from approvals.services.decisions import approval_decide
from bailing.audit.actor import Actor
from bailing.signing import sign_callback
from tests.factories import UserFactory
from tests.support.invocations import agent, call_awaiting_approval

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
STATE_KEYS = [
    "schema_version",
    "approval_id",
    "job_id",
    "request_id",
    "args_hash",
    "status",
    "decided_by",
    "decided_at",
    "decision_source",
    "decision_id",
    "expires_at",
]
SECRET_REASON = "card 4111-1111-1111-1111 under the mat"


@pytest.fixture
def pending(demo_shop, api_client):
    """A pending approval of alice's cancellation of SO-1004 (a reason we can look for), her session."""
    session, _, approval = call_awaiting_approval(
        api_client, demo_shop, tool="cancel_order", arguments={"order_id": "SO-1004", "reason": SECRET_REASON}
    )
    return session, approval


def read(approval_id, *, token=None, signed_with=None, timestamp_ms=None, headers=None):
    extra = dict(headers or {})
    if token is not None:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    if signed_with is not None:
        signed = sign_callback(secret=signed_with, body=b"", timestamp_ms=timestamp_ms)
        extra.update({f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed.items()})
    return APIClient(raise_request_exception=False).get(f"/approvals/{approval_id}", **extra)


def business_decision(approval, session, decision):
    body = {
        "kind": "tool_approval_decision",
        "schema_version": "bailing.approval-decision.v1",
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
        "decision": decision,
        "decision_id": f"shop-{approval.pk}-{decision}",
        "approver": "shop-manager",
        "comment": "private note from the shop",
    }
    response = APIClient().post(
        f"/approvals/{approval.pk}/decision",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._client_token}",
    )
    assert response.status_code == 200, response.content


def test_a_pending_approval_reads_as_pending(pending, django_assert_max_num_queries):
    session, approval = pending
    with django_assert_max_num_queries(3):  # the client by its token (and its last use), the approval
        response = read(approval.pk, token=session._client_token)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == STATE_KEYS
    assert body == {
        "schema_version": "bailing.approval-state.v1",
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "args_hash": approval.args_hash,
        "status": "pending",
        "decided_by": None,
        "decided_at": None,
        "decision_source": None,
        "decision_id": None,
        "expires_at": None,
    }


def test_a_console_decision_reads_as_decided_in_the_console(pending):
    session, approval = pending
    manager = UserFactory(username="manager")
    approval_decide(
        approval_id=approval.pk,
        decision="approved",
        decision_id=f"console:{approval.pk}:approved",
        approver="manager",
        comment="checked with the customer",
        source="console",
        actor=Actor.user(manager),
        user=manager,
    )
    body = read(approval.pk, token=session._client_token).json()
    approval.refresh_from_db()
    assert (body["status"], body["decided_by"], body["decision_source"]) == ("approved", "manager", "console")
    assert body["decision_id"] == f"console:{approval.pk}:approved"
    decided_at = approval.decided_at.astimezone(UTC).isoformat(timespec="milliseconds")
    assert body["decided_at"] == decided_at.replace("+00:00", "Z")


def test_a_business_denial_reads_as_denied_by_the_business(pending):
    session, approval = pending
    business_decision(approval, session, "denied")
    body = read(approval.pk, signed_with=session._client_token).json()
    assert (body["status"], body["decided_by"], body["decision_source"], body["decision_id"]) == (
        "denied",
        "shop-manager",
        "business",
        f"shop-{approval.pk}-denied",
    )
    assert body["decided_at"].endswith("Z")


def test_an_approval_past_its_expiry_reads_as_expired_without_being_written(pending):
    session, approval = pending
    expired_at = timezone.now() - timedelta(seconds=1)
    ToolApproval.objects.filter(pk=approval.pk).update(expires_at=expired_at)
    body = read(approval.pk, token=session._client_token).json()
    assert (body["status"], body["decided_by"], body["decided_at"], body["decision_source"]) == (
        "expired",
        None,
        None,
        None,
    )
    assert body["expires_at"] is not None
    approval.refresh_from_db()
    assert approval.status == "pending"  # a read never writes; a decision or a resume would expire it


@pytest.mark.parametrize(
    "how", ["none", "wrong_token", "basic_auth", "bad_signature", "stale_signature", "other_clients_token"]
)
def test_without_valid_auth_it_is_401_or_404(pending, how):
    session, approval = pending
    other = agent(route_key=ROUTE, app_id="other-agent")
    if how == "none":
        response = read(approval.pk)
    elif how == "wrong_token":
        response = read(approval.pk, token="x" * 43)
    elif how == "basic_auth":
        response = read(approval.pk, headers={"HTTP_AUTHORIZATION": "Basic YWxpY2U6cHc="})
    elif how == "bad_signature":
        response = read(approval.pk, signed_with=other._client_token)
    elif how == "stale_signature":
        response = read(approval.pk, signed_with=session._client_token, timestamp_ms=1)
    else:
        response = read(approval.pk, token=other._client_token)
    # Another client's valid token learns nothing about this approval: the same 404 as an unknown one.
    expected = (404, "not_found") if how == "other_clients_token" else (401, "unauthorized")
    assert (response.status_code, response.json()["error"]) == expected
    assert "status" not in response.json()


def test_an_unknown_or_malformed_id_is_404(pending):
    session, approval = pending
    for path_id in (approval.pk + 1000, "abc", "0", "01"):
        response = read(path_id, token=session._client_token)
        assert (response.status_code, response.json()["error"]) == (404, "not_found"), path_id
    signed = read(approval.pk + 1000, signed_with=session._client_token)
    assert (signed.status_code, signed.json()["error"]) == (404, "not_found")


def test_the_state_carries_no_secret_nor_argument_nor_comment(pending):
    session, approval = pending
    business_decision(approval, session, "approved")
    response = read(approval.pk, token=session._client_token)
    text = response.content.decode()
    assert response.status_code == 200
    for secret in (session._client_token, SECRET_REASON, "4111", "SO-1004", "private note"):
        assert secret not in text
    assert "args" not in response.json() and "comment" not in response.json()


def test_only_get_is_served(pending):
    session, approval = pending
    response = APIClient().post(
        f"/approvals/{approval.pk}",
        b"{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {session._client_token}",
    )
    assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")
    # A path that cannot name an approval stays an unknown path for every method.
    unknown = APIClient().post("/approvals/nope", b"{}", content_type="application/json")
    assert (unknown.status_code, unknown.json()["error"]) == (404, "not_found")
