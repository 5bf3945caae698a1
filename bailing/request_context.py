"""The request id, and one access-log line per request.

:class:`RequestContextMiddleware` runs first. It takes the client's ``X-Request-Id`` when it is
printable ASCII of at most :data:`REQUEST_ID_MAX_LENGTH` characters, else makes one (uuid4 hex),
puts it on ``request.request_id`` and in a context variable for the duration of the request, and
answers it in ``X-Request-Id`` on every response (errors included). Logging (``RequestIdFilter``)
and the audit ledger read it from there, so every line and every audit event a request causes
carries it.

It then logs one line to ``bailing.access``: method, route (the URL pattern's template, e.g.
``agent-api/v1/tools/<segment:tool>/invoke``, never the raw path, so no identifier or query string
reaches the log), status and duration. Bodies, headers and query strings are never logged.
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
import uuid

from bailing import tracing

REQUEST_ID_HEADER = "X-Request-Id"
REQUEST_ID_MAX_LENGTH = 128
_REQUEST_ID_RE = re.compile(r"^[\x21-\x7e][\x20-\x7e]*$")  # printable ASCII, not starting blank

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("bailing_request_id", default="")

access_logger = logging.getLogger("bailing.access")

# What an unmatched path (a 404 outside every pattern) is logged and counted as.
UNMATCHED_ROUTE = "<unmatched>"


def current_request_id() -> str:
    """The id of the request being served on this thread, or ``""`` outside a request."""
    return _request_id.get()


def request_id_accept(value: str | None) -> str:
    """``value`` when it is an acceptable request id, else a fresh uuid4 hex."""
    if (
        value
        and len(value) <= REQUEST_ID_MAX_LENGTH
        and _REQUEST_ID_RE.match(value)
        and value == value.strip()
    ):
        return value
    return uuid.uuid4().hex


def route_template(request) -> str:
    """The matched URL pattern's route (the template), or :data:`UNMATCHED_ROUTE`."""
    match = getattr(request, "resolver_match", None)
    if match is None or not match.route:
        return UNMATCHED_ROUTE
    return match.route


class RequestIdFilter(logging.Filter):
    """Puts ``request_id`` on every record (``""`` outside a request) and, while tracing is on and a
    span is current, ``trace_id`` and ``span_id`` (docs/production.md "Tracing"); never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _request_id.get()
        if not hasattr(record, "trace_id"):
            ids = tracing.current_ids()
            if ids is not None:
                record.trace_id, record.span_id = ids
        return True


class RequestContextMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        request_id = request_id_accept(request.META.get("HTTP_X_REQUEST_ID"))
        request.request_id = request_id
        token = _request_id.set(request_id)
        try:
            response = self.get_response(request)
            response[REQUEST_ID_HEADER] = request_id
            duration_ms = round((time.perf_counter() - started) * 1000, 2)
            route = route_template(request)
            from bailing.metrics import request_observe

            request_observe(route, response.status_code, duration_ms / 1000)
            access_logger.info(
                "%s %s %s %.2fms",
                request.method,
                route,
                response.status_code,
                duration_ms,
                extra={
                    "route": route,
                    "status": response.status_code,
                    "duration_ms": duration_ms,
                    "method": request.method,
                },
            )
            return response
        finally:
            _request_id.reset(token)
