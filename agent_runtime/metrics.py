"""The agent runtime's metrics, computed at each scrape from the database (``bailing.metrics``).

``bailing_tool_invocations{status}``: invocations recorded, by status (executed, denied, ...): a
gauge of rows, so every gunicorn process and every restart agrees (rate() over it still works while
rows are only ever added). ``bailing_approvals_pending``: approvals waiting for a decision, and
``bailing_approvals_pending_oldest_seconds``: how long the oldest of them has waited (0 when none),
both from one statement on the ``(status, created_at)`` index.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric


def invocation_metrics() -> Iterable[Metric]:
    from agent_runtime.models.invocations import ToolApproval, ToolInvocation

    by_status = GaugeMetricFamily(
        "bailing_tool_invocations", "Tool invocations recorded, by status", labels=["status"]
    )
    counts = dict(
        ToolInvocation.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    for status in ToolInvocation.Status.values:
        by_status.add_metric([status], counts.get(status, 0))
    yield by_status
    pending = ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).aggregate(
        n=Count("id"), oldest=Min("created_at")
    )
    yield GaugeMetricFamily(
        "bailing_approvals_pending", "Approvals waiting for a decision", value=pending["n"]
    )
    age = max(0.0, (timezone.now() - pending["oldest"]).total_seconds()) if pending["oldest"] else 0.0
    yield GaugeMetricFamily(
        "bailing_approvals_pending_oldest_seconds",
        "How long the oldest approval waiting for a decision has waited",
        value=age,
    )
