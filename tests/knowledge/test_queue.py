"""The indexing queue: leases, concurrency, the attempts cap and the worker command."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from knowledge.management.commands import knowledge_worker
from knowledge.models import Chunk, Document
from knowledge.services.queue import INDEXING_FAILED, MAX_ATTEMPTS, documents_claim
from tests.factories import KnowledgeBaseFactory, knowledge_document


def _lexical_kb():
    return KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)


def _queued(kb, count: int) -> list[Document]:
    return [
        knowledge_document(kb, f"doc-{i:03d}", f"Doc {i}", f"Paragraph {i} about refunds.", index=False)
        for i in range(count)
    ]


@pytest.mark.django_db
def test_claim_leases_oldest_first_and_counts_attempts():
    kb = _lexical_kb()
    docs = _queued(kb, 3)
    Document.objects.filter(pk=docs[0].pk).update(enqueued_at=timezone.now() + timedelta(seconds=5))
    claimed = documents_claim(limit=2, lease_seconds=60)
    assert claimed == [docs[1].pk, docs[2].pk]
    for doc in Document.objects.filter(pk__in=claimed):
        assert doc.attempts == 1
        assert doc.lease_until > timezone.now() + timedelta(seconds=50)
    # Leased rows are not claimed again while the lease holds.
    assert documents_claim(limit=10, lease_seconds=60) == [docs[0].pk]
    assert documents_claim(limit=10, lease_seconds=60) == []


@pytest.mark.django_db
def test_ready_and_error_documents_are_not_queued():
    kb = _lexical_kb()
    knowledge_document(kb, "ready", "Ready", "Indexed already.")
    failed = knowledge_document(kb, "failed", "Failed", "Broken.", index=False)
    Document.objects.filter(pk=failed.pk).update(status=Document.Status.ERROR, error="x")
    assert documents_claim(limit=10, lease_seconds=60) == []


@pytest.mark.django_db
def test_expired_lease_is_reclaimed():
    kb = _lexical_kb()
    (doc,) = _queued(kb, 1)
    assert documents_claim(limit=1, lease_seconds=60) == [doc.pk]
    assert documents_claim(limit=1, lease_seconds=60) == []
    Document.objects.filter(pk=doc.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert documents_claim(limit=1, lease_seconds=60) == [doc.pk]
    doc.refresh_from_db()
    assert doc.attempts == 2


@pytest.mark.django_db
def test_attempts_cap_moves_the_document_to_error():
    kb = _lexical_kb()
    poison, healthy = _queued(kb, 2)
    Document.objects.filter(pk=poison.pk).update(attempts=MAX_ATTEMPTS - 1)
    assert documents_claim(limit=1, lease_seconds=60) == [poison.pk]  # the last allowed lease
    Document.objects.filter(pk=poison.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert documents_claim(limit=10, lease_seconds=60) == [healthy.pk]
    poison.refresh_from_db()
    assert (poison.status, poison.error, poison.lease_until) == ("error", INDEXING_FAILED, None)
    assert poison.attempts == MAX_ATTEMPTS


@pytest.mark.django_db
def test_put_after_failure_requeues_with_fresh_attempts():
    from bailing.audit.actor import Actor
    from knowledge.services.documents import document_put

    kb = _lexical_kb()
    (doc,) = _queued(kb, 1)
    Document.objects.filter(pk=doc.pk).update(attempts=MAX_ATTEMPTS, status="error", error=INDEXING_FAILED)
    document_put(kb=kb, source_key=doc.source_key, title=doc.title, content=doc.content, actor=Actor.system())
    assert documents_claim(limit=1, lease_seconds=60) == [doc.pk]


def test_claim_rejects_nonpositive_arguments():
    with pytest.raises(ValueError):
        documents_claim(limit=0, lease_seconds=60)


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_never_claim_the_same_document():
    kb = _lexical_kb()
    expected = {doc.pk for doc in _queued(kb, 60)}
    barrier = threading.Barrier(4)
    claims: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def worker(slot: int) -> None:
        try:
            barrier.wait()
            while True:
                ids = documents_claim(limit=3, lease_seconds=60)
                if not ids:
                    break
                claims[slot].extend(ids)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    everything = [pk for claim in claims for pk in claim]
    assert len(everything) == len(set(everything))  # no document claimed twice
    assert set(everything) == expected
    assert sum(1 for claim in claims if claim) >= 2  # the workers really ran side by side
    assert set(Document.objects.values_list("attempts", flat=True)) == {1}


@pytest.mark.django_db
def test_worker_once_drains_the_queue():
    kb = _lexical_kb()
    docs = _queued(kb, 5)
    call_command("knowledge_worker", "--once", "--batch", "2")
    for doc in docs:
        doc.refresh_from_db()
        assert doc.status == Document.Status.READY
        assert doc.lease_until is None
        assert doc.chunk_count == Chunk.objects.filter(document=doc).count() >= 1
    assert documents_claim(limit=10, lease_seconds=60) == []


@pytest.mark.django_db
def test_worker_indexes_one_by_one_when_a_batch_crashes(monkeypatch):
    kb = _lexical_kb()
    docs = _queued(kb, 3)

    def crash(**kwargs):
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(knowledge_worker, "documents_index", crash)
    call_command("knowledge_worker", "--once")
    assert set(Document.objects.filter(pk__in=[d.pk for d in docs]).values_list("status", flat=True)) == {
        "ready"
    }


@pytest.mark.django_db
def test_worker_rejects_bad_arguments():
    with pytest.raises(CommandError):
        call_command("knowledge_worker", "--once", "--batch", "0")
    with pytest.raises(CommandError):
        call_command("knowledge_worker", "--once", "--lease", "0")
