"""bailing.tracing in-process: off costs nothing, what the scrubbing exporter lets leave, and the
traceparent outside the business request's signature."""

from __future__ import annotations

import contextlib

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from bailing import signing, tracing


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "hub"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),
    ],
)
def test_tracing_is_on_only_when_the_otel_environment_names_an_endpoint(environ, on):
    assert tracing.configured(environ) is on


def test_off_the_span_helper_is_one_shared_nullcontext_and_nothing_is_installed():
    assert not tracing.configured() and not tracing.active()
    first, second = tracing.span("dispatch", tool="x"), tracing.span("rules")
    assert first is second and isinstance(first, contextlib.nullcontext)
    with first as entered:
        assert entered is None
    assert tracing.current_ids() is None and tracing.current_trace_id() == ""
    assert tracing.clock() == 0

    def work():
        return 1

    assert tracing.traced("x")(work) is work  # not configured at decoration: no wrapper at all
    from opentelemetry import trace

    assert type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider"


def _export(build) -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(tracing.ScrubbingExporter(memory)))
    build(provider.get_tracer("t"))
    provider.shutdown()
    return memory.get_finished_spans()


def test_the_exporter_keeps_no_query_string_no_outbound_path_no_header_and_no_exception_message():
    def build(tracer):
        with tracer.start_as_current_span(
            "GET oauth/authorize",
            kind=SpanKind.SERVER,
            attributes={
                "http.method": "GET",
                "http.target": "/oauth/authorize?code_challenge=abc&state=s3cr3t",
                "http.url": "https://hub.example/oauth/authorize?code_challenge=abc&state=s3cr3t",
                "url.query": "code=s3cr3t",
                "http.request.header.authorization": ("Bearer s3cr3t",),
                "http.route": "oauth/authorize",
                "bailing.route": "shop",
            },
        ) as server:
            try:
                raise ValueError("s3cr3t in a message")
            except ValueError as exc:
                server.record_exception(exc)
            with tracer.start_as_current_span(
                "POST",
                kind=SpanKind.CLIENT,
                attributes={"url.full": "http://shop.example:8080/orders/s3cr3t/cancel?x=s3cr3t"},
            ):
                pass

    outbound, server = _export(build)
    assert dict(server.attributes) == {
        "http.method": "GET",
        "http.target": "/oauth/authorize",
        "http.url": "https://hub.example/oauth/authorize",
        "http.route": "oauth/authorize",
        "bailing.route": "shop",
    }
    assert [(event.name, dict(event.attributes)) for event in server.events] == [
        ("exception", {"exception.type": "ValueError"})
    ]
    assert dict(outbound.attributes) == {"url.full": "http://shop.example:8080"}
    assert server.status.description is None


def test_a_hub_span_records_the_error_type_never_its_message(monkeypatch):
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(tracing.ScrubbingExporter(memory)))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("bailing"))
    with pytest.raises(KeyError), tracing.span("rules", tool="t"):
        raise KeyError("s3cr3t")
    (recorded,) = memory.get_finished_spans()
    assert recorded.attributes["error.type"] == "builtins.KeyError"
    assert recorded.attributes["bailing.tool"] == "t"
    assert recorded.status.status_code.name == "ERROR" and not recorded.events


def test_the_traceparent_is_not_part_of_the_business_request_signature():
    body = b'{"message":"hi"}'
    headers = signing.sign_tool_request(
        secret="s" * 32, method="POST", path_with_query="/tickets", body=body, job_id="j-1"
    )
    for traceparent in (
        None,
        "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
        "00-" + "3" * 32 + "-" + "4" * 16 + "-00",
    ):
        sent = {name.lower(): value for name, value in headers.items()}
        if traceparent:
            sent["traceparent"] = traceparent
        verified = signing.verify_tool_request(
            secret="s" * 32,
            headers=sent,
            method="POST",
            path_with_query="/tickets",
            body=body,
            now=float(headers[signing.TIMESTAMP_HEADER]),
            tolerance_seconds=300,
        )
        assert verified, verified.reason
