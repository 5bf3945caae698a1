"""Shared fixtures. The database is the real embedded PostgreSQL (or DATABASE_URL's server)."""

from __future__ import annotations

import pytest
from django.test import TransactionTestCase
from rest_framework.test import APIClient

from tests.support.module_rows import superuser, tables_empty

# Fixtures shared across test packages: ``external_database_url`` (a throwaway database on the
# machine's PostgreSQL 15, for the DATABASE_URL path and the lexical fallback); ``database_down`` and
# ``throwaway_server`` (broken databases for the outage tests, never the shared test database);
# ``loopback_only`` and ``stand_in_resolver`` (outbound-policy tests: no connection beyond loopback,
# a scripted resolver for the outbound backend); ``cimd_server`` and ``cimd`` (an HTTPS server of
# client metadata documents with a certificate made for the run).
pytest_plugins = [
    "tests.support.external_db",
    "tests.support.console",
    "tests.support.outage",
    "tests.support.outbound",
    "tests.support.cpu_profile",
    "tests.support.cimd_server",
]


def _fast_flush(self) -> None:
    """A transactional test's teardown, as Django's flush leaves the database, in ~10 ms instead of ~2 s.

    Django truncates every table (a TRUNCATE costs a new file per relation) and then replays
    post_migrate, which recreates every content type, permission and role group. Here the static
    tables are kept and the others emptied with DELETE in one transaction, with triggers and foreign
    key checks off for it (``session_replication_role = replica``, which needs a superuser: on a
    server where the tests are not one, Django's own flush runs).
    """
    from bailing.audit.ledger import audit_sealer_drain

    audit_sealer_drain()  # the sealer thread's seals of this test's events, before the tables empty
    for db_name in self._databases_names(include_mirrors=False):
        if not superuser(db_name):
            _django_fixture_teardown(self)
            return
        tables_empty(db_name)


_django_fixture_teardown = TransactionTestCase._fixture_teardown
TransactionTestCase._fixture_teardown = _fast_flush


def _xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_modifyitems(config, items):
    """Tests that drive the session's Chromium run last, in their collected order: the browser starts
    on the first of them and keeps an event loop running in its worker until the session ends
    (tests/support/console.py ``chromium``)."""
    items.sort(key=lambda item: "chromium" in getattr(item, "fixturenames", ()))


def pytest_unconfigure(config):
    """Stop the embedded PostgreSQL if this test session started it (a running demo's is left alone).

    Under pytest-xdist the controller loads the settings first, so it is the process that starts the
    server, and it stops it once every worker has ended; a worker only attaches to it."""
    from django.conf import settings

    from bailing.db import embedded
    from tests.support.cpu_profile import record_postgres

    if _xdist_worker(config):
        return
    if getattr(settings, "BAILING_EMBEDDED_DB", False) and embedded.started_here:
        from django.db import connections

        connections.close_all()
        record_postgres(settings.BAILING_PGDATA)
        embedded.embedded_server_stop(settings.BAILING_PGDATA)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _fresh_query_vectors():
    """Each test starts with an empty query-vector LRU, so no test sees another's cached embeddings."""
    from knowledge.query_vectors import query_vector_cache

    query_vector_cache().clear()
    yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """The tests' own connections commit without waiting for the WAL flush (``synchronous_commit =
    off``): a crash could lose the last commits of a throwaway test database, nothing else. Processes
    the tests start (live hubs, the Demo Shop) connect with the server's defaults."""
    from django.conf import settings

    options = settings.DATABASES["default"].setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()


@pytest.fixture(scope="session", autouse=True)
def _lock_connections_closed():
    """The advisory locks' own connections (bailing/db/locks.py) and the audit sealer thread's are
    closed at the session's end, before pytest-django drops the test database they are connected to."""
    yield
    from bailing.audit.ledger import audit_sealer_stop
    from bailing.db import locks

    audit_sealer_stop()
    locks.close_all()
