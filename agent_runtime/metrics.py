"""The agent runtime's metrics, computed at each scrape from the database (``bailing.metrics``).

``bailing_tool_invocations{status}``: invocations recorded, by status (executed, denied, ...): a
gauge of rows, so every gunicorn process and every restart agrees (rate() over it still works while
rows are only ever added). ``bailing_approvals_pending``: approvals waiting for a decision.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count
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
    pending = ToolApproval.objects.filter(status=ToolApproval.Status.PENDING).count()
    yield GaugeMetricFamily("bailing_approvals_pending", "Approvals waiting for a decision", value=pending)
