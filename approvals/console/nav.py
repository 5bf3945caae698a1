"""The operators' app in the console navigation (approvals with a pending count, tool calls, audit
history) and its dashboard cards."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from approvals.selectors import approvals_pending_count, invocations_unresolved_count
from bailing.audit.models import AuditEvent
from bailing.ui.nav import Card, NavItem
from bailing.ui.tables import utc_iso


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
        cards.append(
            Card(
                60,
                "Unknown outcomes",
                invocations_unresolved_count(),
                "tool calls to reconcile with the business system",
                reverse("console:invocation_list") + "?state=reconciliation_required",
            )
        )
    if user.has_perm("bailing.view_auditevent"):
        since = timezone.now() - timedelta(hours=24)
        cards.append(
            Card(
                90,
                "Audit events, last 24 h",
                AuditEvent.objects.filter(created_at__gte=since).count(),
                f"since {utc_iso(since)}",
                reverse("console:audit_list") + "?since=" + since.strftime("%Y-%m-%dT%H:%M:%S"),
            )
        )
    return cards
