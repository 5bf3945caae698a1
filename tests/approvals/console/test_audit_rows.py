"""Audit list rows: two or three key fields per action (a field map in one place, ``key=value`` for an
action it does not know) and each target linked to its console page when there is one and the viewer
may open it. The browser test clicks a target and checks the filter bar stays on one line at 1280 px
(``audit-rows-*.png``)."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

import pytest
from django.db import transaction
from django.urls import reverse

from approvals.console.audit_rows import KEY_FIELDS, VALUE_CHARS, key_fields, target_url
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.audit.models import AuditEvent
from tests.factories import ToolInvocationFactory, UserFactory
from tests.support.console import PASSWORD, signed_in


def _record(**kwargs) -> AuditEvent:
    with transaction.atomic():
        return audit_record(actor=Actor.system("tests"), **kwargs)


def _event(target_type: str, target_id: str, data: dict | None = None) -> AuditEvent:
    return AuditEvent(action="tests.any", target_type=target_type, target_id=target_id, data=data or {})


# --- key fields ------------------------------------------------------------------------------------------
def test_known_actions_show_their_key_fields_in_order():
    data = {
        "invocation_id": "a" * 64,
        "tool": "request_refund",
        "provider": "shop",
        "approval_id": 7,
        "policy": "confirm_when",
    }
    assert key_fields("agent_runtime.invocation.approval_requested", data) == (
        "tool request_refund · policy confirm_when · approval 7"
    )
    outcome = {"tool": "cancel_order", "state": "executed", "business_status": 200, "reason": None}
    assert key_fields("agent_runtime.invocation.outcome", outcome) == (
        "tool cancel_order · state executed · business status 200"
    )


def test_a_family_entry_covers_its_actions_and_the_exact_entry_wins():
    assert key_fields("knowledge.base.disabled", {"fields": ["enabled"]}) == "fields enabled"
    assert key_fields(
        "approvals.request.approved", {"tool": "t", "decision": "approved", "source": "console"}
    ) == ("tool t · decision approved · via console")
    assert key_fields("agent_runtime.client.token_rotated", {"token_prefix": "bct_12ab"}) == "token bct_12ab"
    assert "agent_runtime.client." in KEY_FIELDS and "agent_runtime.client.token_rotated" in KEY_FIELDS


def test_unknown_actions_fall_back_to_a_short_key_value_line():
    data = {"zeta": 1, "alpha": True, "beta": ["a", "b"], "gamma": {"x": 1}}
    assert key_fields("somebody.new.action", data) == "alpha=yes · beta=a, b · gamma={…}"
    assert key_fields("somebody.new.action", {}) == ""
    assert key_fields("somebody.new.action", None) == ""


def test_values_are_bounded_and_ids_shortened():
    long_error = "x" * 200
    line = key_fields("agent_runtime.approval.notify_failed", {"channel": "webhook", "error": long_error})
    assert line == f"channel webhook · error {'x' * (VALUE_CHARS - 1)}…"
    session = str(uuid.uuid4())
    assert key_fields("unknown.action", {"session": session}) == f"session={session[:8]}…"


# --- target links ----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_every_target_type_with_a_page_links_to_it(administrator):
    job, session = uuid.uuid4(), uuid.uuid4()
    expected = {
        ("tool_invocation", str(job)): reverse("console:invocation_detail", args=[job]),
        ("tool_approval", "12"): reverse("console:approval_detail", args=[12]),
        ("client", "shop"): reverse("console:client_detail", args=["shop"]),
        ("agent_session", str(session)): reverse("console:session_detail", args=[session]),
        ("route", "orders"): reverse("console:workspace_detail", args=["orders"]),
        ("tool_provider", "shop"): reverse("console:provider_detail", args=["shop"]),
        ("knowledge_base", "handbook"): reverse("console:knowledge_detail", args=["handbook"]),
        ("knowledge_document", "handbook/faq/refunds.md"): reverse(
            "console:knowledge_detail", args=["handbook"]
        )
        + "?q=faq%2Frefunds.md",
        ("user", "bob"): reverse("console:user_detail", args=["bob"]),
    }
    for (target_type, target_id), url in expected.items():
        assert target_url(_event(target_type, target_id), administrator) == url, target_type
    read = _event("knowledge_document", "41", {"kb_id": "handbook", "source_key": "refunds"})
    assert target_url(read, administrator) == reverse(
        "console:knowledge_document_detail", args=["handbook", 41]
    )


@pytest.mark.django_db
def test_targets_without_a_page_or_with_a_bad_id_stay_plain(administrator):
    for target_type, target_id in [
        ("agent_authorization", str(uuid.uuid4())),
        ("oauth_client", "bhc_x"),
        ("knowledge_scope", "ab" * 32),
        ("tool_invocation", "not-a-uuid"),
        ("tool_approval", "seven"),
        ("agent_session", ""),
        ("knowledge_document", "no-slash"),
        ("client", "bad\x00id"),
        ("", "shop"),
    ]:
        assert target_url(_event(target_type, target_id), administrator) is None, (target_type, target_id)


@pytest.mark.django_db
def test_a_target_is_linked_only_for_viewers_who_may_open_its_page(administrator, auditor):
    user_event = _event("user", "bob")
    assert target_url(user_event, administrator) is not None
    assert target_url(user_event, auditor) is None  # users' pages are the administrators'
    assert target_url(_event("client", "shop"), auditor) is not None


@pytest.mark.django_db
def test_the_list_shows_key_fields_and_target_links(auditor):
    invocation = ToolInvocationFactory(tool="request_refund")
    _record(
        action="agent_runtime.invocation.approval_requested",
        target_type="tool_invocation",
        target_id=str(invocation.job_id),
        data={
            "invocation_id": invocation.invocation_id,
            "tool": "request_refund",
            "approval_id": 3,
            "policy": "confirm_when",
        },
    )
    _record(
        action="console.user.password_reset", target_type="user", target_id="bob", data={"generated": True}
    )
    response = signed_in(auditor).get(reverse("console:audit_list"))
    table = response.context["table"]
    assert table.columns == ["#", "Time (UTC)", "Action", "Target", "Actor", "Client", "Session", "Workspace"]
    reset, requested = table.rows
    assert requested[2].sub == "tool request_refund · policy confirm_when · approval 3"
    assert requested[3].href == reverse("console:invocation_detail", args=[invocation.job_id])
    assert requested[3].text == f"{str(invocation.job_id)[:8]}…"
    assert requested[3].title == f"tool_invocation:{invocation.job_id}"
    assert requested[3].sub == "tool invocation"
    assert (reset[2].sub, reset[3].text, reset[3].sub, reset[3].href) == (
        "generated yes",
        "bob",
        "user",
        None,
    )


@pytest.mark.django_db
def test_the_event_page_links_its_target(admin_http):
    event = _record(action="agent_runtime.client.token_rotated", target_type="client", target_id="shop")
    response = admin_http.get(reverse("console:audit_detail", args=[event.id]))
    assert (
        f'<a href="{reverse("console:client_detail", args=["shop"])}">client:shop</a>'
        in response.content.decode()
    )


# --- in a browser ----------------------------------------------------------------------------------------
FILLED = {
    "actor": "audrey",
    "action": "agent_runtime.invocation",
    "client": "desk-agent",
    "session": "7375793d-b55a-4f0e-9d3c-2b1a0e6f5c44",
    "route": "orders",
    "since": "2026-01-31T23:59:58",
    "until": "2026-12-31T23:59:59",
}
FILTER_CONTROLS = (
    "form.filters input:not([type=hidden]), form.filters select, form.filters button, form.filters .btn"
)


def control_tops(page) -> list[float]:
    return page.eval_on_selector_all(
        FILTER_CONTROLS, "elements => elements.map(element => element.getBoundingClientRect().top)"
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_audit_rows_in_a_browser(hub_server, browser_page, screenshot, console_roles):
    auditor = UserFactory(username="audrey", roles=["auditor"])
    invocation = ToolInvocationFactory(tool="request_refund")
    _record(
        action="agent_runtime.invocation.approval_requested",
        target_type="tool_invocation",
        target_id=str(invocation.job_id),
        route_key=invocation.route_key,
        data={
            "invocation_id": invocation.invocation_id,
            "tool": "request_refund",
            "approval_id": 3,
            "policy": "confirm_when",
        },
    )
    _record(
        action="knowledge.document.created",
        target_type="knowledge_document",
        target_id="handbook/refunds",
        data={"kb_id": "handbook", "source_key": "refunds", "revision": "f" * 64, "chars": 1234},
    )
    page = browser_page
    base = hub_server.url
    audit = base + reverse("console:audit_list")
    page.goto(audit)
    page.get_by_label("Username").fill(auditor.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(audit)
    # Filled in (the widest the date-time fields get), the bar keeps every control on one line.
    page.goto(audit + "?" + urlencode(FILLED))
    tops = control_tops(page)
    assert len(tops) == 9  # seven filters, Filter and Reset
    assert max(tops) - min(tops) < 1, tops
    screenshot(page, "audit-rows-00-filters")
    page.goto(audit)
    tops = control_tops(page)
    assert max(tops) - min(tops) < 1, tops
    row = page.locator("table.data tbody tr", has_text="approval_requested")
    assert "tool request_refund · policy confirm_when · approval 3" in row.inner_text()
    document_row = page.locator("table.data tbody tr", has_text="knowledge.document.created")
    assert "source key refunds · characters 1234" in document_row.inner_text()
    screenshot(page, "audit-rows-01")

    page.set_viewport_size({"width": 1024, "height": 860})
    # Narrower, the bar may wrap but every control stays whole and on screen.
    width = page.evaluate("document.documentElement.clientWidth")
    boxes = page.eval_on_selector_all(
        FILTER_CONTROLS, "elements => elements.map(element => element.getBoundingClientRect().toJSON())"
    )
    assert all(box["width"] >= 48 and box["right"] <= width for box in boxes), boxes
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "audit-rows-02-1024")
    page.set_viewport_size({"width": 1280, "height": 860})

    assert "tool invocation" in row.inner_text()
    row.get_by_role("link", name=f"{str(invocation.job_id)[:8]}…").click()
    page.wait_for_url(base + reverse("console:invocation_detail", args=[invocation.job_id]))
    assert "request_refund" in page.locator("main").inner_text()
    screenshot(page, "audit-rows-03-target")
