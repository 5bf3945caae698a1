"""Debian's PgBouncer in front of this test session's database (installed by ``scripts/ensure-pgbouncer``,
which ``make test`` runs, as Chromium is).

:func:`pgbouncer_running` starts ``pgbouncer`` in the foreground on a free loopback port, pooling the
test database's connections in the mode asked for (transaction by default) over a deliberately small
pool, so that many client connections share few server connections and whatever a client leaves on
a server connection (a session lock, a prepared statement, a cursor) would meet another client. It
yields the ``DATABASE_URL`` through the pooler and stops the process on exit.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from django.db import connection

from front.launcher import free_port, stop_process

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _upstream() -> tuple[str, int, str, str]:
    """Host (a socket directory or an address), port, database and user of the test database."""
    settings = connection.settings_dict
    host = settings["OPTIONS"].get("host") or settings["HOST"] or "/var/run/postgresql"
    return host, int(settings["PORT"] or 5432), settings["NAME"], settings["USER"] or "postgres"


@contextlib.contextmanager
def pgbouncer_running(*, pool_mode: str = "transaction", pool_size: int = 2) -> Iterator[str]:
    assert os.path.exists(PGBOUNCER), "Debian pgbouncer is required: run scripts/ensure-pgbouncer"
    host, port, dbname, user = _upstream()
    listen = free_port()
    run_dir = Path(tempfile.mkdtemp(prefix="bailing-pgbouncer-"))
    argv = [PGBOUNCER]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root: it runs as the database socket's owner (pgserver runs
        # PostgreSQL as its own user when started by root), who can reach that socket.
        owner = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
        run_dir.chmod(0o777)
        argv += ["-u", owner]
    config = run_dir / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
{dbname} = host={host} port={port} dbname={dbname} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = any
pool_mode = {pool_mode}
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
max_db_connections = {pool_size}
ignore_startup_parameters = extra_float_digits
logfile = {run_dir}/pgbouncer.log
pidfile =
""",
        encoding="utf-8",
    )
    config.chmod(0o644)
    process = subprocess.Popen(
        [*argv, str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=run_dir
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", listen)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                log = run_dir / "pgbouncer.log"
                raise RuntimeError(
                    f"pgbouncer did not listen (exit={process.poll()}): "
                    + (log.read_text()[-2000:] if log.exists() else "")
                )
            time.sleep(0.05)
        yield f"postgres://{user}@127.0.0.1:{listen}/{dbname}"
    finally:
        stop_process(process, timeout=10)
        shutil.rmtree(run_dir, ignore_errors=True)
