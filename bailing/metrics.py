"""Prometheus metrics (``prometheus-client``), exposed at ``GET /metrics`` to holders of a token.

``BAILING_METRICS_TOKEN`` unset (the default): the endpoint answers 404, like any unknown path. Set:
a scrape must send ``Authorization: Bearer <token>`` (compared in constant time), else 404 too, so
the endpoint's existence is not advertised.

Two kinds of metric:

* **Counted in the process** (counters, histograms): requests by route template and status
  (:func:`request_observe`, from ``bailing.request_context``), audit appends, and whatever an app
  defines with ``prometheus_client`` itself (knowledge: search latency by lane). Under gunicorn
  several worker processes count separately; with ``PROMETHEUS_MULTIPROC_DIR`` set (the gunicorn
  conf sets and empties it at start, and marks dead workers with ``child_exit``) every process writes
  its values to files there and a scrape sums them (``prometheus_client.multiprocess``).
* **Computed at scrape** from the database (gauges): what is true of the hub as a whole, whichever
  process answers: approvals pending, invocations by status, the knowledge queue, the audit
  ledger's unsealed tail. An app registers a
  function with :func:`metrics_collector_register` from its ``AppConfig.ready()``; each yields
  ``prometheus_client`` metric families. A collector that fails is left out of that scrape (logged).
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Iterable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import Metric

logger = logging.getLogger("bailing.metrics")

# Seconds; from a fast 404 to a slow agent call.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUESTS = Counter(
    "bailing_http_requests", "HTTP requests answered, by route template and status", ["route", "status"]
)
REQUEST_SECONDS = Histogram(
    "bailing_http_request_duration_seconds",
    "Time to answer a request, by route template",
    ["route"],
    buckets=LATENCY_BUCKETS,
)
AUDIT_APPEND_SECONDS = Histogram(
    "bailing_audit_append_duration_seconds",
    "Time to append a batch of events to the audit ledger (normalise, hash, insert; no lock)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)


def request_observe(route: str, status: int, seconds: float) -> None:
    REQUESTS.labels(route=route, status=str(status)).inc()
    REQUEST_SECONDS.labels(route=route).observe(seconds)


ScrapeCollector = Callable[[], Iterable[Metric]]
_SCRAPE_COLLECTORS: list[tuple[str, ScrapeCollector]] = []


def metrics_collector_register(name: str, collect: ScrapeCollector) -> None:
    """Add a function computing metric families at each scrape (names are unique)."""
    if any(existing == name for existing, _ in _SCRAPE_COLLECTORS):
        raise ValueError(f"metrics collector {name!r} is registered already")
    _SCRAPE_COLLECTORS.append((name, collect))


class _ScrapeTime:
    def collect(self) -> Iterable[Metric]:
        for name, collect in _SCRAPE_COLLECTORS:
            try:
                families = list(collect())
            except Exception as exc:  # one broken collector never breaks the scrape
                logger.error("metrics collector %s raised %s", name, type(exc).__name__)
                continue
            yield from families


def metrics_exposition() -> tuple[bytes, str]:
    """The text exposition of every metric: summed over processes in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted)
    else:
        counted = REGISTRY  # one process (runserver, tests): its own values
    scraped = CollectorRegistry()
    scraped.register(_ScrapeTime())
    return generate_latest(counted) + generate_latest(scraped), CONTENT_TYPE_LATEST


def metrics_authorized(request, token: str) -> bool:
    if not token:
        return False
    given = request.META.get("HTTP_AUTHORIZATION", "")
    return hmac.compare_digest(given.encode("latin-1", "replace"), f"Bearer {token}".encode())


def metrics_view(request):
    """``GET /metrics``: the exposition for a bearer of ``BAILING_METRICS_TOKEN``; 404 otherwise."""
    from django.conf import settings
    from django.http import Http404, HttpResponse

    if request.method != "GET" or not metrics_authorized(request, settings.BAILING_METRICS_TOKEN):
        raise Http404
    body, content_type = metrics_exposition()
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
