"""A misbehaving business system for hub tests: tools that write and then fail in the ways networks do.

The Demo Shop stays an honest business; this one exists to test how the hub dispatches side effects
when the answer is lost. Every tool call is verified with :mod:`bailing.signing` (the catalog is
``signed_required`` too: unsigned or wrongly signed requests are 401 and reach no tool), and each
tool counts the writes it *performed* before it misbehaves, so a test can tell "the business did
it once" from "the hub sent it twice":

======================  =======  =========================================================================
tool                    method   behaviour
======================  =======  =========================================================================
chaos_ok                POST     writes, answers 200 JSON
chaos_drop_after_write  POST     writes, then closes the connection without any response
chaos_hang              POST     writes, then never answers (until the server stops, at most 300 s)
chaos_reset_mid_body    POST     writes, sends 200 headers with ``Content-Length: 1000`` and 10 body
                                 bytes, then resets the connection (RST, ``SO_LINGER`` 0)
chaos_slow_ok           POST     waits ``delay_ms``, then writes and answers 200 (nothing is written if
                                 the server stops while it waits); while held
                                 (:meth:`ChaosBusiness.hold_slow_calls`) it waits to be released
chaos_bulk_ok           POST     needs approval; takes a ``payload`` of any JSON up to the hub's argument
                                 budget, writes, answers 200 with the body's length and SHA-256 (the
                                 exact bytes are in :meth:`ChaosBusiness.requests`), or with the
                                 ``reply`` it was given (status and text/plain body)
chaos_drip_headers      POST     writes, sends ``HTTP/1.1 200 OK`` and then one header line every
                                 :data:`DRIP_INTERVAL` s, never ending the headers (until the client
                                 hangs up or the server stops, at most :data:`DRIP_LIMIT_SECONDS`)
chaos_drip_body         POST     writes, sends complete 200 headers promising :data:`DRIP_LENGTH` bytes,
                                 then one body byte every :data:`DRIP_INTERVAL` s (same limits)
chaos_read              GET      readonly; counts calls; ``mode=drop`` (or :meth:`ChaosBusiness.drop_reads`)
                                 closes the connection without a response
chaos_item              GET      readonly, ``/chaos/items/{item}``; answers 200 with the request target
                                 it received
======================  =======  =========================================================================

Every request target the server received (request line as sent, before any signature check) is
recorded in order: :meth:`ChaosBusiness.targets`, to compare the path sent with the path signed.

The fixture is not registered globally: import it in the ``conftest.py`` of the test package that
uses it (importing it into a test module works too, but ruff then flags every test parameter of that
name as F811)::

    # tests/<package>/conftest.py
    from tests.support.chaos_business import chaos_business  # noqa: F401

    # tests/<package>/test_dispatch.py
    def test_lost_answer_is_not_resent(chaos_business):
        ...  # provider base_url=chaos_business.base_url, secret=chaos_business.secret
        assert chaos_business.writes("chaos_drop_after_write") == 1

or ``with running_chaos_business() as chaos: ...`` outside pytest fixtures. The server listens on
127.0.0.1 on a free port; :meth:`ChaosBusiness.stop` (run at fixture teardown) wakes hanging tools,
closes open connections and joins every thread it started.
"""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha256
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from bailing import signing

SPEC_PATH = "/.well-known/bailing/tools.json"
TOOLS = (
    "chaos_ok",
    "chaos_drop_after_write",
    "chaos_hang",
    "chaos_reset_mid_body",
    "chaos_slow_ok",
    "chaos_drip_headers",
    "chaos_drip_body",
    "chaos_read",
    "chaos_bulk_ok",
    "chaos_item",
)
# Declared execution.timeout_ms: short so a hub gives up on chaos_hang quickly; chaos_slow_ok gets
# room for its delay (a "worker killed during dispatch" test needs the call to be slow, not failed).
TIMEOUT_MS = 1500
SLOW_TIMEOUT_MS = 10_000
MAX_DELAY_MS = 60_000
# chaos_hang waits for the server to stop, but never longer than this.
HANG_LIMIT_SECONDS = 300.0
MAX_BODY_BYTES = 64 * 1024
# chaos_bulk_ok takes the hub's whole argument budget (1 MiB of compact JSON) and a little more, so a
# test can tell the hub's refusal from this server's.
BULK_MAX_BODY_BYTES = 2 * 1024 * 1024
# The partial answer of chaos_reset_mid_body: 10 bytes of a promised 1000.
PARTIAL_BODY = b'{"ok":true'
PROMISED_LENGTH = 1000
# The drip tools: a line (or byte) this often, never finishing; they stop after this long at most.
DRIP_INTERVAL = 0.2
DRIP_LIMIT_SECONDS = 60.0
DRIP_LENGTH = 100_000
ITEM_PREFIX = "/chaos/items/"

