"""The front (front/server.py) in process, before a fake gunicorn that records what it gets.

Raw sockets on loopback; every wait is bounded. What gunicorn behind the real front does with these
requests is in ``test_front_live.py``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from front.server import Front, FrontConfig, upstream_limits

BUDGETS = {"/agent-api/v1/small": 64}
DEFAULT_BUDGET = 4096


class FakeUpstream:
    """A unix-socket server answering ``200 {"ok":true}`` and recording each raw request."""

    def __init__(self):
        self.received: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.received.append(head + body)
        payload = b'{"ok":true}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
        )
        await writer.drain()
        writer.close()


class Running:
    def __init__(self, port: int, upstream: FakeUpstream):
        self.port, self.upstream = port, upstream

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


def _start(tmp_path, upstream: FakeUpstream | None, **overrides):
    socket_path = str(tmp_path / "up.sock")
    config = FrontConfig(
        upstream=socket_path,
        body_budget=lambda path: BUDGETS.get(path, DEFAULT_BUDGET),
        **{
            "header_timeout": 1.0,
            "body_timeout": 1.0,
            "keepalive_timeout": 1.0,
            "max_body_bytes": 256,
            **overrides,
        },
    )
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict = {}

    async def main():
        if upstream is not None:
            state["upstream"] = await asyncio.start_unix_server(upstream.handle, socket_path)
        front = Front(config)
        state["address"] = await front.start("127.0.0.1", 0)
        state["front"] = front
        state["stop"] = asyncio.Event()
        ready.set()
        await state["stop"].wait()
        await front.stop(grace=1)
        if upstream is not None:
            state["upstream"].close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10)

    def stop():
        loop.call_soon_threadsafe(state["stop"].set)
        thread.join(10)
        loop.close()

    return state["address"][0][1], stop


@pytest.fixture
def front(tmp_path, request):
    upstream = FakeUpstream()
    overrides = getattr(request, "param", {})
    port, stop = _start(tmp_path, upstream, **overrides)
    yield Running(port, upstream)
    stop()


def read_all(sock: socket.socket, limit: float = 10.0) -> bytes:
    sock.settimeout(limit)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def exchange(front: Running, data: bytes) -> tuple[int, dict[str, str], bytes]:
    with front.connect() as sock:
        sock.sendall(data)
        return parse(read_all(sock))


def assert_envelope(answer, status: int, code: str) -> dict:
    got, headers, body = answer
    assert got == status
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store"
    assert headers["connection"] == "close"
    payload = json.loads(body)
    assert payload["error"] == code
    return payload


# --- what reaches gunicorn ------------------------------------------------------------------------


def test_a_chunked_request_reaches_gunicorn_whole_with_a_content_length_behind_a_proxy_line(front):
    request = (
        b"POST /agent-api/v1/thing?x=1 HTTP/1.1\r\nHost: hub.example\r\nContent-Type: application/json\r\n"
        b"X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\nForwarded: for=203.0.113.9\r\n"
        b'Transfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n5\r\n":1}\n\r\n0\r\n\r\n'
    )
    status, _, body = exchange(front, request)
    assert (status, body) == (200, b'{"ok":true}')
    [raw] = front.upstream.received
    proxy, _, rest = raw.partition(b"\r\n")
    assert proxy.startswith(b"PROXY TCP4 127.0.0.1 127.0.0.1 ")
    head, _, forwarded_body = rest.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /agent-api/v1/thing?x=1 HTTP/1.1"
    names = {line.split(b":", 1)[0].lower(): line.split(b":", 1)[1].strip() for line in lines[1:]}
    assert names[b"host"] == b"hub.example"
    assert names[b"content-length"] == b"8"
    assert names[b"connection"] == b"close"
    # The client is no proxy of ours: its forwarding headers never reach gunicorn, which trusts its socket.
    assert b"x-forwarded-for" not in names
    assert b"x-forwarded-proto" not in names
    assert b"forwarded" not in names
    assert b"transfer-encoding" not in names
    assert forwarded_body == b'{"a":1}\n'


@pytest.mark.parametrize("front", [{"trusted_proxies": ("127.0.0.0/8",)}], indirect=True)
def test_a_trusted_proxy_keeps_its_forwarding_headers_and_names_the_client(front):
    status, _, _ = exchange(
        front,
        b"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-Proto: https\r\n"
        b"X-Forwarded-For: 198.51.100.1, 203.0.113.9\r\n\r\n",
    )
    assert status == 200
    [raw] = front.upstream.received
    assert raw.startswith(b"PROXY TCP4 203.0.113.9 127.0.0.1 0 ")
    assert b"x-forwarded-proto: https" in raw.lower()


def test_two_requests_on_one_kept_alive_connection(front):
    with front.connect() as sock:
        for _ in range(2):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
            sock.settimeout(5)
            answer = b""
            while not answer.endswith(b'{"ok":true}'):
                chunk = sock.recv(65536)
                assert chunk, "the front closed a kept-alive connection"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ")
    assert len(front.upstream.received) == 2


# --- budgets --------------------------------------------------------------------------------------


def test_a_declared_length_over_the_endpoints_budget_is_413_before_the_body_is_sent(front):
    with front.connect() as sock:
        # Only the head: the answer must come without one byte of the body.
        sock.sendall(
            b"POST /agent-api/v1/small HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
            b"Content-Length: 65\r\n\r\n"
        )
        payload = assert_envelope(parse(read_all(sock)), 413, "arguments_too_large")
    assert (payload["max_bytes"], payload["observed_bytes"], payload["limit_scope"]) == (
        64,
        65,
        "request_body",
    )
    assert front.upstream.received == []


SMALL_EXPECTING = b"POST /agent-api/v1/small HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"


def test_expect_100_continue_is_answered_only_within_the_budget(front):
    with front.connect() as sock:
        sock.sendall(SMALL_EXPECTING + b"Content-Length: 65\r\n\r\n")
        status, _, _ = parse(read_all(sock))
    assert status == 413
    with front.connect() as sock:
        sock.sendall(SMALL_EXPECTING + b"Content-Length: 2\r\n\r\n")
        sock.settimeout(5)
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(b"{}")
        status, _, _ = parse(read_all(sock))
    assert status == 200
    assert b"expect" not in front.upstream.received[0].lower()


def test_a_chunked_body_past_the_budget_is_413_while_it_is_still_coming(front):
    with front.connect() as sock:
        sock.sendall(b"POST /agent-api/v1/small HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.sendall(b"28\r\n" + b"x" * 40 + b"\r\n" + b"28\r\n" + b"x" * 40 + b"\r\n")  # never ends
        payload = assert_envelope(parse(read_all(sock)), 413, "arguments_too_large")
    assert payload["observed_bytes"] == 80
    assert front.upstream.received == []


def test_outside_the_api_prefixes_the_front_budget_applies_and_answers_text(front):
    status, headers, body = exchange(
        front, b"POST /console/x HTTP/1.1\r\nHost: h\r\nContent-Length: 257\r\n\r\n"
    )
    assert status == 413
    assert headers["content-type"].startswith("text/plain")
    assert headers["cache-control"] == "no-store"
    assert body == b"413 Request Entity Too Large\n"


# --- what the front refuses itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /agent-api/v1/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: h\r\n\r\n", 414, "invalid_request"),
        (
            b"GET /agent-api/v1/w HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n",
            431,
            "invalid_request",
        ),
        (
            b"GET /agent-api/v1/w HTTP/1.1\r\nHost: h\r\n"
            + b"".join(b"X-%d: a\r\n" % i for i in range(120))
            + b"\r\n",
            431,
            "invalid_request",
        ),
        (b"G@T /agent-api/v1/w HTTP/1.1\r\nHost: h\r\n\r\n", 400, "invalid_request"),
        (b"GET /agent-api/v1/w HTTP/9.9\r\nHost: h\r\n\r\n", 400, "invalid_request"),
        (b"GET /agent-api/v1/w HTTP/2.0\r\nHost: h\r\n\r\n", 400, "invalid_request"),
        (b"GET /agent-api/v1/w HTTX/1.1\r\nHost: h\r\n\r\n", 400, "invalid_request"),
        (
            b"POST /agent-auth/v1/token HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
            501,
            "not_implemented",
        ),
        (
            b"POST /kb/v1/x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            400,
            "invalid_request",
        ),
        (
            b"POST /mcp/demo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            400,
            "invalid_request",
        ),
    ],
    ids=[
        "long-line",
        "big-header",
        "many-fields",
        "bad-method",
        "bad-version",
        "http2-line",
        "bad-protocol",
        "gzip",
        "two-lengths",
        "bad-chunk",
    ],
)
def test_requests_the_front_refuses_are_the_envelope_under_the_api_prefixes(
    front, request_bytes, status, code
):
    assert_envelope(exchange(front, request_bytes), status, code)
    assert front.upstream.received == []


def test_the_same_refusal_outside_the_api_prefixes_is_text(front):
    status, headers, _ = exchange(front, b"GET /console/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    assert status == 414
    assert headers["content-type"].startswith("text/plain")
    assert headers["cache-control"] == "no-store"


# --- time limits ----------------------------------------------------------------------------------


def test_headers_that_never_end_are_cut_off_with_408(front):
    started = time.monotonic()
    with front.connect() as sock:
        sock.sendall(b"GET /agent-api/v1/workspaces HTTP/1.1\r\nHost: h\r\n")
        for n in range(3):  # still trickling when the limit strikes
            time.sleep(0.3)
            sock.sendall(b"X-%d: 1\r\n" % n)
        answer = read_all(sock)
    assert 0.9 < time.monotonic() - started < 5
    assert_envelope(parse(answer), 408, "invalid_request")


def test_an_idle_connection_is_closed_silently(front):
    started = time.monotonic()
    with front.connect() as sock:
        assert read_all(sock) == b""
    assert 0.9 < time.monotonic() - started < 5


def test_a_body_shorter_than_its_length_is_cut_off_with_408(front):
    started = time.monotonic()
    with front.connect() as sock:
        sock.sendall(
            b'POST /agent-auth/v1/token HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n{"grant_type"'
        )
        answer = read_all(sock)
    assert 0.9 < time.monotonic() - started < 5
    assert_envelope(parse(answer), 408, "invalid_request")
    assert front.upstream.received == []


def test_a_client_gone_mid_body_gets_nothing_and_gunicorn_nothing(front):
    with front.connect() as sock:
        sock.sendall(
            b"POST /agent-auth/v1/token HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{"
        )
    time.sleep(0.3)
    assert front.upstream.received == []


# --- gunicorn missing -----------------------------------------------------------------------------


def test_no_gunicorn_behind_is_502_in_the_envelope(tmp_path):
    port, stop = _start(tmp_path, None)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /agent-api/v1/workspaces HTTP/1.1\r\nHost: h\r\n\r\n")
            assert_envelope(parse(read_all(sock)), 502, "internal_error")
    finally:
        stop()


# --- framing: stated once, or refused and the connection closed ------------------------------------
#
# Each request below is followed in the same packet by a second, valid one. The front answers the
# first with its refusal and closes: the second is never parsed, never answered and never forwarded
# (a proxy before the front that framed the first differently would otherwise have smuggled it).

SECOND = b"GET /agent-api/v1/second HTTP/1.1\r\nHost: h\r\n\r\n"


def exchange_all(front: Running, data: bytes) -> bytes:
    """Everything the front sends back until it closes the connection."""
    with front.connect() as sock:
        sock.sendall(data)
        return read_all(sock)


def test_two_valid_pipelined_requests_are_both_answered(front):
    # The control of the tests below: a second request in the same packet is answered when the first
    # was framed unambiguously (OWS around a Content-Length is no part of its value, RFC 9110 5.5).
    with front.connect() as sock:
        sock.sendall(
            b"POST /agent-api/v1/first HTTP/1.1\r\nHost: h\r\nContent-Length:  2 \r\n\r\n{}"
            + b"GET /agent-api/v1/second HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        )
        answer = read_all(sock)
    assert answer.count(b"HTTP/1.1 200 ") == 2
    assert [raw.split(b"\r\n")[1].split(b" ")[1] for raw in front.upstream.received] == [
        b"/agent-api/v1/first",
        b"/agent-api/v1/second",
    ]


SMUGGLED = b"0\r\n\r\n" + SECOND  # chunked: an empty body; by its Content-Length: a body holding a request


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(SMUGGLED),
        b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(SMUGGLED),
        b"content-length: %d\r\ntransfer-encoding: Chunked\r\n" % len(SMUGGLED),
        b"Content-Length: 0\r\nTransfer-Encoding: gzip, chunked\r\n",
    ],
    ids=["cl-te", "te-cl", "lowercase", "cl-gzip-chunked"],
)
def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(front, head):
    answer = exchange_all(
        front, b"POST /agent-api/v1/thing HTTP/1.1\r\nHost: h\r\n" + head + b"\r\n" + SMUGGLED
    )
    assert answer.count(b"HTTP/1.1 ") == 1
    assert_envelope(parse(answer), 400, "invalid_request")
    assert front.upstream.received == []


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: 2\r\nContent-Length: 2\r\n",
        b"Content-Length: 2\r\nX-Between: 1\r\ncontent-length: 2\r\n",
        b"Content-Length: 2, 2\r\n",
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
    ],
    ids=["identical", "identical-apart", "list", "different"],
)
def test_two_content_lengths_are_refused_even_identical_and_the_connection_closed(front, head):
    answer = exchange_all(front, b"POST /kb/v1/x HTTP/1.1\r\nHost: h\r\n" + head + b"\r\n{}" + SECOND)
    assert answer.count(b"HTTP/1.1 ") == 1
    assert_envelope(parse(answer), 400, "invalid_request")
    assert front.upstream.received == []


CHUNKED_BODY = b"2\r\n{}\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("request_line", "head", "status", "code"),
    [
        (
            b"POST /mcp/demo HTTP/1.1",
            b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            400,
            "invalid_request",
        ),
        (b"POST /mcp/demo HTTP/1.1", b"Transfer-Encoding: chunked, chunked\r\n", 400, "invalid_request"),
        (b"POST /mcp/demo HTTP/1.1", b"Transfer-Encoding: gzip, chunked\r\n", 501, "not_implemented"),
        (b"POST /mcp/demo HTTP/1.1", b"Transfer-Encoding: chunked, gzip\r\n", 501, "not_implemented"),
        (b"POST /mcp/demo HTTP/1.0", b"Transfer-Encoding: chunked\r\n", 400, "invalid_request"),
    ],
    ids=["two-fields", "chunked-twice", "gzip-chunked", "chunked-gzip", "http10"],
)
def test_a_transfer_encoding_other_than_chunked_once_is_refused_and_the_connection_closed(
    front, request_line, head, status, code
):
    answer = exchange_all(front, request_line + b"\r\nHost: h\r\n" + head + b"\r\n" + CHUNKED_BODY + SECOND)
    assert answer.count(b"HTTP/1.1 ") == 1
    assert_envelope(parse(answer), status, code)
    assert front.upstream.received == []


@pytest.mark.parametrize(
    "field",
    [
        b"Content-Length: +2",
        b"Content-Length: -2",
        b"Content-Length: 0x2",
        b"Content-Length: 2 2",
        b"Content-Length: \x0b2",
        b"Content-Length : 2",
        b"Content-Length:",
    ],
    ids=["plus", "minus", "hex", "inner-space", "vertical-tab", "space-before-colon", "empty"],
)
def test_a_content_length_that_is_not_plain_digits_is_refused_and_the_connection_closed(front, field):
    answer = exchange_all(
        front, b"POST /agent-api/v1/thing HTTP/1.1\r\nHost: h\r\n" + field + b"\r\n\r\n{}" + SECOND
    )
    assert answer.count(b"HTTP/1.1 ") == 1
    assert_envelope(parse(answer), 400, "invalid_request")
    assert front.upstream.received == []


# --- the head's limits, to the byte ------------------------------------------------------------------

LIMITS = FrontConfig(upstream="", body_budget=len)  # the defaults, which the launcher keeps


def _line_of(length: int, end: bytes = b"\r\n") -> bytes:
    """A request line of ``length`` bytes (without its end) under the API prefixes."""
    fixed = len(b"GET /agent-api/v1/ HTTP/1.1")
    return b"GET /agent-api/v1/" + b"l" * (length - fixed) + b" HTTP/1.1" + end


@pytest.mark.parametrize("end", [b"\r\n", b"\n"], ids=["crlf", "bare-lf"])
def test_a_request_line_at_the_limit_passes_and_one_byte_more_is_414(front, end):
    status, _, _ = exchange(
        front, _line_of(LIMITS.max_request_line, end) + b"Host: h\r\nConnection: close\r\n\r\n"
    )
    assert status == 200
    assert_envelope(
        exchange(front, _line_of(LIMITS.max_request_line + 1, end) + b"Host: h\r\nConnection: close\r\n\r\n"),
        414,
        "invalid_request",
    )
    assert len(front.upstream.received) == 1


def test_a_pipelined_request_is_held_to_the_same_limits(front):
    # The second head comes whole with the first request, before the front reads anything more.
    with front.connect() as sock:
        sock.sendall(
            b"GET /agent-api/v1/first HTTP/1.1\r\nHost: h\r\n\r\n"
            + _line_of(LIMITS.max_request_line + 1)
            + b"Host: h\r\n\r\n"
        )
        answer = read_all(sock)
    first, _, second = answer.partition(b'{"ok":true}')
    assert first.startswith(b"HTTP/1.1 200 ")
    assert_envelope(parse(second), 414, "invalid_request")
    assert len(front.upstream.received) == 1


def _head_of(size: int) -> bytes:
    """A head of exactly ``size`` bytes, its blank line included."""
    start = b"GET /agent-api/v1/w HTTP/1.1\r\nHost: h\r\nConnection: close\r\nX-Pad: "
    return start + b"p" * (size - len(start) - 4) + b"\r\n\r\n"


@pytest.mark.parametrize("split", [False, True], ids=["whole", "in-two"])
def test_a_head_at_the_limit_passes_and_one_byte_more_is_431(front, split):
    # Arriving whole or all but its last byte first, the same head gets the same answer.
    def send(head: bytes):
        with front.connect() as sock:
            if split:
                sock.sendall(head[:-1])
                time.sleep(0.2)
                sock.sendall(head[-1:])
            else:
                sock.sendall(head)
            return parse(read_all(sock))

    status, _, _ = send(_head_of(LIMITS.max_header_bytes))
    assert status == 200
    assert_envelope(send(_head_of(LIMITS.max_header_bytes + 1)), 431, "invalid_request")
    assert len(front.upstream.received) == 1


def test_gunicorns_limits_follow_the_fronts():
    # What gunicorn gets is what the front accepted, written again (the live tests send it): the same
    # request line, fields no longer than the head, up to three fields more (Host, Content-Length,
    # Connection). gunicorn takes no finite request-line limit over 8190 (0 is unbounded) and counts at
    # most 32768 fields.
    assert upstream_limits(LIMITS) == {
        "limit_request_line": LIMITS.max_request_line,
        "limit_request_field_size": LIMITS.max_header_bytes,
        "limit_request_fields": LIMITS.max_header_fields + 3,
    }
    wide = FrontConfig(upstream="", body_budget=len, max_request_line=16384, max_header_bytes=65536)
    assert upstream_limits(wide)["limit_request_line"] == 0
    assert upstream_limits(wide)["limit_request_field_size"] == 65536
    with pytest.raises(ValueError):
        upstream_limits(FrontConfig(upstream="", body_budget=len, max_header_fields=32766))
