"""Shared fixtures. The database is the real embedded PostgreSQL (or DATABASE_URL's server)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

# Fixtures shared across test packages: ``external_database_url`` (a throwaway database on the
# machine's PostgreSQL 15, for the DATABASE_URL path and the lexical fallback).
pytest_plugins = ["tests.support.external_db"]


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()
