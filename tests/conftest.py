"""Shared fixtures. The database is the real embedded PostgreSQL (or DATABASE_URL's server)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

# Fixtures shared across test packages: ``external_database_url`` (a throwaway database on the
# machine's PostgreSQL 15, for the DATABASE_URL path and the lexical fallback); ``database_down`` and
# ``throwaway_server`` (broken databases for the outage tests, never the shared test database);
# ``loopback_only`` and ``stand_in_resolver`` (outbound-policy tests: no connection beyond loopback,
# a scripted resolver for the outbound backend).
pytest_plugins = [
    "tests.support.external_db",
    "tests.support.console",
    "tests.support.outage",
    "tests.support.outbound",
]


def pytest_unconfigure(config):
    """Stop the embedded PostgreSQL if this test session started it (a running demo's is left alone)."""
    from django.conf import settings

    from bailing.db import embedded

    if getattr(settings, "BAILING_EMBEDDED_DB", False) and embedded.started_here:
        from django.db import connections

        connections.close_all()
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
