"""Parallel writers on one knowledge base keep the lexical index and its statistics exact.

Threads put, replace, delete and index the same few ``source_key``s of one KB at once (the push API,
the console and several ``knowledge_worker`` processes do exactly this). Afterwards, and whatever the
interleaving, the BM25 statistics must equal what the postings and chunks say, and every chunk must
belong to a current document. Real PostgreSQL, real transactions; each thread closes its connection.
"""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection

from bailing.audit.actor import Actor
from knowledge.models import Chunk, Document, KnowledgeBaseStats, TermStat
from knowledge.services.documents import document_delete, document_put
from knowledge.services.indexing import documents_index
from knowledge.services.queue import documents_claim
from tests.factories import KnowledgeBaseFactory

KEYS = ["alpha", "beta"]
WORDS = [
    "refund",
    "shipping",
    "parcel",
    "invoice",
    "warehouse",
    "approval",
    "customer",
    "delivery",
    "return",
    "card",
]
THREADS = 6
ROUNDS = 40


def _text(rng: random.Random) -> str:
    paragraphs = [" ".join(rng.choices(WORDS, k=rng.randint(3, 40))) + "." for _ in range(rng.randint(1, 4))]
    return "\n\n".join(paragraphs)


def _assert_index_consistent(kb) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.term, count(*) FROM knowledge_posting p JOIN knowledge_chunk c ON c.id = p.chunk_id "
            "WHERE c.kb_id = %s GROUP BY p.term",
            [kb.pk],
        )
        df_from_postings = dict(cursor.fetchall())
        cursor.execute("SELECT count(*) FROM knowledge_posting WHERE kb_id <> %s", [kb.pk])
        assert cursor.fetchone()[0] == 0
    assert dict(TermStat.objects.filter(kb=kb).values_list("term", "df")) == df_from_postings
    chunks = list(Chunk.objects.filter(kb=kb).values("document_id", "revision", "length"))
    stats = KnowledgeBaseStats.objects.get(kb=kb)
    assert (stats.chunks, stats.tokens) == (len(chunks), sum(chunk["length"] for chunk in chunks))
    documents = {doc.pk: doc for doc in Document.objects.filter(kb=kb)}
    for doc in documents.values():
        if doc.status == Document.Status.READY:
            mine = [chunk for chunk in chunks if chunk["document_id"] == doc.pk]
            assert len(mine) == doc.chunk_count
            assert {chunk["revision"] for chunk in mine} <= {doc.revision}
    # Every chunk belongs to an existing document (deleted documents leave nothing behind).
    assert {chunk["document_id"] for chunk in chunks} <= set(documents)


@pytest.mark.django_db(transaction=True)
def test_parallel_puts_deletes_and_workers_keep_statistics_exact():
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []
    counts = {"put": 0, "delete": 0, "index": 0}
    lock = threading.Lock()

    def writer(slot: int) -> None:
        rng = random.Random(slot)
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                action = rng.choice(["put", "put", "delete", "index", "index"])
                key = rng.choice(KEYS)
                if action == "put":
                    document_put(
                        kb=kb, source_key=key, title=key.title(), content=_text(rng), actor=Actor.system()
                    )
                elif action == "delete":
                    document_delete(kb=kb, source_key=key, actor=Actor.system())
                else:
                    ids = documents_claim(limit=2, lease_seconds=60)
                    if ids:
                        documents_index(document_ids=ids)
                with lock:
                    counts[action] += 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(slot,)) for slot in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    assert all(counts.values())
    _assert_index_consistent(kb)

    # Drain the queue: every surviving document ends ready with exactly its current chunks.
    while ids := documents_claim(limit=10, lease_seconds=60):
        documents_index(document_ids=ids)
    _assert_index_consistent(kb)
    for doc in Document.objects.filter(kb=kb):
        assert doc.status == Document.Status.READY
        assert set(Chunk.objects.filter(document=doc).values_list("revision", flat=True)) == {doc.revision}
