"""Knowledge bases, documents, chunks and the lexical index (docs/protocol.md "Knowledge ingestion").

Storage layout
    ``KnowledgeBase``  configuration; the embedding provider, model and dimension are locked at
                       creation (a vector of one model is meaningless next to another's).
    ``Document``       one source text per ``(kb, source_key)``; ``content`` is the sanitized text,
                       ``revision`` = SHA-256 hex of ``title + NUL + content``. ``status`` is
                       ``embedding`` while queued or being indexed, then ``ready`` or ``error``.
    ``Chunk``          a verbatim slice ``content[char_start:char_end]`` of the document revision
                       it was cut from (``revision``): "chunk text stored exactly as served".
    ``Posting``        the inverted index of the lexical lane: one row per (chunk, lexeme) with the
                       term frequency ``tf`` and the chunk's length ``dl`` (both from PostgreSQL's
                       ``to_tsvector``), so BM25 is computed in SQL. ``TermStat`` (document
                       frequency per KB and lexeme) and ``KnowledgeBaseStats`` (chunk count and
                       total length per KB) give the IDF and the average length. ``Posting.chunk_id``
                       is a plain column whose foreign key (``ON DELETE CASCADE``) is created by the
                       migration, so deleting chunks removes their postings in the database.
    ``knowledge_chunk_vector``
                       (no model) created only where the ``vector`` extension exists: chunk id, KB
                       id and the embedding, with one partial HNSW cosine index per KB cast to the
                       KB's dimension. See :mod:`knowledge.vectors`.

Indexing (chunks, postings, vectors, statistics) is written only by
:mod:`knowledge.services.indexing`, which keeps the statistics consistent with the postings.
"""

from __future__ import annotations

import re

from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from agent_runtime.models import Client
from bailing.api.limits import SHORT_TEXT_MAX_CHARS

SOURCE_KEY_PATTERN = r"[A-Za-z0-9_.:-]{1,128}"
SOURCE_KEY_RE = re.compile(SOURCE_KEY_PATTERN)
KB_ID_PATTERN = r"[a-z0-9][a-z0-9_-]{1,63}"
# URL segments are matched against this before any lookup: PostgreSQL refuses NUL in a query.
KB_ID_RE = re.compile(KB_ID_PATTERN)
TITLE_MAX_CHARS = SHORT_TEXT_MAX_CHARS


class KnowledgeBase(models.Model):
    """A knowledge base. ``kb_id`` is its public resource name (routes name it in ``knowledge``)."""

    class EmbeddingProvider(models.TextChoices):
        LOCAL = "local", "Local MiniLM (ONNX, offline)"
        OPENAI = "openai", "OpenAI-compatible endpoint"
        NONE = "none", "None (lexical only)"

    kb_id = models.CharField(max_length=64, unique=True, validators=[RegexValidator(f"^{KB_ID_PATTERN}$")])
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    # Locked at creation (docs/protocol.md "Knowledge ingestion"): changing them would orphan every
    # stored vector.
    embedding_provider = models.CharField(
        max_length=16, choices=EmbeddingProvider.choices, default=EmbeddingProvider.LOCAL
    )
    embedding_model = models.CharField(max_length=128, blank=True, default="")
    embedding_dim = models.PositiveIntegerField(default=0)
    # For ``openai``: {"base_url": ..., "secret_env": ... | "secret_file": ..., "timeout": ...}.
    # The API key itself is never stored, only where to read it.
    embedding_config = models.JSONField(default=dict, blank=True)
    writers = models.ManyToManyField(Client, blank=True, related_name="knowledge_bases_writable")
    # Bumped by a database trigger on every INSERT/UPDATE (a value of one shared sequence, never
    # reused), so per-process caches keyed by it see any change, even one made with raw SQL
    # (bailing.versioned, knowledge migration 0003).
    version = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kb_id"]
        permissions = [("manage_knowledgebase", "Can add, upload and delete knowledge documents")]

    def __str__(self) -> str:
        return self.kb_id

    @property
    def has_embeddings(self) -> bool:
        return self.embedding_provider != self.EmbeddingProvider.NONE


