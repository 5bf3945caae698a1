"""What the connected PostgreSQL server offers (read at run time, cached per process)."""

from __future__ import annotations

from functools import lru_cache

from django.db import connection


@lru_cache(maxsize=1)
def vector_available() -> bool:
    """True when the ``vector`` extension is installed in the current database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        return cursor.fetchone() is not None


def server_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return cursor.fetchone()[0]
