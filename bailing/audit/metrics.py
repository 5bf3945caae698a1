"""Scrape-time gauges of the audit ledger's unsealed tail (registered in ``BailingConfig.ready``).

A tail that keeps growing or ageing means sealing is stuck: no append has committed since the
last events (nothing asked for a seal), or a sealer holds the lock (docs/audit.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric


def audit_tail_metrics() -> Iterable[Metric]:
    from bailing.audit.models import AuditEvent

    tail = AuditEvent.objects.filter(chain_seq__isnull=True).aggregate(
        n=Count("id"), oldest=Min("created_at")
    )
    yield GaugeMetricFamily(
        "bailing_audit_unsealed_events",
        "Audit events recorded but not yet sealed into the chain",
        value=tail["n"],
    )
    age = max(0.0, (timezone.now() - tail["oldest"]).total_seconds()) if tail["oldest"] else 0.0
    yield GaugeMetricFamily(
        "bailing_audit_unsealed_oldest_seconds", "Age of the oldest audit event not yet sealed", value=age
    )
