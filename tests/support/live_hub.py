"""The hub as shipped (the front before gunicorn, ``python -m front``) on this test session's
database: the URL a live hub needs, and a module fixture helper that starts one and stops it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from django.db import connection

from bailing.db.urls import database_url
from front.launcher import hub_running


def test_database_url() -> str:
    """``DATABASE_URL`` of the database this test session writes to."""
    return database_url(connection.settings_dict)


test_database_url.__test__ = False  # a helper, not a test


@contextlib.contextmanager
def live_hub(log_dir, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A shipped-topology hub on the test database with ``env`` added; yields its URL. Its output goes
    to ``hub.log`` in ``log_dir`` (read it when a test fails)."""
    with (
        (log_dir / "hub.log").open("w") as log,
        hub_running(extra_env={"DATABASE_URL": test_database_url(), **(env or {})}, log=log) as url,
    ):
        yield url
