"""A small OTLP/HTTP trace receiver for the tests: a threaded ``http.server`` on 127.0.0.1 that accepts
``POST /v1/traces`` (protobuf, optionally gzip), decodes each ``ExportTraceServiceRequest`` with the
official classes of ``opentelemetry-proto`` and keeps the spans, flattened to :class:`ReceivedSpan`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.spans import otlp_http_server


def _value(any_value) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in any_value.kvlist_value.values}
    return getattr(any_value, kind)


def _attributes(items) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


@dataclass
class ReceivedSpan:
    """One exported span: ids as lowercase hex (parent ``""`` for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str, dict[str, Any]]]
    status_code: int
    status_message: str
    resource: dict[str, Any]
    scope: str

    def texts(self) -> list[str]:
        """Every string this span carries: name, attribute keys and values, events, links, status."""
        out = [self.name, self.status_message, self.scope]
        for mapping in (self.attributes, self.resource):
            out.extend(mapping.keys())
            out.extend(repr(value) for value in mapping.values())
        for name, attributes in self.events:
            out.append(name)
            out.extend(attributes.keys())
            out.extend(repr(value) for value in attributes.values())
        for _trace, _span, attributes in self.links:
            out.extend(repr(value) for value in attributes.values())
        return out


@dataclass
class OtlpReceiver:
    url: str  # the endpoint to set as OTEL_EXPORTER_OTLP_ENDPOINT
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def clear(self) -> None:
        with self.lock:
            self.spans.clear()

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0):
        """The spans received once ``predicate`` holds for them; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({span.name for span in spans})
                raise AssertionError(f"spans never matched within {timeout}s; received {names}")
            time.sleep(0.1)

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        return [span for span in self.snapshot() if span.trace_id == trace_id]


def _decode(receiver: OtlpReceiver, body: bytes) -> None:
    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    received = []
    for resource_spans in message.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                received.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes=_attributes(span.attributes),
                        events=[(event.name, _attributes(event.attributes)) for event in span.events],
                        links=[
                            (link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                            for link in span.links
                        ],
                        status_code=span.status.code,
                        status_message=span.status.message,
                        resource=resource,
                        scope=scope_spans.scope.name,
                    )
                )
    with receiver.lock:
        receiver.spans.extend(received)
        receiver.requests += 1


@contextlib.contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A running receiver on an ephemeral loopback port; stopped on exit."""
    receiver = OtlpReceiver(url="")
    with otlp_http_server(lambda body: _decode(receiver, body)) as url:
        receiver.url = url
        yield receiver
