"""Chunked request bodies against the real server: gunicorn (``bailing/gunicorn.conf.py``) de-chunks
them into a stream without ``Content-Length``, and the hub reads, measures and parses that stream.

Only endpoints that answer without touching the database are used, so the server can run against
whatever database the settings name.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def hub():
    port = _free_port()
    env = {
        **os.environ,
        "BAILING_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_THREADS": "2",
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    server = subprocess.Popen(
        [str(gunicorn), "-c", str(ROOT / "bailing" / "gunicorn.conf.py"), "bailing.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_chunked_body_reaches_the_view(hub):
    connection = http.client.HTTPConnection("127.0.0.1", hub, timeout=10)
    body = json.dumps({"grant_type": "password", "client_app_id": "shop"}).encode()
    pieces = iter([body[:10], body[10:]])
    connection.request(
        "POST",
        "/agent-auth/v1/token",
        body=pieces,
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = connection.getresponse()
    payload = json.loads(response.read())
    connection.close()
    # An unread body would have been judged as {} ("grant_type" missing, invalid_request).
    assert response.status == 400
    assert payload["error"] == "unsupported_grant_type"
    assert response.getheader("Cache-Control") == "no-store"
    assert response.getheader("Pragma") == "no-cache"


def test_an_oversized_chunked_body_is_refused_while_it_is_still_being_sent(hub):
    sock = socket.create_connection(("127.0.0.1", hub), timeout=10)
    head = (
        "POST /agent-auth/v1/token HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{hub}\r\n"
        "Content-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    sock.sendall(head.encode())
    chunk = b"x" * 8192
    sent = 0
    # 128 KiB of a body that never ends (no final zero-length chunk): the answer must come anyway.
    for _ in range(16):
        sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        sent += len(chunk)
    response = http.client.HTTPResponse(sock)
    response.begin()
    payload = json.loads(response.read())
    sock.close()
    assert response.status == 413
    assert payload["error"] == "arguments_too_large"
    assert payload["limit_scope"] == "request_body"
    assert payload["max_bytes"] == 8192
    assert 8192 < payload["observed_bytes"] <= sent
    assert response.getheader("Cache-Control") == "no-store"
