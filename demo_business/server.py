"""A small threaded HTTP server for the WSGI app (stdlib ``wsgiref``; fine for demos and tests).

Two changes from the stock ``wsgiref`` server: requests run on daemon threads (a slow client or a
long test never blocks the others or shutdown), and the raw request target is passed on as
``RAW_URI`` because the signature covers the path exactly as sent, before percent-decoding.
"""

from __future__ import annotations

import sys
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class DemoRequestHandler(WSGIRequestHandler):
    """Request handler that exposes the raw request target and keeps the access log optional."""

    access_log = False

    def get_environ(self) -> dict[str, Any]:
        environ = super().get_environ()
        environ["RAW_URI"] = self.path
        return environ

    def log_message(self, format: str, *args: Any) -> None:
        if self.access_log:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """``WSGIServer`` with one daemon thread per request."""

    daemon_threads = True


def make_demo_server(host: str, port: int, app: Any, *, access_log: bool = False) -> ThreadingWSGIServer:
    handler = type("ConfiguredDemoRequestHandler", (DemoRequestHandler,), {"access_log": access_log})
    return make_server(host, port, app, server_class=ThreadingWSGIServer, handler_class=handler)
