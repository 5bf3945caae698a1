"""The embedded PostgreSQL supervisor (``python -m bailing.db.embedded supervise``, run by ``make demo``)
brings a stopped or killed server back within seconds, and never stops it itself.

It runs against a throwaway server of this module's own, never the shared test database.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from bailing.db import embedded

ROOT = Path(__file__).resolve().parents[2]


def _connectable(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=1).close()
    except psycopg.Error:
        return False
    return True


def _wait_until(predicate, *, timeout: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - started


def _supervisor(data_dir: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bailing.db.embedded", "supervise", "--interval", "0.2"],
        cwd=ROOT,
        env={**os.environ, "BAILING_PGDATA": str(data_dir), "DATABASE_URL": "", **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_stopped_and_a_killed_server_are_restarted(throwaway_server):
    url = throwaway_server.url
    assert _connectable(url)
    supervisor = _supervisor(throwaway_server.data_dir)
    try:
        for breakdown in (throwaway_server.stop, throwaway_server.kill):
            before = embedded.embedded_postmaster_pid(throwaway_server.data_dir)
            breakdown()  # returns once that postmaster is gone
            _wait_until(lambda: _connectable(url), timeout=20)
            assert throwaway_server.running()
            # Another postmaster: the supervisor started a new server.
            assert embedded.embedded_postmaster_pid(throwaway_server.data_dir) != before
    finally:
        supervisor.terminate()
        _, said = supervisor.communicate(timeout=20)
    assert supervisor.returncode == 0, said
    restarts = [float(seconds) for seconds in re.findall(r"restarted in ([\d.]+) s", said)]
    assert len(restarts) == 2, said
    # The aim is 2 s from noticing; the bound leaves room for a loaded machine.
    assert all(seconds < 10 for seconds in restarts), restarts
    # Stopping the supervisor leaves the server running.
    assert throwaway_server.running() and _connectable(url)


def test_a_zombie_postmaster_counts_as_down(throwaway_server, monkeypatch):
    pid = embedded.embedded_postmaster_pid(throwaway_server.data_dir)
    assert embedded.embedded_server_running(throwaway_server.data_dir)
    real_read_text = Path.read_text

    def stat_of_a_zombie(path: Path, *args, **kwargs):
        if str(path) == f"/proc/{pid}/stat":
            return f"{pid} (postgres) Z 1 0 0"
        return real_read_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", stat_of_a_zombie)
    assert not embedded.embedded_server_running(throwaway_server.data_dir)


def test_with_database_url_set_there_is_nothing_to_supervise(tmp_path):
    supervisor = _supervisor(tmp_path / "none", DATABASE_URL="postgres://db.example.com/hub")
    supervisor.communicate(timeout=30)
    assert supervisor.returncode == 0
    assert not (tmp_path / "none").exists()
