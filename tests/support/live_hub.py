"""The hub as shipped (the front before gunicorn, ``python -m front``) on this test session's
database: the URL a live hub needs, a module fixture helper that starts one and stops it, and the
same for a ``knowledge_worker`` process."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from django.conf import settings
from django.db import connection

from bailing.db.urls import database_url
from front.launcher import hub_running, stop_process


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


def knowledge_worker_start(
    log: Path,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    stdout: int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    """``manage.py knowledge_worker *args`` on the test database (``env`` may name another
    ``DATABASE_URL``, e.g. through a pooler), one embedding thread, its stderr in ``log``."""
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "BAILING_EMBEDDING_THREADS": "1",
        **(env or {}),
    }
    with log.open("w") as stderr:  # the child holds its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "manage.py", "knowledge_worker", *args],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )


@contextlib.contextmanager
def knowledge_worker_running(log: Path, **options) -> Iterator[subprocess.Popen]:
    """:func:`knowledge_worker_start`, stopped (SIGTERM, then SIGKILL after 30 s) on exit."""
    worker = knowledge_worker_start(log, **options)
    try:
        yield worker
    finally:
        stop_process(worker, timeout=30)
