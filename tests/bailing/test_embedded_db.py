"""The embedded PostgreSQL can be stopped by whoever started it (tests, ``make stop``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bailing.db import embedded

ROOT = Path(__file__).resolve().parents[2]


def test_a_server_started_on_a_fresh_data_directory_is_stopped_again(tmp_path_factory):
    # A short path: the unix socket lives in the data directory.
    data_dir = Path(tmp_path_factory.mktemp("pg", numbered=True))
    data_dir.chmod(0o777)  # pgserver runs PostgreSQL as its own user when the tests run as root
    pgdata = data_dir / "d"
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
