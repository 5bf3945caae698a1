"""Shared fixtures. The database is the real embedded PostgreSQL (or DATABASE_URL's server)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()
