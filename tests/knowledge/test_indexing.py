"""Indexing a document: chunks are exact slices, postings and BM25 statistics stay consistent."""

from __future__ import annotations

import pytest
from django.db import connection

from bailing.audit.actor import Actor
from knowledge.models import Chunk, Document, KnowledgeBaseStats, Posting, TermStat
from knowledge.services.documents import document_delete, document_put
from knowledge.services.indexing import document_index
from knowledge.vectors import VECTOR_TABLE, vector_storage_ready
from tests.factories import KnowledgeBaseFactory, knowledge_document

pytestmark = pytest.mark.django_db

REFUNDS = "# Refunds\n\nRefunds are paid within 14 days.\n\nRefund requests above 500 need approval."


def _stats(kb):
    stats = KnowledgeBaseStats.objects.get(kb=kb)
    return stats.chunks, stats.tokens


def _df(kb) -> dict[str, int]:
    return dict(TermStat.objects.filter(kb=kb).values_list("term", "df"))


def _df_from_postings(kb) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT term, count(*) FROM knowledge_posting WHERE kb_id = %s GROUP BY term", [kb.pk])
        return dict(cursor.fetchall())


def test_index_stores_exact_slices_postings_and_statistics():
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    doc = knowledge_document(kb, "policy", "Refund policy", REFUNDS)
    assert doc.status == Document.Status.READY
    chunks = list(Chunk.objects.filter(document=doc))
    assert doc.chunk_count == len(chunks) >= 1
    for chunk in chunks:
        assert doc.content[chunk.char_start : chunk.char_end] == chunk.content
        assert chunk.revision == doc.revision
        assert chunk.length > 0
    # "refunds"/"refund" stem to one lexeme; the title is indexed with every chunk.
    assert "refund" in _df(kb)
    assert _df(kb) == _df_from_postings(kb)
    assert _stats(kb) == (len(chunks), sum(c.length for c in chunks))


def test_unchanged_put_is_not_requeued_and_changed_put_reindexes():
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    doc = knowledge_document(kb, "policy", "Refund policy", REFUNDS)
    again = document_put(
        kb=kb, source_key="policy", title="Refund policy", content=REFUNDS, actor=Actor.system()
    )
    assert (again.created, again.queued, again.document.status) == (False, False, "ready")

    changed = document_put(
        kb=kb,
        source_key="policy",
        title="Refund policy",
        content="Shipping takes two days.",
        actor=Actor.system(),
    )
    assert changed.queued and changed.document.status == Document.Status.EMBEDDING
    assert changed.document.revision != doc.revision
    assert document_index(document_id=doc.pk).result == "ready"
    assert "refund" in _df(kb)  # still in the title
    assert "ship" in _df(kb)
    assert "paid" not in _df(kb)
    assert _df(kb) == _df_from_postings(kb)
    assert _stats(kb)[0] == Chunk.objects.filter(kb=kb).count()


def test_superseded_revision_is_not_indexed():
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    first = knowledge_document(kb, "a", "A", "alpha text", index=False)
    # Index a stale read: the document changes between reading and writing.
    document_put(kb=kb, source_key="a", title="A", content="beta text", actor=Actor.system())
    outcome = document_index(document_id=first.pk)
    assert outcome.result == "ready"  # the current revision was read, so this is the new one
    assert Chunk.objects.get(document=first).content == "beta text"


def test_delete_removes_postings_and_statistics():
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    knowledge_document(kb, "a", "Alpha", "alpha beta gamma")
    knowledge_document(kb, "b", "Beta", "beta delta")
    assert document_delete(kb=kb, source_key="a", actor=Actor.system())
    assert not document_delete(kb=kb, source_key="a", actor=Actor.system())
    assert Posting.objects.filter(kb_id=kb.pk).count() > 0
    assert _df(kb) == _df_from_postings(kb)
    assert "alpha" not in _df(kb)
    assert _stats(kb) == (1, Chunk.objects.get(kb=kb).length)


def test_local_embeddings_are_stored_as_unit_vectors():
    kb = KnowledgeBaseFactory()
    doc = knowledge_document(kb, "policy", "Refund policy", REFUNDS)
    assert vector_storage_ready()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), min(vector_norm(embedding)), max(vector_dims(embedding)) FROM {VECTOR_TABLE} "
            "WHERE kb_id = %s",
            [kb.pk],
        )
        count, norm, dims = cursor.fetchone()
    assert count == doc.chunk_count
    assert dims == 384
    assert abs(norm - 1.0) < 1e-3
