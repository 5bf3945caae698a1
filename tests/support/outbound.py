"""Real sockets for tests of the hub's outbound HTTP (bailing/outbound.py): a raw HTTP server whose
answers misbehave on purpose, a guard that fails any test trying to connect beyond loopback, and a
stand-in for the resolver function the outbound backend calls.

:class:`RawHTTPServer` listens on 127.0.0.1 (optionally with TLS), reads one request per connection
(head and ``Content-Length`` body) and hands it to an *answer* — a function of the request and a
:class:`Peer` that writes raw bytes and counts them. It records every request as received (the raw
request target included) and, per connection, when it opened and closed and how many bytes the
answer managed to send before the client hung up. Answers here: :func:`fixed`, :func:`drip_headers`,
:func:`drip_body`, :func:`huge_body`, :func:`endless_body`; :func:`routes` picks one by path.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

# Every scripted misbehaviour gives up after this long, so a client that never hangs up (the old,
# unbounded code) still lets the test end.
ANSWER_LIMIT_SECONDS = 30.0
DRIP_INTERVAL = 0.2
CHUNK = 64 * 1024


@dataclass
class RawRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ConnectionStats:
    opened_at: float
    closed_at: float | None = None
    sent: int = 0
    hung_up: bool = False  # the client closed (or reset) while the answer was still sending

    @property
    def seconds(self) -> float:
        return (self.closed_at or time.monotonic()) - self.opened_at


class Peer:
    """The server's end of one connection: ``send`` raises ``OSError`` once the client hung up."""

    def __init__(self, sock: socket.socket, stats: ConnectionStats, stopping: threading.Event):
        self._sock = sock
        self.stats = stats
        self.stopping = stopping

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            sent = self._sock.send(view)
            self.stats.sent += sent
            view = view[sent:]

    def wait(self, seconds: float) -> bool:
        """Sleep; True if the server is stopping."""
        return self.stopping.wait(seconds)


Answer = Callable[[RawRequest, Peer], None]


def _read_request(sock: socket.socket) -> RawRequest | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return RawRequest(method=method, target=target, headers=headers, body=rest[:length])


class RawHTTPServer:
    def __init__(self, answer: Answer, *, tls: ssl.SSLContext | None = None, sndbuf: int | None = None):
        self.answer = answer
        self.requests: list[RawRequest] = []
        self.connections: list[ConnectionStats] = []
        self.server_names: list[str | None] = []
        self._tls = tls
        self._sndbuf = sndbuf
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        if tls is not None:
            tls.sni_callback = self._sni
        self._acceptor = threading.Thread(target=self._accept, name="raw-http-accept")
        self._acceptor.start()

    def _sni(self, sslobj, server_name, context) -> None:
        with self._lock:
            self.server_names.append(server_name)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), name="raw-http-conn")
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        stats = ConnectionStats(opened_at=time.monotonic())
        with self._lock:
            self.connections.append(stats)
        try:
            if self._sndbuf is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
            sock.settimeout(10)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True)
            request = _read_request(sock)
            if request is None:
                return
            with self._lock:
                self.requests.append(request)
            self.answer(request, Peer(sock, stats, self._stopping))
        except OSError:
            stats.hung_up = True
        finally:
            stats.closed_at = time.monotonic()
            with contextlib.suppress(OSError):
                sock.close()

    @property
    def accepted(self) -> int:
        with self._lock:
            return len(self.connections)

    def stop(self) -> None:
        self._stopping.set()
        self._acceptor.join()
        self._listener.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=ANSWER_LIMIT_SECONDS + 5)


@contextlib.contextmanager
def raw_http_server(answer: Answer, **options) -> Iterator[RawHTTPServer]:
    server = RawHTTPServer(answer, **options)
    try:
        yield server
    finally:
        server.stop()


# --- answers ---------------------------------------------------------------------------------------
def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def fixed(status: int = 200, body: bytes = b"{}", headers: dict[str, str] | None = None) -> Answer:
    def answer(request: RawRequest, peer: Peer) -> None:
        head = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        peer.send(_head(status, {**head, "Connection": "close"}) + body)

    return answer


def _until_limit(peer: Peer, interval: float) -> Iterator[None]:
    deadline = time.monotonic() + ANSWER_LIMIT_SECONDS
    while time.monotonic() < deadline:
        if peer.wait(interval):
            return
        yield


