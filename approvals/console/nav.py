"""The operators' app in the console navigation: audit history (and its dashboard card)."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from bailing.audit.models import AuditEvent
from bailing.ui.nav import Card, NavItem
from bailing.ui.tables import utc_iso

NAV = [NavItem(90, "Audit history", "console:audit_list", "bailing.view_auditevent")]


def dashboard_cards(user) -> list[Card]:
    if not user.has_perm("bailing.view_auditevent"):
        return []
    since = timezone.now() - timedelta(hours=24)
    return [
        Card(
            90,
            "Audit events, last 24 h",
            AuditEvent.objects.filter(created_at__gte=since).count(),
            f"since {utc_iso(since)}",
            reverse("console:audit_list") + "?since=" + since.strftime("%Y-%m-%dT%H:%M:%S"),
        )
    ]
