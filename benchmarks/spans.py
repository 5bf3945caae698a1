"""Where a request's time goes, from a traced run: an OTLP/HTTP receiver for the served hub's spans,
their breakdown per request by kind, and a sampler of what PostgreSQL's backends wait on.

The hub under test runs with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at :func:`span_receiver`;
every request is one trace whose root is the Django server span. :func:`request_breakdown` splits
each root's duration into exclusive parts, by the spans below it:

* ``business_call`` — the ``dispatch`` span (the signed request to the business system and its answer);
* ``embedding`` — ``knowledge.embed`` (the query embedding);
* ``seal`` — ``audit.seal``, the after-commit seal of the audit chain, its statements and commit;
* ``commit`` — ``db.commit`` outside the seal: the transaction's COMMIT, where it waits for its fsync;
* ``lock`` — statements that take a lock (advisory locks, ``FOR UPDATE``), outside the seal;
* ``sql`` — every other statement (the psycopg instrumentation's spans);
* ``python`` — the rest of the root span: the hub's own code, the framework, and what the
  tracing itself costs.

A statement's span covers its round trip, so ``sql`` holds the server's work and the wire; a lock wait
is inside the statement that waits. :class:`WaitSampler` therefore also samples
``pg_stat_activity`` during the run: the share of samples in which a hub backend was active, idle in a
transaction (waiting for the hub), or waiting on a lock, the WAL or I/O.

Benchmarks print figures; they are never tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import http.server
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

PARTS = ("python", "sql", "lock", "commit", "seal", "embedding", "business_call")
_LOCK_MARKS = ("advisory_lock", "advisory_xact_lock", "for update", "for no key update", "lock table")


@dataclasses.dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    statement: str = ""

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


@dataclasses.dataclass
class SpanReceiver:
    url: str = ""
    spans: list[Span] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def snapshot(self) -> list[Span]:
        with self.lock:
            return list(self.spans)

    def clear(self) -> None:
        with self.lock:
            self.spans.clear()


def _decode(body: bytes) -> list[Span]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    out = []
    for resource_spans in message.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                statement = ""
                for attribute in span.attributes:
                    if attribute.key in ("db.statement", "db.query.text"):
                        statement = attribute.value.string_value
                out.append(
                    Span(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        name=span.name,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        statement=statement,
                    )
                )
    return out


def receiver_available() -> bool:
    """Can spans be decoded here (``opentelemetry-proto``, from the ``dev`` extra)?"""
    try:
        import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def otlp_http_server(on_body: Callable[[bytes], None]) -> Iterator[str]:
    """An OTLP/HTTP trace endpoint on an ephemeral loopback port; yields its URL, stopped on exit.
    Each ``POST /v1/traces`` body (gunzipped) goes to ``on_body``; one it cannot take is a 400."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    answer = ExportTraceServiceResponse().SerializeToString()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            try:
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                on_body(body)
            except Exception:
                self.send_response(400)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format, *args):  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextlib.contextmanager
def span_receiver() -> Iterator[SpanReceiver]:
    """An OTLP/HTTP trace receiver on an ephemeral loopback port (its ``url`` is the endpoint to set
    as ``OTEL_EXPORTER_OTLP_ENDPOINT``); stopped on exit."""
    receiver = SpanReceiver()

    def take(body: bytes) -> None:
        spans = _decode(body)
        with receiver.lock:
            receiver.spans.extend(spans)

    with otlp_http_server(take) as url:
        receiver.url = url
        yield receiver


def tracing_env(endpoint: str) -> dict[str, str]:
    """The environment that makes the served hub export every span to ``endpoint`` quickly."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2048",
        "OTEL_SERVICE_NAME": "bailing-bench",
    }


def _part_of(span: Span, ancestors: Sequence[str]) -> str | None:
    """The part a span's whole duration counts in, or None for a span whose children are counted."""
    if "audit.seal" in ancestors or span.name == "audit.seal":
        return "seal" if span.name == "audit.seal" else None
    if "dispatch" in ancestors or "knowledge.embed" in ancestors:
        return None
    if span.name == "dispatch":
        return "business_call"
    if span.name == "knowledge.embed":
        return "embedding"
    if span.name == "db.commit":
        return "commit"
    if span.statement:
        text = span.statement.lower()
        return "lock" if any(mark in text for mark in _LOCK_MARKS) else "sql"
    return None


