"""Django's PostgreSQL backend, with a persistent-connection health check that costs no round trip,
and a ``db.commit`` span around every commit while tracing is on.

With ``CONN_HEALTH_CHECKS`` on, Django checks a reused connection once per request by sending
``SELECT 1`` — one extra round trip on every request, the hot paths included. This backend answers
the same question from the socket instead: a connection sitting idle between requests has nothing to
read, because PostgreSQL only writes to it in answer to a query. If the socket *is* readable, the
server has spoken on its own — the ``FATAL`` of a shutdown or ``pg_terminate_backend``, or the end of
the stream when the server process died — and only then does the check fall back to Django's own
``SELECT 1`` (which also consumes a harmless ``ParameterStatus`` or notification, should one be
waiting). A network that silently drops packets is not detected here; the first query then fails
as an outage (503, ``bailing.db.outage``) and the connection is closed for the next request, as before.

The psycopg instrumentation traces statements sent through a cursor; a commit is the connection's
own ``COMMIT`` and would be invisible, yet it is where a write waits for its WAL to reach disk. So
``_commit`` is the span ``db.commit`` (off: the shared no-op of :func:`bailing.tracing.span`).
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus

from bailing import tracing
from bailing.db.postgresql.creation import DatabaseCreation


def server_spoke(conn) -> bool:
    """Whether the server has written to an idle psycopg connection (or its socket cannot be polled):
    it never does but to end it, so a ``True`` means reconnect, or check with a query first."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


class DatabaseWrapper(base.DatabaseWrapper):
    creation_class = DatabaseCreation

    def _commit(self):
        with tracing.span("db.commit"):
            return super()._commit()

    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        if conn.info.transaction_status != TransactionStatus.IDLE:
            return super().is_usable()
        return super().is_usable() if server_spoke(conn) else True
