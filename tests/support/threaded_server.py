"""A stand-in server (``socketserver`` / ``http.server``) served from a thread of the test process.

``serve_forever`` looks for a shutdown request every ``poll_interval`` seconds, half a second by
default: every stand-in stopped at the end of a test waited that long for nothing. Here it looks every
10 ms, and stopping closes the socket and joins the thread.
"""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator
from typing import TypeVar

POLL_INTERVAL_SECONDS = 0.01

Server = TypeVar("Server", bound=socketserver.BaseServer)


class ServerThread:
    """``server`` serving from a daemon thread until :meth:`stop`."""

    def __init__(self, server: socketserver.BaseServer, *, name: str | None = None):
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": POLL_INTERVAL_SECONDS},
            name=name,
            daemon=True,
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@contextlib.contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` serving from a thread for the ``with`` block; stopped (socket closed) after it."""
    running = ServerThread(server)
    try:
        yield server
    finally:
        running.stop()
