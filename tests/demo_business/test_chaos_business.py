"""Self-tests of the chaos business system (tests/support/chaos_business.py) that hub tests rely on:
each tool counts the writes it performed and then misbehaves exactly as documented."""

import json
import socket
import threading
import time
import uuid

import httpx
import jsonschema
import pytest

from agent_runtime.tools.acc import ACC_SCHEMA
from agent_runtime.tools.compiler import compile_spec
from bailing import signing
from tests.support.chaos_business import (
    DRIP_INTERVAL,
    DRIP_LENGTH,
    PARTIAL_BODY,
    PROMISED_LENGTH,
    SPEC_PATH,
    TOOLS,
    running_chaos_business,
)

WRITE_PATHS = {
    "chaos_ok": "/chaos/ok",
    "chaos_drop_after_write": "/chaos/drop-after-write",
    "chaos_hang": "/chaos/hang",
    "chaos_reset_mid_body": "/chaos/reset-mid-body",
    "chaos_slow_ok": "/chaos/slow-ok",
    "chaos_drip_headers": "/chaos/drip-headers",
    "chaos_drip_body": "/chaos/drip-body",
}
READS = ("chaos_read", "chaos_item")
LOST_ANSWER = (httpx.RemoteProtocolError, httpx.ReadError)


def encode(args):
    return b"" if args is None else json.dumps(args, separators=(",", ":")).encode()


def signed_headers(chaos, method, path, body=b"", *, job_id="job-chaos", key=None, secret=None):
    headers = signing.sign_tool_request(
        secret=secret or chaos.secret, method=method, path_with_query=path, body=body, job_id=job_id
    )
    if body:
        headers["Content-Type"] = "application/json"
    if key:
        headers[signing.IDEMPOTENCY_KEY_HEADER] = key
    return headers


def call(chaos, method, path, args=None, *, timeout=2.0, key=None, job_id="job-chaos", secret=None):
    """One signed call on a fresh connection (no keep-alive reuse between misbehaving calls)."""
    body = encode(args)
    headers = signed_headers(chaos, method, path, body, job_id=job_id, key=key, secret=secret)
    with httpx.Client(timeout=timeout) as client:
        return client.request(method, chaos.url(path), content=body, headers=headers)


def wait_until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


# --- catalog --------------------------------------------------------------------------------------


def test_catalog_is_served_to_signed_requests_only(chaos_business):
    with httpx.Client(timeout=2) as client:
        unsigned = client.get(chaos_business.url(SPEC_PATH))
        assert unsigned.status_code == 401
        assert unsigned.json()["error"] == "invalid_signature"
        assert "paths" not in unsigned.text
        other = client.get(
            chaos_business.url(SPEC_PATH),
            headers=signed_headers(chaos_business, "GET", SPEC_PATH, secret="x"),
        )
        assert other.status_code == 401
        signed = client.get(
            chaos_business.url(SPEC_PATH),
            headers=signing.sign_spec_fetch(secret=chaos_business.secret, path_with_query=SPEC_PATH),
        )
    assert signed.status_code == 200
    assert signed.headers["cache-control"] == "private, no-store"
    assert signed.json() == chaos_business.spec
    assert chaos_business.rejected() == 2


def test_catalog_compiles_to_every_tool_without_warnings(chaos_business):
    spec = chaos_business.spec
    assert spec["openapi"] == "3.1.0"
    result = compile_spec(spec, provider="chaos")
    assert result.warnings == []
    tools = {tool.name: tool for tool in result.tools}
    assert sorted(tools) == sorted(TOOLS)
    validator = jsonschema.Draft202012Validator(ACC_SCHEMA)
    for name, tool in tools.items():
        assert tool.risk == "medium"
        assert tool.input_schema["properties"], name
        readonly = name in READS
        assert (tool.method, tool.readonly, tool.scope) == (
            ("GET", True, "chaos.read") if readonly else ("POST", False, "chaos.write")
        )
        assert tool.timeout_ms == (10_000 if name in ("chaos_slow_ok", "chaos_bulk_ok") else 1500)
    for item in spec["paths"].values():
        for operation in item.values():
            validator.validate(operation["x-agent-capability"])
    assert tools["chaos_slow_ok"].input_schema["required"] == ["delay_ms"]
    assert tools["chaos_read"].param_locations == {"mode": "query"}
    assert tools["chaos_bulk_ok"].approval.required is True
    assert (tools["chaos_item"].path, tools["chaos_item"].param_locations) == (
        "/chaos/items/{item}",
        {"item": "path"},
    )


