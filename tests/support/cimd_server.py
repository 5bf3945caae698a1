"""A tiny HTTPS server for client metadata documents, with a self-signed certificate made here.

The certificate (``127.0.0.1`` and ``localhost``) is its own CA: its PEM is what a test points
``BAILING_CIMD_CA_FILE`` at. Each path answers what the test put there (:meth:`DocumentServer.put`):
a status, headers and a body, optionally after a delay or dripped slowly; :meth:`hits` counts the
requests each path received, so a test can tell a cached document from a fetched one. Fixtures:
``cimd_server`` (session) and ``cimd`` (the server emptied, the hub allowed to fetch from it).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.threaded_server import ServerThread


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A fresh key and self-signed certificate for 127.0.0.1 / localhost: (cert PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bailing cimd test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cimd-cert.pem", directory / "cimd-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay: float = 0.0  # before the status line
    drip: float = 0.0  # between body bytes (and no Content-Length)
    content_length: bool = True


class DocumentServer:
    """HTTPS on 127.0.0.1 with a random port; ``url(path)`` is ``https://127.0.0.1:<port><path>``."""

    def __init__(self, directory: Path) -> None:
        self.ca_file, key_file = self_signed_certificate(directory)
        self._answers: dict[str, Answer] = {}
        self._hits: dict[str, int] = {}
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                with outer._lock:
                    outer._hits[self.path] = outer._hits.get(self.path, 0) + 1
                    answer = outer._answers.get(self.path, Answer(status=404, body=b"{}"))
                if answer.delay:
                    time.sleep(answer.delay)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    if answer.content_length and not answer.drip:
                        self.send_header("Content-Length", str(len(answer.body)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    if answer.drip:
                        for byte in answer.body:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(answer.drip)
                    else:
                        self.wfile.write(answer.body)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, key_file)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.running = ServerThread(self.server)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def put(self, path: str, answer: Answer) -> str:
        with self._lock:
            self._answers[path] = answer
        return self.url(path)

    def put_document(self, path: str, document: dict, *, cache_control: str | None = None) -> str:
        """Serve ``document`` as JSON at ``path``; returns its URL."""
        headers = {"Content-Type": "application/json"}
        if cache_control is not None:
            headers["Cache-Control"] = cache_control
        return self.put(path, Answer(body=json.dumps(document).encode(), headers=headers))

    def hits(self, path: str) -> int:
        with self._lock:
            return self._hits.get(path, 0)

    def reset(self) -> None:
        with self._lock:
            self._answers.clear()
            self._hits.clear()

    def close(self) -> None:
        self.running.stop()


@pytest.fixture(scope="session")
def cimd_server(tmp_path_factory):
    """One document server for the session (its certificate is made once)."""
    server = DocumentServer(tmp_path_factory.mktemp("cimd"))
    yield server
    server.close()


@pytest.fixture
def cimd(cimd_server, settings):
    """The document server with nothing on it, the hub allowed to fetch from it (loopback, its CA)
    and an empty document cache."""
    from agent_runtime.services.agent_auth.cimd import cimd_cache_clear

    cimd_server.reset()
    cimd_cache_clear()
    settings.BAILING_CIMD_ALLOW_PRIVATE = True
    settings.BAILING_CIMD_CA_FILE = str(cimd_server.ca_file)
    yield cimd_server
    cimd_cache_clear()
