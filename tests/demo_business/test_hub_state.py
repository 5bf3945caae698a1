"""The Demo Shop's approvals page against the real hub (pytest-django's live server, real HTTP both
ways): a decision made in the hub console shows on the shop's page as decided (by whom, where, when),
and the shop's own late decision, refused by the hub with 409 ``approval_conflict``, is reported as
what the hub holds — never as "still pending"."""

from __future__ import annotations

import time

import httpx
import pytest

from agent_runtime.models import ApprovalNotification
from agent_runtime.services.clients import client_token_set
from approvals.services.decisions import approval_decide
from bailing.audit.actor import Actor
from tests.factories import UserFactory
from tests.support.demo_business import running_demo_business
from tests.support.invocations import INVOKE_URL, agent, invoke_body, post, provider_for, workspace

pytestmark = pytest.mark.django_db(transaction=True)
ROUTE = "shop"
CLIENT_TOKEN = "demo-client-token-for-the-state-test-" + "y" * 8


@pytest.fixture(scope="module")
def shop(live_server):
    env = {"DEMO_HUB_URL": live_server.url, "DEMO_CLIENT_TOKEN": CLIENT_TOKEN}
    with running_demo_business(extra_env=env) as business:
        yield business


@pytest.fixture
def session(shop):
    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(
        route_key=ROUTE,
        provider="demo-shop",
        write_tools=["cancel_order", "request_refund"],
        approval={"type": "business_webhook", "url": shop.url("/approvals")},
    )
    session = agent(route_key=ROUTE)
    client_token_set(client=session.client, token=CLIENT_TOKEN, actor=Actor.system("tests"))
    return session


def waiting_approval(api_client, session, shop, tool, arguments) -> int:
    """A call that waits for approval, its webhook delivered to the shop."""
    result = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, tool, arguments)).json()
    assert result["state"] == "awaiting_approval", result
    approval_id = result["approval_id"]
    deadline = time.monotonic() + 10
    while ApprovalNotification.objects.get(approval_id=approval_id).status == "pending":
        assert time.monotonic() < deadline, "the webhook never reached the shop"
        time.sleep(0.05)
    assert ApprovalNotification.objects.get(approval_id=approval_id).status == "delivered"
    return approval_id


def console_decision(approval_id: int, decision: str, approver) -> None:
    """What the console's decide view does when an approver clicks (approvals.console.approvals)."""
    approval_decide(
        approval_id=approval_id,
        decision=decision,
        decision_id=f"console:{approval_id}:{decision}",
        approver=approver.get_username(),
        comment="",
        source="console",
        actor=Actor.user(approver),
        user=approver,
    )


def card_of(page: str, approval_id: int) -> str:
    start = page.index(f'id="approval-{approval_id}"')
    return page[start : page.index("</article>", start)]


def test_a_console_decision_shows_on_the_shops_page_as_decided(api_client, session, shop):
    manager = UserFactory(username="manager")
    refund = waiting_approval(
        api_client,
        session,
        shop,
        "request_refund",
        {"order_id": "SO-1002", "amount": 650, "reason": "Broken"},
    )
    cancel = waiting_approval(
        api_client, session, shop, "cancel_order", {"order_id": "SO-1005", "reason": "Ordered twice"}
    )
    before = httpx.get(shop.url("/approvals"), timeout=15).text
    assert "2 pending." in before

    console_decision(refund, "approved", manager)
    page = httpx.get(shop.url("/approvals"), timeout=15).text
    assert "1 pending." in page
    card = card_of(page, refund)
    assert "<form" not in card and "status-approved" in card
    assert "Not decided here: Approved by manager in the hub console at 20" in card
    assert f"console:{refund}:approved" in card
    assert "Pending in the hub too" in card_of(page, cancel)
    record = next(
        r for r in httpx.get(shop.url("/approvals.json")).json()["approvals"] if r["approval_id"] == refund
    )
    assert (record["status"], record["hub_decision"]["decision_source"]) == ("approved", "console")


def test_the_shops_late_decision_reports_the_hubs_409_truthfully(api_client, session, shop):
    manager = UserFactory(username="manager")
    approval_id = waiting_approval(
        api_client, session, shop, "cancel_order", {"order_id": "SO-1005", "reason": "Ordered twice"}
    )
    console_decision(approval_id, "denied", manager)
    # The shop's page was opened before the console decided: its Approve button is still there.
    clicked = httpx.post(
        shop.url(f"/approvals/{approval_id}/approve"), headers={"Origin": shop.base_url}, timeout=15
    )
    assert clicked.status_code == 409
    alert = clicked.text.split('role="alert">', 1)[1].split("</p>", 1)[0]
    assert alert.startswith(
        f"Approval #{approval_id} was already decided in the hub: denied by manager in the hub console at 20"
    )
    assert alert.endswith("The shop&#x27;s approve was not applied.")
    assert "still pending" not in clicked.text
    assert "<form" not in card_of(clicked.text, approval_id)
