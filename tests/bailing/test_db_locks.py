"""bailing/db/locks.py: an advisory lock held across the commits of the work it guards, in a
transaction of its own on a second connection, so that it holds behind a transaction-pooling
PgBouncer (docs/scaling.md "A connection pooler")."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from bailing.db import locks
from bailing.db.locks import advisory_lock

pytestmark = pytest.mark.django_db(transaction=True)

NAMESPACE, KEY = 0x74657374, 42


def _in_a_thread(function):
    """``function()`` in another thread (another lock connection); its result."""
    result = {}

    def run():
        try:
            result["value"] = function()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    return result["value"]


def _try_elsewhere() -> bool:
    def attempt():
        with advisory_lock(NAMESPACE, KEY) as held:
            return held

    return _in_a_thread(attempt)


def _advisory_locks_of(pid: int) -> list[tuple[str, bool]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT mode, granted FROM pg_locks WHERE locktype = 'advisory' AND pid = %s AND objid = %s",
            [pid, KEY],
        )
        return cursor.fetchall()


def test_a_held_lock_is_refused_elsewhere_and_free_again_after_the_block():
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held is True
        assert _try_elsewhere() is False
    assert _try_elsewhere() is True


def test_the_lock_outlives_the_commits_of_the_work_it_guards():
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held
        for _ in range(3):  # the journal commits before and after the business call
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        assert _try_elsewhere() is False


def test_it_is_a_transaction_lock_of_its_own_connection_never_a_session_lock_of_the_request():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        request_pid = cursor.fetchone()[0]
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held
        lock_pid = locks._local.kept.conn.info.backend_pid
        assert lock_pid != request_pid
        assert _advisory_locks_of(lock_pid) == [("ExclusiveLock", True)]
        assert _advisory_locks_of(request_pid) == []
        with connection.cursor() as cursor:  # transaction-scoped: open in a transaction, no statement
            cursor.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [lock_pid])
            assert cursor.fetchone()[0] == "idle in transaction"
    assert _advisory_locks_of(lock_pid) == []


def test_a_lock_whose_connection_dies_is_free_at_once_and_the_next_lock_reconnects():
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held
        lock_pid = locks._local.kept.conn.info.backend_pid
        with connection.cursor() as cursor:  # as when the worker holding it dies
            cursor.execute("SELECT pg_terminate_backend(%s)", [lock_pid])
        assert _try_elsewhere() is True
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held
        assert locks._local.kept.conn.info.backend_pid != lock_pid


def test_an_idle_lock_connection_the_server_ended_is_replaced_before_the_next_lock():
    """A database restart (or ``pg_terminate_backend``) between two locks ends the kept connection on
    the server's side: the next lock opens a new one instead of failing once per thread (a 503 for
    each thread's first governed call after the database is back, as the soak found)."""
    with advisory_lock(NAMESPACE, KEY):
        lock_pid = locks._local.kept.conn.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [lock_pid])
    _wait_gone(lock_pid)
    with advisory_lock(NAMESPACE, KEY) as held:
        assert held
        assert locks._local.kept.conn.info.backend_pid != lock_pid


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.02)
    raise AssertionError(f"backend {pid} still runs")


def test_one_connection_per_thread_serves_lock_after_lock():
    with advisory_lock(NAMESPACE, KEY):
        first = locks._local.kept.conn
    with advisory_lock(NAMESPACE, KEY + 1):
        assert locks._local.kept.conn is first


def test_with_conn_max_age_zero_no_lock_connection_is_kept():
    connection.settings_dict["CONN_MAX_AGE"], before = 0, connection.settings_dict["CONN_MAX_AGE"]
    try:
        with advisory_lock(NAMESPACE, KEY) as held:
            assert held
            conn = locks._local.kept.conn
        assert conn.closed
        assert locks._local.kept is None
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = before


def test_a_lock_taken_under_another_is_released_alone_and_the_outer_one_stays_held():
    # As a call probes a sibling's lock under its own (agent_runtime/services/invocations/gates.py).
    outer, inner = KEY, KEY + 1

    def elsewhere(key: int) -> bool:
        def attempt():
            with advisory_lock(NAMESPACE, key) as held:
                return held

        return _in_a_thread(attempt)

    with advisory_lock(NAMESPACE, outer) as held_outer:
        assert held_outer
        connection_before = locks._local.kept.conn
        with advisory_lock(NAMESPACE, inner) as held_inner:
            assert held_inner
            assert locks._local.kept.conn is connection_before  # one connection, one transaction
            assert (elsewhere(outer), elsewhere(inner)) == (False, False)
        assert (elsewhere(outer), elsewhere(inner)) == (False, True)
        with advisory_lock(NAMESPACE, outer) as again:  # the same lock again, under itself: taken
            assert again
        assert elsewhere(outer) is False
    assert (elsewhere(outer), elsewhere(inner)) == (True, True)
