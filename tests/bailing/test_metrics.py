"""GET /metrics: hidden without the token, a parsable exposition with it, counters that move."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from bailing import metrics

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-for-tests"


@pytest.fixture
def scrape(settings):
    settings.BAILING_METRICS_TOKEN = TOKEN

    def get() -> dict[str, dict[tuple, float]]:
        response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain")
        samples: dict[str, dict[tuple, float]] = {}
        for family in text_string_to_metric_families(response.content.decode()):
            for sample in family.samples:
                samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
        return samples

    return get


def test_without_a_token_setting_the_endpoint_is_a_404(settings):
    settings.BAILING_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


def test_a_wrong_or_missing_token_is_a_404(settings):
    settings.BAILING_METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 404
    assert Client().get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 404
    assert Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


def test_request_counters_move_by_route_template_and_status(scrape):
    key = (("route", "health"), ("status", "200"))
    before = scrape().get("bailing_http_requests_total", {}).get(key, 0.0)
    Client().get("/health")
    Client().get("/health")
    after = scrape()
    assert after["bailing_http_requests_total"][key] == before + 2
    assert after["bailing_http_request_duration_seconds_count"][(("route", "health"),)] >= 2
    assert all("nowhere" not in str(labels) for labels in after["bailing_http_requests_total"])


def test_scrape_time_gauges_and_the_audit_histogram(scrape):
    from django.db import transaction

    from bailing.audit.actor import Actor
    from bailing.audit.ledger import audit_record
    from knowledge.models import Document, KnowledgeBase

    before = scrape()
    with transaction.atomic():
        audit_record(actor=Actor.system("pytest"), action="test.metrics")
    kb = KnowledgeBase.objects.create(kb_id="m", name="M")
    Document.objects.create(
        kb=kb,
        source_key="a",
        title="t",
        content="c",
        revision="r",
        enqueued_at=timezone.now() - timedelta(seconds=30),
    )
    after = scrape()
    assert after["bailing_audit_append_duration_seconds_count"][()] == (
        before.get("bailing_audit_append_duration_seconds_count", {}).get((), 0) + 1
    )
    assert after["bailing_knowledge_queue_depth"][()] == 1
    assert after["bailing_knowledge_indexing_lag_seconds"][()] >= 30
    assert after["bailing_approvals_pending"][()] == 0
    assert after["bailing_tool_invocations"][(("status", "executed"),)] == 0


def test_pending_approvals_and_the_age_of_the_oldest(scrape):
    from agent_runtime.models import ToolApproval
    from tests.factories import RouteFactory
    from tests.support.console_overview import pending_approval

    empty = scrape()
    assert empty["bailing_approvals_pending"][()] == 0
    assert empty["bailing_approvals_pending_oldest_seconds"][()] == 0
    route = RouteFactory(route_key="metrics-desk")
    pending_approval(tool="refund", route=route, waited=timedelta(minutes=10))
    pending_approval(tool="cancel", route=route, waited=timedelta(seconds=5))
    decided = pending_approval(tool="close", route=route, waited=timedelta(hours=3))
    ToolApproval.objects.filter(pk=decided.pk).update(status=ToolApproval.Status.APPROVED)
    after = scrape()
    assert after["bailing_approvals_pending"][()] == 2
    # the oldest still waiting (10 minutes), not the older one already decided
    assert 600 <= after["bailing_approvals_pending_oldest_seconds"][()] < 3600


def test_a_broken_collector_is_left_out_of_the_scrape(scrape, monkeypatch):
    monkeypatch.setattr(metrics, "_SCRAPE_COLLECTORS", list(metrics._SCRAPE_COLLECTORS))

    def broken():
        raise KeyError("never shown")

    metrics.metrics_collector_register("broken", broken)
    with pytest.raises(ValueError):
        metrics.metrics_collector_register("broken", broken)
    assert "bailing_approvals_pending" in scrape()


@pytest.mark.django_db(transaction=True)
def test_under_gunicorn_the_workers_counts_are_summed(tmp_path):
    """The production topology (front + gunicorn with several workers), multiprocess mode."""
    import urllib.request

    from front.launcher import hub_running

    env = {
        "BAILING_METRICS_TOKEN": TOKEN,
        "GUNICORN_WORKERS": "3",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "m"),
    }
    with hub_running(extra_env=env) as url:
        for _ in range(12):
            with urllib.request.urlopen(f"{url}/health") as response:
                assert response.headers["X-Request-Id"]
        request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request) as response:
            text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    # wait_answering's probes count too: at least the twelve asked here, summed over the workers
    assert samples[("bailing_http_requests_total", (("route", "health"), ("status", "200")))] >= 12
    # (the hub started here runs on the development database, which may not be migrated: a
    # scrape-time collector failing there is left out, the counted metrics are still answered)
    assert ("bailing_audit_append_duration_seconds_count", ()) in samples