_ROUTES = {
    ("POST", "/chaos/ok"): "chaos_ok",
    ("POST", "/chaos/drop-after-write"): "chaos_drop_after_write",
    ("POST", "/chaos/hang"): "chaos_hang",
    ("POST", "/chaos/reset-mid-body"): "chaos_reset_mid_body",
    ("POST", "/chaos/slow-ok"): "chaos_slow_ok",
    ("POST", "/chaos/drip-headers"): "chaos_drip_headers",
    ("POST", "/chaos/drip-body"): "chaos_drip_body",
    ("GET", "/chaos/read"): "chaos_read",
    ("POST", "/chaos/bulk-ok"): "chaos_bulk_ok",
}


# --- catalog ---------------------------------------------------------------------------------------

_NOTE = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "description": "Free text stored with the write, so a test can tell its calls apart.",
}


def _acc(
    scope: str, *, readonly: bool, timeout_ms: int, result: str, when: str, approval: dict | None = None
) -> dict[str, Any]:
    acc = {
        "version": 1,
        "enabled": True,
        "scope": scope,
        "risk": {"level": "medium"},
        "execution": {"readonly": readonly, "idempotent": readonly, "timeout_ms": timeout_ms},
        "outcome": {"result": result, "side_effect": "read" if readonly else "write"},
        "guidance": {"when_to_use": when, "returns": result},
    }
    if approval is not None:
        acc["approval"] = approval
    return acc


def _write_operation(
    tool: str,
    summary: str,
    result: str,
    *,
    properties: dict[str, Any],
    required: list[str],
    timeout_ms: int,
    approval: dict | None = None,
) -> dict[str, Any]:
    return {
        "operationId": tool,
        "summary": summary,
        "description": f"{summary} Test fixture of the hub: counts the writes it performs.",
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": properties,
                        "required": required,
                    }
                }
            },
        },
        "responses": {"200": {"description": result}},
        "x-agent-capability": _acc(
            "chaos.write",
            readonly=False,
            timeout_ms=timeout_ms,
            result=result,
            when="Only in hub tests of lost, late or broken answers to side-effecting calls.",
            approval=approval,
        ),
    }


