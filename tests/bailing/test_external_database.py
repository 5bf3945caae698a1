"""DATABASE_URL points the hub at an existing server; without pgvector it still migrates and says so.

Runs against the machine's PostgreSQL 15 (no pgvector), in a throwaway database. Set
``BAILING_EXTERNAL_PG_URL`` to point it elsewhere. An unreachable server fails this test: the
external-database path must be proven, never silently skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def manage(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_database_url_server_without_pgvector_migrates_and_reports_it(external_database_url):
    migrated = manage(external_database_url, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    probe = manage(
        external_database_url,
        "shell",
        "-c",
        "from django.conf import settings; from django.db import connection; "
        "from bailing.db.features import vector_available, server_version; "
        "print(settings.BAILING_EMBEDDED_DB, vector_available(), server_version().split('.')[0], "
        "connection.settings_dict['NAME'])",
    )
    assert probe.returncode == 0, probe.stderr
    # The last line is ours; the embedded-server bootstrap may log above it.
    embedded, vector, major, name = probe.stdout.strip().splitlines()[-1].split()
    assert embedded == "False"
    assert vector == "False"
    assert int(major) < 18  # the machine's server, not the embedded one
    assert name == external_database_url.rsplit("/", 1)[1]
