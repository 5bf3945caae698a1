"""Indexing one document revision: chunks, lexical postings and statistics, vectors.

:func:`document_index` is what ``knowledge_worker`` runs for a claimed document:

1. read the document (no lock) and cut its sanitized content into chunks (:mod:`knowledge.chunking`;
   every chunk is a verbatim slice of the content);
2. embed the chunks with the KB's provider — outside any transaction, because it is slow and may
   call the network (style guide: never hold a row lock across the network);
3. in one short transaction: lock the document, re-check that it still has the revision that was
   embedded and is still waiting (otherwise a newer write superseded this work and the newer queue
   entry will index it), take the KB's index lock, replace the old chunks, postings and vectors,
   adjust the BM25 statistics and mark the document ``ready``.

Lexical index: each chunk's text, prefixed with the document title and Han-segmented
(:func:`knowledge.lexical.lexical_document`), goes through PostgreSQL's ``to_tsvector('english', …)``
(lowercasing, stop words, stemming). Its lexemes become ``knowledge_posting`` rows with the term
frequency (the number of positions) and the chunk length (the sum of all term frequencies).
``knowledge_termstat.df`` counts the chunks containing a lexeme and ``knowledge_knowledgebasestats``
the chunks and total length, so the lexical lane computes BM25 entirely in SQL.

Index writes of one KB are serialised by a transaction-scoped advisory lock: the statistics rows
are shared by every document of the KB, and one lock taken first avoids deadlocks between workers
updating overlapping terms. Embedding (the slow part) still runs in parallel across workers.

The embedding text of a chunk is the title, a newline and the chunk with image markup stripped
(:func:`knowledge.chunking.embedding_text`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from knowledge.chunking import chunk_spans, embedding_text
from knowledge.embeddings import EmbeddingConfigError, EmbeddingError, EmbeddingProvider
from knowledge.lexical import TS_CONFIG, lexical_document
from knowledge.models import Chunk, Document, KnowledgeBase
from knowledge.services.providers import embedding_provider_for
from knowledge.vectors import VECTOR_TABLE, vector_rows_insert, vector_storage_ready

logger = logging.getLogger(__name__)

# Postings store the chunk length in a smallint; a 700-character chunk has far fewer lexemes.
_DL_MAX = 32767
_INDEX_LOCK_NAMESPACE = 0x4B42  # "KB": first key of pg_advisory_xact_lock(int, int)


@dataclass(frozen=True)
class IndexOutcome:
    """What :func:`document_index` did: ``ready``, ``error`` (with ``error`` code), ``superseded``
    (the document changed or was deleted meanwhile) or ``skipped`` (not waiting for indexing)."""

    result: str
    chunks: int = 0
    vectors: bool = False
    error: str = ""


def kb_index_lock(kb_pk: int) -> None:
    """Serialise index writes of one KB until the current transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_INDEX_LOCK_NAMESPACE, int(kb_pk)])


def embedding_texts(title: str, chunks: list[str]) -> list[str]:
    return [f"{title}\n{embedding_text(text)}" for text in chunks]


def document_chunks_remove(*, document: Document) -> int:
    """Delete the document's chunks, vectors and postings (those cascade) and take them out of the BM25
    statistics. Call inside a transaction after :func:`kb_index_lock`. Returns the chunks removed."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH old AS (
                SELECT p.term, count(*) AS n
                FROM knowledge_posting p JOIN knowledge_chunk c ON c.id = p.chunk_id
                WHERE c.document_id = %s
                GROUP BY p.term
            )
            UPDATE knowledge_termstat t SET df = t.df - old.n
            FROM old WHERE t.kb_id = %s AND t.term = old.term
            RETURNING t.term, t.df
            """,
            [document.pk, document.kb_id],
        )
        # Terms no chunk of the KB contains any more would only inflate the table; only the terms
        # just decremented can have reached zero, so the KB's whole vocabulary is never scanned.
        vanished = [term for term, df in cursor.fetchall() if df <= 0]
        cursor.execute(
            "SELECT count(*), coalesce(sum(length), 0) FROM knowledge_chunk WHERE document_id = %s",
            [document.pk],
        )
        chunks, tokens = cursor.fetchone()
        if chunks:
            if vector_storage_ready():
                cursor.execute(
                    f"DELETE FROM {VECTOR_TABLE} WHERE chunk_id IN "  # noqa: S608 - constant table name
                    "(SELECT id FROM knowledge_chunk WHERE document_id = %s)",
                    [document.pk],
                )
            cursor.execute(
                "UPDATE knowledge_knowledgebasestats SET chunks = chunks - %s, tokens = tokens - %s "
                "WHERE kb_id = %s",
                [chunks, tokens, document.kb_id],
            )
            cursor.execute("DELETE FROM knowledge_chunk WHERE document_id = %s", [document.pk])
        if vanished:
            cursor.execute(
                "DELETE FROM knowledge_termstat WHERE kb_id = %s AND term = ANY(%s)",
                [document.kb_id, vanished],
            )
    return chunks


