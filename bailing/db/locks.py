"""Advisory locks held across commits, safe behind a transaction-pooling PgBouncer.

Some locks must outlive the transactions of the work they guard: the invocation lock is held over
the business call, while the journal commits ``dispatching`` before it and the outcome after it. A
session lock (``pg_try_advisory_lock``) on the request's own connection did that, but it belongs to
the *server* connection: behind a pooler in transaction mode the lock, the work and the unlock may
each run on a different one, so the unlock frees nothing and the next client of that server
connection finds the lock already "its own" (docs/scaling.md "A connection pooler").

:func:`advisory_lock` takes ``pg_try_advisory_xact_lock`` instead, in a transaction of its own on a
second connection of this thread that stays open (idle, no statement running) until the block ends
and then rolls back. Whatever pools the connections, an open transaction keeps its server
connection, and its end — the rollback, or the connection dying with its process — releases the
lock. Each thread keeps its lock connection for the next lock (``DB_CONN_MAX_AGE`` applies, as to
Django's own), so a lock costs the same two round trips as before.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg
from django.db import connections

_local = threading.local()
# Every lock connection still open, of every thread: closed together by close_all().
_open: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()
_open_guard = threading.Lock()


def _new_connection() -> psycopg.Connection:
    """A connection to the default database with its settings (the test database under tests)."""
    params = dict(connections["default"].get_connection_params())
    params.pop("cursor_factory", None)  # plain client-side binding: two fixed statements
    params["prepare_threshold"] = None  # nothing prepared: a pooler may hand it any server connection
    conn = psycopg.connect(**params, autocommit=False)
    with _open_guard:
        _open.add(conn)
    return conn


class _Kept:
    """This thread's lock connection. When the thread ends, its locals go and this closes the
    connection (instead of leaving it to be reclaimed open)."""

    __slots__ = ("conn", "opened")

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.opened = time.monotonic()

    def __del__(self):
        with suppress(Exception):
            self.conn.close()


def _connection() -> psycopg.Connection:
    kept: _Kept | None = getattr(_local, "kept", None)
    max_age = connections["default"].settings_dict.get("CONN_MAX_AGE")
    if kept is not None and (
        kept.conn.closed
        or kept.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        or (max_age is not None and time.monotonic() - kept.opened > max_age)
    ):
        _discard(kept.conn)
        kept = None
    if kept is None:
        kept = _local.kept = _Kept(_new_connection())
    return kept.conn


def _discard(conn: psycopg.Connection) -> None:
    kept = getattr(_local, "kept", None)
    if kept is not None and kept.conn is conn:
        _local.kept = None
    with suppress(psycopg.Error):
        conn.close()


@contextmanager
def advisory_lock(namespace: int, key: int) -> Iterator[bool]:
    """Try to take the two-int4 advisory lock ``(namespace, key)`` without waiting; yields whether it
    was taken, and releases it when the block ends. A failure to reach the database raises, as any
    query would (an outage: 503)."""
    conn = _connection()
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [namespace, key])
            held = bool(cursor.fetchone()[0])
    except psycopg.Error:
        _discard(conn)
        raise
    try:
        yield held
    finally:
        try:
            conn.rollback()  # ends the lock's transaction: the lock goes with it
        except psycopg.Error:
            _discard(conn)  # the connection is gone, and its transaction (and lock) with it
        if connections["default"].settings_dict.get("CONN_MAX_AGE") == 0:
            _discard(conn)  # DB_CONN_MAX_AGE=0: no connection is kept between requests


def close_all() -> None:
    """Close every thread's lock connection (for a test session's end, before its database is
    dropped; a thread that takes a lock afterwards opens a new one)."""
    with _open_guard:
        open_now = list(_open)
        _open.clear()
    for conn in open_now:
        with suppress(psycopg.Error):
            conn.close()
