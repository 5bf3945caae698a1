"""Raw body budgets are measured while the stream is read: reading stops past the budget, and a body
without ``Content-Length`` (``Transfer-Encoding: chunked``) is measured and parsed like any other.

The WSGI environ is built by hand, as gunicorn builds it for a chunked request (no ``CONTENT_LENGTH``,
``wsgi.input_terminated``); ``test_chunked_live.py`` checks the same against a real gunicorn.
"""

from __future__ import annotations

import io
import json

import pytest
from django.test import RequestFactory
from django.test.client import ClientHandler

from bailing.api.errors import InvalidRequest, RequestBodyTooLarge
from bailing.api.parsers import parse_json_bytes, read_budgeted

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


class MeteredStream(io.RawIOBase):
    """A request body of ``size`` bytes that counts how much of it was read."""

    def __init__(self, data: bytes | None = None, *, size: int = 0, fill: bytes = b" "):
        self.data = data
        self.size = len(data) if data is not None else size
        self.fill = fill
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.consumed
        n = left if n is None or n < 0 else min(n, left)
        chunk = self.fill * n if self.data is None else self.data[self.consumed : self.consumed + n]
        self.consumed += n
        return chunk

    def readline(self, size: int = -1) -> bytes:  # LimitedStream wants it; bodies are read by size
        return self.read(size)


def chunked_request(path: str, stream: MeteredStream, *, terminated: bool = True, token: str | None = None):
    environ = RequestFactory()._base_environ(
        PATH_INFO=path,
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": stream},
    )
    environ.pop("CONTENT_LENGTH", None)
    if terminated:
        environ["wsgi.input_terminated"] = True
    if token:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return ClientHandler()(environ)


def envelope(response) -> dict:
    assert response["Cache-Control"] == "no-store"
    assert response["Content-Type"].startswith("application/json")
    return json.loads(response.content)


# --- the reader -------------------------------------------------------------------------------------------


def test_reading_stops_one_chunk_past_the_budget():
    stream = MeteredStream(size=10 * MIB)
    with pytest.raises(RequestBodyTooLarge) as info:
        read_budgeted(stream, 100_000)
    observed = info.value.extra["observed_bytes"]
    assert 100_000 < observed <= 100_000 + 64 * 1024
    assert stream.consumed == observed
    assert info.value.extra["max_bytes"] == 100_000


def test_a_body_at_the_budget_is_read_whole():
    stream = MeteredStream(b"x" * 100_000)
    assert read_budgeted(stream, 100_000) == b"x" * 100_000


@pytest.mark.parametrize(
    "raw",
    [
        b"[" + b"9" * 4301 + b"]",  # more digits than Python converts to an int
        b'{"a":1e400}',
        b'{"a":[1,{"b":-1E+999}]}',
    ],
)
def test_numbers_that_cannot_be_represented_are_rejected(raw):
    with pytest.raises(InvalidRequest):
        parse_json_bytes(raw)


def test_numbers_that_can_are_kept_exactly():
    assert parse_json_bytes(b'{"a":1e308,"b":12345678901234567890,"c":-0.5}') == {
        "a": 1e308,
        "b": 12345678901234567890,
        "c": -0.5,
    }


def test_nesting_is_limited_without_recursion():
    from bailing.api.parsers import MAX_JSON_DEPTH

    at_limit = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json_bytes(at_limit) is not None
    with pytest.raises(InvalidRequest):
        parse_json_bytes(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1))


def test_a_repeated_key_is_named_unless_it_cannot_be_encoded():
    with pytest.raises(InvalidRequest) as info:
        parse_json_bytes(b'{"grant_type":1,"grant_type":2}')
    assert info.value.extra["field"] == "grant_type"
    with pytest.raises(InvalidRequest) as info:
        parse_json_bytes(b'{"\\ud800":1,"\\ud800":2}')
    assert info.value.extra["field"] == "$"


