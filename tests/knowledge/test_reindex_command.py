"""knowledge_reindex queues every indexed document again and (with --wait) indexes it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from knowledge.models import Document
from knowledge.vectors import VECTOR_TABLE
from tests.factories import KnowledgeBaseFactory, knowledge_document

pytestmark = pytest.mark.django_db


def _vectors(kb) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {VECTOR_TABLE} WHERE kb_id = %s", [kb.pk])
        return cursor.fetchone()[0]


def test_reindex_requeues_ready_and_failed_documents_and_indexes_them_again():
    kb = KnowledgeBaseFactory()
    ready = knowledge_document(kb, "ready", "Refunds", "Refunds are paid within 14 days.")
    failed = knowledge_document(kb, "failed", "Shipping", "Parcels ship the same day.", index=False)
    Document.objects.filter(pk=failed.pk).update(status="error", error="embedding_unreachable")
    # As if the documents had been indexed before pgvector existed: no vectors.
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {VECTOR_TABLE} WHERE kb_id = %s", [kb.pk])
    other = KnowledgeBaseFactory()
    untouched = knowledge_document(other, "x", "Other", "Other text.")

    out = io.StringIO()
    call_command("knowledge_reindex", kb.kb_id, stdout=out)
    assert f"queued 2 document(s) of {kb.kb_id} for indexing (lexical + vector)" in out.getvalue()
    assert set(Document.objects.filter(kb=kb).values_list("status", flat=True)) == {"embedding"}
    assert Document.objects.get(pk=untouched.pk).status == "ready"

    call_command("knowledge_reindex", kb.kb_id, "--wait", stdout=io.StringIO())
    statuses = dict(Document.objects.filter(kb=kb).values_list("source_key", "status"))
    assert statuses == {"ready": "ready", "failed": "ready"}
    assert _vectors(kb) == 2
    assert Document.objects.get(pk=ready.pk).revision == ready.revision


def test_unknown_knowledge_base_is_an_error():
    with pytest.raises(CommandError):
        call_command("knowledge_reindex", "nope", stdout=io.StringIO())
