"""OpenTelemetry tracing, off unless the standard ``OTEL_*`` environment asks for it (docs/production.md
"Tracing").

On when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none`` says otherwise. Everything else
(``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and its argument, the
``OTEL_BSP_*`` batch schedule, ``OTEL_EXPORTER_OTLP_HEADERS`` …) is read by the official SDK itself.

Off, nothing of OpenTelemetry's SDK or instrumentation is imported or installed, and :func:`span` hands
back one shared ``contextlib.nullcontext``: a call costs a global read and a branch.

On, a process sets tracing up in two steps:

* :func:`instrument` before the Django application is loaded (``bailing/wsgi.py``, the commands that
  matter): the Django, psycopg and httpx instrumentation, which hold proxy tracers until a provider
  exists, and the middleware that takes an MCP request's ``_meta.traceparent``;
* :func:`provider_start` in the process that serves (gunicorn's ``post_fork``: the batch processor's
  export thread does not survive a fork) — the tracer provider, its batch processor and the OTLP/HTTP
  exporter behind :class:`ScrubbingExporter`.

What a span may hold: the hub's own spans carry identifiers only (route key, tool and provider names,
states, counts); :class:`ScrubbingExporter` is the last gate before anything leaves, whatever an
instrumentation recorded — an allowlist of attribute keys, URLs without query strings (and without
paths on outbound calls, whose paths carry argument values), exception events reduced to the type,
status descriptions dropped.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("bailing.tracing")

DEFAULT_SERVICE_NAME = "bailing-hub"

_NOOP = contextlib.nullcontext()
# The hub's tracer once a provider runs in this process; None while tracing is off.
_tracer: Any = None
_provider: Any = None
_instrumented = False
_lock = threading.Lock()


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Does the standard OpenTelemetry environment ask for traces to be exported?"""
    env = os.environ if environ is None else environ
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return False
    exporters = {part.strip().lower() for part in (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")}
    if "otlp" not in exporters:
        return False
    return bool(
        (env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "").strip()
        or (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").strip()
    )


def active() -> bool:
    """Is a tracer provider running in this process?"""
    return _tracer is not None


# --- the hub's spans -------------------------------------------------------------------------------------


class _Span:
    """One of the hub's spans: an exception sets the status to error and ``error.type`` to its class,
    never its message (which may quote data)."""

    __slots__ = ("_attributes", "_manager", "_name", "_span")

    def __init__(self, name: str, attributes: dict[str, Any]):
        self._name = name
        self._attributes = attributes

    def __enter__(self):
        self._manager = _tracer.start_as_current_span(
            self._name,
            attributes=self._attributes or None,
            record_exception=False,
            set_status_on_exception=False,
        )
        self._span = self._manager.__enter__()
        return self._span

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.set_attribute("error.type", f"{kind.__module__}.{kind.__qualname__}")
            self._span.set_status(Status(StatusCode.ERROR))
        return self._manager.__exit__(kind, exc, tb)


def span(name: str, **attributes: Any):
    """A context manager timing ``name`` as a child of the current span, with ``attributes`` (keys are
    prefixed ``bailing.``; values must be identifiers, states or counts — never arguments, answers,
    tokens or secrets). Off: one shared ``nullcontext`` (``as`` gives ``None``)."""
    if _tracer is None:
        return _NOOP
    return _Span(name, {f"bailing.{key}": value for key, value in attributes.items() if value is not None})


def traced(name: str):
    """Decorate a function so each call is the span ``name``. When tracing is not configured as the
    module is imported the function is returned as it is: no wrapper, no cost."""

    def decorate(function):
        if not configured():
            return function

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if _tracer is None:
                return function(*args, **kwargs)
            with _Span(name, {}):
                return function(*args, **kwargs)

        return wrapper

    return decorate


def clock() -> int:
    """Now in nanoseconds while tracing is on (for :func:`span_record`), else 0 at no cost."""
    return time.time_ns() if _tracer is not None else 0


def span_record(name: str, start_ns: int, end_ns: int, **attributes: Any) -> None:
    """Record an already finished span ``name`` (from ``start_ns`` to ``end_ns``, :func:`clock`) as a
    child of the current span: work that ran inside one statement with others (a KB's retrieval
    lanes). Same attribute rule as :func:`span`."""
    if _tracer is None or not start_ns:
        return
    recorded = _tracer.start_span(
        name,
        attributes={f"bailing.{key}": value for key, value in attributes.items() if value is not None},
        start_time=start_ns,
        record_exception=False,
        set_status_on_exception=False,
    )
    recorded.end(end_time=end_ns)


def annotate(**attributes: Any) -> None:
    """Add ``bailing.``-prefixed attributes to the current span (same rule as :func:`span`)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(f"bailing.{key}", value)


def current_ids() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` of the current span as lowercase hex, or None (off, or no span)."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def current_trace_id() -> str:
    """The current trace id (32 lowercase hex digits), or ``""``."""
    ids = current_ids()
    return ids[0] if ids else ""


# --- set-up ----------------------------------------------------------------------------------------------


def instrument() -> bool:
    """Install the Django, psycopg and httpx instrumentation when tracing is configured; before the
    Django application (its middleware chain) is loaded. Idempotent; False when tracing is off."""
    global _instrumented
    if not configured():
        return False
    with _lock:
        if _instrumented:
            return True
        from django.conf import settings
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        if "OTEL_PROPAGATORS" not in os.environ:
            # W3C trace context only: an agent's baggage is not passed on to the business systems.
            from opentelemetry.propagate import set_global_textmap
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            set_global_textmap(TraceContextTextMapPropagator())
        middleware = list(settings.MIDDLEWARE)
        if MCP_META_MIDDLEWARE not in middleware:
            settings.MIDDLEWARE = [MCP_META_MIDDLEWARE, *middleware]
        # Right after the _meta middleware, before everything else: the server span covers the request.
        DjangoInstrumentor().instrument(middleware_position=1)
        PsycopgInstrumentor().instrument(capture_parameters=False, enable_commenter=False)
        HTTPXClientInstrumentor().instrument()
        _instrumented = True
        return True


def provider_start() -> bool:
    """Start this process's tracer provider (OTLP/HTTP, batch processor, scrubbing) when tracing is
    configured. In a gunicorn worker: after the fork. Idempotent; False when tracing is off."""
    global _tracer, _provider
    if not configured():
        return False
    with _lock:
        if _tracer is not None:
            return True
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        attributes = {}
        if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get(
            "OTEL_RESOURCE_ATTRIBUTES", ""
        ):
            attributes["service.name"] = DEFAULT_SERVICE_NAME
        # The sampler (OTEL_TRACES_SAMPLER[_ARG]), the exporter's endpoint, headers and timeout and
        # the batch schedule (OTEL_BSP_*) come from the environment, read by the SDK.
        provider = TracerProvider(resource=Resource.create(attributes))
        provider.add_span_processor(BatchSpanProcessor(ScrubbingExporter(OTLPSpanExporter())))
        trace.set_tracer_provider(provider)
        _provider = provider
        _tracer = provider.get_tracer("bailing")
        return True


def setup() -> bool:
    """Both steps at once, for a process that does not fork after loading (the commands)."""
    return instrument() and provider_start()


def shutdown() -> None:
    """Export what is buffered and stop the provider (a gunicorn worker's exit)."""
    global _tracer, _provider
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def force_flush(timeout_millis: int = 5000) -> bool:
    """Export what is buffered now (tests, a command's end)."""
    provider = _provider
    return provider.force_flush(timeout_millis) if provider is not None else True


# --- an MCP request's _meta trace context -----------------------------------------------------------------

MCP_META_MIDDLEWARE = "bailing.tracing.McpTraceContextMiddleware"
# MCP endpoints (bailing.shell.urls mounts mcp_server at /mcp/<route>).
_MCP_PATH = re.compile(r"^/mcp/[^/]+/?$")
_META_BODY_MAX_BYTES = 1024 * 1024
_TRACEPARENT_MAX = 55  # version 00: 2 + 1 + 32 + 1 + 16 + 1 + 2
_TRACESTATE_MAX = 512  # the W3C limit of 32 members fits in well under this


class McpTraceContextMiddleware:
    """Installed (outermost, before the Django instrumentation's) only while tracing is on.

    The MCP 2026-07-28 envelope carries the agent's ``traceparent``/``tracestate`` in a request's
    ``params._meta``; a JSON-RPC request is the unit of the agent's work, so when it has one it is
    put where the W3C propagator reads it (``HTTP_TRACEPARENT``/``HTTP_TRACESTATE``), replacing any
    HTTP header: the server span, and all the work below it, continue the agent's trace. The body
    is read once here (Django keeps it for the view); a chunked or oversized body is left alone."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method == "POST" and _MCP_PATH.match(request.path_info):
            _meta_trace_context(request)
        return self.get_response(request)


def _meta_trace_context(request) -> None:
    length = request.META.get("CONTENT_LENGTH") or ""
    if not length.isdigit() or not 0 < int(length) <= _META_BODY_MAX_BYTES:
        return
    try:
        message = json.loads(request.body)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return
    except Exception:  # the body could not be read (the view answers that); no trace context
        return
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return
    traceparent = meta.get("traceparent")
    if not isinstance(traceparent, str) or len(traceparent) > _TRACEPARENT_MAX:
        return
    request.META["HTTP_TRACEPARENT"] = traceparent
    tracestate = meta.get("tracestate")
    if isinstance(tracestate, str) and len(tracestate) <= _TRACESTATE_MAX:
        request.META["HTTP_TRACESTATE"] = tracestate
    else:
        request.META.pop("HTTP_TRACESTATE", None)


# --- what leaves the process --------------------------------------------------------------------------------

# Attribute keys an exported span may carry besides the hub's own (``bailing.*``): HTTP method, route,
# status and server; database system, name and statement (SQL with placeholders; parameters are never
# captured); error type. Anything else an instrumentation (or an OTEL_* option) adds is dropped.
ALLOWED_ATTRIBUTES = frozenset(
    {
        "http.method",
        "http.request.method",
        "http.route",
        "http.status_code",
        "http.response.status_code",
        "http.scheme",
        "url.scheme",
        "http.flavor",
        "network.protocol.version",
        "http.server_name",
        "http.host",
        "server.address",
        "server.port",
        "net.host.name",
        "net.host.port",
        "net.peer.name",
        "net.peer.port",
        "network.peer.address",
        "network.peer.port",
        "net.transport",
        "db.system",
        "db.system.name",
        "db.name",
        "db.namespace",
        "db.user",
        "db.statement",
        "db.query.text",
        "db.operation",
        "db.operation.name",
        "error.type",
    }
)
# URL attributes kept without their query string (and fragment); on a client span (an outbound call,
# whose path holds argument values) without their path too.
_URL_ATTRIBUTES = frozenset({"http.url", "url.full", "http.target", "url.path"})


def _url_scrubbed(key: str, value: str, client: bool) -> str | None:
    value = value.split("?", 1)[0].split("#", 1)[0]
    if not client:
        return value
    if key in ("http.target", "url.path"):
        return None
    match = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", value)
    return match.group(0) if match else None


def scrubbed_attributes(attributes: Mapping[str, Any] | None, *, client: bool) -> dict[str, Any]:
    """``attributes`` as they may leave the process (see :data:`ALLOWED_ATTRIBUTES`)."""
    kept: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if key.startswith("bailing.") or key in ALLOWED_ATTRIBUTES:
            kept[key] = value
        elif key in _URL_ATTRIBUTES and isinstance(value, str):
            clean = _url_scrubbed(key, value, client)
            if clean:
                kept[key] = clean
    return kept


class ScrubbingExporter:
    """A span exporter that hands ``inner`` every span rebuilt from what may leave the process:
    allowed attributes only, URLs cut (:func:`scrubbed_attributes`), events reduced to their name
    (an exception event to ``exception.type``), links kept without attributes, status without
    description."""

    def __init__(self, inner):
        self._inner = inner

    def export(self, spans):
        return self._inner.export([_scrubbed(item) for item in spans])

    def shutdown(self):
        return self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000):
        return self._inner.force_flush(timeout_millis)


def _scrubbed(item):
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, SpanKind, Status

    client = item.kind in (SpanKind.CLIENT, SpanKind.PRODUCER)
    events = []
    for event in item.events:
        attributes = {}
        if event.name == "exception" and event.attributes and "exception.type" in event.attributes:
            attributes["exception.type"] = event.attributes["exception.type"]
        events.append(Event(event.name, attributes, timestamp=event.timestamp))
    return ReadableSpan(
        name=item.name,
        context=item.context,
        parent=item.parent,
        resource=item.resource,
        attributes=scrubbed_attributes(item.attributes, client=client),
        events=events,
        links=[Link(link.context) for link in item.links],
        kind=item.kind,
        status=Status(item.status.status_code),
        start_time=item.start_time,
        end_time=item.end_time,
        instrumentation_scope=item.instrumentation_scope,
    )
