"""The embedded PostgreSQL can be stopped by whoever started it (tests, ``make stop``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bailing.db import embedded

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_data_dir() -> Iterator[Path]:
    """A short path (the unix socket lives in the data directory), outside pytest's base temporary
    directory: as root, PostgreSQL runs as pgserver's own user, which must traverse every parent, and
    each new pytest session on the machine makes that base private again."""
    base = Path(tempfile.mkdtemp(prefix="bpg-"))
    base.chmod(0o777)
    # Starting this server says nothing about the shared one the session may have to stop at its end.
    started_here = embedded.started_here
    try:
        yield base / "d"
    finally:
        embedded.started_here = started_here
        embedded.embedded_server_stop(base / "d")
        shutil.rmtree(base, ignore_errors=True)


def test_a_server_started_on_a_fresh_data_directory_is_stopped_again(fresh_data_dir):
    pgdata = fresh_data_dir
    assert not embedded.embedded_server_running(pgdata)

    url = embedded.embedded_database_url(pgdata)
    assert str(pgdata) in url or "host=" in url
    assert embedded.embedded_server_running(pgdata)

    status = subprocess.run(
        [sys.executable, "-m", "bailing.db.embedded", "status"],
        cwd=ROOT,
        env={"BAILING_PGDATA": str(pgdata), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "running" in status.stdout

    stop = subprocess.run(
        [sys.executable, "-m", "bailing.db.embedded", "stop"],
        cwd=ROOT,
        env={"BAILING_PGDATA": str(pgdata), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "stopped" in stop.stdout
    assert not embedded.embedded_server_running(pgdata)
    assert embedded.embedded_server_stop(pgdata) is False


def test_stop_without_a_server_says_so(tmp_path):
    assert embedded.embedded_server_stop(tmp_path / "none") is False
