"""The approvals inbox and tool-call traces in the console: what each role sees and may do, the
own-call rule, double submits, reconciliation; and the whole flow in headless Chromium."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from bailing.audit.models import AuditEvent
from tests.support.chaos_business import running_chaos_business
from tests.support.console import PASSWORD, csp_violations, signed_in
from tests.support.invocations import (
    INVOKE_URL,
    agent,
    call_awaiting_approval,
    console_decision,
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
    return call_awaiting_approval(
        api_client,
        demo_shop,
        tool="cancel_order",
        arguments={"order_id": "SO-1004", "reason": "changed mind"},
    )


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
    decide = reverse("console:approval_decide", args=[approval.pk])
    # One click does not decide: the decision POST without its confirmation changes nothing.
    refused = client.post(decide, {"decision": "approved", "args_hash": approval.args_hash})
    assert refused.status_code == 400 and refused.context["code"] == "not_confirmed"
    approval.refresh_from_db()
    assert approval.status == "pending"
    confirm = client.get(detail.context["approve_url"])
    assert confirm.status_code == 200
    assert confirm.context["confirmation"].lead == approval.summary
    assert ("Arguments hash", approval.args_hash) in confirm.context["confirmation"].facts
    response = client.post(decide, console_decision(approval, "approved", comment="ok"))
    assert response.status_code == 302
    again = client.post(decide, console_decision(approval, "approved"))
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


def test_a_large_snapshot_shows_hidden_characters_as_json_escapes(demo_shop, api_client, approver):
    """The on-demand JSON is the same value, with U+202E and the zero-width space written as \\u
    escapes, so the browser that shows it cannot be made to reorder it."""
    from bailing.ui.visible import HIDDEN_CHARS

    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["cancel_order"])
    session = agent(route_key=ROUTE, on_behalf_of="alice")
    reason = "to IBAN \u202eDE00 1234\u202c\u200b"
    body = invoke_body(session, ROUTE, "cancel_order", {"order_id": "SO-1004", "reason": reason})
    approval = ToolApproval.objects.get(pk=post(api_client, session, INVOKE_URL, body).json()["approval_id"])
    ToolApproval.objects.filter(pk=approval.pk).update(args_bytes=200_000)
    args = signed_in(approver).get(reverse("console:approval_args", args=[approval.pk]))
    assert args.status_code == 200
    text = args.content.decode("utf-8")
    assert not HIDDEN_CHARS.search(text)
    assert "\\u202eDE00 1234\\u202c\\u200b" in text
    assert args.json() == approval.args
    assert approval.args["reason"] == reason


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
    page.get_by_role("link", name="Approve…").click()
    page.get_by_label("Comment").fill("Customer sent photos")
    page.get_by_role("button", name="Approve the call").click()
    page.wait_for_url(base + reverse("console:approval_detail", args=[waiting["approval_id"]]))
    assert page.locator(".alert-success").is_visible()
    screenshot(page, "approvals-03-approved")

    done = post(api_client, session, resume_url(body["invocation_id"]), {}).json()
    assert done["state"] == "executed"
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1
    post(api_client, session, resume_url(body["invocation_id"]), {})
    assert len(demo_shop.records()["refunds"]) == refunds_before + 1

    page.get_by_role("link", name="Trace of this call").click()
    page.locator(".trace-label").first.wait_for()  # the click navigates: read the trace page, not this one
    labels = page.locator(".trace-label").all_inner_texts()
    assert labels == ["Requested", "Approval pending", "Decided", "Dispatched", "Outcome"]
    assert "executed" in page.locator(".trace-step").last.inner_text()
    screenshot(page, "approvals-04-trace")
    page.goto(base + reverse("console:invocation_list"))
    assert page.locator("table.data tbody tr").count() == 1
    screenshot(page, "approvals-05-calls")


# --- hidden characters in what approvers read (bailing/ui/visible.py) ------------------------------------

SPOOFED_REASON = "refund to IBAN \u202eDE00 1234\u202c ok\u200b " + "Z" * 300
HIDDEN_IN_ARGS = ("\u202e", "\u202c", "\u200b")


def _no_horizontal_overflow(page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        " && [...document.querySelectorAll('.table-wrap, pre.json')]"
        "      .every(el => el.scrollWidth <= el.clientWidth"
        "                   && el.getBoundingClientRect().right <= window.innerWidth)"
    )


def _overflow_report(page) -> list:
    return page.evaluate(
        "[document.documentElement, ...document.querySelectorAll('.table-wrap, pre.json')]"
        ".map(el => [el.className || el.tagName, el.scrollWidth, el.clientWidth,"
        " Math.round(el.getBoundingClientRect().right), window.innerWidth])"
    )


def _assert_neutralised(page, *, escapes: tuple[str, ...]) -> None:
    """The text a reader gets from the page (and the DOM's whole text, <title> included) holds the
    visible escapes and not one hidden character."""
    from bailing.ui.visible import HIDDEN_CHARS

    shown = page.inner_text("body")
    everything = page.evaluate("document.documentElement.textContent")
    for text in (shown, everything):
        assert not HIDDEN_CHARS.search(text), [hex(ord(c)) for c in HIDDEN_CHARS.findall(text)]
    for escape in escapes:
        assert escape in shown


@pytest.mark.browser
def test_hidden_characters_in_arguments_are_shown_as_escapes_in_a_browser(
    hub_server, api_client, chromium, screenshot, console_roles, demo_shop
):
    """A refund whose reason carries a right-to-left override and a zero-width space, waiting for
    approval: the inbox, the approval page, the dashboard and the trace show ``U+202E`` tokens, never
    the raw characters, and nothing overflows a 1024 px screen. The stored snapshot stays exact."""
    from tests.factories import UserFactory

    approver = UserFactory(username="april", roles=["approver"])
    provider_for(name="demo-shop", base_url=demo_shop.base_url, secret=demo_shop.secret)
    workspace(route_key=ROUTE, provider="demo-shop", write_tools=["request_refund"])
    session = agent(route_key=ROUTE, on_behalf_of="alice")
    arguments = {"order_id": "SO-1002", "amount": 650, "reason": SPOOFED_REASON}
    waiting = post(api_client, session, INVOKE_URL, invoke_body(session, ROUTE, "request_refund", arguments))
    assert waiting.status_code == 200, waiting.content
    assert waiting.json()["state"] == "awaiting_approval"
    approval = ToolApproval.objects.get(pk=waiting.json()["approval_id"])
    # What is approved (and hashed, and sent to the business) is exactly what the agent sent.
    assert approval.args["reason"] == SPOOFED_REASON
    assert all(char in approval.summary for char in HIDDEN_IN_ARGS)

    context = chromium.new_context(viewport={"width": 1024, "height": 800}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    violations = csp_violations(page)
    base = hub_server.url
    page.goto(base + reverse("console:approval_list"))
    page.get_by_label("Username").fill(approver.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:approval_list"))

    row = page.locator("table.data tbody tr").first
    assert "refund to IBAN U+202EDE00 1234U+202C okU+200B" in row.inner_text()
    assert row.locator(".char-escape").count() == 3
    assert row.locator(".char-escape").first.get_attribute("title") == "RIGHT-TO-LEFT OVERRIDE"
    _assert_neutralised(page, escapes=("U+202E", "U+202C", "U+200B"))
    screenshot(page, "approvals-hidden-01-inbox")
    assert _no_horizontal_overflow(page), _overflow_report(page)

    page.get_by_role("link", name=f"#{approval.pk}").click()
    page.wait_for_url(base + reverse("console:approval_detail", args=[approval.pk]))
    lead = page.locator("h1.statement").inner_text()
    assert lead.startswith("Refund 650 on order SO-1002? Reason: refund to IBAN U+202EDE00 1234U+202C ok")
    args = page.locator("#approval-args")
    assert '"reason": "refund to IBAN U+202EDE00 1234U+202C okU+200B ZZZ' in args.inner_text()
    assert args.locator(".char-escape").count() == 3
    _assert_neutralised(page, escapes=("U+202E", "U+202C", "U+200B"))
    screenshot(page, "approvals-hidden-02-detail")
    assert _no_horizontal_overflow(page), _overflow_report(page)

    page.goto(base + reverse("console:dashboard"))
    _assert_neutralised(page, escapes=())
    screenshot(page, "approvals-hidden-03-dashboard")
    assert _no_horizontal_overflow(page), _overflow_report(page)
    page.goto(base + reverse("console:invocation_detail", args=[approval.invocation.job_id]))
    _assert_neutralised(page, escapes=())
    screenshot(page, "approvals-hidden-04-trace")
    assert _no_horizontal_overflow(page), _overflow_report(page)
    context.close()
    assert not violations, violations


def test_decision_comments_and_audit_data_show_hidden_characters_as_escapes(waiting, approver, auditor):
    """What an approver typed and what the ledger holds go through the same neutralisation: no hidden
    character anywhere in the HTML (attributes and <title> included), a token for each."""
    from django.db import transaction

    from bailing.audit.actor import Actor
    from bailing.audit.ledger import audit_record
    from bailing.ui.visible import HIDDEN_CHARS

    _, _, approval = waiting
    client = signed_in(approver)
    comment = "ok \u202egnp.exe\u202c\u00ad"
    client.post(
        reverse("console:approval_decide", args=[approval.pk]),
        console_decision(approval, "denied", comment=comment),
    )
    approval.refresh_from_db()
    assert approval.decision_comment == comment
    html = client.get(reverse("console:approval_detail", args=[approval.pk])).content.decode()
    assert not HIDDEN_CHARS.search(html)
    assert all(f">{point}</span>" in html for point in ("U+202E", "U+202C", "U+00AD"))

    with transaction.atomic():
        event = audit_record(
            action="tests.display",
            actor=Actor.system("tests"),
            target_type="note",
            target_id="n\u200b1",
            data={"label": "\u2066admin\u2069", "bell": "\x07"},
        )
    reader = signed_in(auditor)
    for url in (reverse("console:audit_list"), reverse("console:audit_detail", args=[event.pk])):
        html = reader.get(url).content.decode()
        assert not HIDDEN_CHARS.search(html), url
        assert all(f">{point}</span>" in html for point in ("U+200B", "U+2066", "U+2069")), url
