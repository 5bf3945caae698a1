"""Broken databases for the outage tests, never the shared test database.

``database_down`` points this thread's default connection at a loopback port nobody listens on (every
connection attempt is refused at once). ``throwaway_server`` is an embedded PostgreSQL of the test's
own, on a fresh data directory, that a test may stop, kill and restart; it is stopped at the end of
the module whatever state the test left it in. ``default_database`` swaps the default connection's
settings for the duration of a block and restores them (and closes what it opened) afterwards.
"""

from __future__ import annotations

import contextlib
import copy
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import environ
import pytest
from django.db import connections

from bailing.db import embedded


def closed_port() -> int:
    """A loopback port that was free a moment ago: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def default_database(**overrides) -> Iterator[None]:
    connection = connections["default"]
    saved = copy.deepcopy(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(overrides)
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def database_down(django_db_blocker) -> Iterator[None]:
    """The default connection refused at every attempt (a database that is not there)."""
    with (
        django_db_blocker.unblock(),
        default_database(HOST="127.0.0.1", PORT=str(closed_port()), OPTIONS={"connect_timeout": 2}),
    ):
        yield


@dataclass
class ThrowawayServer:
    data_dir: Path
    url: str

    def connection_settings(self) -> dict:
        config = environ.Env.db_url_config(self.url)
        return {
            "NAME": config["NAME"],
            "USER": config["USER"],
            "PASSWORD": config["PASSWORD"],
            "HOST": config["HOST"],
            "PORT": config["PORT"],
            "OPTIONS": {**config.get("OPTIONS", {}), "connect_timeout": 2},
        }

    def running(self) -> bool:
        return embedded.embedded_server_running(self.data_dir)

    def stop(self) -> None:
        embedded.embedded_server_stop(self.data_dir)

    def kill(self) -> int | None:
        return embedded.embedded_server_kill(self.data_dir)

    def start(self) -> None:
        embedded.embedded_server_start(self.data_dir)


@pytest.fixture(scope="module")
def throwaway_server() -> Iterator[ThrowawayServer]:
    # Not under pytest's base temporary directory: as root, PostgreSQL runs as pgserver's own user,
    # which must traverse every parent, and each new pytest session on the machine makes that base
    # private again. A short path, too: the unix socket lives in the data directory.
    base = Path(tempfile.mkdtemp(prefix="bpg-"))
    base.chmod(0o777)
    data_dir = base / "d"
    # Starting this server says nothing about the shared one the session may have to stop at its end.
    started_here = embedded.started_here
    url = embedded.embedded_database_url(data_dir)
    embedded.started_here = started_here
    server = ThrowawayServer(data_dir=data_dir.resolve(), url=url)
    try:
        yield server
    finally:
        try:
            server.stop()  # a no-op when a test left it down (a killed server's backends exit by themselves)
        finally:
            shutil.rmtree(base, ignore_errors=True)
