"""/health/ready's knowledge checks: the embedding providers the bases use, and a recent worker."""

from __future__ import annotations

import io
import os
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from bailing import health
from knowledge import readiness
from knowledge.embeddings import EmbeddingError
from knowledge.models import KnowledgeBase, WorkerHeartbeat
from knowledge.services.heartbeat import heartbeat_record

pytestmark = pytest.mark.django_db


def checks() -> tuple[int, dict]:
    response = Client().get("/health/ready")
    return response.status_code, response.json()["checks"]


def test_no_worker_is_not_ready_and_says_so():
    status, found = checks()
    assert status == 503
    assert found["knowledge_worker"] == {"ok": False, "error": "no_worker", "max_age_s": 60}
    assert found["database"]["ok"] and found["migrations"] == {"ok": True, "unapplied": 0}


def test_a_recent_heartbeat_is_ready_and_an_old_one_is_stale(settings):
    heartbeat_record("host:1", started_at=timezone.now())
    status, found = checks()
    assert status == 200
    assert found["knowledge_worker"]["ok"] is True
    assert found["knowledge_worker"]["workers"] == 1
    WorkerHeartbeat.objects.update(seen_at=timezone.now() - timedelta(seconds=61))
    status, found = checks()
    assert status == 503
    assert found["knowledge_worker"]["error"] == "heartbeat_stale"
    assert found["knowledge_worker"]["age_s"] >= 61
    settings.BAILING_WORKER_HEARTBEAT_MAX_AGE = 120
    assert checks()[1]["knowledge_worker"]["ok"] is True


def test_the_worker_heartbeats_while_polling_and_forgets_itself_on_stop(monkeypatch):
    from knowledge.management.commands import knowledge_worker

    seen = []

    def claim(**kwargs):
        seen.append(list(WorkerHeartbeat.objects.values_list("worker", flat=True)))
        return []

    monkeypatch.setattr(knowledge_worker, "documents_claim", claim)
    call_command("knowledge_worker", once=True, stdout=io.StringIO())
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0].endswith(f":{os.getpid()}")
    assert not WorkerHeartbeat.objects.exists()


def test_embedding_is_ok_without_bases_and_checks_the_local_model_once(monkeypatch):
    heartbeat_record("host:1", started_at=timezone.now())
    assert checks()[1]["embedding"] == {"ok": True, "providers": {}}
    KnowledgeBase.objects.create(kb_id="docs", name="Docs")
    loads = []
    monkeypatch.setattr(readiness, "_local_loaded", False)

    def failing_load(self):
        loads.append(1)
        raise EmbeddingError("embedding_model_unavailable")

    from knowledge.embeddings import LocalMiniLMProvider

    monkeypatch.setattr(LocalMiniLMProvider, "load", failing_load)
    status, found = checks()
    assert status == 503
    assert found["embedding"] == {"ok": False, "providers": {"local": "embedding_model_unavailable"}}
    monkeypatch.setattr(LocalMiniLMProvider, "load", lambda self: loads.append(1))
    assert checks()[1]["embedding"] == {"ok": True, "providers": {"local": "ok"}}
    assert checks()[1]["embedding"]["ok"] is True
    assert len(loads) == 2  # the positive answer is kept


def test_an_unreachable_remote_provider_is_not_ready(monkeypatch):
    KnowledgeBase.objects.create(
        kb_id="remote",
        name="Remote",
        embedding_provider="openai",
        embedding_model="m",
        embedding_dim=8,
        embedding_config={"base_url": "http://127.0.0.1:9/v1"},
    )
    found = checks()[1]
    assert found["embedding"] == {"ok": False, "providers": {"openai:remote": "embedding_unreachable"}}


def test_unapplied_migrations_are_counted(monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    monkeypatch.setattr(health, "_MIGRATIONS_APPLIED", False)
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("m", False)] * 2)
    assert checks()[1]["migrations"] == {"ok": False, "unapplied": 2}
