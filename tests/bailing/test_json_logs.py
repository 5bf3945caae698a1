"""BAILING_LOG_FORMAT=json: one object per line, and one access line per request (route template)."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from bailing.log import JsonFormatter, RedactingFormatter
from bailing.request_context import RequestIdFilter

pytestmark = pytest.mark.django_db


@pytest.fixture
def json_lines(caplog):
    """Every record captured during the test, as the json formatter (behind the filter) writes it."""
    caplog.set_level(logging.INFO)
    formatter = JsonFormatter()

    def lines() -> list[dict]:
        out = []
        for record in caplog.records:
            RequestIdFilter().filter(record)
            text = formatter.format(record)
            assert "\n" not in text
            out.append(json.loads(text))
        return out

    return lines


def access(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["logger"] == "bailing.access"]


def test_the_json_formatter_keeps_the_tracebacks_redacted():
    assert issubclass(JsonFormatter, RedactingFormatter)
    message = "secret-" + "in-message"
    try:
        raise ValueError(message)
    except ValueError:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "failed %s", ("here",), __import__("sys").exc_info()
        )
    record.body = "never"  # an extra the formatter does not know is not written
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed here" and line["level"] == "ERROR" and line["logger"] == "x"
    assert "ValueError (message withheld)" in line["exc"]
    assert "secret-in-message" not in json.dumps(line) and "never" not in json.dumps(line)
    assert line["time"].endswith("+00:00")


def test_one_access_line_per_request_with_the_route_template(json_lines):
    Client().get("/agent-api/v1/nowhere/at-all?token=qs-secret", HTTP_X_REQUEST_ID="req-9")
    Client().get("/health", HTTP_X_REQUEST_ID="req-10", HTTP_AUTHORIZATION="Bearer hdr-secret")
    lines = access(json_lines())
    assert len(lines) == 2
    first, second = lines
    assert first["request_id"] == "req-9" and first["status"] == 404 and first["method"] == "GET"
    assert "/nowhere" not in first["route"]  # the pattern, never the raw path
    assert second == {
        "time": second["time"],
        "level": "INFO",
        "logger": "bailing.access",
        "message": second["message"],
        "request_id": "req-10",
        "method": "GET",
        "route": "health",
        "status": 200,
        "duration_ms": second["duration_ms"],
    }
    assert isinstance(second["duration_ms"], float)
    text = json.dumps(json_lines())
    assert "qs-secret" not in text and "hdr-secret" not in text


def test_a_route_with_parameters_is_logged_as_its_template(json_lines):
    Client().get("/agent-api/v1/tools/some-tool-name-77")
    (line,) = access(json_lines())
    assert "some-tool-name-77" not in json.dumps(line)
    assert "<" in line["route"]


def test_the_setting_selects_the_formatter():
    from django.conf import settings

    assert settings.BAILING_LOG_FORMAT == "text"
    assert settings.LOGGING["handlers"]["console"]["formatter"] == "text"
    assert settings.LOGGING["formatters"]["json"]["()"] == "bailing.log.JsonFormatter"