# --- declared lengths -------------------------------------------------------------------------------------


def test_a_declared_length_over_the_budget_is_413_before_one_byte_is_read():
    stream = MeteredStream(size=20 * MIB, fill=b"x")
    environ = RequestFactory()._base_environ(
        PATH_INFO="/agent-auth/v1/authorizations",
        REQUEST_METHOD="POST",
        CONTENT_TYPE="application/json",
        CONTENT_LENGTH=str(stream.size),
        **{"wsgi.input": stream},
    )
    response = ClientHandler()(environ)
    assert response.status_code == 413
    body = envelope(response)
    assert body["error"] == "arguments_too_large"
    assert (body["max_bytes"], body["observed_bytes"]) == (16 * 1024, stream.size)
    assert stream.consumed == 0


class BrokenStream(MeteredStream):
    """A body reader that fails the way gunicorn's does: ``error`` on the first read."""

    def __init__(self, error: BaseException):
        super().__init__(b"")
        self.error = error

    def read(self, n: int = -1) -> bytes:
        raise self.error


class InvalidChunkSize(Exception):
    """Stands for gunicorn.http.errors.InvalidChunkSize (a ParseException, not an OSError)."""


class NoMoreData(OSError):
    """Stands for gunicorn.http.errors.NoMoreData (an IOError: the client went away)."""


@pytest.mark.parametrize("error", [InvalidChunkSize("zz"), NoMoreData(b""), ConnectionResetError()])
def test_a_body_the_server_cannot_read_is_400_invalid_request(error):
    response = chunked_request("/agent-auth/v1/token", BrokenStream(error))
    assert response.status_code == 400
    assert envelope(response)["error"] == "invalid_request"


# --- chunked bodies through the whole stack ----------------------------------------------------------------


def test_a_chunked_body_is_read_and_parsed():
    body = json.dumps({"grant_type": "password"}).encode()
    response = chunked_request("/agent-auth/v1/token", MeteredStream(body))
    # The grant type was read from the body: an unread body would be "grant_type missing".
    assert response.status_code == 400
    assert envelope(response)["error"] == "unsupported_grant_type"
    assert response["Pragma"] == "no-cache"


def test_an_empty_chunked_body_is_an_empty_object():
    response = chunked_request("/agent-auth/v1/token", MeteredStream(b""))
    assert response.status_code == 400
    body = envelope(response)
    assert (body["error"], body["field"]) == ("invalid_request", "grant_type")


def test_a_chunked_body_over_the_budget_is_413_and_not_read_to_the_end():
    stream = MeteredStream(size=20 * MIB, fill=b"x")
    response = chunked_request("/agent-auth/v1/authorizations", stream)
    assert response.status_code == 413
    body = envelope(response)
    assert body["error"] == "arguments_too_large"
    assert body["limit_scope"] == "request_body"
    assert body["max_bytes"] == 16 * 1024
    assert 16 * 1024 < body["observed_bytes"] == stream.consumed < stream.size


def test_a_chunked_body_on_an_authenticated_endpoint_uses_that_endpoints_budget():
    from tests.factories import ClientFactory

    client = ClientFactory()
    stream = MeteredStream(size=MIB, fill=b"x")
    path = "/agent-auth/v1/authorizations/00000000-0000-4000-8000-000000000000/approve"
    response = chunked_request(path, stream, token=client._token)
    assert response.status_code == 413
    assert envelope(response)["max_bytes"] == 32 * 1024
    assert stream.consumed < stream.size


def test_a_chunked_body_the_server_does_not_terminate_is_refused():
    # Without wsgi.input_terminated the stream may block past the body: never read it.
    stream = MeteredStream(json.dumps({"grant_type": "password"}).encode())
    response = chunked_request("/agent-auth/v1/token", stream, terminated=False)
    assert response.status_code == 400
    assert envelope(response)["error"] == "invalid_request"
    assert stream.consumed == 0
