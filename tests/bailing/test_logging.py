"""Logs never carry request bodies, credentials or SQL: not on an error path, not on a 500.

Records are captured as emitted and then formatted with the formatter the settings install, which is
what reaches stderr in production.
"""

from __future__ import annotations

import logging

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from agent_runtime.api import auth_views
from bailing.api.renderers import CompactJSONRenderer
from bailing.log import RedactingFormatter
from tests.factories import AgentSessionFactory, ClientFactory

pytestmark = pytest.mark.django_db

REFRESH = "bhr_" + "R" * 43
BODY_MARKER = "body-marker-3f9a"


@pytest.fixture
def written(caplog):
    """What the configured log handler would write for the records captured during the test."""
    caplog.set_level(logging.DEBUG)
    formatters = [handler.formatter for handler in logging.getLogger().handlers]
    configured = next(f for f in formatters if isinstance(f, RedactingFormatter))

    def text() -> str:
        return "\n".join(configured.format(record) for record in caplog.records)

    return text


def refresh_body(**extra) -> dict:
    return {"grant_type": "refresh_token", "client_app_id": "shop", "refresh_token": REFRESH, **extra}


def assert_clean(text: str, *secrets: str) -> None:
    for secret in (REFRESH, REFRESH[4:], BODY_MARKER, *secrets):
        assert secret not in text
    assert "SELECT" not in text.upper()


def test_the_settings_install_the_redacting_formatter():
    assert any(isinstance(h.formatter, RedactingFormatter) for h in logging.getLogger().handlers)


def test_an_error_path_logs_no_credential_or_body(written):
    ClientFactory(app_id="shop")
    client = APIClient()
    response = client.post("/agent-auth/v1/token", refresh_body(), format="json")
    assert response.json()["error"] == "invalid_grant"
    response = client.post("/agent-auth/v1/token", refresh_body(note=BODY_MARKER), format="json")
    assert response.json()["error"] == "invalid_request"
    response = client.get("/agent-api/v1/workspaces", HTTP_AUTHORIZATION=f"Bearer bha_{'A' * 43}")
    assert response.status_code == 401
    assert_clean(written(), "bha_" + "A" * 43)


def test_a_500_in_a_view_logs_the_exception_type_only(written, monkeypatch):
    def failing_refresh(*, client_app_id, refresh_token):
        # A real database error whose message quotes the credential it failed on.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT %s::integer", [refresh_token])

    monkeypatch.setattr(auth_views, "token_refresh", failing_refresh)
    ClientFactory(app_id="shop")
    response = APIClient(raise_request_exception=False).post(
        "/agent-auth/v1/token", refresh_body(), format="json"
    )
    assert response.status_code == 500
    assert response.json() == {"error": "internal_error", "message": "Internal error."}
    assert response["Cache-Control"] == "no-store"
    assert response["Pragma"] == "no-cache"
    text = written()
    assert "DataError" in text  # operators still learn what failed, and where
    assert_clean(text)
    assert REFRESH not in response.content.decode()


def test_a_500_outside_the_view_logs_frames_and_types_but_no_message(written, monkeypatch):
    session = AgentSessionFactory()

    def failing_render(self, data, accepted_media_type=None, renderer_context=None):
        raise RuntimeError(f"cannot render {session._access} {BODY_MARKER}")

    monkeypatch.setattr(CompactJSONRenderer, "render", failing_render)
    response = APIClient(raise_request_exception=False).get(
        "/agent-api/v1/workspaces", HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    # Django's own 500 page, replaced by the envelope on the agent surface.
    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert response["Cache-Control"] == "no-store"
    assert b'"error":"internal_error"' in response.content
    text = written()
    assert "Traceback" in text and "builtins.RuntimeError" in text
    assert_clean(text, session._access, session._access[4:])


def test_the_formatter_keeps_frames_and_types_of_the_whole_chain():
    import sys

    formatter = RedactingFormatter("%(message)s")
    # Built at run time: the frames show source lines, which must not be what hides the values.
    cause, effect = "-".join(["secret", "cause"]), "-".join(["secret", "effect"])
    try:
        try:
            raise KeyError(cause)
        except KeyError as exc:
            raise ValueError(effect) from exc
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    record.exc_text = f"cached by another handler: {effect}"
    text = formatter.format(record)
    assert cause not in text and effect not in text
    assert "builtins.KeyError" in text and "builtins.ValueError" in text
    assert "direct cause" in text
    assert "test_the_formatter_keeps_frames_and_types_of_the_whole_chain" in text
    # Other handlers still see what they cached.
    assert record.exc_text == f"cached by another handler: {effect}"


def test_sql_is_not_logged_even_at_debug_level(written):
    # The development default (DEBUG on) makes Django log every statement at DEBUG.
    connection.force_debug_cursor = True
    try:
        ClientFactory(app_id="shop", name="SELECT-ME-NOT")
        response = APIClient().post("/agent-auth/v1/token", refresh_body(), format="json")
    finally:
        connection.force_debug_cursor = False
    assert response.status_code == 400
    assert connection.queries  # statements were recorded: only the logger's level keeps them out
    text = written()
    assert "SELECT-ME-NOT" not in text
    assert_clean(text)