class KnowledgeBaseStats(models.Model):
    """Lexical collection statistics of one KB (BM25's N and average length)."""

    kb = models.OneToOneField(KnowledgeBase, on_delete=models.CASCADE, primary_key=True, related_name="stats")
    chunks = models.BigIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kb_id}: {self.chunks} chunks"


class Document(models.Model):
    class Status(models.TextChoices):
        EMBEDDING = "embedding", "Embedding"
        READY = "ready", "Ready"
        ERROR = "error", "Error"

    class ContentType(models.TextChoices):
        TEXT = "text", "Text"
        MARKDOWN = "markdown", "Markdown"
        HTML = "html", "HTML"

    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="documents")
    source_key = models.CharField(max_length=128, validators=[RegexValidator(f"^{SOURCE_KEY_PATTERN}$")])
    title = models.CharField(max_length=TITLE_MAX_CHARS)
    content = models.TextField()
    content_type = models.CharField(max_length=16, choices=ContentType.choices, default=ContentType.MARKDOWN)
    metadata = models.JSONField(default=dict, blank=True)
    revision = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.EMBEDDING)
    # A stable code (and a short fixed text) when indexing failed; never document text.
    error = models.CharField(max_length=255, blank=True, default="")
    chunk_count = models.PositiveIntegerField(default=0)
    # Queue state for ``knowledge_worker`` (status ``embedding``): claimed rows carry a lease.
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(default=timezone.now)
    ready_at = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=160, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kb_id", "source_key"]
        constraints = [
            models.UniqueConstraint(fields=["kb", "source_key"], name="knowledge_document_source_key_uniq"),
            models.CheckConstraint(
                condition=models.Q(status__in=["embedding", "ready", "error"]),
                name="knowledge_document_status_valid",
            ),
        ]
        indexes = [
            models.Index(
                fields=["enqueued_at", "id"],
                condition=models.Q(status="embedding"),
                name="knowledge_document_queue",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kb_id}:{self.source_key}"


class Chunk(models.Model):
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()
    content = models.TextField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    # The document revision this chunk was cut from; freshness checks compare it with the document.
    revision = models.CharField(max_length=64)
    # Number of lexemes (BM25 document length), 0 when the text has none.
    length = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["document_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["document", "seq"], name="knowledge_chunk_seq_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.seq}"


class TermStat(models.Model):
    """Document frequency (in chunks) of one lexeme in one KB."""

    pk = models.CompositePrimaryKey("kb_id", "term")
    kb = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    term = models.TextField()
    df = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.kb_id}:{self.term}"


class Posting(models.Model):
    """One lexeme of one chunk. Read with raw SQL by the lexical lane, written by the indexer."""

    pk = models.CompositePrimaryKey("chunk_id", "term")
    chunk_id = models.BigIntegerField()
    kb_id = models.BigIntegerField()
    term = models.TextField()
    tf = models.SmallIntegerField()
    dl = models.SmallIntegerField()

    class Meta:
        indexes = [
            # Impact order inside a term's posting list (high tf, short chunk first), covering the
            # columns BM25 needs so the lexical lane reads the index only.
            models.Index(
                fields=["kb_id", "term", "-tf", "dl"], include=["chunk_id"], name="knowledge_posting_impact"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.chunk_id}:{self.term}"


class WorkerHeartbeat(models.Model):
    """One row per running ``knowledge_worker`` (``host:pid``), touched on every poll of the queue.

    ``/health/ready``'s ``knowledge_worker`` check reads the newest ``seen_at``; a worker deletes its
    row when it stops cleanly, and a killed worker's row simply grows old.
    """

    worker = models.CharField(max_length=200, primary_key=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.worker
