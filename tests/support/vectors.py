"""Test helpers that break a knowledge base's vectors on purpose, to prove a failure stays in its KB."""

from __future__ import annotations

from django.db import connection

from knowledge.models import Chunk
from knowledge.vectors import VECTOR_TABLE, vector_index_drop


def vectors_corrupted(kb, document) -> None:
    """Give ``document``'s first chunk a 3-dimensional vector: without the KB's HNSW index the row is
    accepted, and the vector lane's cast to vector(384) then fails inside PostgreSQL."""
    vector_index_drop(kb_pk=kb.pk)
    chunk_id = Chunk.objects.filter(document=document).values_list("pk", flat=True)[0]
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {VECTOR_TABLE} WHERE chunk_id = %s", [chunk_id])
        cursor.execute(f"INSERT INTO {VECTOR_TABLE} VALUES (%s, %s, '[1,0,0]')", [chunk_id, kb.pk])
