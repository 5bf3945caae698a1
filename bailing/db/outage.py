"""Telling a database that cannot be reached from a bug (docs/protocol.md "Database outages").

An outage is an exception whose chain (``__cause__`` / ``__context__``) holds a database error that
says the server is not there: a psycopg or Django ``OperationalError`` / ``InterfaceError`` raised
by the client side (connection refused, socket gone, connection closed, connect timeout), or one the
server reports with a connection-class SQLSTATE (``08xxx``, shutting down, starting up, out of
connection slots); also a raw ``ConnectionError`` raised inside the driver. Everything else the
server reports — a ``DataError`` from bad input, an ``IntegrityError``, a deadlock, a statement
timeout — is not an outage and keeps its own handling.

Callers answer 503 ``service_unavailable`` with ``Retry-After`` and log one line naming the
exception type (:func:`log_database_unavailable`), never a traceback: an outage is an operational
fact, not a bug to debug from a stack.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
from django.db import utils as django_db

logger = logging.getLogger("bailing.db")

# What Retry-After says while the database is unreachable: the embedded server's supervisor brings
# it back within about a second of noticing (docs/production.md "Outages").
DATABASE_RETRY_AFTER_SECONDS = 2

# SQLSTATEs the server sends when it cannot serve this connection (besides class 08, connection
# exception): admin_shutdown, crash_shutdown, cannot_connect_now (starting up or shutting down),
# idle_session_timeout, too_many_connections.
OUTAGE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})

_DRIVER_MODULES = ("psycopg", "django.db")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [exc]
    while stack:
        link = stack.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        stack += [link.__cause__, link.__context__]


def _raised_in_driver(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module.split(".", 1)[0] == "psycopg" or module.startswith("django.db"):
            return True
        tb = tb.tb_next
    return False


def _psycopg_outage(exc: psycopg.Error) -> bool:
    state = exc.sqlstate
    if state is None:  # raised by the client side: the connection could not be made or is gone
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in OUTAGE_SQLSTATES


def database_unavailable(exc: BaseException | None) -> BaseException | None:
    """The link of ``exc``'s chain that shows the database unreachable, or None (not an outage)."""
    if exc is None:
        return None
    for link in _chain(exc):
        if isinstance(link, psycopg.Error):
            if _psycopg_outage(link):
                return link
        elif isinstance(link, django_db.OperationalError | django_db.InterfaceError):
            # Django wraps the driver's error (``raise ... from``): the driver's error decides.
            if not isinstance(link.__cause__, psycopg.Error):
                return link
        elif isinstance(link, ConnectionError) and _raised_in_driver(link):
            return link
    return None


def log_database_unavailable(outage: BaseException) -> None:
    """The one log line of a request (or a check) that failed because the database is unreachable."""
    logger.warning("database unavailable: %s", type(outage).__name__)


def mark_logged(response) -> None:
    """Tell Django's request logging that this response has been logged already (the flag
    ``django.utils.log.log_response`` sets and honours), so an outage stays one line."""
    response._has_been_logged = True
