"""The approvals inbox and tool-call traces in the console: what each role sees and may do, the
own-call rule, double submits, reconciliation; and the whole flow in headless Chromium."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from bailing.audit.models import AuditEvent
from tests.support.chaos_business import running_chaos_business
from tests.support.console import PASSWORD, signed_in
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
def waiting(demo_shop, api_client):
    """alice's cancellation of SO-1004, waiting for approval."""
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["cancel_order", "request_refund"])
    session = agent(route_key=ROUTE, on_behalf_of="alice")
    body = invoke_body(session, ROUTE, "cancel_order", {"order_id": "SO-1004", "reason": "changed mind"})
    result = post(api_client, session, INVOKE_URL, body).json()
    return session, body, ToolApproval.objects.get(pk=result["approval_id"])


def test_the_inbox_lists_pending_first_and_the_nav_counts_them(waiting, approver):
    client = signed_in(approver)
    page = client.get(reverse("console:approval_list"))
    assert page.status_code == 200
    assert page.context["counts"]["pending"] == 1
    nav = {item["label"]: item.get("badge") for item in page.context["console_nav"]}
    assert nav["Approvals"] == 1
    assert "cancel_order" in page.content.decode()


def test_the_detail_shows_the_snapshot_and_an_approver_decides(waiting, approver, api_client):
    session, body, approval = waiting
    client = signed_in(approver)
    detail = client.get(reverse("console:approval_detail", args=[approval.pk]))
    text = detail.content.decode()
    assert detail.context["can_decide"] is True
    assert "changed mind" in text and "risk_high" in text and approval.args_hash in text
    response = client.post(
        reverse("console:approval_decide", args=[approval.pk]), {"decision": "approved", "comment": "ok"}
    )
    assert response.status_code == 302
    again = client.post(reverse("console:approval_decide", args=[approval.pk]), {"decision": "approved"})
    assert again.status_code == 302  # a double submit is a replay
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decision_source) == (
        "approved",
        "april",
        "console",
    )
    assert (
        AuditEvent.objects.filter(action="approvals.request.approved", target_id=str(approval.pk)).count()
        == 1
    )
    assert post(api_client, session, resume_url(body["invocation_id"]), {}).json()["state"] == "executed"


def test_nobody_decides_a_call_made_on_their_own_behalf(waiting, console_roles):
    from tests.factories import UserFactory

    _, _, approval = waiting
    alice = UserFactory(username="alice", roles=["approver"])
    client = signed_in(alice)
    assert client.get(reverse("console:approval_detail", args=[approval.pk])).context["can_decide"] is False
    response = client.post(reverse("console:approval_decide", args=[approval.pk]), {"decision": "approved"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_administrators_and_auditors_see_but_do_not_decide(waiting, administrator, auditor):
    _, _, approval = waiting
    for user in (administrator, auditor):
        client = signed_in(user)
        assert client.get(reverse("console:approval_detail", args=[approval.pk])).status_code == 200
        response = client.post(
            reverse("console:approval_decide", args=[approval.pk]), {"decision": "approved"}
        )
        assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_large_snapshot_is_loaded_on_demand(waiting, approver):
    _, _, approval = waiting
    ToolApproval.objects.filter(pk=approval.pk).update(args_bytes=200_000)
    client = signed_in(approver)
    detail = client.get(reverse("console:approval_detail", args=[approval.pk]))
    assert detail.context["args_inline"] is False
    args = client.get(reverse("console:approval_args", args=[approval.pk]))
    assert args["Content-Type"] == "application/json"
    assert args.json() == approval.args


def test_an_operator_resolves_an_unknown_outcome_and_the_agent_receives_it(
    api_client, administrator, approver
):
    with running_chaos_business() as chaos:
        provider_for(name="chaos", base_url=chaos.base_url, secret=chaos.secret)
        workspace(route_key="chaos", provider="chaos", write_tools=["chaos_drop_after_write"])
        session = agent(route_key="chaos")
        body = invoke_body(session, "chaos", "chaos_drop_after_write", {"note": "x"})
        assert post(api_client, session, INVOKE_URL, body).json()["state"] == "reconciliation_required"
        invocation = ToolInvocation.objects.get(invocation_id=body["invocation_id"])
        url = reverse("console:invocation_detail", args=[invocation.job_id])
        assert signed_in(approver).get(url).context["can_resolve"] is False
        admin = signed_in(administrator)
        assert admin.get(url).context["can_resolve"] is True
        refused = admin.post(
            reverse("console:invocation_resolve", args=[invocation.job_id]), {"resolution": "executed"}
        )
        assert refused.status_code == 302
        assert not ToolCallJournal.objects.get(
            invocation=invocation
        ).resolution  # not confirmed: nothing changed
        admin.post(
            reverse("console:invocation_resolve", args=[invocation.job_id]),
            {"resolution": "executed", "evidence": "ticket #1 exists", "checked": "on"},
        )
        journal = ToolCallJournal.objects.get(invocation=invocation)
        assert (journal.resolution, journal.resolved_by) == ("executed", "ada")
        result = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
        assert result["state"] == "executed" and "ticket #1 exists" in result["text"]
        assert chaos.calls("chaos_drop_after_write") == 1
        trace = admin.get(url)
        assert [step.label for step in trace.context["steps"]] == ["Requested", "Dispatched", "Outcome"]


@pytest.mark.browser
def test_approval_flow_in_a_browser(
    hub_server, api_client, browser_page, screenshot, console_roles, demo_shop
):
    """Agent call waits → the approver approves in Chromium → the agent resumes → one business write
    → the trace shows it."""
    from tests.factories import UserFactory

    approver = UserFactory(username="april", roles=["approver"])
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["request_refund"])
    session = agent(route_key=ROUTE, on_behalf_of="alice")
    body = invoke_body(
        session,
        ROUTE,
        "request_refund",
        {"order_id": "SO-1002", "amount": 650, "reason": "Broken <b>jug</b>"},
    )
    waiting = post(api_client, session, INVOKE_URL, body).json()
    assert waiting["state"] == "awaiting_approval"
    refunds_before = len(demo_shop.records()["refunds"])

    page = browser_page
    base = hub_server.url
    page.goto(base + reverse("console:approval_list"))
    page.get_by_label("Username").fill(approver.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:approval_list"))
    assert page.locator(".nav a", has_text="Approvals").locator(".nav-badge").inner_text() == "1"
    screenshot(page, "approvals-01-inbox")
    page.get_by_role("link", name=f"#{waiting['approval_id']}").click()
    page.wait_for_url(base + reverse("console:approval_detail", args=[waiting["approval_id"]]))
    assert "Broken <b>jug</b>" in page.locator("#approval-args").inner_text()  # escaped, shown as text
    screenshot(page, "approvals-02-detail")
    page.get_by_label("Comment").fill("Customer sent photos")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(base + reverse("console:approval_detail", args=[waiting["approval_id"]]))
    assert page.locator(".alert-success").is_visible()
    screenshot(page, "approvals-03-approved")

    done = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed"
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1
    post(api_client, session, resume_url(body["invocation_id"]), {})
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1

    page.get_by_role("link", name="Trace of this call").click()
    labels = page.locator(".trace-label").all_inner_texts()
    assert labels == ["Requested", "Approval pending", "Decided", "Dispatched", "Outcome"]
    assert "executed" in page.locator(".trace-step").last.inner_text()
    screenshot(page, "approvals-04-trace")
    page.goto(base + reverse("console:invocation_list"))
    assert page.locator("table.data tbody tr").count() == 1
    screenshot(page, "approvals-05-calls")
