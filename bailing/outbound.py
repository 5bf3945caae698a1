"""The one way the hub opens HTTP clients towards business systems and webhooks.

Every outbound client follows no redirects (a redirect could move a signed request to another host)
and ignores proxy settings from the environment (a signed call goes where its provider says). They
all share one TLS context: building a context loads the CA bundle, which costs about 19 ms on this
machine — more than the rest of a loopback tool call — while a shared context is safe to use from
many threads at once (the ``ssl`` module's contexts are).

**One deadline per request.** httpx applies its timeouts to each socket operation: a server that
answers one header line (or one body byte) every few seconds never trips a read timeout and holds the
caller — a gunicorn thread, an invocation's advisory lock — for as long as it drips. Here every
request sent through an outbound client has one absolute deadline, ``timeout`` seconds after it is
handed to the transport, that covers the name lookup, connecting, TLS, sending, the response headers
and the body together. The network backend (:class:`_DeadlineBackend`) clamps every connect, read and
write to the time left and raises the matching httpcore timeout once it has passed, which httpx
reports as ``ConnectTimeout`` / ``WriteTimeout`` / ``ReadTimeout`` like any other timeout. The
deadline is kept per thread: a request and the reading of its body happen on the thread that sent it.

**Outbound targets** (docs/protocol.md "Outbound targets", :mod:`bailing.outbound_targets`). The
backend resolves a host name once, refuses the connection when *any* address it resolved to is
denied (link-local, unspecified, multicast, broadcast, reserved; private ranges unless
``BAILING_OUTBOUND_ALLOWED_NETWORKS`` lists them), and connects to exactly the addresses it checked —
there is no second lookup a rebinding DNS server could answer differently. TLS still verifies the
certificate against the host name (httpcore passes it as the server name). A refusal is
:class:`TargetForbidden`, a ``ConnectError``: nothing was sent.
"""

from __future__ import annotations

import functools
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpcore
import httpx
from django.conf import settings

from bailing.outbound_targets import (
    IPAddress,
    IPNetwork,
    address_problem,
    literal_address,
    parse_allowed_networks,
)

# Why an address must not be connected to (its kind), or None: the outbound target policy.
TargetPolicy = Callable[[IPAddress], str | None]

__all__ = [
    "TargetForbidden",
    "allowed_networks",
    "literal_host_problem",
    "outbound_client",
    "provider_target_problem",
    "resolve_addresses",
    "tls_context",
]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The hub's outbound TLS context (system-independent CA bundle from ``certifi``, as httpx uses)."""
    return httpx.create_ssl_context()


class TargetForbidden(httpx.ConnectError):
    """The target is, or resolved to, an address the outbound policy denies; nothing was sent.

    ``kind`` is the denied address's kind (``link_local``, ``private`` …).
    """

    def __init__(self, message: str, *, kind: str, request: httpx.Request | None = None) -> None:
        super().__init__(message, request=request)
        self.kind = kind


class _Forbidden(httpcore.ConnectError):
    """Raised inside httpcore; the transport turns it into :class:`TargetForbidden`."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"outbound target forbidden ({kind})")
        self.kind = kind


@functools.cache
def _allowed_networks(entries: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return parse_allowed_networks(entries)


def allowed_networks() -> tuple[IPNetwork, ...]:
    """``BAILING_OUTBOUND_ALLOWED_NETWORKS`` as networks (settings load has already checked it)."""
    return _allowed_networks(tuple(getattr(settings, "BAILING_OUTBOUND_ALLOWED_NETWORKS", ())))


def provider_target_problem(address: IPAddress) -> str | None:
    """The policy for business systems and webhooks: :func:`address_problem` with
    ``BAILING_OUTBOUND_ALLOWED_NETWORKS``."""
    return address_problem(address, allowed_networks())


def literal_host_problem(host: str) -> str | None:
    """For a host written as an IP address, the kind that makes it a denied target (``link_local``,
    ``private`` …), else None. Host names are judged when they are resolved, on every connection."""
    address = literal_address(host)
    return None if address is None else address_problem(address, allowed_networks())


def resolve_addresses(host: str, port: int) -> list[tuple[int, Any]]:
    """The ``(family, sockaddr)`` pairs ``host`` resolves to for TCP, in the resolver's order.

    The backend calls this exactly once per connection (tests may substitute it to play a
    rebinding DNS server).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [(family, sockaddr) for family, _, _, _, sockaddr in infos]


# --- the deadline --------------------------------------------------------------------------------
class _Deadlines(threading.local):
    """The absolute deadline (``time.monotonic()``) of the request this thread is sending, if any."""

    at: float | None = None


