"""The database backend: a health check without a round trip, and prepared statements (real PostgreSQL)."""

from __future__ import annotations

import select
import time

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def _other_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    keep = {key: params[key] for key in ("dbname", "user", "host", "port", "password") if params.get(key)}
    return psycopg.connect(**keep, autocommit=True)


def _last_statement(pid: int) -> str:
    with _other_connection() as other:
        return other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def test_an_idle_healthy_connection_is_usable_without_a_query():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'marker-before-health-check'")
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    assert connection.is_usable() is True
    # PostgreSQL's last statement of that backend is still ours: the check sent nothing.
    assert _last_statement(pid) == "SELECT pg_backend_pid()"


def test_a_terminated_backend_is_detected_and_replaced():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while not select.select([connection.connection.fileno()], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the server never closed the terminated connection"
    assert connection.is_usable() is False
    # What Django does at the start of a request with CONN_HEALTH_CHECKS: the dead connection is
    # dropped, and the next query opens a new one instead of failing.
    connection.health_check_done = False
    connection.close_if_health_check_failed()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_statements_run_again_are_prepared_on_the_server():
    users = get_user_model().objects
    for _ in range(3):
        list(users.filter(username="nobody-prepared").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("nobody" not in text and "auth_user" in text and "$1" in text for text in prepared), prepared
