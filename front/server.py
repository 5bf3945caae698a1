"""The front: reads whole requests on an event loop, then hands them to gunicorn over a unix socket.

Per connection, one request at a time (HTTP/1.1 keep-alive and pipelining, parsed by h11):

1. **Headers** must be complete within ``header_timeout`` seconds — from the accepted connection for
   the first request; for a later one from its first byte, or from the end of the exchange before if
   some of it had come already (pipelined); a kept-alive connection may wait ``keepalive_timeout``
   seconds for that byte. An idle connection is closed silently, one that had started a request gets
   408. A request line over ``max_request_line`` bytes (its CRLF or bare LF not counted) is 414; a
   head over ``max_header_bytes`` as sent (request line, fields and the blank line ending it, however
   it arrives in pieces) or with more than ``max_header_fields`` fields is 431; anything h11 cannot
   parse (or an HTTP version other than 1.0/1.1) is 400.
2. **Framing** is stated once or refused, from the head's raw bytes (h11's parsed headers fold
   duplicates): ``Content-Length`` together with ``Transfer-Encoding``, two ``Content-Length`` fields
   or a list (even of one value), ``Transfer-Encoding`` in two fields or naming ``chunked`` twice, or
   in an HTTP/1.0 request, is 400 ``invalid_request`` (request smuggling: see
   :func:`_framing_refusal`); a ``Content-Length`` of anything but digits is h11's 400, a transfer
   coding other than a single ``chunked`` (``gzip``, ``gzip, chunked``) 501 ``not_implemented``.
3. **The body's budget** is the endpoint's (``body_max_bytes`` of the view the path resolves to, as
   :func:`bailing.api.parsers.body_budget` reads it) under the API prefixes, ``max_body_bytes``
   elsewhere (console forms and uploads). A declared ``Content-Length`` over it is 413
   ``arguments_too_large`` before one byte of the body is read (``observed_bytes`` is the declared
   length, as the MCP endpoint reports it); a chunked body is de-chunked and counted, and refused the
   same way once past the budget (``observed_bytes``: what was seen). ``Expect: 100-continue`` is
   answered only after that check.
4. **The body** must be complete within ``body_timeout`` seconds of the end of the headers, else 408.
   A malformed chunk is 400 ``invalid_request``; a client that disconnects mid-request is dropped
   without an answer or a log line.
5. **gunicorn** gets the complete request — with a ``Content-Length`` if it had a body or framing,
   never chunked — behind a PROXY protocol v1 line naming the client's address (``REMOTE_ADDR`` stays
   the client's, for the per-IP throttles), and with the forwarding headers (``X-Forwarded-*``,
   ``Forwarded``, ``X-Real-IP``) removed unless the client is a trusted proxy (``trusted_proxies``;
   gunicorn trusts whatever arrives on its unix socket). Behind a trusted proxy (a TLS terminator) the
   client is the last address that proxy appended to ``X-Forwarded-For``. gunicorn's own request
   limits are never below the front's (:func:`upstream_limits`, passed by the launcher), so a request
   within the front's limits is never gunicorn's HTML 414/431. The response is read into the front's
   buffer as fast as gunicorn writes it (up to ``response_buffer_bytes`` ahead of the client), so a
   slow reader holds no thread either; the client has ``send_timeout`` seconds to take it.

See docs/protocol.md "The HTTP front". Every answer the front makes itself carries
``Cache-Control: no-store`` and ``Connection: close``, and the connection is closed after it: the
front stops sending, reads and drops what still comes for a moment (so the answer is not lost to a
reset), and never parses another request on it — one pipelined behind a refused request is neither
answered nor forwarded. Under the API prefixes (:func:`bailing.api.surfaces.api_prefixes`) the
answer is the hub's JSON envelope with the codes of :mod:`bailing.api.errors`, elsewhere a line of
text. Nothing of a request (line, headers, body) is ever logged.

The connections open at the moment are the gauge ``bailing_front_connections`` (:func:`connections_gauge`),
which the hub's ``/metrics`` answers although gunicorn's workers serve it: the front writes it to the
multiprocess directory they read (``PROMETHEUS_MULTIPROC_DIR``, made by the launcher).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import ipaddress
import json
import logging
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

import h11
from prometheus_client import Gauge

from bailing.api import errors
from bailing.api.surfaces import on_agent_surface

logger = logging.getLogger("bailing.front")

_READ = 64 * 1024
# Where a head ends, as h11 finds it (it also takes a bare LF as a line's end).
_HEAD_END = re.compile(rb"\n\r?\n")
# Fields the front may add to a client's: Host (a request without one), Content-Length (the body it
# read, in place of the client's framing header) and its own Connection.
_ADDED_FIELDS = 3
# gunicorn (gunicorn.http.message) takes no finite request-line limit above this one (0 is unbounded),
# and counts at most this many fields.
_GUNICORN_MAX_REQUEST_LINE = 8190
_GUNICORN_MAX_FIELDS = 32768
# Never forwarded: this hop's framing and connection management (the front sets its own).
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"expect",
        b"content-length",
    }
)
_RESPONSE_HOP_BY_HOP = _HOP_BY_HOP - {b"content-length"}
# Headers only a proxy in front of this one may set.
_FORWARDING = frozenset(
    {
        b"forwarded",
        b"x-forwarded-for",
        b"x-forwarded-host",
        b"x-forwarded-port",
        b"x-forwarded-proto",
        b"x-forwarded-protocol",
        b"x-forwarded-ssl",
        b"x-real-ip",
    }
)


@dataclass(frozen=True)
class FrontConfig:
    upstream: str
    body_budget: Callable[[str], int]
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive_timeout: float = 5.0
    send_timeout: float = 30.0
    upstream_timeout: float = 75.0
    max_request_line: int = 8190
    max_header_bytes: int = 32 * 1024
    max_header_fields: int = 100
    max_body_bytes: int = 32 * 1024 * 1024
    max_connections: int = 4096
    response_buffer_bytes: int = 4 * 1024 * 1024
    trusted_proxies: tuple[str, ...] = ()


def upstream_limits(config: FrontConfig) -> dict[str, int]:
    """gunicorn's request limits behind this front (the launcher passes them on its command line).

    Never below what the front lets through, so every request the front accepts reaches Django and
    every limit a client meets is the front's own answer (the envelope under the API prefixes), not
    gunicorn's HTML 414/431. What gunicorn receives is what the front accepted, written again: the
    same request line (gunicorn also counts it without its CRLF), each field on one line of
    ``name: value`` (never longer than the head it arrived in), and at most ``_ADDED_FIELDS`` more
    fields than the client sent. The PROXY line is read apart from the request and limited by none.
    """
    fields = config.max_header_fields + _ADDED_FIELDS
    if fields > _GUNICORN_MAX_FIELDS:
        raise ValueError(f"gunicorn counts at most {_GUNICORN_MAX_FIELDS} fields; the front allows {fields}")
    line = config.max_request_line
    return {
        "limit_request_line": line if line <= _GUNICORN_MAX_REQUEST_LINE else 0,
        "limit_request_field_size": config.max_header_bytes,
        "limit_request_fields": fields,
    }


class _Refusal(Exception):
    """An answer the front gives itself, then closes the connection."""

    def __init__(self, status: int, error: errors.ApiError, *, api: bool):
        super().__init__(status)
        self.status, self.error, self.api = status, error, api


class _Gone(Exception):
    """The client went away mid-request: nothing to answer."""


def _invalid(message: str) -> errors.ApiError:
    return errors.InvalidRequest(message)


def _path_of(target: bytes) -> str:
    raw = urllib.parse.urlsplit(target.decode("latin-1")).path or "/"
    return urllib.parse.unquote(raw, encoding="utf-8", errors="replace")


def _framing_refusal(head: bytes, *, api: bool) -> _Refusal | None:
    """A refusal for a head whose body framing is ambiguous, read from the head's raw bytes.

    h11 folds what it considers harmless before anyone sees the parsed headers: two identical
    ``Content-Length`` fields (or a list ``5, 5``) become one, and a request with both
    ``Content-Length`` and ``Transfer-Encoding`` is read as chunked and may be kept alive. A proxy
    before or after this one that frames the same bytes differently would then see another request
    in the body, or a body in the next request (request smuggling). So the framing is stated once or
    refused (RFC 9112 section 6.3 allows a framing error; refusing closes the connection as the RFC
    requires, and nothing of it is forwarded):

    - ``Content-Length`` together with ``Transfer-Encoding``;
    - ``Content-Length`` more than once or as a list, even of the same value;
    - ``Transfer-Encoding`` in more than one field, or naming ``chunked`` more than once;
    - ``Transfer-Encoding`` in an HTTP/1.0 request (RFC 9112 section 6.1: faulty framing).

    The value of each is h11's to check (digits only; ``chunked`` the one coding, else 501).
    """
    lines = head.split(b"\n")
    lengths: list[bytes] = []
    codings: list[bytes] = []
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            continue  # obs-fold: the rest of the field before (h11 joins it to that value)
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths.append(value)
        elif name == b"transfer-encoding":
            codings.append(value)
    problem = None
    if lengths and codings:
        problem = "The request has both a Content-Length and a Transfer-Encoding."
    elif len(lengths) > 1 or any(b"," in value for value in lengths):
        problem = "The request has more than one Content-Length."
    elif codings:
        listed = [coding.strip().lower() for value in codings for coding in value.split(b",")]
        if len(codings) > 1 or listed.count(b"chunked") > 1:
            problem = "The request's Transfer-Encoding is stated more than once."
        elif lines[0].rstrip(b"\r").endswith(b" HTTP/1.0"):
            problem = "An HTTP/1.0 request cannot have a Transfer-Encoding."
    if problem is None:
        return None
    return _Refusal(400, _invalid(problem), api=api)


def error_bytes(status: int, error: errors.ApiError, *, api: bool) -> bytes:
    """A complete response the front makes itself: the envelope under the API prefixes, else text."""
    phrase = http.HTTPStatus(status).phrase
    if api:
        body = json.dumps(error.payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        content_type = "application/json"
    else:
        body = f"{status} {phrase}\n".encode()
        content_type = "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n"
    )
    for name, value in error.headers.items():
        head += f"{name}: {value}\r\n"
    return (head + "\r\n").encode("latin-1") + body


def proxy_line(client: tuple, local: tuple) -> bytes:
    """PROXY protocol v1 naming the client (gunicorn sets ``REMOTE_ADDR`` from it)."""
    source = ipaddress.ip_address(str(client[0]).split("%", 1)[0])
    destination = ipaddress.ip_address(str(local[0]).split("%", 1)[0])
    if source.version != destination.version:  # a client named by a trusted proxy, of the other family
        destination = ipaddress.ip_address(0 if source.version == 4 else "::")
    family = "TCP4" if source.version == 4 else "TCP6"
    return f"PROXY {family} {source} {destination} {client[1]} {local[1]}\r\n".encode("ascii")


def forwarded_client(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The address a trusted proxy appended last to ``X-Forwarded-For`` (None if none is valid)."""
    values = [value for name, value in headers if name == b"x-forwarded-for"]
    if not values:
        return None
    last = values[-1].decode("latin-1").rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return None


