"""The knowledge app's metrics (``bailing.metrics``).

``bailing_knowledge_search_lane_duration_seconds{lane}``: time of one KB's lane statement, lexical,
vector or ``hybrid`` (both lanes in one statement), its freshness check included (counted in the
process). At scrape: ``bailing_knowledge_queue_depth`` (documents waiting for
``knowledge_worker``) and ``bailing_knowledge_indexing_lag_seconds`` (age of the oldest of them; 0 when
the queue is empty).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

SEARCH_LANE_SECONDS = Histogram(
    "bailing_knowledge_search_lane_duration_seconds",
    "Time of one knowledge base's retrieval lane statement, by lane (hybrid: both)",
    ["lane"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


def queue_metrics() -> Iterable[Metric]:
    from knowledge.models import Document

    queue = Document.objects.filter(status=Document.Status.EMBEDDING).aggregate(
        depth=Count("id"), oldest=Min("enqueued_at")
    )
    yield GaugeMetricFamily(
        "bailing_knowledge_queue_depth", "Documents waiting to be indexed", value=queue["depth"]
    )
    lag = (timezone.now() - queue["oldest"]).total_seconds() if queue["oldest"] else 0.0
    yield GaugeMetricFamily(
        "bailing_knowledge_indexing_lag_seconds",
        "Age of the oldest document waiting to be indexed",
        value=lag,
    )
