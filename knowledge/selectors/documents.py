"""Documents and chunks as the console shows them. Document bodies can be 500,000 characters: lists
defer ``content`` and ``metadata``, and only one document's own page loads a body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import Count, Q, QuerySet

from knowledge.models import Chunk, Document, KnowledgeBase

# What a confirmation page (and the delete after it) reads of a document.
_SUMMARY_FIELDS = ("id", "source_key", "title", "chunk_count")


def document_list(*, kb: KnowledgeBase, filters: Mapping[str, Any] | None = None) -> QuerySet[Document]:
    """The base's documents by source key, without their bodies. ``filters``: ``status`` and ``q``
    (part of the title or the source key, case-insensitive)."""
    filters = filters or {}
    documents = Document.objects.filter(kb=kb).defer("content", "metadata").order_by("source_key", "id")
    if filters.get("status"):
        documents = documents.filter(status=filters["status"])
    text = (filters.get("q") or "").strip()
    if text:
        # ILIKE with escaped wildcards, anywhere in the title or the key.
        documents = documents.filter(Q(title__icontains=text) | Q(source_key__icontains=text))
    return documents


def document_status_counts(*, kb: KnowledgeBase) -> dict[str, int]:
    """Status → how many of the base's documents have it (statuses without any are absent)."""
    return dict(
        Document.objects.filter(kb=kb)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )


def document_get(*, kb: KnowledgeBase, doc_id: int, summary: bool = False) -> Document | None:
    """The base's document ``doc_id`` (its ``kb`` set to ``kb``, so it is not read again), or None.
    ``summary`` reads only its id, source key, title and chunk count, never its body."""
    documents = Document.objects.only(*_SUMMARY_FIELDS) if summary else Document.objects.all()
    document = documents.filter(kb=kb, pk=doc_id).first()
    if document is not None:
        document.kb = kb
    return document


def document_chunks(*, document: Document) -> QuerySet[Chunk]:
    """The document's chunks in order."""
    return Chunk.objects.filter(document=document).order_by("seq")