def chunk_postings_insert(*, kb_pk: int, chunk_ids: list[int], lexical: list[str]) -> None:
    """Write the postings of freshly inserted chunks (``lexical`` = their prepared texts, same order)
    and add them to the BM25 statistics. Call after :func:`kb_index_lock` in the writing transaction;
    ``knowledge_bench`` uses it too, so a synthetic corpus is indexed by the same SQL."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH lex AS (
                SELECT x.chunk_id, l.lexeme AS term, coalesce(array_length(l.positions, 1), 1) AS tf
                FROM unnest(%s::bigint[], %s::text[]) AS x(chunk_id, body)
                CROSS JOIN LATERAL unnest(to_tsvector('{TS_CONFIG}'::regconfig, x.body)) AS l
            ), len AS (
                SELECT chunk_id, least(sum(tf), {_DL_MAX}) AS dl FROM lex GROUP BY chunk_id
            )
            INSERT INTO knowledge_posting (chunk_id, kb_id, term, tf, dl)
            SELECT lex.chunk_id, %s, lex.term, least(lex.tf, {_DL_MAX}), len.dl
            FROM lex JOIN len USING (chunk_id)
            """,  # noqa: S608 - only module constants are interpolated; values are bound parameters
            [chunk_ids, lexical, kb_pk],
        )
        cursor.execute(
            """
            UPDATE knowledge_chunk c SET length = s.dl
            FROM (
                SELECT chunk_id, max(dl) AS dl FROM knowledge_posting
                WHERE chunk_id = ANY(%s) GROUP BY chunk_id
            ) s
            WHERE c.id = s.chunk_id
            """,
            [chunk_ids],
        )
        cursor.execute(
            """
            INSERT INTO knowledge_termstat (kb_id, term, df)
            SELECT %s, term, count(*) FROM knowledge_posting WHERE chunk_id = ANY(%s)
            GROUP BY term ORDER BY term
            ON CONFLICT (kb_id, term) DO UPDATE SET df = knowledge_termstat.df + EXCLUDED.df
            """,
            [kb_pk, chunk_ids],
        )
        cursor.execute(
            """
            UPDATE knowledge_knowledgebasestats s
            SET chunks = s.chunks + %s,
                tokens = s.tokens + (SELECT coalesce(sum(length), 0) FROM knowledge_chunk WHERE id = ANY(%s))
            WHERE s.kb_id = %s
            """,
            [len(chunk_ids), chunk_ids, kb_pk],
        )


def document_fail(*, document_id: int, revision: str, error: str) -> bool:
    """Mark a waiting document revision as failed with a stable ``error`` code (no document text)."""
    updated = Document.objects.filter(
        pk=document_id, revision=revision, status=Document.Status.EMBEDDING
    ).update(status=Document.Status.ERROR, error=error[:255], lease_until=None, updated_at=timezone.now())
    return bool(updated)


def _embed(kb: KnowledgeBase, provider: EmbeddingProvider, texts: list[str]) -> np.ndarray:
    vectors = provider.embed(texts) if texts else np.zeros((0, kb.embedding_dim), dtype=np.float32)
    if vectors.shape != (len(texts), kb.embedding_dim):
        raise EmbeddingError(
            "embedding_dimension_mismatch",
            expected_dimension=kb.embedding_dim,
            observed_dimension=int(vectors.shape[1]) if vectors.ndim == 2 else None,
        )
    return vectors


@dataclass
class _Prepared:
    document_id: int
    kb: KnowledgeBase
    revision: str
    spans: list[tuple[int, int]]
    texts: list[str]
    lexical: list[str]
    embed_inputs: list[str]
    vectors: np.ndarray | None = None
    error: str = ""


