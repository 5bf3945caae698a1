"""Governed calls against the Demo Shop as a real process: reads, writes, approvals, replays."""

from __future__ import annotations

import pytest

from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    invoke_body,
    post,
    provider_for,
    resume_url,
    workspace,
)

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"


@pytest.fixture
def shop_session(demo_shop):
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(
        route_key=ROUTE, provider="demo-shop", write_tools=["create_ticket", "request_refund", "cancel_order"]
    )
    return agent(route_key=ROUTE)


def test_a_read_is_executed_with_the_business_answer(api_client, shop_session):
    body = invoke_body(shop_session, ROUTE, "list_orders", {})
    response = post(api_client, shop_session, INVOKE_URL, body)
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["state"] == "executed", result
    assert result["ok"] is True and result["business_status"] == 200
    assert "SO-1001" in result["text"]
    assert response["Cache-Control"] == "no-store"
    invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
    assert invocation.journal.state == ToolCallJournal.State.COMPLETED
    # Replay: the same body returns the same stable result, no second call.
    again = post(api_client, shop_session, INVOKE_URL, body)
    assert again.json() == result


def test_a_high_risk_write_waits_for_approval_then_runs_once_after_resume(
    api_client, shop_session, demo_shop
):
    body = invoke_body(
        shop_session, ROUTE, "cancel_order", {"order_id": "SO-1004", "reason": "customer asked"}
    )
    first = post(api_client, shop_session, INVOKE_URL, body).json()
    assert first["state"] == "awaiting_approval", first
    approval = ToolApproval.objects.get(pk=first["approval_id"])
    assert approval.policy == "risk_high" and approval.args == body["arguments"]
    pending = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    assert pending["state"] == "awaiting_approval"
    ToolApproval.objects.filter(pk=approval.pk).update(status="approved")
    done = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed", done
    again = post(api_client, shop_session, resume_url(body["invocation_id"]), {}).json()
    assert again == done
    approval.refresh_from_db()
    assert approval.consumed_at is not None
