"""X-Request-Id: accepted when sane, made otherwise, answered on every response, in logs and audit."""

from __future__ import annotations

import logging
import re

import pytest
from django.db import transaction
from django.http import HttpResponse
from django.test import Client, RequestFactory

from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_chain_verify, audit_record
from bailing.request_context import (
    RequestContextMiddleware,
    RequestIdFilter,
    current_request_id,
    request_id_accept,
)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


@pytest.mark.parametrize("value", ["abc-123", "A" * 128, "trace=1;span=2", "x y"])
def test_a_printable_ascii_id_of_at_most_128_characters_is_kept(value):
    assert request_id_accept(value) == value


@pytest.mark.parametrize(
    "value", [None, "", "A" * 129, "naïve", "tab\there", "line\nbreak", " lead", "trail "]
)
def test_anything_else_is_replaced_by_a_uuid4_hex(value):
    assert HEX32.match(request_id_accept(value))


@pytest.mark.django_db
def test_every_response_answers_the_id_given_or_made():
    client = Client()
    assert client.get("/health", HTTP_X_REQUEST_ID="probe-7")["X-Request-Id"] == "probe-7"
    made = client.get("/health")["X-Request-Id"]
    assert HEX32.match(made)
    assert client.get("/health")["X-Request-Id"] != made
    # errors too: an unknown agent path (JSON 404), a console 404, an invalid id replaced
    assert client.get("/agent-api/v1/nowhere", HTTP_X_REQUEST_ID="e-1")["X-Request-Id"] == "e-1"
    assert client.get("/nowhere-at-all", HTTP_X_REQUEST_ID="e-2")["X-Request-Id"] == "e-2"
    assert HEX32.match(client.get("/health", HTTP_X_REQUEST_ID="bad\x7f")["X-Request-Id"])


def test_log_records_carry_the_request_id_during_the_request_only():
    seen = {}

    def view(request):
        record = logging.LogRecord("t", logging.INFO, __file__, 1, "m", (), None)
        RequestIdFilter().filter(record)
        seen["record"] = record.request_id
        seen["request"] = request.request_id
        return HttpResponse("ok")

    response = RequestContextMiddleware(view)(RequestFactory().get("/x", HTTP_X_REQUEST_ID="log-1"))
    assert seen == {"record": "log-1", "request": "log-1"}
    assert response["X-Request-Id"] == "log-1"
    assert current_request_id() == ""


@pytest.mark.django_db
def test_audit_events_recorded_in_a_request_carry_its_id_and_the_chain_verifies():
    def view(request):
        with transaction.atomic():
            audit_record(actor=Actor.system("pytest"), action="test.request")
        return HttpResponse("ok")

    RequestContextMiddleware(view)(RequestFactory().post("/x", HTTP_X_REQUEST_ID="audit-1"))
    with transaction.atomic():
        outside = audit_record(actor=Actor.system("pytest"), action="test.command")
    from bailing.audit.models import AuditEvent

    inside = AuditEvent.objects.get(action="test.request")
    assert inside.request_id == "audit-1"
    assert outside.request_id == ""
    assert audit_chain_verify().ok
    # hashed when present (so it cannot be changed unnoticed); absent, the content is as before
    from bailing.audit.ledger import audit_event_content as _content

    assert _content(inside)["request_id"] == "audit-1"
    assert "request_id" not in _content(outside)
