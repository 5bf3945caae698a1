"""A database that cannot be reached is 503 ``service_unavailable`` with ``Retry-After`` on every surface,
logged as one warning line; genuine bugs stay 500 ``internal_error`` (docs/protocol.md "Database
outages").

The broken database is a refused loopback port (``database_down``) or an embedded server of the
test's own that it stops and kills (``throwaway_server``); the shared test database is never touched
by a failure.
"""

from __future__ import annotations

import io
import logging
import sys
from wsgiref.util import setup_testing_defaults

import psycopg
import psycopg.errors
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.db import DataError, InterfaceError, OperationalError, connection
from django.test import Client, override_settings

from bailing.api.exception_handler import api_exception_handler
from bailing.db import outage
from bailing.db.outage import DATABASE_RETRY_AFTER_SECONDS, database_unavailable
from tests.support.outage import default_database

BEARER = "Bearer bha_" + "A" * 43
RETRY_AFTER = str(DATABASE_RETRY_AFTER_SECONDS)


class TouchDatabaseMiddleware:
    """Touches the database before any view runs, as a session or authentication middleware does."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        connection.ensure_connection()
        return self.get_response(request)


@pytest.fixture
def problems(caplog):
    """Every record at WARNING or above logged while the test ran."""
    caplog.set_level(logging.DEBUG)

    def records() -> list[logging.LogRecord]:
        return [record for record in caplog.records if record.levelno >= logging.WARNING]

    return records


def assert_one_outage_line(records: list[logging.LogRecord]) -> None:
    assert [(r.name, r.levelname, r.getMessage()) for r in records] == [
        ("bailing.db", "WARNING", "database unavailable: OperationalError")
    ]
    assert records[0].exc_info is None


def assert_envelope(response) -> None:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "service_unavailable"
    assert response.json()["retry_after_seconds"] == DATABASE_RETRY_AFTER_SECONDS
    assert response["Retry-After"] == RETRY_AFTER
    assert response["Cache-Control"] == "no-store"


def assert_console_page(response) -> None:
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert response["Retry-After"] == RETRY_AFTER
    assert "no-store" in response["Cache-Control"]
    assert "service_unavailable" in response.content.decode()


# --- what counts as an outage --------------------------------------------------------------------------


def _raised(exc: BaseException, *, cause: BaseException | None = None) -> BaseException:
    try:
        raise exc from cause
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("connection failed"),
        psycopg.InterfaceError("the connection is closed"),
        psycopg.errors.AdminShutdown(),
        psycopg.errors.CrashShutdown(),
        psycopg.errors.CannotConnectNow(),
        psycopg.errors.TooManyConnections(),
        psycopg.errors.ConnectionFailure(),
        _raised(OperationalError("wrapped"), cause=psycopg.OperationalError("server closed the connection")),
        _raised(InterfaceError("connection already closed")),
        _raised(RuntimeError("while handling"), cause=psycopg.OperationalError("gone")),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_what_an_unreachable_database_raises_is_an_outage(exc):
    assert database_unavailable(exc) is not None


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.DeadlockDetected(),
        psycopg.errors.QueryCanceled(),
        psycopg.errors.SerializationFailure(),
        psycopg.errors.InvalidTextRepresentation(),
        _raised(OperationalError("deadlock"), cause=psycopg.errors.DeadlockDetected()),
        _raised(DataError("bad input"), cause=psycopg.errors.NumericValueOutOfRange()),
        ConnectionRefusedError("an outbound call, not the database"),
        RuntimeError("a bug"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_bugs_and_server_verdicts_on_a_query_are_not_an_outage(exc):
    assert database_unavailable(exc) is None


def test_a_socket_error_raised_inside_the_driver_is_an_outage():
    namespace = {"__name__": "psycopg.generators"}  # the raising frame's module decides
    exec("def read():\n    raise ConnectionResetError('socket gone')\n", namespace)
    try:
        namespace["read"]()
    except ConnectionResetError as exc:
        assert database_unavailable(exc) is exc


@pytest.mark.django_db
def test_a_data_error_from_bad_input_stays_an_internal_error(problems):
    with pytest.raises(DataError) as caught, connection.cursor() as cursor:
        cursor.execute("SELECT %s::integer", ["not a number"])
    response = api_exception_handler(caught.value, {})
    assert response.status_code == 500
    assert response.data["error"] == "internal_error"
    assert "Retry-After" not in response
    assert [r.getMessage() for r in problems()] == ["unhandled DataError in view"]


# --- every surface, the database refused ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/health", None),
        ("get", "/agent-api/v1/workspaces", None),
        ("get", "/agent-api/v1/workspaces/demo/bootstrap", None),
        (
            "post",
            "/agent-api/v1/workspaces/demo/turns",
            b'{"client_conversation_id":"c","client_turn_id":"t","user_message_id":"m","user_input":"hi"}',
        ),
        (
            "post",
            "/agent-auth/v1/token",
            b'{"grant_type":"refresh_token","client_app_id":"shop","refresh_token":"bhr_' + b"R" * 43 + b'"}',
        ),
        ("get", "/kb/demo-kb/docs", None),
    ],
    ids=["health", "workspaces", "bootstrap", "turns", "token", "push-api"],
)
def test_drf_views_answer_the_envelope(database_down, problems, method, path, body):
    client = Client(raise_request_exception=False)
    kwargs = {"data": body, "content_type": "application/json"} if body is not None else {}
    response = getattr(client, method)(path, HTTP_AUTHORIZATION=BEARER, **kwargs)
    assert_envelope(response)
    assert_one_outage_line(problems())


def test_a_plain_django_view_on_an_agent_surface_answers_the_envelope(database_down, problems):
    # /mcp/<route> is a plain Django view: the bearer lookup fails outside any DRF handler.
    response = Client(raise_request_exception=False).post(
        "/mcp/demo",
        data=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=BEARER,
    )
    assert_envelope(response)
    assert_one_outage_line(problems())


def test_a_console_sign_in_answers_the_styled_503_page(database_down, problems):
    response = Client(raise_request_exception=False).post(
        "/console/login/", {"username": "alice", "password": "correct-horse-battery"}
    )
    assert_console_page(response)
    assert "503.html" in [t.name for t in response.templates]
    assert_one_outage_line(problems())


def test_a_signed_in_console_page_answers_503_when_the_session_cannot_be_read(database_down, problems):
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "a" * 32  # the session store and the user are read from the database
    response = client.get("/console/")
    assert_console_page(response)
    assert_one_outage_line(problems())


@override_settings(
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "bailing.api.middleware.AgentSurfaceMiddleware",
        "tests.bailing.test_outage.TouchDatabaseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ]
)
@pytest.mark.parametrize("path", ["/agent-api/v1/task-control/capabilities", "/console/login/"])
def test_a_failure_inside_a_middleware_is_503_too(database_down, problems, path):
    response = Client(raise_request_exception=False).get(path, HTTP_AUTHORIZATION=BEARER)
    if path.startswith("/agent-api/"):
        assert_envelope(response)
    else:
        assert_console_page(response)
    assert_one_outage_line(problems())


def test_readiness_names_the_failed_database_check(database_down, problems):
    response = Client().get("/health/ready")
    assert response.status_code == 503
    assert response["Retry-After"] == RETRY_AFTER
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is False
    assert body["checks"]["database"]["error"] == "OperationalError"
    assert_one_outage_line(problems())


# --- readiness with the database up ----------------------------------------------------------------------


@pytest.mark.django_db
def test_readiness_is_ok_with_the_database_up():
    from django.utils import timezone

    from knowledge.services.heartbeat import heartbeat_record

    heartbeat_record("test-worker", started_at=timezone.now())  # a knowledge_worker is polling
    response = Client().get("/health/ready")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] is True
    assert isinstance(body["checks"]["database"]["latency_ms"], float)


@pytest.mark.django_db
def test_readiness_checks_are_a_list_other_apps_extend(monkeypatch):
    from bailing import health

    monkeypatch.setattr(health, "READINESS_CHECKS", list(health.READINESS_CHECKS))
    health.readiness_check_register("queue", lambda: {"ok": True, "depth": 3})
    with pytest.raises(ValueError):
        health.readiness_check_register("queue", lambda: {"ok": True})
    body = Client().get("/health/ready").json()
    assert list(body["checks"]) == ["database", "migrations", "embedding", "knowledge_worker", "queue"]
    assert body["checks"]["queue"] == {"ok": True, "depth": 3}

    def broken():
        raise KeyError("never shown")

    health.readiness_check_register("broken", broken)
    health.readiness_check_register("says_no", lambda: {"ok": "yes", "why": "not a bool"})
    response = Client().get("/health/ready")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["broken"] == {"ok": False, "error": "KeyError"}
    assert checks["says_no"]["ok"] is False
    assert checks["database"]["ok"] is True


# --- a real server going away and coming back, through the WSGI handler gunicorn runs -----------------------


def _wsgi_get(handler: WSGIHandler, path: str) -> tuple[int, dict[str, str], bytes]:
    """One request through Django's WSGI handler (connections are checked before and after each
    request there, as under gunicorn; the test client skips that)."""
    environ = {
        "PATH_INFO": path,
        "REQUEST_METHOD": "GET",
        "SERVER_NAME": "127.0.0.1",
        "wsgi.errors": sys.stderr,
    }
    setup_testing_defaults(environ)
    environ["wsgi.input"], environ["wsgi.errors"] = io.BytesIO(), sys.stderr
    started = {}

    def start_response(status, headers, exc_info=None):
        started["status"], started["headers"] = int(status.split()[0]), dict(headers)

    result = handler(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        result.close()  # request_finished: Django closes a connection that broke
    return started["status"], started["headers"], body


def test_persistent_connections_recover_after_a_stop_and_a_crash(
    throwaway_server, django_db_blocker, problems, monkeypatch
):
    handler = WSGIHandler()
    from bailing import health

    # A bare throwaway server has no tables: only the database check is about this test.
    monkeypatch.setattr(health, "READINESS_CHECKS", health.READINESS_CHECKS[:1])
    with django_db_blocker.unblock(), default_database(**throwaway_server.connection_settings()):
        assert _wsgi_get(handler, "/health")[0] == 200
        assert connection.connection is not None  # kept for the next request (CONN_MAX_AGE)

        for breakdown in (throwaway_server.stop, throwaway_server.kill):
            breakdown()
            status, headers, body = _wsgi_get(handler, "/health")
            assert status == 503
            assert b'"error":"service_unavailable"' in body
            assert headers["Retry-After"] == RETRY_AFTER
            status, _, body = _wsgi_get(handler, "/health/ready")
            assert status == 503 and b'"status":"unavailable"' in body

            throwaway_server.start()
            assert _wsgi_get(handler, "/health")[0] == 200
            assert _wsgi_get(handler, "/health/ready")[0] == 200

    lines = [r.getMessage() for r in problems()]
    assert len(lines) == 4
    assert all(line.startswith("database unavailable: ") for line in lines)
    assert all(r.exc_info is None for r in problems())


def test_the_outage_logger_line_names_the_type_only(caplog):
    caplog.set_level(logging.WARNING)
    outage.log_database_unavailable(psycopg.OperationalError("password=hunter2 host=secret"))
    assert caplog.messages == ["database unavailable: OperationalError"]
