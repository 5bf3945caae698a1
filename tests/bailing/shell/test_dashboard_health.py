"""The dashboard's health panels: each tool provider's last refresh and probes, the knowledge worker's
heartbeat with the indexing queue, and the approvals waiting longest; each for users who may read the
page it summarises, each with an empty state that reads as a sentence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agent_runtime.models import Route, ToolApproval, ToolProvider
from knowledge.models import Document, WorkerHeartbeat
from tests.factories import KnowledgeBaseFactory, RouteFactory, ToolProviderFactory, UserFactory
from tests.support.console import signed_in
from tests.support.console_overview import pending_approval, seed_overview

pytestmark = pytest.mark.django_db


def panels(response) -> dict:
    return {panel.title: panel for panel in response.context["panels"]}


def facts(panel) -> dict[str, tuple[str, str, str]]:
    return {fact.label: (fact.value, fact.tone, fact.note) for fact in panel.facts}


def cells(table) -> list[list[str]]:
    return [[cell.text for cell in row] for row in table.rows]


def dashboard(client):
    response = client.get(reverse("console:dashboard"))
    assert response.status_code == 200
    return response


def test_provider_health_puts_failing_providers_first(admin_http):
    seed_overview()

    panel = panels(dashboard(admin_http))["Tool provider health"]

    rows = cells(panel.table)
    assert [row[0] for row in rows] == ["billing", "crm", "shop"]
    billing = panel.table.rows[0]
    assert billing[3].text == "failed" and billing[3].tone == "bad"
    assert billing[3].sub == "spec_unreachable"
    assert billing[2].kind == "time"
    assert billing[4].text == "inconclusive"
    assert rows[2][3] == "ok"
    assert panel.note == "1 failing"
    assert panel.table.rows[0][0].href == reverse("console:provider_detail", args=["billing"])
    assert panel.more_url == reverse("console:provider_list")


def test_provider_health_shows_the_authorization_probe(admin_http):
    seed_overview(failed_provider=False)
    ToolProvider.objects.filter(name="crm").update(
        authz_probe={"status": "suspect", "mode": "subject", "tool": "crm_contact_get", "http": 200}
    )
    ToolProvider.objects.filter(name="shop").update(authz_probe={"status": "pass", "mode": "subject"})

    rows = panels(dashboard(admin_http))["Tool provider health"].table.rows

    assert [(row[0].text, row[5].text, row[5].tone) for row in rows] == [
        ("crm", "suspect", "bad"),
        ("shop", "pass", "ok"),
    ]


def test_provider_health_is_capped_with_the_total(admin_http):
    for n in range(14):
        ToolProviderFactory(name=f"p-{n:02d}")
    panel = panels(dashboard(admin_http))["Tool provider health"]
    assert len(panel.table.rows) == 12
    assert panel.note == "none failing · 12 of 14 shown"
    assert all(row[3].text == "never" for row in panel.table.rows)


def test_indexing_without_a_worker_and_with_an_empty_queue(admin_http):
    panel = panels(dashboard(admin_http))["Knowledge indexing"]
    shown = facts(panel)
    assert shown["Worker heartbeat"][:2] == ("no worker", "bad")
    assert "manage.py knowledge_worker" in shown["Worker heartbeat"][2]
    assert shown["Queue"][:2] == ("empty", "ok")
    assert shown["Indexing lag"][0] == "none"
    assert shown["Failed documents"][:2] == ("0", "ok")


def test_indexing_shows_heartbeat_age_queue_depth_failures_and_lag(admin_http, settings):
    settings.BAILING_WORKER_HEARTBEAT_MAX_AGE = 30
    now = timezone.now()
    WorkerHeartbeat.objects.create(
        worker="host-a:1", started_at=now - timedelta(hours=1), seen_at=now - timedelta(seconds=4)
    )
    WorkerHeartbeat.objects.create(
        worker="host-b:2", started_at=now - timedelta(hours=2), seen_at=now - timedelta(hours=1)
    )
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    for key, status, enqueued, lease in (
        ("a", "embedding", now - timedelta(minutes=7, seconds=3), now + timedelta(minutes=5)),
        ("b", "embedding", now - timedelta(minutes=1), None),
        ("c", "error", now - timedelta(hours=3), None),
        ("d", "ready", now - timedelta(hours=4), None),
    ):
        Document.objects.create(
            kb=kb,
            source_key=key,
            title=key,
            content="Text.",
            revision="0" * 64,
            status=status,
            enqueued_at=enqueued,
            lease_until=lease,
        )

    shown = facts(panels(dashboard(admin_http))["Knowledge indexing"])

    value, tone, note = shown["Worker heartbeat"]
    assert tone == "ok" and value.endswith(" s ago") and int(value.split()[0]) in range(4, 9)
    assert note == "1 worker alive"
    assert shown["Queue"] == ("2 waiting", "warn", "1 being indexed now")
    assert shown["Indexing lag"][0].startswith("7 min ")
    assert shown["Failed documents"][:2] == ("1", "bad")


def test_a_stale_heartbeat_is_bad(admin_http, settings):
    settings.BAILING_WORKER_HEARTBEAT_MAX_AGE = 30
    now = timezone.now()
    WorkerHeartbeat.objects.create(worker="host-a:1", started_at=now, seen_at=now - timedelta(minutes=5))
    value, tone, note = facts(panels(dashboard(admin_http))["Knowledge indexing"])["Worker heartbeat"]
    assert value.startswith("5 min") and value.endswith(" ago")
    assert (tone, note) == ("bad", "stale: older than 30 s")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0, "0 s"),
        (4.4, "4 s"),
        (60, "1 min"),
        (185, "3 min 5 s"),
        (7200, "2 h"),
        (7800, "2 h 10 min"),
        (86_400 * 3 + 3_600 * 4 + 59, "3 d 4 h"),
        (86_400, "1 d"),
    ],
)
def test_durations_read_as_people_say_them(seconds, text):
    from bailing.ui.tables import duration

    assert duration(seconds) == text


def test_pending_approvals_oldest_first_with_the_inbox_link(approver):
    route = RouteFactory(route_key="writer")
    for n, minutes in enumerate((3, 90, 10, 1, 45, 20)):
        pending_approval(tool=f"tool_{n}", route=route, waited=timedelta(minutes=minutes))
    decided = pending_approval(tool="decided", route=route, waited=timedelta(days=1))
    ToolApproval.objects.filter(pk=decided.pk).update(status="approved")

    panel = panels(dashboard(signed_in(approver)))["Pending approvals"]

    # What each call would do (these tools declare no prompt: their request), tool and workspace under it.
    assert [row[1] for row in cells(panel.table)] == [
        f"Call tool_{n} (POST /tool_{n})?" for n in (1, 4, 5, 2, 0)
    ]
    assert cells(panel.table)[0][2] == "1 h 30 min"
    expires = panel.table.rows[0][2].sub
    assert expires.startswith("expires in 22 h 29 min") or expires.startswith("expires in 22 h 30")
    assert panel.table.rows[0][1].sub.startswith("tool_1 · writer · ")
    assert panel.note == "6 pending, the 5 oldest shown"
    assert panel.more_url == reverse("console:approval_list") + "?status=pending"
    assert panel.more_label == "Open the approvals inbox (6 pending)"


def test_the_pending_panel_leads_with_what_each_call_would_do(approver):
    waiting = pending_approval(
        tool="refund_create", route=RouteFactory(route_key="writer"), waited=timedelta()
    )
    ToolApproval.objects.filter(pk=waiting.pk).update(summary="Refund 650 on order SO-1002? " + "x" * 200)
    (row,) = panels(dashboard(signed_in(approver)))["Pending approvals"].table.rows
    assert row[1].text.startswith("Refund 650 on order SO-1002? xxx") and row[1].text.endswith("…")
    assert len(row[1].text) == 90
    assert row[1].href == reverse("console:approval_detail", args=[waiting.pk])


def test_the_unknown_outcomes_card_alarms_only_when_a_call_needs_an_operator(admin_http):
    from agent_runtime.models import ToolCallJournal, ToolInvocation
    from tests.factories import ToolInvocationFactory

    def card():
        (found,) = [c for c in dashboard(admin_http).context["cards"] if c.label == "Unknown outcomes"]
        return found

    calm = card()
    assert (calm.value, calm.alarm) == (0, False)
    unknown = ToolInvocationFactory(status=ToolInvocation.Status.RECONCILIATION_REQUIRED)
    journal = ToolCallJournal.objects.create(invocation=unknown, state="uncertain", idempotency_key="k")
    alarm = card()
    assert (alarm.value, alarm.alarm) == (1, True)
    assert alarm.url == reverse("console:invocation_list") + "?state=reconciliation_required"
    html = dashboard(admin_http).content.decode()
    assert 'class="stat stat-alarm"' in html and "needs an operator" in html
    ToolCallJournal.objects.filter(pk=journal.pk).update(resolution="not_executed")
    assert (card().value, card().alarm) == (0, False)  # resolved: nobody is needed any more


def test_no_pending_approvals_reads_well(approver):
    response = dashboard(signed_in(approver))
    panel = panels(response)["Pending approvals"]
    assert panel.table.rows == [] and panel.note == "none pending"
    assert "No tool call is waiting for a decision." in response.content.decode()
    assert "No tool providers yet" in response.content.decode()


def test_panels_follow_the_permissions(console_roles, no_role_user):
    assert dashboard(signed_in(no_role_user)).context["panels"] == []
    for role in ("administrator", "approver", "auditor"):
        shown = set(panels(dashboard(signed_in(UserFactory(roles=[role])))))
        assert shown == {"Tool provider health", "Knowledge indexing", "Pending approvals"}
    user = UserFactory()
    user.user_permissions.add(Permission.objects.get(codename="view_toolapproval"))
    assert set(panels(dashboard(signed_in(user)))) == {"Pending approvals"}


def test_the_dashboard_costs_the_same_with_many_rows(admin_http):
    seed_overview()
    route = Route.objects.get(route_key="writer")

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            dashboard(admin_http)
        return len(queries)

    pending_approval(tool="first", route=route, waited=timedelta(minutes=1))
    before = page_queries()
    for n in range(6):
        pending_approval(tool=f"more_{n}", route=route, waited=timedelta(minutes=2 + n))
        ToolProviderFactory(name=f"extra-{n}")
        WorkerHeartbeat.objects.create(worker=f"w{n}", started_at=timezone.now(), seen_at=timezone.now())
    assert page_queries() == before
    assert before <= 30
