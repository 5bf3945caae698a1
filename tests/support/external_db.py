"""A throwaway database on an external PostgreSQL server (the machine's PostgreSQL 15, no pgvector).

``BAILING_EXTERNAL_PG_URL`` points it elsewhere. An unreachable server fails the tests that use it:
the ``DATABASE_URL`` path and the lexical fallback must be proven, never silently skipped.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import psycopg
import pytest

EXTERNAL_SERVER = os.environ.get("BAILING_EXTERNAL_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def external_database_url() -> Iterator[str]:
    """The URL of a fresh database on the external server, dropped afterwards."""
    name = f"bailing_ext_{secrets.token_hex(4)}"
    with psycopg.connect(EXTERNAL_SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = EXTERNAL_SERVER.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(EXTERNAL_SERVER, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