def _left(deadlines: _Deadlines, timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` clamped to the time left until the deadline; ``error`` once it has passed."""
    if deadlines.at is None:
        return timeout
    left = deadlines.at - time.monotonic()
    if left <= 0:
        raise error("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


def _resolve_within(host: str, port: int, deadlines: _Deadlines, timeout: float | None):
    """``resolve_addresses`` bounded by the deadline: ``getaddrinfo`` has no timeout of its own, so it
    runs on a daemon thread that is left to finish on its own if the deadline comes first."""
    limit = _left(deadlines, timeout, httpcore.ConnectTimeout)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["addresses"] = resolve_addresses(host, port)
        except Exception as exc:
            outcome["error"] = exc

    resolver = threading.Thread(target=run, name="outbound-resolve", daemon=True)
    resolver.start()
    resolver.join(limit)
    if resolver.is_alive():
        raise httpcore.ConnectTimeout("the name lookup did not finish before the deadline")
    if "error" in outcome:
        raise httpcore.ConnectError(f"the name lookup failed ({type(outcome['error']).__name__})")
    return outcome["addresses"]


class _DeadlineStream(httpcore.NetworkStream):
    """A socket whose every read and write ends by the request's deadline."""

    def __init__(self, sock: socket.socket, deadlines: _Deadlines) -> None:
        self._sock = sock
        self._deadlines = deadlines

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            self._sock.settimeout(_left(self._deadlines, timeout, httpcore.ReadTimeout))
            return self._sock.recv(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout("read timed out") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            while buffer:
                self._sock.settimeout(_left(self._deadlines, timeout, httpcore.WriteTimeout))
                sent = self._sock.send(buffer)
                buffer = buffer[sent:]
        except TimeoutError:
            raise httpcore.WriteTimeout("write timed out") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from None

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        # The handshake is one blocking call; CPython bounds its total duration by the socket
        # timeout, so clamping that to the time left bounds a server that drips handshake bytes.
        try:
            self._sock.settimeout(_left(self._deadlines, timeout, httpcore.ConnectTimeout))
            wrapped = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except TimeoutError:
            self._sock.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except OSError as exc:  # ssl.SSLError (certificate, protocol) is an OSError
            self._sock.close()
            raise httpcore.ConnectError(str(exc)) from None
        return _DeadlineStream(wrapped, self._deadlines)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            # The SSLSocket answers what httpcore asks of an SSLObject (ALPN, version, certificate).
            return self._sock if isinstance(self._sock, ssl.SSLSocket) else None
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            # An idle pooled connection that is readable was closed (or sent junk) by the server.
            if self._sock.fileno() < 0:
                return True
            readable, _, _ = select.select([self._sock], [], [], 0)
            return bool(readable)
        return None


class _DeadlineBackend(httpcore.NetworkBackend):
    """Connects only to addresses ``policy`` allows, within the request's deadline."""

    def __init__(self, deadlines: _Deadlines, policy: TargetPolicy) -> None:
        self._deadlines = deadlines
        self._policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        literal = literal_address(host)
        if literal is not None:
            family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            sockaddr = (str(literal), port, 0, 0) if literal.version == 6 else (str(literal), port)
            targets = [(family, sockaddr)]
        else:
            targets = _resolve_within(host, port, self._deadlines, timeout)
        if not targets:
            raise httpcore.ConnectError("the name resolved to no address")
        for _, sockaddr in targets:
            problem = self._policy(ipaddress.ip_address(sockaddr[0]))
            if problem:
                raise _Forbidden(problem)
        last_error: Exception | None = None
        for family, sockaddr in targets:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(_left(self._deadlines, timeout, httpcore.ConnectTimeout))
                if local_address is not None:
                    sock.bind((local_address, 0))
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.connect(sockaddr)
            except TimeoutError:
                sock.close()
                raise httpcore.ConnectTimeout("connect timed out") from None
            except OSError as exc:
                sock.close()
                last_error = exc
                continue
            except BaseException:
                sock.close()
                raise
            return _DeadlineStream(sock, self._deadlines)
        raise httpcore.ConnectError(str(last_error))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("outbound clients do not use unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport over a pool that uses :class:`_DeadlineBackend`.

    ``HTTPTransport`` takes no network backend, so the pool it built is replaced by an equal one that
    has it (``_pool`` is httpx's private attribute: pyproject.toml pins httpx and httpcore to the
    versions this was written against).
    """

    def __init__(
        self, *, budget: float, ssl_context: ssl.SSLContext, limits: httpx.Limits, policy: TargetPolicy
    ) -> None:
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        self._budget = budget
        self._deadlines = _Deadlines()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_DeadlineBackend(self._deadlines, policy),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        # Starts now and stays in force while the caller reads the body on this thread.
        self._deadlines.at = time.monotonic() + self._budget
        try:
            return super().handle_request(request)
        except httpx.ConnectError as exc:
            if isinstance(exc.__cause__, _Forbidden):
                raise TargetForbidden(str(exc), kind=exc.__cause__.kind, request=request) from None
            raise


def outbound_client(
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    keep_alive: bool = True,
    policy: TargetPolicy | None = None,
    ssl_context: ssl.SSLContext | None = None,
    **options: Any,
) -> httpx.Client:
    """An ``httpx.Client`` for business systems: no redirects, no proxies, the shared TLS context,
    the outbound target policy, and ``timeout`` seconds *in all* for each request it sends (connect,
    TLS, sending, response headers and body; see the module docstring).

    ``keep_alive=False`` opens a fresh connection for every request (tool dispatch: a reused
    connection the server already closed would fail after the request was written, making an unsent
    call look uncertain).

    ``policy`` replaces the outbound target policy (:func:`provider_target_problem`) for callers that
    fetch from addresses no administrator named (client metadata documents); ``ssl_context`` replaces
    the shared TLS context.
    """
    # httpx's default pool limits, without keep-alive when asked.
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20 if keep_alive else 0)
    return httpx.Client(
        # httpx's own per-operation timeouts stay as a cap; the deadline is the real bound.
        timeout=timeout,
        headers=dict(headers or {}),
        follow_redirects=False,
        trust_env=False,
        transport=_DeadlineTransport(
            budget=timeout,
            ssl_context=ssl_context or tls_context(),
            limits=limits,
            policy=policy or provider_target_problem,
        ),
        **options,
    )