def _prepare(document: Document) -> _Prepared:
    spans = chunk_spans(document.content)
    texts = [document.content[start:end] for start, end in spans]
    embeds = document.kb.has_embeddings and vector_storage_ready()
    return _Prepared(
        document_id=document.pk,
        kb=document.kb,
        revision=document.revision,
        spans=spans,
        texts=texts,
        lexical=[lexical_document(f"{document.title}\n{text}") for text in texts],
        embed_inputs=embedding_texts(document.title, texts) if embeds else [],
    )


def _embed_group(items: list[_Prepared], provider: EmbeddingProvider | None) -> None:
    """Embed the chunks of several documents of one KB in one provider call (batching matters: the
    ONNX model is several times faster on full batches than on a document's two or three chunks)."""
    kb = items[0].kb
    inputs = [text for item in items for text in item.embed_inputs]
    try:
        chosen = provider or embedding_provider_for(kb, for_indexing=True)
        if chosen is None:
            return
        vectors = _embed(kb, chosen, inputs)
    except EmbeddingConfigError:
        for item in items:
            item.error = "embedding_config_invalid"
        return
    except EmbeddingError as exc:
        for item in items:
            item.error = exc.code
        return
    offset = 0
    for item in items:
        item.vectors = vectors[offset : offset + len(item.embed_inputs)]
        offset += len(item.embed_inputs)


def _write(item: _Prepared) -> IndexOutcome:
    if item.error:
        document_fail(document_id=item.document_id, revision=item.revision, error=item.error)
        return IndexOutcome("error", error=item.error)
    kb = item.kb
    with transaction.atomic():
        locked = Document.objects.select_for_update().filter(pk=item.document_id).first()
        if locked is None or locked.revision != item.revision or locked.status != Document.Status.EMBEDDING:
            return IndexOutcome("superseded")
        kb_index_lock(kb.pk)
        document_chunks_remove(document=locked)
        chunks = Chunk.objects.bulk_create(
            [
                Chunk(
                    kb_id=kb.pk,
                    document_id=locked.pk,
                    seq=seq,
                    content=text,
                    char_start=start,
                    char_end=end,
                    revision=item.revision,
                )
                for seq, ((start, end), text) in enumerate(zip(item.spans, item.texts, strict=True))
            ]
        )
        chunk_ids = [chunk.pk for chunk in chunks]
        if chunk_ids:
            chunk_postings_insert(kb_pk=kb.pk, chunk_ids=chunk_ids, lexical=item.lexical)
            if item.vectors is not None:
                vector_rows_insert(
                    [(chunk_id, kb.pk, item.vectors[i]) for i, chunk_id in enumerate(chunk_ids)]
                )
        locked.status = Document.Status.READY
        locked.chunk_count = len(chunk_ids)
        locked.error = ""
        locked.lease_until = None
        locked.ready_at = timezone.now()
        locked.save(update_fields=["status", "chunk_count", "error", "lease_until", "ready_at", "updated_at"])
    return IndexOutcome("ready", chunks=len(chunk_ids), vectors=item.vectors is not None)


def documents_index(
    *, document_ids: list[int], provider: EmbeddingProvider | None = None
) -> dict[int, IndexOutcome]:
    """Index several waiting documents: chunks of the same KB are embedded together, then each
    document is written in its own short transaction (see the module docstring).

    ``provider`` overrides the KBs' embedding provider (benchmarks, tests); by default each KB's
    own (:func:`knowledge.services.providers.embedding_provider_for`). Embedding failures mark the
    documents ``error`` with the provider's stable code; they are never raised. Returns an outcome
    per document id.
    """
    outcomes: dict[int, IndexOutcome] = {}
    documents = Document.objects.select_related("kb").filter(pk__in=document_ids).order_by("kb_id", "pk")
    groups: dict[int, list[_Prepared]] = {}
    for document in documents:
        if document.status != Document.Status.EMBEDDING:
            outcomes[document.pk] = IndexOutcome("skipped")
            continue
        groups.setdefault(document.kb_id, []).append(_prepare(document))
    for items in groups.values():
        if any(item.embed_inputs for item in items):
            _embed_group(items, provider)
        for item in items:
            outcomes[item.document_id] = _write(item)
    for document_id in document_ids:
        outcomes.setdefault(document_id, IndexOutcome("superseded"))
    return outcomes


def document_index(*, document_id: int, provider: EmbeddingProvider | None = None) -> IndexOutcome:
    """Index the current revision of one waiting document (:func:`documents_index` for one id)."""
    return documents_index(document_ids=[document_id], provider=provider)[document_id]