_CONNECTIONS: Gauge | None = None


def connections_gauge() -> Gauge:
    """``bailing_front_connections``: connections the front holds open (accepted, not yet closed).

    Made by the first :class:`Front`, not at import: the launcher imports this module before gunicorn
    starts, and gunicorn's conf empties the multiprocess directory then, which would unlink a file
    opened earlier (the front would go on counting into a file no scrape reads); it builds the Front
    once gunicorn listens. ``livesum``: the live processes' values added up (one front per hub).
    """
    global _CONNECTIONS
    if _CONNECTIONS is None:
        _CONNECTIONS = Gauge(
            "bailing_front_connections",
            "Client connections the front holds open",
            multiprocess_mode="livesum",
        )
    return _CONNECTIONS


class Front:
    """The listening front; :meth:`start` binds it, :meth:`stop` drains and closes it."""

    def __init__(self, config: FrontConfig):
        self.config = config
        self.connections = 0
        self.busy = 0
        self._gauge = connections_gauge()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._trusted_all = "*" in config.trusted_proxies
        self._trusted = tuple(
            ipaddress.ip_network(item, strict=False) for item in config.trusted_proxies if item != "*"
        )

    async def start(self, host: str, port: int) -> list[tuple]:
        self._server = await asyncio.start_server(self._accept, host, port, backlog=2048, reuse_address=True)
        return [sock.getsockname() for sock in self._server.sockets]

    async def stop(self, grace: float) -> None:
        """Stop accepting, let requests in flight finish for up to ``grace`` seconds, close the rest."""
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.busy and loop.time() < deadline:
            await asyncio.sleep(0.05)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def trusted(self, peer: tuple | None) -> bool:
        if self._trusted_all:
            return True
        if not peer:
            return False
        try:
            address = ipaddress.ip_address(peer[0].split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self._trusted)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.config.max_connections:
            writer.transport.abort()
            return
        self.connections += 1
        self._gauge.inc()
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await _Connection(self, reader, writer).serve()
        except asyncio.CancelledError:
            pass
        except Exception:
            logger.exception("front connection failed")
        finally:
            self.connections -= 1
            self._gauge.dec()
            if task is not None:
                self._tasks.discard(task)
            writer.transport.abort()


