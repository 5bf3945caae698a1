"""A small TCP proxy between the hub and a business system that can reset every connection on demand.

The soak points the Demo Shop's tool provider (and its approval webhook URL) at this proxy. Normally
it pipes bytes both ways, one thread per direction. :meth:`ResetProxy.reset_for` makes it behave like a
business system (or a load balancer before it) dropping everything for a while: every live
connection is closed with an RST (``SO_LINGER`` 0) on the hub's side, and every connection accepted
until the window ends is reset the same way at once, before a byte is read. Nothing else changes: the
business system itself keeps running and never sees the reset connections' requests.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

_LINGER_RESET = struct.pack("ii", 1, 0)


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    with contextlib.suppress(OSError):
        sock.close()


class ResetProxy:
    def __init__(self, upstream_port: int, *, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.listener.settimeout(0.2)  # accept() wakes to see close(): closing alone does not wake it
        self._lock = threading.Lock()
        self._live: set[tuple[socket.socket, socket.socket]] = set()
        self._finished: dict[tuple[socket.socket, socket.socket], int] = {}
        self._reset_until = 0.0
        self._closed = False
        self.accepted = 0
        self.reset_connections = 0
        self._thread = threading.Thread(target=self._accept_loop, name="reset-proxy", daemon=True)

    def start(self) -> ResetProxy:
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset_for(self, seconds: float) -> None:
        """Reset every live connection now, and every new one for ``seconds``."""
        with self._lock:
            self._reset_until = time.monotonic() + seconds
            live = list(self._live)
            self._live.clear()
        for client, upstream in live:
            self.reset_connections += 1
            _reset(client)
            _reset(upstream)

    def resetting(self) -> bool:
        return time.monotonic() < self._reset_until

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            live = list(self._live)
            self._live.clear()
        for pair in live:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.close()
        self._thread.join(timeout=5)

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            self.accepted += 1
            if self.resetting():
                self.reset_connections += 1
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            pair = (client, upstream)
            with self._lock:
                self._live.add(pair)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(pair, source, target), daemon=True).start()

    def _pump(self, pair, source: socket.socket, target: socket.socket) -> None:
        """One direction; the connection is closed when both directions ended, or one failed."""
        clean = False
        try:
            while data := source.recv(65536):
                target.sendall(data)
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
            clean = True
        except OSError:
            pass
        with self._lock:
            self._finished[pair] = self._finished.get(pair, 0) + 1
            last = not clean or self._finished[pair] >= 2
            if last:
                self._live.discard(pair)
                self._finished.pop(pair, None)
        if last:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.close()
