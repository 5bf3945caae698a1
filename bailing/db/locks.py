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
Django's own), so a lock costs the same two round trips as before. A lock taken while the thread
holds another is taken in a savepoint of the same transaction (one server connection per thread,
never two).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg
from django.db import connections

from bailing.db.postgresql.base import server_spoke

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
    """This thread's lock connection, and how many of its locks are held now (``depth``). When the
    thread ends, its locals go and this closes the connection (instead of leaving it to be reclaimed
    open)."""

    __slots__ = ("conn", "depth", "opened")

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.depth = 0
        self.opened = time.monotonic()

    def __del__(self):
        with suppress(Exception):
            self.conn.close()


def _kept() -> _Kept:
    """This thread's lock connection: the one holding its outer locks while any is held, else a
    usable one (reopened when closed, ended by the server, older than ``DB_CONN_MAX_AGE`` or left in
    a transaction)."""
    kept: _Kept | None = getattr(_local, "kept", None)
    if kept is not None and kept.depth > 0 and not kept.conn.closed:
        return kept
    max_age = connections["default"].settings_dict.get("CONN_MAX_AGE")
    if kept is not None and (
        kept.conn.closed
        or kept.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        or server_spoke(kept.conn)  # ended by a restart or pg_terminate_backend: no failed lock
        or (max_age is not None and time.monotonic() - kept.opened > max_age)
    ):
        _discard(kept)
        kept = None
    if kept is None:
        kept = _local.kept = _Kept(_new_connection())
    return kept


def _discard(kept: _Kept) -> None:
    if getattr(_local, "kept", None) is kept:
        _local.kept = None
    with suppress(psycopg.Error):
        kept.conn.close()


@contextmanager
def advisory_lock(namespace: int, key: int) -> Iterator[bool]:
    """Try to take the two-int4 advisory lock ``(namespace, key)`` without waiting; yields whether it
    was taken, and releases it when the block ends. A failure to reach the database raises, as any
    query would (an outage: 503).

    Locks nest: one taken while this thread holds another (a call probing a sibling's lock under its
    own) is taken in a savepoint of the same transaction, and rolling back to that savepoint releases
    it alone; the outer lock stays held until its own block ends."""
    kept = _kept()
    savepoint = f"bailing_lock_{kept.depth}" if kept.depth else None
    try:
        with kept.conn.cursor() as cursor:
            if savepoint:
                cursor.execute(f"SAVEPOINT {savepoint}")
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [namespace, key])
            held = bool(cursor.fetchone()[0])
    except psycopg.Error:
        _discard(kept)
        raise
    kept.depth += 1
    try:
        yield held
    finally:
        kept.depth -= 1
        try:
            if savepoint:  # this lock alone: the outer ones stay with the transaction
                with kept.conn.cursor() as cursor:
                    cursor.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
                    cursor.execute(f"RELEASE SAVEPOINT {savepoint}")
            else:
                kept.conn.rollback()  # ends the lock's transaction: the lock goes with it
        except psycopg.Error:
            _discard(kept)  # the connection is gone, and its transaction (and locks) with it
        if not savepoint and connections["default"].settings_dict.get("CONN_MAX_AGE") == 0:
            _discard(kept)  # DB_CONN_MAX_AGE=0: no connection is kept between requests


def close_all() -> None:
    """Close every thread's lock connection (for a test session's end, before its database is
    dropped; a thread that takes a lock afterwards opens a new one)."""
    with _open_guard:
        open_now = list(_open)
        _open.clear()
    for conn in open_now:
        with suppress(psycopg.Error):
            conn.close()
