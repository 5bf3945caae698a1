"""What the chaos scenarios and the soak share: a dedicated embedded PostgreSQL they may stop and kill,
the child process that runs against it, one keep-alive HTTP connection to the hub, and waiting.

A scenario that breaks the database never touches the configured one (a running demo's, the tests'):
:func:`dedicated_run` makes a fresh data directory under the system's temporary directory (prefix
:data:`WORK_PREFIX`), re-runs a management command in a child process whose settings point there
(``BAILING_PGDATA``; the settings initialise and start the server), streams its output, and afterwards
stops that server and removes the directory, however the child ended. The child checks with
:func:`dedicated_server_check` that it really runs on such a server before doing anything.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg
from django.conf import settings

from bailing.db import embedded

# The dedicated server's directory: a fresh temporary one of this prefix, nothing else. Short: the
# server's unix socket lives in it.
WORK_PREFIX = "bch-"


def dedicated_run(
    *, command: Sequence[str], write: Callable[[str], None], timeout: float, label: str
) -> tuple[int, Path]:
    """Run ``manage.py *command --dedicated-server=DIR`` on a fresh embedded server; each line of its
    output is passed to ``write``. Stops the child's process group after ``timeout`` seconds, and the
    server and its directory in any case. Returns the child's exit code and the data directory (gone
    by then)."""
    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX))
    work.chmod(0o777)  # as root, pgserver runs PostgreSQL as its own user
    pgdata = work / "pg"
    write(f"{label}: a dedicated embedded PostgreSQL on {pgdata}")
    argv = [
        sys.executable,
        str(Path(settings.BASE_DIR) / "manage.py"),
        *command,
        f"--dedicated-server={pgdata}",
    ]
    env = {**os.environ, "BAILING_PGDATA": str(pgdata), "DATABASE_URL": "", "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(
        argv,
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # what it starts goes with it if it must be stopped
    )
    timer = threading.Timer(timeout, stop_group, args=(child,))
    timer.start()
    try:
        for line in child.stdout:
            write(line.rstrip("\n"))
        child.wait()
    finally:
        timer.cancel()
        stop_group(child)
        _kill_written_down(work / "pids")
        child.stdout.close()  # the pipe, even when the loop above was cut short
        with contextlib.suppress(Exception):
            embedded.embedded_server_stop(pgdata)
        shutil.rmtree(work, ignore_errors=True)
    return child.returncode, pgdata


def _kill_written_down(pid_file: Path) -> None:
    """SIGKILL what the child wrote down as started (one pid a line) and left running: processes in
    a session of their own (gunicorn) are not in the child's group. A pid is killed only while its
    command line is still one of this checkout's interpreter or gunicorn, not a reused number."""
    try:
        pids = {int(line) for line in pid_file.read_text().split() if line.isdigit()}
    except OSError:
        return
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"python" in cmdline or b"gunicorn" in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def dedicated_server_check(given: str) -> Path | None:
    """The data directory ``--dedicated-server`` names, when it is the fresh embedded server these
    settings use (else None: the caller refuses to run)."""
    pgdata = Path(given).resolve()
    if (
        not settings.BAILING_EMBEDDED_DB
        or Path(settings.BAILING_PGDATA).resolve() != pgdata
        or not pgdata.parent.name.startswith(WORK_PREFIX)
    ):
        return None
    return pgdata


def signal_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signum)


def stop_group(child: subprocess.Popen) -> None:
    """Stop the child (TERM, then KILL after 30 s) and whatever of its process group it left behind
    (what it started, had it no chance to stop it). The PostgreSQL server is not in that group
    (``pg_ctl`` detaches it); the caller stops it."""
    if child.poll() is None:
        signal_group(child, signal.SIGTERM)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            signal_group(child, signal.SIGKILL)
            child.wait()
    signal_group(child, signal.SIGKILL)


class HubConnection:
    """One keep-alive HTTP connection to the hub; any transport failure is status 0 and a reconnect."""

    def __init__(
        self, port: int, token: str, name: str, *, timeout: float = 10, idle_close: float | None = None
    ):
        """``idle_close``: a connection left idle that long is closed before the next request, as a
        client does below the server's keep-alive timeout (the front closes one idle for
        ``BAILING_FRONT_KEEPALIVE_TIMEOUT``, 5 s), so a request never meets one the server just
        closed."""
        self.port = port
        self.name = name
        self.sent = 0
        self.timeout = timeout
        self.idle_close = idle_close
        self.last_used = 0.0
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.conn: http.client.HTTPConnection | None = None
        self.last_request_id = ""

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """One request under its own ``X-Request-Id`` (``last_request_id``), which the hub's log
        lines for it carry."""
        self.sent += 1
        self.last_request_id = f"{self.name}-{self.sent}"
        if (
            self.conn is not None
            and self.idle_close is not None
            and time.monotonic() - self.last_used > self.idle_close
        ):
            self.close()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            sent = {**self.headers, "X-Request-Id": self.last_request_id, **(headers or {})}
            self.conn.request(method, path, body=body, headers=sent)
            response = self.conn.getresponse()
            data = response.read()
            self.last_used = time.monotonic()
            if response.will_close:
                self.close()
            return response.status, data
        except (OSError, http.client.HTTPException):
            self.close()
            return 0, b""

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def accepting() -> bool:
    """Does the server accept a connection right now (a fresh one, not Django's)?"""
    db = settings.DATABASES["default"]
    options = db.get("OPTIONS", {})
    try:
        psycopg.connect(
            dbname=db["NAME"],
            user=db["USER"],
            host=options.get("host") or db["HOST"] or None,
            port=db["PORT"] or None,
            connect_timeout=1,
        ).close()
    except psycopg.Error:
        return False
    return True


def wait_for(predicate: Callable[[], bool], *, timeout: float, poll: float = 0.02) -> float | None:
    """When ``predicate`` first held (``time.monotonic()``), polling every ``poll`` seconds; None when
    it did not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(poll)
    return None
