"""Log formatting that keeps request data out of the logs.

An exception's message often quotes what it failed on: a database error names the offending value
and a fragment of the SQL, a decoding error the bad input. Tracebacks are therefore written as their
frames (file, line, function and source line: code, never data) and the exception type names only,
for the whole ``__cause__``/``__context__`` chain. Log messages themselves are the hub's own fixed
texts; request logging names the path, never the query string or body.
"""

from __future__ import annotations

import datetime
import json
import logging
import traceback


def _exception_lines(exc: BaseException, seen: set[int]) -> list[str]:
    seen.add(id(exc))
    lines: list[str] = []
    cause, context = exc.__cause__, exc.__context__
    if cause is not None and id(cause) not in seen:
        lines += _exception_lines(cause, seen)
        lines.append("\nThe above exception was the direct cause of the following exception:\n\n")
    elif context is not None and not exc.__suppress_context__ and id(context) not in seen:
        lines += _exception_lines(context, seen)
        lines.append("\nDuring handling of the above exception, another exception occurred:\n\n")
    lines.append("Traceback (most recent call last):\n")
    lines += traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__)).format()
    kind = type(exc)
    lines.append(f"{kind.__module__}.{kind.__qualname__} (message withheld)\n")
    return lines


class RedactingFormatter(logging.Formatter):
    """A ``logging.Formatter`` whose tracebacks carry frames and exception types, never messages."""

    def formatException(self, ei) -> str:
        _kind, exc, _tb = ei
        if exc is None:
            return ""
        return "".join(_exception_lines(exc, set())).rstrip("\n")

    def format(self, record: logging.LogRecord) -> str:
        # Another handler's formatter may already have cached the full traceback text on the record.
        cached = record.exc_text
        record.exc_text = None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached


# Fields of a record the JSON line carries besides time, level, logger and message, when present
# (the access line sets them; ``request_id`` comes from ``bailing.request_context.RequestIdFilter``).
# ``trace_id``/``span_id`` while tracing is on (bailing/tracing.py): the link from a log line to its trace.
_JSON_EXTRAS = ("request_id", "trace_id", "span_id", "method", "route", "status", "duration_ms")


class JsonFormatter(RedactingFormatter):
    """One JSON object per line: ``time`` (UTC ISO 8601), ``level``, ``logger``, ``message``,
    ``request_id``, ``trace_id`` and ``span_id`` (tracing on, inside a span) and, on the access line,
    ``method``, ``route``, ``status``, ``duration_ms``; a traceback (frames and exception types only)
    under ``exc``. Nothing else of the record is written, so whatever a caller passes in ``extra``
    cannot smuggle a body or a header into the log."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _JSON_EXTRAS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info and record.exc_info[1] is not None:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)