# --- gates ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(WRITE_PATHS))
def test_unsigned_or_wrongly_signed_calls_reach_no_tool(chaos_business, tool):
    path = WRITE_PATHS[tool]
    args = {"note": "x", "delay_ms": 0} if tool == "chaos_slow_ok" else {"note": "x"}
    with httpx.Client(timeout=2) as client:
        unsigned = client.post(chaos_business.url(path), json=args)
    assert unsigned.status_code == 401
    assert call(chaos_business, "POST", path, args, secret="not-the-secret").status_code == 401
    headers = signed_headers(chaos_business, "POST", path, encode(args))
    with httpx.Client(timeout=2) as client:
        tampered = client.post(
            chaos_business.url(path), content=encode({**args, "note": "y"}), headers=headers
        )
    assert tampered.status_code == 401
    assert (chaos_business.writes(tool), chaos_business.calls(tool), chaos_business.rejected()) == (0, 0, 3)


@pytest.mark.parametrize(
    ("method", "path", "args", "field"),
    [
        ("POST", "/chaos/ok", {}, "note"),
        ("POST", "/chaos/ok", {"note": ""}, "note"),
        ("POST", "/chaos/ok", {"note": "x", "extra": 1}, "extra"),
        ("POST", "/chaos/hang", {"note": 5}, "note"),
        ("POST", "/chaos/slow-ok", {"delay_ms": -1}, "delay_ms"),
        ("POST", "/chaos/slow-ok", {"delay_ms": "10"}, "delay_ms"),
        ("POST", "/chaos/slow-ok", {}, "delay_ms"),
        ("GET", "/chaos/read?mode=explode", None, "mode"),
        ("GET", "/chaos/read?other=1", None, "query"),
    ],
)
def test_invalid_arguments_are_400_and_perform_nothing(chaos_business, method, path, args, field):
    response = call(chaos_business, method, path, args)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert all(chaos_business.writes(tool) == 0 for tool in TOOLS)


def test_unknown_paths_and_methods(chaos_business):
    assert call(chaos_business, "GET", "/chaos/nothing").status_code == 404
    assert call(chaos_business, "GET", "/chaos/ok").status_code == 405
    assert call(chaos_business, "POST", "/chaos/read", {"note": "x"}).status_code == 405


# --- tools ----------------------------------------------------------------------------------------


def test_chaos_ok_writes_once_per_call_and_records_the_request(chaos_business):
    key = uuid.uuid4().hex
    first = call(chaos_business, "POST", "/chaos/ok", {"note": "first"}, key=key, job_id="job-1")
    assert first.status_code == 200
    assert first.json() == {"ok": True, "tool": "chaos_ok", "write": 1, "note": "first"}
    # No deduplication here: the same key twice is two writes (the test sees what the hub sent).
    assert call(chaos_business, "POST", "/chaos/ok", {"note": "again"}, key=key).json()["write"] == 2
    assert chaos_business.writes("chaos_ok") == 2
    (recorded, _) = chaos_business.requests("chaos_ok")
    assert (recorded.job_id, recorded.idempotency_key, recorded.body) == ("job-1", key, b'{"note":"first"}')
    assert recorded.headers["x-bailing-job-id"] == "job-1"


def test_drop_after_write_closes_without_a_response(chaos_business):
    with pytest.raises(httpx.RemoteProtocolError):
        call(chaos_business, "POST", "/chaos/drop-after-write", {"note": "x"})
    assert chaos_business.writes("chaos_drop_after_write") == 1


def test_hang_writes_and_never_answers(chaos_business):
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        call(chaos_business, "POST", "/chaos/hang", {"note": "x"}, timeout=0.5)
    assert time.monotonic() - started < 2
    assert chaos_business.writes("chaos_hang") == 1