def drip_headers(interval: float = DRIP_INTERVAL) -> Answer:
    """``HTTP/1.1 200 OK`` and then one header line per ``interval``; the headers never end."""

    def answer(request: RawRequest, peer: Peer) -> None:
        peer.send(b"HTTP/1.1 200 OK\r\n")
        for _ in _until_limit(peer, interval):
            peer.send(b"X-Drip: still coming\r\n")

    return answer


def drip_body(interval: float = DRIP_INTERVAL, status: int = 200) -> Answer:
    """Complete headers promising 100,000 bytes, then one byte per ``interval``."""

    def answer(request: RawRequest, peer: Peer) -> None:
        peer.send(_head(status, {"Content-Type": "application/json", "Content-Length": "100000"}) + b"{")
        for _ in _until_limit(peer, interval):
            peer.send(b" ")

    return answer


def huge_body(size: int, status: int = 200) -> Answer:
    """A ``size``-byte body with its ``Content-Length``, sent as fast as the client takes it."""

    def answer(request: RawRequest, peer: Peer) -> None:
        peer.send(_head(status, {"Content-Type": "application/json", "Content-Length": str(size)}))
        block = b" " * CHUNK
        left = size
        while left > 0 and not peer.stopping.is_set():
            peer.send(block[: min(left, CHUNK)])
            left -= CHUNK

    return answer


def endless_body(status: int = 200) -> Answer:
    """A body without a length that never ends (until the client hangs up, or the time limit)."""

    def answer(request: RawRequest, peer: Peer) -> None:
        peer.send(_head(status, {"Content-Type": "application/json", "Connection": "close"}))
        block = b" " * CHUNK
        deadline = time.monotonic() + ANSWER_LIMIT_SECONDS
        while time.monotonic() < deadline and not peer.stopping.is_set():
            peer.send(block)

    return answer


def routes(table: dict[str, Answer], default: Answer | None = None) -> Answer:
    """The answer for the request's path (the target without its query)."""

    def answer(request: RawRequest, peer: Peer) -> None:
        chosen = table.get(request.target.split("?", 1)[0], default or fixed(404, b'{"error":"not_found"}'))
        chosen(request, peer)

    return answer


# --- never beyond loopback -------------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


@pytest.fixture
def loopback_only(monkeypatch) -> list[str]:
    """Fail the test at once if anything tries to connect a TCP socket beyond loopback.

    Outbound-policy tests name denied addresses (169.254.169.254 …); the hub must refuse them before
    connecting, and if it ever did not, the test must fail here instead of sending traffic there.
    Any thread is guarded; the hosts returned, in order, are those the test's own thread connected
    to (a webhook delivery left running by an earlier test connects from its own thread meanwhile).
    """
    real_connect = socket.socket.connect
    attempts: list[str] = []
    test_thread = threading.current_thread()

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if threading.current_thread() is test_thread:
                attempts.append(host)
            if not _is_loopback(host):
                raise AssertionError(f"a test tried to connect beyond loopback ({host})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


@dataclass
class StandInResolver:
    """Answers ``resolve_addresses(host, port)`` from a script: ``answers[host]`` is one list of
    addresses per call (the last one repeats). Records every call."""

    answers: dict[str, list[list[str]]]
    calls: list[str] = field(default_factory=list)

    def __call__(self, host: str, port: int) -> list[tuple[int, tuple]]:
        self.calls.append(host)
        script = self.answers[host]
        addresses = script[min(len(self.calls_for(host)) - 1, len(script) - 1)]
        result = []
        for text in addresses:
            if ipaddress.ip_address(text).version == 6:
                result.append((socket.AF_INET6, (text, port, 0, 0)))
            else:
                result.append((socket.AF_INET, (text, port)))
        return result

    def calls_for(self, host: str) -> list[str]:
        return [call for call in self.calls if call == host]


@pytest.fixture
def stand_in_resolver(monkeypatch) -> Callable[[dict[str, list[list[str]]]], StandInResolver]:
    """Substitute the resolver function the outbound backend calls (bailing.outbound.resolve_addresses)."""
    from bailing import outbound

    def install(answers: dict[str, list[list[str]]]) -> StandInResolver:
        resolver = StandInResolver(answers)
        monkeypatch.setattr(outbound, "resolve_addresses", resolver)
        return resolver

    return install
