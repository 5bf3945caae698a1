"""Chunked request bodies against the real servers, with raw sockets: gunicorn alone
(``bailing/gunicorn.conf.py``) de-chunks them into a stream without ``Content-Length`` that the hub
reads, measures and parses; behind the front (``python -m front``, the production topology)
the front de-chunks and measures them before gunicorn sees them. Broken framing is 400
``invalid_request`` either way, and a client that disconnects mid-chunk gets nothing and leaves no
traceback in the server's log.

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
from collections.abc import Iterator
from pathlib import Path

import pytest

from front.launcher import hub_running

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Hub:
    def __init__(self, port: int, log: Path):
        self.port, self.log = port, log

    def errors_logged(self) -> list[str]:
        return [
            line for line in self.log.read_text().splitlines() if "Traceback" in line or " ERROR " in line
        ]


def _gunicorn_alone(log) -> Iterator[int]:
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
        stdout=log,
        stderr=log,
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


def _behind_the_front(log) -> Iterator[int]:
    env = {"GUNICORN_WORKERS": "1", "GUNICORN_THREADS": "2"}
    with hub_running(extra_env=env, log=log) as url:
        yield int(url.rsplit(":", 1)[1])


# gunicorn alone (its own de-chunking, read by the middleware), and the production topology (the front
# de-chunks and forwards a Content-Length).
@pytest.fixture(scope="module", params=["gunicorn", "front"])
def hub(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("hub") / "server.log"
    start = _gunicorn_alone if request.param == "gunicorn" else _behind_the_front
    with path.open("w") as log:
        servers = start(log)
        port = next(servers)
        try:
            yield Hub(port, path)
        finally:
            servers.close()


def _raw_exchange(port: int, data: bytes, *, close_after_send: bool = False) -> bytes:
    """Send ``data`` on a fresh connection and return everything the server sends until it closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(data)
        if close_after_send:
            return b""
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
            if b"\r\n\r\n" in received:
                head, _, rest = received.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(rest) >= length[0]:
                    return received
    finally:
        sock.close()


def _parse(raw: bytes) -> tuple[int, dict[str, str], dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_a_chunked_body_reaches_the_view(hub):
    connection = http.client.HTTPConnection("127.0.0.1", hub.port, timeout=10)
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
    sock = socket.create_connection(("127.0.0.1", hub.port), timeout=10)
    head = (
        "POST /agent-auth/v1/token HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{hub.port}\r\n"
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


CHUNKED_HEAD = (
    "POST /agent-auth/v1/token HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\n"
    "Content-Type: application/json\r\n"
    "Transfer-Encoding: chunked\r\n\r\n"
)


@pytest.mark.parametrize(
    "chunks",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # a chunk size that is not hex
        b"2\r\n{}XX0\r\n\r\n",  # a chunk without its CRLF
        b"-2\r\n{}\r\n0\r\n\r\n",
    ],
    ids=["size-not-hex", "missing-crlf", "negative-size"],
)
def test_a_malformed_chunked_body_is_400_invalid_request_without_authentication(hub, chunks):
    status, headers, payload = _parse(_raw_exchange(hub.port, CHUNKED_HEAD.encode() + chunks))
    assert status == 400
    assert payload["error"] == "invalid_request"
    assert headers["cache-control"] == "no-store"
    assert headers["content-type"].startswith("application/json")
    assert hub.errors_logged() == []


def test_a_client_that_disconnects_mid_chunk_gets_nothing_and_leaves_no_traceback(hub):
    _raw_exchange(hub.port, CHUNKED_HEAD.encode() + b"40\r\n" + b'{"grant_type":', close_after_send=True)
    time.sleep(1.0)  # let the server notice the disconnect and log whatever it would
    # Still serving, and nothing was logged as an error.
    status, _, payload = _parse(_raw_exchange(hub.port, CHUNKED_HEAD.encode() + b"2\r\n{}\r\n0\r\n\r\n"))
    assert (status, payload["error"]) == (400, "invalid_request")
    assert hub.errors_logged() == []
