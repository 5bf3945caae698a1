"""A real OpenAI-compatible chat completions endpoint on loopback, for the answer tests.

``chat_model(settings, model=..., api_key=...)`` is a context manager that starts it, points the
``BAILING_ANSWER_CHAT_*`` settings at it and yields its state: set ``state["content"]`` to the answer,
``state["mode"]`` to ``"status"`` (500), ``"malformed"``, ``"oversized"``, ``"sleep"`` or ``"raw"``
(``state["document"]`` as the body); ``state["requests"]`` records what the hub sent.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _ChatHandler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):
        pass

    def do_POST(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        state["requests"].append(
            {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
        )
        mode = state["mode"]
        if mode == "sleep":
            time.sleep(state.get("sleep", 2.0))
        if mode == "status":
            self._send(500, json.dumps({"error": {"message": "internal"}}).encode())
        elif mode == "malformed":
            self._send(200, b'{"choices": [{"message": {"content": "unterminated')
        elif mode == "oversized":
            content = "Refunds take five days [1]. " * 60_000  # ~1.7 MB of JSON
            self._send(200, _completion(content).encode())
        elif mode == "raw":
            self._send(200, json.dumps(state["document"]).encode())
        else:
            self._send(200, _completion(state["content"]).encode())

    def _send(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _completion(content: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
        }
    )


class _ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients hanging up (timeouts, oversized bodies) are what some tests do


@contextlib.contextmanager
def chat_model(settings, *, model: str = "test-model", api_key: str = "", timeout: float = 5):
    server = _ChatServer(("127.0.0.1", 0), _ChatHandler)
    server.state = {"mode": "ok", "content": "", "requests": []}
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    settings.BAILING_ANSWER_CHAT_URL = f"http://127.0.0.1:{server.server_address[1]}/v1/"
    settings.BAILING_ANSWER_CHAT_MODEL = model
    settings.BAILING_ANSWER_CHAT_API_KEY = api_key
    settings.BAILING_ANSWER_CHAT_TIMEOUT = timeout
    server.state["model"] = model
    try:
        yield server.state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