def build_spec() -> dict[str, Any]:
    """The chaos catalog: OpenAPI 3.1 with one ``x-agent-capability`` per tool (a fresh copy)."""
    note_only = {"properties": {"note": _NOTE}, "required": ["note"], "timeout_ms": TIMEOUT_MS}
    paths = {
        "/chaos/ok": {
            "post": _write_operation(
                "chaos_ok", "Record a write and answer.", "ok and the write number.", **note_only
            )
        },
        "/chaos/drop-after-write": {
            "post": _write_operation(
                "chaos_drop_after_write",
                "Record a write, then close the connection without answering.",
                "Never answers.",
                **note_only,
            )
        },
        "/chaos/hang": {
            "post": _write_operation(
                "chaos_hang", "Record a write, then never answer.", "Never answers.", **note_only
            )
        },
        "/chaos/reset-mid-body": {
            "post": _write_operation(
                "chaos_reset_mid_body",
                "Record a write, then reset the connection in the middle of the response body.",
                "A truncated response.",
                **note_only,
            )
        },
        "/chaos/slow-ok": {
            "post": _write_operation(
                "chaos_slow_ok",
                "Wait, then record a write and answer.",
                "ok and the write number, after the delay.",
                properties={
                    "delay_ms": {
                        "type": "integer",
                        "minimum": 0,
                        "maximum": MAX_DELAY_MS,
                        "description": "How long to wait before writing, in milliseconds.",
                    },
                    "note": _NOTE,
                },
                required=["delay_ms"],
                timeout_ms=SLOW_TIMEOUT_MS,
            )
        },
        "/chaos/bulk-ok": {
            "post": _write_operation(
                "chaos_bulk_ok",
                "Record a large write once it is approved, and answer with the size and hash of the body.",
                "ok, the write number, and the length and SHA-256 of the body received.",
                properties={
                    "note": _NOTE,
                    "payload": {"description": "Any JSON value, as large as the hub lets through."},
                    "reply": {
                        "type": "object",
                        "description": "Answer with this status and text/plain body instead.",
                        "properties": {"status": {"type": "integer"}, "text": {"type": "string"}},
                        "required": ["status", "text"],
                    },
                },
                required=["note"],
                timeout_ms=SLOW_TIMEOUT_MS,
                approval={"required": True, "prompt": "Write the bulk record {note}?"},
            )
        },
        "/chaos/drip-headers": {
            "post": _write_operation(
                "chaos_drip_headers",
                "Record a write, then send response headers one line at a time, forever.",
                "Never finishes its headers.",
                **note_only,
            )
        },
        "/chaos/drip-body": {
            "post": _write_operation(
                "chaos_drip_body",
                "Record a write, then send the response body one byte at a time, forever.",
                "Never finishes its body.",
                **note_only,
            )
        },
        "/chaos/read": {
            "get": {
                "operationId": "chaos_read",
                "summary": "Read a counter, or drop the connection.",
                "description": "Readonly test fixture of the hub: counts its calls.",
                "parameters": [
                    {
                        "name": "mode",
                        "in": "query",
                        "required": False,
                        "description": "ok answers; drop closes the connection without a response.",
                        "schema": {"type": "string", "enum": ["ok", "drop"]},
                    }
                ],
                "responses": {"200": {"description": "ok and the number of calls so far."}},
                "x-agent-capability": _acc(
                    "chaos.read",
                    readonly=True,
                    timeout_ms=TIMEOUT_MS,
                    result="ok and the number of calls so far.",
                    when="Only in hub tests of lost answers to readonly calls.",
                ),
            }
        },
        "/chaos/items/{item}": {
            "get": {
                "operationId": "chaos_item",
                "summary": "Echo the request target.",
                "description": "Readonly test fixture of the hub: answers the request target it received.",
                "parameters": [
                    {
                        "name": "item",
                        "in": "path",
                        "required": True,
                        "description": "Any text; it ends up in the path.",
                        "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                    }
                ],
                "responses": {"200": {"description": "ok and the request target."}},
                "x-agent-capability": _acc(
                    "chaos.read",
                    readonly=True,
                    timeout_ms=TIMEOUT_MS,
                    result="ok and the request target.",
                    when="Only in hub tests of how path arguments reach the business system.",
                ),
            }
        },
    }
    return copy.deepcopy(
        {
            "openapi": "3.1.0",
            "info": {"title": "Chaos business (hub test fixture)", "version": "1.0.0"},
            "security": [{"bailingSignature": []}],
            "paths": paths,
            "components": {
                "securitySchemes": {
                    "bailingSignature": {"type": "apiKey", "in": "header", "name": signing.SIGNATURE_HEADER}
                }
            },
        }
    )


# --- state -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChaosRequest:
    """One verified call that reached a tool, as received (header names lowercased)."""

    tool: str
    method: str
    path_with_query: str
    headers: dict[str, str]
    body: bytes
    on_behalf_of: str
    job_id: str
    idempotency_key: str | None


class _State:
    """Counters and switches shared by the handler threads and the test (one lock for all)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.performed: dict[str, int] = dict.fromkeys(TOOLS, 0)
        self.received: dict[str, list[ChaosRequest]] = {tool: [] for tool in TOOLS}
        self.rejected = 0
        self.reads_to_drop = 0
        # While set, chaos_slow_ok waits for ``released`` (or its delay) instead of its delay alone.
        self.holding = False
        self.released = threading.Event()
        self.targets: list[str] = []

    def perform(self, tool: str) -> int:
        with self.lock:
            self.performed[tool] += 1
            return self.performed[tool]

    def take_drop(self) -> bool:
        with self.lock:
            if self.reads_to_drop > 0:
                self.reads_to_drop -= 1
                return True
            return False

    def reset(self) -> None:
        with self.lock:
            self.performed = dict.fromkeys(TOOLS, 0)
            self.received = {tool: [] for tool in TOOLS}
            self.rejected = 0
            self.reads_to_drop = 0
            self.holding = False
            self.released.clear()
            self.targets = []


class _BadRequest(Exception):
    def __init__(self, status: int, code: str, field: str | None = None) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.field = field


# --- HTTP ------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    # Handler threads are joined by server_close() (ThreadingMixIn.block_on_close), never left behind.
    daemon_threads = False

    def __init__(self, state: _State) -> None:
        self.state = state
        self.spec_bytes = json.dumps(build_spec(), separators=(",", ":")).encode()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._connections_lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close_connections(self) -> None:
        """Wake handler threads blocked on idle keep-alive connections."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # Socket timeout: an idle keep-alive connection is dropped after this (stop() is sooner).
    timeout = 30

    def setup(self) -> None:
        super().setup()
        threading.current_thread().name = "chaos-business-handler"
        self.server.track(self.connection, open_=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, open_=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    # --- plumbing ----------------------------------------------------------------------------------

    def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise _BadRequest(411, "length_required")
        raw_length = self.headers.get("Content-Length") or "0"
        if not raw_length.isdigit():
            raise _BadRequest(400, "invalid_request", "content_length")
        length = int(raw_length)
        bulk = urlsplit(self.path).path == "/chaos/bulk-ok"
        if length > (BULK_MAX_BODY_BYTES if bulk else MAX_BODY_BYTES):
            raise _BadRequest(413, "request_too_large")
        body = self.rfile.read(length) if length else b""
        if len(body) != length:
            raise _BadRequest(400, "invalid_request", "body")
        return body

    def _drop(self) -> None:
        """No response at all: the connection is closed (FIN) once the handler returns."""
        self.close_connection = True

    def _handle(self) -> None:
        state = self.server.state
        with state.lock:
            state.targets.append(self.path)
        try:
            body = self._read_body()
        except _BadRequest as exc:
            self.close_connection = True  # the rest of the request was not read
            self._send_json(exc.status, {"error": exc.code}, {"Connection": "close"})
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        verified = signing.verify_tool_request(
            secret=state.secret, headers=headers, method=self.command, path_with_query=self.path, body=body
        )
        if not verified:
            with state.lock:
                state.rejected += 1
            self._send_json(401, {"error": "invalid_signature", "reason": verified.reason})
            return
        parts = urlsplit(self.path)
        if (self.command, parts.path) == ("GET", SPEC_PATH):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.server.spec_bytes)))
            self.send_header("Cache-Control", "private, no-store")
            self.end_headers()
            self.wfile.write(self.server.spec_bytes)
            return
        tool = _ROUTES.get((self.command, parts.path))
        if self.command == "GET" and parts.path.startswith(ITEM_PREFIX) and parts.path != ITEM_PREFIX:
            tool = "chaos_item"
        if tool is None:
            known = any(path == parts.path for _, path in _ROUTES)
            self._send_json(405 if known else 404, {"error": "method_not_allowed" if known else "not_found"})
            return
        with state.lock:
            state.received[tool].append(
                ChaosRequest(
                    tool=tool,
                    method=self.command,
                    path_with_query=self.path,
                    headers=headers,
                    body=body,
                    on_behalf_of=verified.on_behalf_of,
                    job_id=verified.job_id,
                    idempotency_key=headers.get(signing.IDEMPOTENCY_KEY_HEADER.lower()),
                )
            )
        try:
            arguments = self._arguments(tool, parts.query, body)
        except _BadRequest as exc:
            self._send_json(exc.status, {"error": exc.code, "field": exc.field})
            return
        getattr(self, f"_{tool}")(arguments)

    def _arguments(self, tool: str, query: str, body: bytes) -> dict[str, Any]:
        if tool == "chaos_item":
            if body or query:
                raise _BadRequest(400, "invalid_request", "query" if query else "body")
            return {}
        if tool == "chaos_read":
            if body:
                raise _BadRequest(400, "invalid_request", "body")
            try:
                pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
            except ValueError:
                raise _BadRequest(400, "invalid_request", "query") from None
            arguments = dict(pairs)
            if len(arguments) != len(pairs) or set(arguments) - {"mode"}:
                raise _BadRequest(400, "invalid_request", "query")
            if arguments.get("mode", "ok") not in {"ok", "drop"}:
                raise _BadRequest(400, "invalid_request", "mode")
            return arguments
        if query:
            raise _BadRequest(400, "invalid_request", "query")
        try:
            arguments = json.loads(body or b"{}")
        except ValueError:
            raise _BadRequest(400, "invalid_json") from None
        if not isinstance(arguments, dict):
            raise _BadRequest(400, "invalid_request", "body")
        allowed = {"chaos_slow_ok": {"delay_ms", "note"}, "chaos_bulk_ok": {"note", "payload", "reply"}}.get(
            tool, {"note"}
        )
        for name in arguments:
            if name not in allowed:
                raise _BadRequest(400, "invalid_request", name)
        note_required = tool != "chaos_slow_ok"
        if "note" in arguments or note_required:
            note = arguments.get("note")
            if not isinstance(note, str) or not 1 <= len(note) <= 200:
                raise _BadRequest(400, "invalid_request", "note")
        if tool == "chaos_slow_ok":
            delay = arguments.get("delay_ms")
            if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= MAX_DELAY_MS:
                raise _BadRequest(400, "invalid_request", "delay_ms")
        return arguments

    # --- tools -------------------------------------------------------------------------------------

    def _answer_write(self, tool: str, number: int, arguments: dict[str, Any]) -> None:
        self._send_json(200, {"ok": True, "tool": tool, "write": number, "note": arguments.get("note")})

    def _chaos_ok(self, arguments: dict[str, Any]) -> None:
        self._answer_write("chaos_ok", self.server.state.perform("chaos_ok"), arguments)

    def _chaos_drop_after_write(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_drop_after_write")
        self._drop()

    def _chaos_hang(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_hang")
        self.server.state.stopping.wait(HANG_LIMIT_SECONDS)
        self._drop()

    def _chaos_reset_mid_body(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_reset_mid_body")
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {PROMISED_LENGTH}\r\n\r\n"
        ).encode("ascii")
        self.wfile.write(head + PARTIAL_BODY)
        # Let the client read the headers and the first bytes before the reset arrives.
        self.server.state.stopping.wait(0.1)
        self.close_connection = True
        connection = self.connection
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The buffered reader holds a reference to the socket: release it so close() really closes
        # (and resets) now, not later in finish() after a graceful shutdown.
        self.rfile.close()
        connection.close()

    def _chaos_slow_ok(self, arguments: dict[str, Any]) -> None:
        state = self.server.state
        if state.holding:
            # Held by the test: answer once released (writing first), or give up like a stop.
            if not state.released.wait(arguments["delay_ms"] / 1000) or state.stopping.is_set():
                self._drop()
                return
            self._answer_write("chaos_slow_ok", state.perform("chaos_slow_ok"), arguments)
            return
        if state.stopping.wait(arguments["delay_ms"] / 1000):
            self._drop()  # stopped while waiting: nothing written, nothing answered
            return
        self._answer_write("chaos_slow_ok", self.server.state.perform("chaos_slow_ok"), arguments)

    def _chaos_bulk_ok(self, arguments: dict[str, Any]) -> None:
        number = self.server.state.perform("chaos_bulk_ok")
        reply = arguments.get("reply")
        if isinstance(reply, dict):
            payload = str(reply.get("text", "")).encode("utf-8")
            self.send_response(int(reply.get("status", 200)))
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        body = self.server.state.received["chaos_bulk_ok"][-1].body
        self._send_json(
            200,
            {
                "ok": True,
                "tool": "chaos_bulk_ok",
                "write": number,
                "bytes": len(body),
                "sha256": sha256(body).hexdigest(),
            },
        )

    def _drip(self, head: bytes, unit: bytes) -> None:
        """Send ``head``, then ``unit`` every DRIP_INTERVAL until the client hangs up, the server
        stops or DRIP_LIMIT_SECONDS have passed; the connection is closed afterwards."""
        self.close_connection = True
        state = self.server.state
        try:
            self.wfile.write(head)
            for _ in range(int(DRIP_LIMIT_SECONDS / DRIP_INTERVAL)):
                if state.stopping.wait(DRIP_INTERVAL):
                    return
                self.wfile.write(unit)
        except OSError:
            return  # the client hung up: what a drip waits for

    def _chaos_drip_headers(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_drip_headers")
        self._drip(b"HTTP/1.1 200 OK\r\n", b"X-Drip: still coming\r\n")

    def _chaos_drip_body(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_drip_body")
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {DRIP_LENGTH}\r\n\r\n"
        ).encode("ascii")
        self._drip(head + b"[", b" ")

    def _chaos_item(self, arguments: dict[str, Any]) -> None:
        self.server.state.perform("chaos_item")
        self._send_json(200, {"ok": True, "tool": "chaos_item", "target": self.path})

    def _chaos_read(self, arguments: dict[str, Any]) -> None:
        state = self.server.state
        calls = state.perform("chaos_read")
        if arguments.get("mode") == "drop" or state.take_drop():
            self._drop()
            return
        self._send_json(200, {"ok": True, "tool": "chaos_read", "calls": calls})


# --- the test's handle -----------------------------------------------------------------------------


class ChaosBusiness:
    """A running chaos business system: where it listens, its secret, its catalog and its counters."""

    def __init__(self, *, secret: str | None = None) -> None:
        self.secret = secret or "chaos-secret-" + secrets.token_hex(16)
        self._state = _State(self.secret)
        self._server = _Server(self._state)
        host, port = self._server.server_address[:2]
        self.base_url = f"http://{host}:{port}"
        self.spec_path = SPEC_PATH
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="chaos-business"
        )
        self._thread.start()
        self._stopped = False

    @property
    def spec(self) -> dict[str, Any]:
        """The catalog served at :data:`SPEC_PATH` (a fresh copy; mutate freely)."""
        return build_spec()

    def url(self, path_with_query: str) -> str:
        return self.base_url + path_with_query

    def writes(self, tool: str) -> int:
        """Writes ``tool`` performed (for ``chaos_read``: the calls it served, dropped ones included)."""
        with self._state.lock:
            return self._state.performed[tool]

    def calls(self, tool: str) -> int:
        """Verified requests that reached ``tool`` (also those it refused as invalid input)."""
        with self._state.lock:
            return len(self._state.received[tool])

    def requests(self, tool: str) -> list[ChaosRequest]:
        with self._state.lock:
            return list(self._state.received[tool])

    def targets(self) -> list[str]:
        """Every request target received, in order, as it stood in the request line (catalog
        fetches, unsigned and refused requests included)."""
        with self._state.lock:
            return list(self._state.targets)

    def rejected(self) -> int:
        """Requests refused with 401 (missing or bad signature), catalog fetches included."""
        with self._state.lock:
            return self._state.rejected

    def drop_reads(self, count: int = 1) -> None:
        """The next ``count`` calls of ``chaos_read`` drop the connection whatever their ``mode``."""
        with self._state.lock:
            self._state.reads_to_drop = count

    def hold_slow_calls(self) -> None:
        """From now on ``chaos_slow_ok`` calls wait (holding their connection) until
        :meth:`release_slow_calls`, at most their ``delay_ms``; one not released in time writes
        nothing and drops its connection."""
        with self._state.lock:
            self._state.holding = True
            self._state.released.clear()

    def release_slow_calls(self) -> None:
        self._state.released.set()

    def reset(self) -> None:
        """Zero every counter, forget recorded requests, pending read drops and holds."""
        self._state.reset()

    def stop(self) -> None:
        """Stop serving, wake hanging tools, close connections and join every thread (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._state.stopping.set()
        self._state.released.set()
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()  # joins the handler threads
        self._thread.join()


@contextlib.contextmanager
def running_chaos_business(*, secret: str | None = None) -> Iterator[ChaosBusiness]:
    chaos = ChaosBusiness(secret=secret)
    try:
        yield chaos
    finally:
        chaos.stop()


@pytest.fixture
def chaos_business() -> Iterator[ChaosBusiness]:
    """A fresh chaos business system per test, stopped (threads joined) at teardown."""
    with running_chaos_business() as chaos:
        yield chaos
