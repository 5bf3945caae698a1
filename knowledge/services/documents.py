"""Writing documents: put (create or replace) and delete, shared by every ingestion path.

The push API, the console, ``knowledge_ingest`` and the tests all call :func:`document_put` and
:func:`document_delete`. A put stores the sanitized text and its revision and *enqueues* the
document (status ``embedding``); ``knowledge_worker`` indexes it later, so no web request waits for
embeddings. Unchanged content is not re-embedded: a put whose revision equals the stored one leaves
a ``ready`` (or still waiting) document alone. A document in ``error`` with the same revision is
queued again (a retry after, say, the embedding endpoint came back).

Revision = SHA-256 hex of ``title + NUL + sanitized content`` (docs/protocol.md "Scope and document
revisions"). Concurrent puts of the same ``(kb, source_key)`` are safe: the row is locked, and two
first puts race on the unique index (savepoint + re-read); the later one wins as an update. A put
racing a delete of the same key looks again after losing the insert race, so it never fails on a row
that vanished.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from knowledge.chunking import sanitize_content
from knowledge.models import Document, KnowledgeBase
from knowledge.parsing import parse_file
from knowledge.services.indexing import document_chunks_remove, kb_index_lock

# What the sanitizer is told about the input: HTML is always converted, text never, Markdown only
# when it looks like HTML (as BailingHub converts pasted HTML).
_HTML_FLAG = {"html": True, "text": False, "markdown": None}


def document_revision(title: str, content: str) -> str:
    return hashlib.sha256(f"{title}\0{content}".encode()).hexdigest()


@dataclass(frozen=True)
class PutResult:
    document: Document
    created: bool
    # False when the stored revision already matched (nothing re-queued).
    queued: bool


def document_put(
    *,
    kb: KnowledgeBase,
    source_key: str,
    title: str,
    content: str,
    content_type: str = "markdown",
    metadata: dict[str, Any] | None = None,
    actor: Actor,
) -> PutResult:
    """Create or replace the document ``source_key`` of ``kb`` and queue it for indexing.

    Inputs are validated by the caller (API serializer, console form, command): ``source_key``
    pattern, title length, content size. The content is sanitized here; the revision covers the
    sanitized text, which is what chunks are cut from and what reads serve.
    """
    text = sanitize_content(content, html=_HTML_FLAG[content_type])
    revision = document_revision(title, text)
    metadata = metadata or {}
    now = timezone.now()
    with transaction.atomic():
        created = False
        document = None
        # Lock the row, or create it. Losing the insert race to a concurrent first put means the row
        # now exists — unless a concurrent delete already removed it again, so look (and maybe
        # create) once more rather than assume it is there. Every retry follows another
        # transaction's committed insert, so the loop always makes progress.
        while document is None:
            document = Document.objects.select_for_update().filter(kb=kb, source_key=source_key).first()
            if document is not None:
                break
            try:
                with transaction.atomic():
                    document = Document.objects.create(
                        kb=kb,
                        source_key=source_key,
                        title=title,
                        content=text,
                        content_type=content_type,
                        metadata=metadata,
                        revision=revision,
                        enqueued_at=now,
                        created_by=f"{actor.type}:{actor.name}"[:160],
                    )
                created = True
            except IntegrityError:
                document = None
        if not created:
            same = document.revision == revision
            if same and document.status != Document.Status.ERROR:
                if document.metadata != metadata or document.content_type != content_type:
                    document.metadata = metadata
                    document.content_type = content_type
                    document.save(update_fields=["metadata", "content_type", "updated_at"])
                return PutResult(document=document, created=False, queued=False)
            document.title = title
            document.content = text
            document.content_type = content_type
            document.metadata = metadata
            document.revision = revision
            document.status = Document.Status.EMBEDDING
            document.error = ""
            document.attempts = 0
            document.lease_until = None
            document.enqueued_at = now
            document.save()
        audit_record(
            action="knowledge.document.created" if created else "knowledge.document.updated",
            actor=actor,
            target_type="knowledge_document",
            target_id=f"{kb.kb_id}/{source_key}",
            data={"kb_id": kb.kb_id, "source_key": source_key, "revision": revision, "chars": len(text)},
        )
    return PutResult(document=document, created=created, queued=True)


def document_delete(*, kb: KnowledgeBase, source_key: str, actor: Actor) -> bool:
    """Delete a document with its chunks, postings and vectors. Returns False when it did not exist."""
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(kb=kb, source_key=source_key).first()
        if document is None:
            return False
        kb_index_lock(kb.pk)
        document_chunks_remove(document=document)
        document.delete()
        audit_record(
            action="knowledge.document.deleted",
            actor=actor,
            target_type="knowledge_document",
            target_id=f"{kb.kb_id}/{source_key}",
            data={"kb_id": kb.kb_id, "source_key": source_key},
        )
    return True


def documents_requeue(*, kb: KnowledgeBase, actor: Actor) -> int:
    """Queue every ``ready`` or ``error`` document of ``kb`` for indexing again; return how many.

    For when the index, not the content, must change: pgvector was installed after the documents
    were indexed lexically, or chunking rules changed. Requeued documents leave search until the
    worker has indexed them again (search serves only ``ready`` documents).
    """
    with transaction.atomic():
        count = Document.objects.filter(
            kb=kb, status__in=[Document.Status.READY, Document.Status.ERROR]
        ).update(
            status=Document.Status.EMBEDDING,
            error="",
            attempts=0,
            lease_until=None,
            enqueued_at=timezone.now(),
            updated_at=timezone.now(),
        )
        audit_record(
            action="knowledge.base.requeued",
            actor=actor,
            target_type="knowledge_base",
            target_id=kb.kb_id,
            data={"documents": count},
        )
    return count


def documents_put_files(
    *, kb: KnowledgeBase, paths: list[Path], source_prefix: str, actor: Actor
) -> list[int]:
    """Put each file (parsed by :func:`knowledge.parsing.parse_file`: title from its first heading or
    metadata) as ``<source_prefix><file stem>``; return the ids of the documents that were queued
    (changed or new). For small, trusted folders (the demo, benchmarks): a file that does not parse
    raises ``DocumentParseError``; ``knowledge_ingest`` is the command for arbitrary folders."""
    queued = []
    for path in paths:
        parsed = parse_file(path)
        result = document_put(
            kb=kb,
            source_key=f"{source_prefix}{path.stem}",
            title=parsed.title,
            content=parsed.text,
            content_type=parsed.content_type,
            actor=actor,
        )
        if result.queued:
            queued.append(result.document.pk)
    return queued
