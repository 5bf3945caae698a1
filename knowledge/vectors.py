"""pgvector storage of chunk embeddings — present only where the ``vector`` extension is.

The table ``knowledge_chunk_vector(chunk_id, kb_id, embedding vector)`` has no Django model: its
column type exists only on servers with pgvector, and the hub must migrate and run (lexically) on a
server without it. The migration creates it when the extension is installed;
:func:`vector_storage_ensure` does the same later (e.g. after an operator installs pgvector and runs
``migrate`` again — the migration is already applied, so ``knowledge_worker`` calls it at start).

Each knowledge base gets its own partial HNSW index over ``embedding::vector(<dim>)`` with
``vector_cosine_ops`` (pgvector's documented pattern for several dimensions in one table). A query
must repeat the same cast and ``kb_id = <pk>`` predicate to use it. A partial index per KB also
keeps the HNSW search from being filtered after the fact, which would lose recall.

Vectors are sent as pgvector's binary type through ``pgvector.psycopg``, registered once per
database connection.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from django.db import connection
from pgvector.psycopg import register_vector
from psycopg.types import TypeInfo

from bailing.db.features import vector_available

VECTOR_TABLE = "knowledge_chunk_vector"

# No foreign key to knowledge_chunk: Django's test flush truncates its own tables without CASCADE
# and would refuse a table it does not know referencing them. Vectors are deleted explicitly with
# their chunks (knowledge.services.indexing) and their KB; every search joins knowledge_chunk, so a
# vector whose chunk is gone can never surface.
_CREATE_TABLE = f"""
CREATE TABLE IF NOT EXISTS {VECTOR_TABLE} (
    chunk_id bigint PRIMARY KEY,
    kb_id bigint NOT NULL,
    embedding vector NOT NULL
)
"""


def _index_name(kb_pk: int) -> str:
    return f"knowledge_vec_kb_{int(kb_pk)}"


_storage_ready = False


def vector_storage_ready() -> bool:
    """True when embeddings can be stored and searched (extension and table both present).

    A positive answer is remembered for the process (the table is never dropped); a negative one is
    asked again, so a web process notices a table that ``knowledge_worker`` created after it started.
    """
    global _storage_ready
    if _storage_ready:
        return True
    if not vector_available():
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [VECTOR_TABLE])
        _storage_ready = bool(cursor.fetchone()[0])
    return _storage_ready


def vector_storage_ensure(cursor: Any | None = None) -> bool:
    """Create the vector table where the extension exists; return whether storage is ready."""
    if cursor is None:
        with connection.cursor() as own:
            return vector_storage_ensure(own)
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    if cursor.fetchone() is None:
        return False
    cursor.execute(_CREATE_TABLE)
    cursor.execute(f"CREATE INDEX IF NOT EXISTS {VECTOR_TABLE}_kb ON {VECTOR_TABLE} (kb_id)")
    return True


def vector_index_ensure(*, kb_pk: int, dim: int) -> None:
    """Create the KB's partial HNSW cosine index (idempotent). Needs :func:`vector_storage_ready`."""
    if dim <= 0 or dim > 2000:
        # HNSW indexes vectors of at most 2,000 dimensions; larger ones are searched exactly.
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {_index_name(kb_pk)} ON {VECTOR_TABLE} "
            f"USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops) WHERE kb_id = {int(kb_pk)}"
        )


def vector_index_drop(*, kb_pk: int) -> None:
    """Drop the KB's vectors and its HNSW index (when its KB is deleted)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {VECTOR_TABLE} WHERE kb_id = %s", [int(kb_pk)])  # noqa: S608
        cursor.execute(f"DROP INDEX IF EXISTS {_index_name(kb_pk)}")


def register() -> None:
    """Register pgvector's types on the current psycopg connection (once per connection).

    Call before opening the cursor that needs them: a psycopg cursor copies its connection's
    adapters when it is created.
    """
    connection.ensure_connection()
    raw = connection.connection
    if not getattr(raw, "_bailing_vector_registered", False):
        register_vector(raw)
        # Also name the type in the connection's registry, which binary COPY's set_types reads.
        info = TypeInfo.fetch(raw, "vector")
        if info is not None:
            info.register(raw)
        raw._bailing_vector_registered = True


def vector_rows_insert(rows: list[tuple[int, int, np.ndarray]]) -> None:
    """Insert ``(chunk_id, kb_pk, embedding)`` rows with one binary COPY."""
    if not rows:
        return
    register()
    statement = f"COPY {VECTOR_TABLE} (chunk_id, kb_id, embedding) FROM STDIN WITH (FORMAT BINARY)"
    with connection.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(["int8", "int8", "vector"])
        for chunk_id, kb_pk, embedding in rows:
            copy.write_row((chunk_id, kb_pk, np.asarray(embedding, dtype=np.float32)))