def test_reset_mid_body_sends_headers_then_a_truncated_body(chaos_business):
    body = encode({"note": "x"})
    headers = signed_headers(chaos_business, "POST", "/chaos/reset-mid-body", body)
    with (
        httpx.Client(timeout=2) as client,
        client.stream(
            "POST", chaos_business.url("/chaos/reset-mid-body"), content=body, headers=headers
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-length"] == str(PROMISED_LENGTH)
        with pytest.raises(LOST_ANSWER):
            response.read()
    assert chaos_business.writes("chaos_reset_mid_body") == 1


def test_reset_mid_body_is_a_tcp_reset_not_a_close(chaos_business):
    body = encode({"note": "raw"})
    headers = signed_headers(chaos_business, "POST", "/chaos/reset-mid-body", body)
    host, port = chaos_business.base_url.removeprefix("http://").split(":")
    lines = ["POST /chaos/reset-mid-body HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    received = b""
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        with pytest.raises(ConnectionResetError):
            while True:
                chunk = raw.recv(4096)
                if not chunk:
                    break  # a FIN: not what this tool promises
                received += chunk
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert received.endswith(b"\r\n\r\n" + PARTIAL_BODY)
    assert len(PARTIAL_BODY) == 10
    assert chaos_business.writes("chaos_reset_mid_body") == 1


def test_slow_ok_writes_only_after_the_delay(chaos_business):
    outcome = {}

    def slow():
        started = time.monotonic()
        outcome["response"] = call(chaos_business, "POST", "/chaos/slow-ok", {"delay_ms": 400}, timeout=5)
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=slow)
    thread.start()
    assert wait_until(lambda: chaos_business.calls("chaos_slow_ok") == 1)
    assert chaos_business.writes("chaos_slow_ok") == 0  # still waiting: nothing written yet
    thread.join(timeout=5)
    assert outcome["response"].status_code == 200
    assert outcome["response"].json()["write"] == 1
    assert outcome["elapsed"] >= 0.4
    assert chaos_business.writes("chaos_slow_ok") == 1


def test_read_counts_calls_and_drops_when_told(chaos_business):
    assert call(chaos_business, "GET", "/chaos/read").json() == {"ok": True, "tool": "chaos_read", "calls": 1}
    with pytest.raises(httpx.RemoteProtocolError):
        call(chaos_business, "GET", "/chaos/read?mode=drop")
    chaos_business.drop_reads(1)
    with pytest.raises(httpx.RemoteProtocolError):
        call(chaos_business, "GET", "/chaos/read?mode=ok")
    assert call(chaos_business, "GET", "/chaos/read").json()["calls"] == 4
    assert chaos_business.writes("chaos_read") == chaos_business.calls("chaos_read") == 4


def test_counters_are_exact_under_concurrency_and_reset(chaos_business):
    numbers = []
    lock = threading.Lock()

    def write(i):
        response = call(chaos_business, "POST", "/chaos/ok", {"note": f"n{i}"}, timeout=5)
        with lock:
            numbers.append(response.json()["write"])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(numbers) == list(range(1, 17))
    assert chaos_business.writes("chaos_ok") == 16
    chaos_business.drop_reads(3)
    chaos_business.reset()
    assert all(chaos_business.writes(tool) == chaos_business.calls(tool) == 0 for tool in TOOLS)
    assert chaos_business.requests("chaos_ok") == [] and chaos_business.rejected() == 0
    assert call(chaos_business, "GET", "/chaos/read").status_code == 200  # pending drops forgotten


# --- lifecycle ------------------------------------------------------------------------------------


def chaos_threads():
    return [t for t in threading.enumerate() if t.name.startswith("chaos-business")]


def test_stop_wakes_hanging_calls_closes_idle_connections_and_joins_threads():
    errors = []
    with running_chaos_business() as chaos:
        base_url = chaos.base_url

        def hang():
            try:
                call(chaos, "POST", "/chaos/hang", {"note": "x"}, timeout=30)
            except httpx.HTTPError as exc:
                errors.append(type(exc))

        def slow():
            try:
                call(chaos, "POST", "/chaos/slow-ok", {"delay_ms": 30_000}, timeout=60)
            except httpx.HTTPError as exc:
                errors.append(type(exc))

        clients = [threading.Thread(target=hang), threading.Thread(target=slow)]
        for thread in clients:
            thread.start()
        idle = httpx.Client(timeout=5)  # keeps its keep-alive connection open, idle
        body = encode({"note": "idle"})
        assert (
            idle.post(
                chaos.url("/chaos/ok"), content=body, headers=signed_headers(chaos, "POST", "/chaos/ok", body)
            ).status_code
            == 200
        )
        assert wait_until(lambda: chaos.writes("chaos_hang") == 1 and chaos.calls("chaos_slow_ok") == 1)
        assert chaos_threads()
        started = time.monotonic()
    assert time.monotonic() - started < 3
    for thread in clients:
        thread.join(timeout=5)
    idle.close()
    assert sorted(e.__name__ for e in errors) == ["RemoteProtocolError", "RemoteProtocolError"]
    assert chaos.writes("chaos_slow_ok") == 0  # stopped while waiting: nothing written
    assert chaos_threads() == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(base_url + SPEC_PATH, timeout=1)
    chaos.stop()  # idempotent


def test_fixture_listens_on_loopback_with_its_own_secret(chaos_business):
    assert chaos_business.base_url.startswith("http://127.0.0.1:")
    assert chaos_business.secret.startswith("chaos-secret-")
    with running_chaos_business(secret="another-secret") as other:
        assert other.base_url != chaos_business.base_url
        assert (
            call(other, "POST", "/chaos/ok", {"note": "x"}, secret=chaos_business.secret).status_code == 401
        )


def _raw_call(chaos, path: str, args) -> socket.socket:
    """Send one signed POST on a raw socket and return the socket (the caller reads and closes)."""
    body = encode(args)
    headers = signed_headers(chaos, "POST", path, body)
    host, port = chaos.base_url.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    raw = socket.create_connection((host, int(port)), timeout=5)
    raw.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return raw


def _read_for(raw: socket.socket, seconds: float) -> bytes:
    received = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        raw.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = raw.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        received += chunk
    return received


def test_drip_headers_writes_then_sends_header_lines_that_never_end(chaos_business):
    with _raw_call(chaos_business, "/chaos/drip-headers", {"note": "d"}) as raw:
        received = _read_for(raw, DRIP_INTERVAL * 5.5)
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\n\r\n" not in received  # the headers never end
    assert 3 <= received.count(b"X-Drip: still coming\r\n") <= 6
    assert chaos_business.writes("chaos_drip_headers") == 1


def test_drip_body_writes_then_sends_one_byte_at_a_time(chaos_business):
    with _raw_call(chaos_business, "/chaos/drip-body", {"note": "d"}) as raw:
        received = _read_for(raw, DRIP_INTERVAL * 5.5)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert f"Content-Length: {DRIP_LENGTH}".encode() in head
    assert body.startswith(b"[") and 4 <= len(body) <= 7
    assert chaos_business.writes("chaos_drip_body") == 1


def test_the_drip_stops_when_the_client_hangs_up(chaos_business):
    raw = _raw_call(chaos_business, "/chaos/drip-headers", {"note": "d"})
    assert _read_for(raw, DRIP_INTERVAL * 1.5).startswith(b"HTTP/1.1 200 OK")
    raw.close()
    # The handler notices on its next line and its connection is released (stop() would hang else).
    assert wait_until(lambda: not chaos_business._server._connections, timeout=5)


def test_item_answers_the_request_target_and_every_target_is_recorded(chaos_business):
    path = "/chaos/items/a%2F.."
    response = call(chaos_business, "GET", path)
    assert response.json() == {"ok": True, "tool": "chaos_item", "target": path}
    assert call(chaos_business, "GET", "/chaos/items/x", secret="wrong").status_code == 401
    assert chaos_business.targets() == [path, "/chaos/items/x"]
    assert (chaos_business.writes("chaos_item"), chaos_business.rejected()) == (1, 1)