class _Connection:
    def __init__(self, front: Front, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.front = front
        self.config = front.config
        self.reader, self.writer = reader, writer
        self.peer = writer.get_extra_info("peername")
        self.local = writer.get_extra_info("sockname")
        # Whether the peer may name the client (X-Forwarded-For): decided once per connection.
        self.trusted = front.trusted(self.peer)
        self.http = h11.Connection(h11.SERVER, max_incomplete_event_size=self.config.max_header_bytes)
        self.head = bytearray()
        self.eof = False
        self.loop = asyncio.get_running_loop()

    async def serve(self) -> None:
        first = True
        try:
            while await self._one(first):
                self.http.start_next_cycle()
                first = False
        except _Gone:
            return
        except _Refusal as refusal:
            await self._refuse(refusal)
        except OSError:
            return  # reset or broken pipe: the client is gone

    # --- reading ------------------------------------------------------------------------------------
    async def _receive(self, deadline: float) -> bool:
        """Feed h11 one read; False when the deadline passed first."""
        remaining = deadline - self.loop.time()
        if remaining <= 0:
            return False
        try:
            async with asyncio.timeout(remaining):
                data = await self.reader.read(_READ)
        except TimeoutError:
            return False
        if not data:
            self.eof = True
        self.http.receive_data(data)
        return True

    def _target_api(self) -> bool:
        line = bytes(self.head.split(b"\n", 1)[0])
        parts = line.split(b" ", 2)
        if len(parts) < 2:
            return False
        try:
            return on_agent_surface(_path_of(parts[1]))
        except ValueError:
            return False

    def _line_too_long(self) -> bool:
        end = self.head.find(b"\n")
        line = self.head if end == -1 else self.head[:end]
        # Its length without the line end, whether that is CRLF or (as h11 also takes) a bare LF: what
        # gunicorn measures of the line the front writes it, with CRLF.
        return len(line) - int(line.endswith(b"\r")) > self.config.max_request_line

    def _whole_head(self) -> bytes | None:
        """The raw bytes of the head h11 holds (through its blank line); None if it is not complete
        within ``max_header_bytes`` + 1 bytes."""
        end = _HEAD_END.search(self.head)
        return None if end is None else bytes(self.head[: end.end()])

    async def _read_head(self, first: bool) -> tuple[h11.Request, bytes | None] | None:
        """The next request and its raw head (None when that is longer than the mirror's
        ``max_header_bytes`` + 1 bytes: too large either way)."""
        config = self.config
        # A pipelining client may have sent (some of) this head with the previous request.
        self._mirror_head()
        started = first or bool(self.head)
        deadline = self.loop.time() + (config.header_timeout if started else config.keepalive_timeout)
        while True:
            # Checked before h11 parses what it holds: a head that came whole, or pipelined with the
            # request before, would otherwise be parsed (and forwarded) whatever its line's length.
            if self._line_too_long():
                raise _Refusal(414, _invalid("The request line is too long."), api=self._target_api())
            try:
                event = self.http.next_event()
            except h11.RemoteProtocolError as exc:
                if self.eof:
                    raise _Gone() from None
                api = self._target_api()
                if exc.error_status_hint == 431:
                    raise _Refusal(431, _invalid("The request headers are too large."), api=api) from None
                # h11 calls a repeated Transfer-Encoding unimplemented (501); it is a framing error.
                head = self._whole_head()
                framing = _framing_refusal(head, api=api) if head is not None else None
                if framing is not None:
                    raise framing from None
                if exc.error_status_hint == 501:
                    raise _Refusal(501, errors.NotImplementedByHub(), api=api) from None
                raise _Refusal(400, _invalid("The request is not valid HTTP/1.1."), api=api) from None
            if isinstance(event, h11.Request):
                return event, self._whole_head()
            if event is not h11.NEED_DATA:
                return None  # ConnectionClosed, or a state with nothing more to read
            if not await self._receive(deadline):
                if not self.head:
                    return None  # idle: closed quietly
                raise _Refusal(
                    408, _invalid("The request headers did not arrive in time."), api=self._target_api()
                )
            if self.eof:
                if not self.head:
                    return None
                raise _Gone()
            self._mirror_head()
            if not started:
                started = True
                deadline = self.loop.time() + config.header_timeout

    def _mirror_head(self) -> None:
        """Mirror the bytes h11 holds for the head in progress (for the request-line and framing
        checks, which need the bytes as they came: h11's parsed headers are already normalised)."""
        buffered = self.http.trailing_data[0]
        self.head[:] = bytes(buffered[: self.config.max_header_bytes + 1])

    async def _read_body(self, request: h11.Request, budget: int, api: bool) -> tuple[bytes, bool]:
        """The whole body (de-chunked) within the budget and the body timeout; and whether it had framing."""
        declared = None
        framed = False
        for name, value in request.headers:
            if name == b"content-length":
                declared = int(value)
                framed = True
            elif name == b"transfer-encoding":
                framed = True
        if declared is not None and declared > budget:
            raise _Refusal(
                413, errors.RequestBodyTooLarge(max_bytes=budget, observed_bytes=declared), api=api
            )
        if self.http.they_are_waiting_for_100_continue:
            self.writer.write(self.http.send(h11.InformationalResponse(status_code=100, headers=[])))
        parts: list[bytes] = []
        seen = 0
        deadline = self.loop.time() + self.config.body_timeout
        while True:
            try:
                event = self.http.next_event()
            except h11.RemoteProtocolError:
                if self.eof:
                    raise _Gone() from None
                raise _Refusal(400, _invalid("The request body's framing is malformed."), api=api) from None
            if isinstance(event, h11.Data):
                seen += len(event.data)
                if seen > budget:
                    raise _Refusal(
                        413, errors.RequestBodyTooLarge(max_bytes=budget, observed_bytes=seen), api=api
                    )
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts), framed
            elif event is h11.NEED_DATA:
                if not await self._receive(deadline):
                    raise _Refusal(408, _invalid("The request body did not arrive in time."), api=api)
            else:
                raise _Gone()

    # --- one exchange -------------------------------------------------------------------------------
    async def _one(self, first: bool) -> bool:
        got = await self._read_head(first)
        if got is None:
            return False
        request, head = got
        path = _path_of(request.target)
        api = on_agent_surface(path)
        if request.http_version not in (b"1.0", b"1.1"):
            raise _Refusal(400, _invalid("The HTTP version is not supported."), api=api)
        if len(request.headers) > self.config.max_header_fields:
            raise _Refusal(431, _invalid("The request has too many header fields."), api=api)
        # h11 bounds only a head still arriving (past max_header_bytes it is 431 whatever else comes);
        # one that came whole is measured here, as sent: request line, fields and the blank line.
        if head is None or len(head) > self.config.max_header_bytes:
            raise _Refusal(431, _invalid("The request headers are too large."), api=api)
        framing = _framing_refusal(head, api=api)
        if framing is not None:
            raise framing
        budget = self.config.body_budget(path) if api else self.config.max_body_bytes
        body, framed = await self._read_body(request, budget, api)
        self.front.busy += 1
        try:
            return await self._forward(request, body, framed, api)
        finally:
            self.front.busy -= 1

    def _upstream_headers(self, request: h11.Request, body: bytes, framed: bool) -> list[tuple[bytes, bytes]]:
        trusted = self.trusted
        headers = [
            (name, value)
            for name, value in request.headers
            if name not in _HOP_BY_HOP and (trusted or name not in _FORWARDING)
        ]
        if not any(name == b"host" for name, _ in headers):
            host = self.local[0] if ":" not in self.local[0] else f"[{self.local[0]}]"
            headers.append((b"host", f"{host}:{self.local[1]}".encode("ascii")))
        if framed or body:
            headers.append((b"content-length", str(len(body)).encode("ascii")))
        headers.append((b"connection", b"close"))
        return headers

    async def _forward(self, request: h11.Request, body: bytes, framed: bool, api: bool) -> bool:
        config = self.config
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_unix_connection(config.upstream), timeout=5
            )
        except (OSError, TimeoutError):
            logger.warning("front: the upstream socket did not accept a connection")
            raise _Refusal(502, errors.InternalError(), api=api) from None
        try:
            return await self._exchange(request, body, framed, api, up_reader, up_writer)
        finally:
            up_writer.transport.abort()

    async def _exchange(self, request, body, framed, api, up_reader, up_writer) -> bool:
        config = self.config
        upstream = h11.Connection(h11.CLIENT)
        client = self.peer
        if self.trusted:
            named = forwarded_client(request.headers)
            if named is not None:
                client = (named, 0)
        outgoing = proxy_line(client, self.local) + upstream.send(
            h11.Request(
                method=request.method,
                target=request.target,
                headers=self._upstream_headers(request, body, framed),
            )
        )
        if body:
            outgoing += upstream.send(h11.Data(data=body))
        outgoing += upstream.send(h11.EndOfMessage())
        up_writer.write(outgoing)
        deadline = self.loop.time() + config.upstream_timeout
        answered = False
        while True:
            try:
                event = upstream.next_event()
            except h11.RemoteProtocolError:
                if answered:
                    raise _Gone() from None  # cut mid-response: nothing sane left to send
                logger.warning("front: the upstream answered with an invalid response")
                raise _Refusal(502, errors.InternalError(), api=api) from None
            if event is h11.NEED_DATA:
                remaining = deadline - self.loop.time()
                try:
                    if remaining <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(remaining):
                        data = await up_reader.read(_READ)
                except TimeoutError:
                    if answered:
                        raise _Gone() from None
                    logger.warning("front: the upstream did not answer in time")
                    raise _Refusal(504, errors.InternalError(), api=api) from None
                upstream.receive_data(data)
            elif isinstance(event, h11.InformationalResponse):
                continue
            elif isinstance(event, h11.Response):
                headers = [(n, v) for n, v in event.headers if n not in _RESPONSE_HOP_BY_HOP]
                self.writer.write(
                    self.http.send(
                        h11.Response(status_code=event.status_code, headers=headers, reason=event.reason)
                    )
                )
                answered = True
            elif isinstance(event, h11.Data):
                self.writer.write(self.http.send(h11.Data(data=event.data)))
                if self.writer.transport.get_write_buffer_size() > config.response_buffer_bytes:
                    await self._drain()
            elif isinstance(event, h11.EndOfMessage):
                self.writer.write(self.http.send(h11.EndOfMessage()))
                up_writer.transport.abort()
                await self._drain()
                return self.http.our_state is h11.DONE and self.http.their_state is h11.DONE
            else:  # ConnectionClosed before the response ended
                if answered:
                    raise _Gone()
                raise _Refusal(502, errors.InternalError(), api=api)

    async def _drain(self) -> None:
        try:
            async with asyncio.timeout(self.config.send_timeout):
                await self.writer.drain()
        except TimeoutError:
            raise _Gone() from None

    async def _refuse(self, refusal: _Refusal) -> None:
        """Answer, then close without resetting: read (and drop) what the client still sends for a
        moment, so the answer is not lost to a reset of unread data."""
        logger.debug("front refused a request: %s", refusal.status)
        try:
            self.writer.write(error_bytes(refusal.status, refusal.error, api=refusal.api))
            await asyncio.wait_for(self.writer.drain(), self.config.send_timeout)
            if self.writer.can_write_eof():
                self.writer.write_eof()
            deadline = self.loop.time() + 2.0
            drained = 0
            while drained < 1024 * 1024:
                remaining = deadline - self.loop.time()
                if remaining <= 0:
                    break
                data = await asyncio.wait_for(self.reader.read(_READ), remaining)
                if not data:
                    break
                drained += len(data)
        except (OSError, TimeoutError):
            pass
        with contextlib.suppress(OSError):
            self.writer.close()