def request_breakdown(spans: Sequence[Span], *, path_prefix: str | None = None) -> dict:
    """Per request (one trace, its root span), the milliseconds of each of :data:`PARTS`, as means and
    medians over the requests, with the mean server time, statements and commits per request.
    ``path_prefix`` keeps only roots whose name holds it (the server span is named after the route)."""
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    rows = []
    for items in by_trace.values():
        roots = [span for span in items if not span.parent_id]
        if len(roots) != 1:
            continue  # an incomplete trace (its root not exported yet)
        root = roots[0]
        if path_prefix is not None and path_prefix not in root.name:
            continue
        by_id = {span.span_id: span for span in items}
        parts = dict.fromkeys(PARTS, 0.0)
        statements = commits = 0
        dispatched = False
        for span in items:
            if span is root:
                continue
            chain, parent = [], span.parent_id
            while parent in by_id:
                chain.append(by_id[parent].name)
                parent = by_id[parent].parent_id
            part = _part_of(span, chain)
            if span.statement and "audit.seal" not in chain:
                statements += 1
            if span.name == "db.commit" and "audit.seal" not in chain:
                commits += 1
            dispatched = dispatched or span.name == "dispatch"
            if part is not None:
                parts[part] += span.ms
        counted = sum(parts[part] for part in PARTS if part != "python")
        parts["python"] = max(0.0, root.ms - counted)
        rows.append(
            {
                "total": root.ms,
                **parts,
                "statements": statements,
                "commits": commits,
                "dispatched": dispatched,
            }
        )
    if not rows:
        return {"requests": 0}
    figures = ("total", *PARTS)
    return {
        "requests": len(rows),
        "dispatched": sum(1 for row in rows if row["dispatched"]),
        "mean_ms": {name: statistics.fmean(row[name] for row in rows) for name in figures},
        "p50_ms": {name: statistics.median(row[name] for row in rows) for name in figures},
        "statements": statistics.fmean(row["statements"] for row in rows),
        "commits": statistics.fmean(row["commits"] for row in rows),
    }


# --- what PostgreSQL's backends wait on -----------------------------------------------------------------
_ACTIVITY_SQL = (
    "SELECT state, coalesce(wait_event_type, ''), coalesce(wait_event, '') FROM pg_stat_activity "
    "WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
    "AND state IS NOT NULL AND state <> 'idle'"
)


class WaitSampler:
    """Samples ``pg_stat_activity`` every ``interval`` seconds on its own connection (a psycopg
    connection string) while running: per sample, each non-idle client backend of the database as
    ``active`` (running), ``active: <type>:<event>`` (waiting: Lock, LWLock, IO …) or
    ``idle in transaction`` (waiting for its client). :meth:`summary` gives the share of each."""

    def __init__(self, conninfo: str, interval: float = 0.01):
        self.conninfo = conninfo
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self):
        import psycopg

        self._connection = psycopg.connect(self.conninfo, autocommit=True)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        with self._connection.cursor() as cursor:
            while not self._stop.is_set():
                cursor.execute(_ACTIVITY_SQL)
                self.samples += 1
                for state, kind, event in cursor.fetchall():
                    if state == "active" and kind:
                        self.counts[f"active: {kind}:{event}"] += 1
                    else:
                        self.counts[state] += 1
                time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._connection.close()
        return False

    def summary(self) -> dict:
        """Samples taken, and per state the mean number of backends in it per sample."""
        samples = max(1, self.samples)
        return {
            "samples": self.samples,
            "interval_s": self.interval,
            "backends_per_sample": {
                key: round(count / samples, 3) for key, count in self.counts.most_common()
            },
        }
