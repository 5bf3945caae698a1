"""The operators' app in the console navigation (approvals with a pending count, tool calls, audit
history) and its dashboard cards."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from approvals.console.approvals import sentence_cell
from approvals.selectors import (
    approvals_pending_count,
    approvals_pending_oldest,
    audit_events_since_count,
    invocations_unresolved_count,
)
from bailing.ui import tables
from bailing.ui.nav import Card, NavItem
from bailing.ui.sections import Panel
from bailing.ui.tables import utc_iso

PENDING_PANEL_ROWS = 5
# The panel is half the dashboard's width: a shorter start of each sentence than the inbox shows.
PANEL_SENTENCE_CHARS = 90


def _pending(user) -> int | None:
    return approvals_pending_count() or None


NAV = [
    NavItem(70, "Approvals", "console:approval_list", "agent_runtime.view_toolapproval", badge=_pending),
    NavItem(75, "Tool calls", "console:invocation_list", "agent_runtime.view_toolinvocation"),
    NavItem(90, "Audit history", "console:audit_list", "bailing.view_auditevent"),
]


def dashboard_cards(user) -> list[Card]:
    cards = []
    if user.has_perm("agent_runtime.view_toolapproval"):
        cards.append(
            Card(
                50,
                "Approvals pending",
                approvals_pending_count(),
                "tool calls waiting for a decision",
                reverse("console:approval_list") + "?status=pending",
            )
        )
    if user.has_perm("agent_runtime.view_toolinvocation"):
        unresolved = invocations_unresolved_count()
        cards.append(
            Card(
                60,
                "Unknown outcomes",
                unresolved,
                "tool calls to look up in the business system and resolve: open them"
                if unresolved
                else "no tool call waits for reconciliation",
                reverse("console:invocation_list") + "?state=reconciliation_required",
                alarm=unresolved > 0,
            )
        )
    if user.has_perm("bailing.view_auditevent"):
        since = timezone.now() - timedelta(hours=24)
        cards.append(
            Card(
                90,
                "Audit events, last 24 h",
                audit_events_since_count(since=since),
                f"since {utc_iso(since)}",
                reverse("console:audit_list") + "?since=" + since.strftime("%Y-%m-%dT%H:%M:%S"),
            )
        )
    return cards


def dashboard_panels(user) -> list[Panel]:
    """The approvals that have waited longest, for users who may read the inbox."""
    if not user.has_perm("agent_runtime.view_toolapproval"):
        return []
    pending = approvals_pending_count()
    # Three columns, so the sentence has room in a half-width card: the tool, workspace and client
    # ride under it, the expiry under the waiting time.
    table = tables.Table(
        ["Approval", "What it would do", "Waiting"],
        empty="No tool call is waiting for a decision.",
    )
    now = timezone.now()
    for approval in approvals_pending_oldest(PENDING_PANEL_ROWS) if pending else []:
        expires = approval.expires_at
        sentence = sentence_cell(approval, limit=PANEL_SENTENCE_CHARS)
        table.rows.append(
            [
                tables.mono(f"#{approval.pk}", href=reverse("console:approval_detail", args=[approval.pk])),
                replace(sentence, sub=f"{sentence.sub} · {approval.invocation.client.app_id}"),
                tables.Cell(
                    tables.duration((now - approval.created_at).total_seconds()),
                    kind="mono",
                    sub="expires in " + tables.duration((expires - now).total_seconds())
                    if expires
                    else "never expires",
                    title=f"requested {tables.utc_iso(approval.created_at)}"
                    + (f", expires {tables.utc_iso(expires)}" if expires else ""),
                ),
            ]
        )
    if pending > PENDING_PANEL_ROWS:
        note = f"{pending} pending, the {PENDING_PANEL_ROWS} oldest shown"
    else:
        note = f"{pending} pending" if pending else "none pending"
    return [
        Panel(
            order=50,
            title="Pending approvals",
            note=note,
            table=table,
            more_url=reverse("console:approval_list") + "?status=pending",
            more_label=f"Open the approvals inbox ({pending} pending)"
            if pending
            else "Open the approvals inbox",
        )
    ]
