"""The bytes a business system receives and the hashes it may recompute, pinned without a database:
where each argument goes (path, query, header, body), how it is encoded, what a null does, the
agent-facing text of an answer, and ``args_hash`` / idempotency keys equal to BailingHub's for the
same arguments (vectors computed once with BailingHub's canonical-JSON rules in Node.js)."""

from __future__ import annotations

import json
import uuid

import pytest

from agent_runtime.services.http_dispatch import (
    ERROR_TEXT_MAX_CHARS,
    DispatchBuildError,
    answer_text,
    dispatch_request_build,
)
from agent_runtime.services.invocations import arguments_hash, idempotency_key
from agent_runtime.tools import compile_spec
from bailing import signing
from bailing.api.jsjson import js_canonical, js_normalized

SECRET = "wire-secret-0123456789abcdef"


def _tool(method: str, path: str, *, parameters=(), body: dict | None = None, readonly: bool = True):
    operation = {
        "operationId": "probe_tool",
        "summary": "Probe",
        "description": "A tool whose arguments land in every location.",
        "parameters": list(parameters),
        "responses": {"200": {"description": "OK"}},
        "x-agent-capability": {
            "version": 1,
            "enabled": True,
            "scope": "probe.scope",
            "execution": {"readonly": readonly, "idempotent": readonly},
        },
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object", "properties": body}}},
        }
    spec = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {path: {method: operation}}}
    result = compile_spec(spec, provider="probe")
    assert result.tools, result.warnings
    return result.tools[0]


def _param(name: str, where: str, schema: dict | None = None) -> dict:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": name,
        "schema": schema or {"type": "string"},
    }


def _build(tool, arguments, **overrides):
    options = {
        "base_url": "http://127.0.0.1:9/base/",
        "secret": SECRET,
        "job_id": "job-1",
        "client_app_id": "agent-a",
        "on_behalf_of": "alice",
        "idempotency_key": None,
        "timestamp": 1_700_000_000,
    }
    options.update(overrides)
    return dispatch_request_build(tool=tool, arguments=arguments, **options)


def test_path_and_query_are_encoded_like_encodeURIComponent_and_URLSearchParams():
    tool = _tool(
        "get",
        "/shops/{shop}/users/{user}",
        parameters=[
            _param("shop", "path"),
            _param("user", "path"),
            _param("q", "query"),
            _param("dry_run", "query", {"type": "boolean"}),
            _param("limit", "query", {"type": "number"}),
            _param("tags", "query", {"type": "array", "items": {"type": "string"}}),
        ],
    )
    request = _build(
        tool,
        {
            "shop": "s 1",
            "user": "u/2!'()*~é",
            "q": "a b&c=d*~",
            "dry_run": True,
            "limit": 10.0,
            "tags": ["x", "y"],
        },
    )
    assert request.path_with_query == (
        "/shops/s%201/users/u%2F2!'()*~%C3%A9?q=a+b%26c%3Dd*%7E&dry_run=true&limit=10&tags=x%2Cy"
    )
    assert request.url == "http://127.0.0.1:9/base" + request.path_with_query
    assert request.method == "GET" and request.body == b""
    assert "Content-Type" not in request.headers


def test_headers_body_and_signature_are_the_ones_sent():
    tool = _tool(
        "post",
        "/orders/{order_id}/notes",
        parameters=[_param("order_id", "path"), _param("X-Request-Tag", "header")],
        body={"text": {"type": "string", "description": "t"}, "meta": {"type": "object", "description": "m"}},
        readonly=False,
    )
    request = _build(
        tool,
        {"order_id": "SO-1", "X-Request-Tag": "tag-7", "text": "hé", "meta": {"b": 1.0, "a": [1e21, 1e-7]}},
        idempotency_key="k" * 64,
    )
    assert request.path_with_query == "/orders/SO-1/notes"
    assert request.body == '{"text":"hé","meta":{"b":1,"a":[1e+21,1e-7]}}'.encode()
    headers = request.headers
    assert headers["X-Request-Tag"] == "tag-7"
    assert headers["Content-Type"] == "application/json"
    assert headers[signing.IDEMPOTENCY_KEY_HEADER] == "k" * 64
    assert (headers[signing.CLIENT_HEADER], headers[signing.TOOL_SCOPE_HEADER]) == ("agent-a", "probe.scope")
    assert (headers["X-Bailing-On-Behalf-Of"], headers["X-Bailing-Job-Id"]) == ("alice", "job-1")
    expected = signing.sign_tool_request(
        secret=SECRET,
        method="POST",
        path_with_query="/orders/SO-1/notes",
        body=request.body,
        on_behalf_of="alice",
        job_id="job-1",
        timestamp=1_700_000_000,
    )
    assert headers["X-Bailing-Signature"] == expected["X-Bailing-Signature"]


def test_a_null_argument_is_sent_nowhere():
    tool = _tool(
        "post",
        "/items/{item}",
        parameters=[_param("item", "path"), _param("q", "query"), _param("X-Tag", "header")],
        body={"note": {"type": ["string", "null"], "description": "n"}},
        readonly=False,
    )
    request = _build(tool, {"item": "i1", "q": None, "X-Tag": None, "note": None})
    assert request.path_with_query == "/items/i1"
    assert request.body == b"{}"
    assert "X-Tag" not in request.headers


def test_a_header_value_that_cannot_be_sent_is_refused_before_dispatch():
    tool = _tool("get", "/x", parameters=[_param("X-Tag", "header")])
    with pytest.raises(DispatchBuildError) as refused:
        _build(tool, {"X-Tag": "two\r\nlines"})
    assert (refused.value.code, refused.value.field) == ("header_value_invalid", "X-Tag")


@pytest.mark.parametrize(
    ("status", "body", "content_type", "expected"),
    [
        (200, '{"ok":true}', "application/json", '{"ok":true}'),
        (201, "", "text/plain", ""),
        (
            409,
            '{"error":"order_not_refundable"}',
            "application/json",
            'HTTP 409: {"error":"order_not_refundable"}',
        ),
        (503, "   ", "text/plain", "HTTP 503 with an empty body."),
        (
            502,
            "<!DOCTYPE html><html><body>Bad gateway</body></html>",
            "text/plain",
            "HTTP 502: the business system answered an HTML error page (52 characters).",
        ),
        (
            500,
            "oops",
            "text/html; charset=utf-8",
            "HTTP 500: the business system answered an HTML error page (4 characters).",
        ),
    ],
)
def test_the_agent_reads_an_answer_as_BailingHub_shapes_it(status, body, content_type, expected):
    assert answer_text(status, body, content_type) == expected


def test_an_error_answer_is_cut_to_2048_characters_after_its_status():
    text = answer_text(400, "e" * 5000, "text/plain")
    assert text == "HTTP 400: " + "e" * ERROR_TEXT_MAX_CHARS


def test_args_hash_and_idempotency_key_equal_BailingHubs():
    arguments = js_normalized(json.loads('{"order_id": "SO-1002", "amount": 650.0, "reason": "Broken"}'))
    assert arguments == {"order_id": "SO-1002", "amount": 650, "reason": "Broken"}
    args_hash = arguments_hash(arguments)
    assert args_hash == "3c756165b5432b5d441d84f8a939d1aecb663fc2cdf72b0638fdeb205c08c674"
    key = idempotency_key(
        job_id=uuid.UUID("8453e2db-7e87-49c1-b550-f509021107c3"),
        tool="request_refund",
        args_hash=args_hash,
        on_behalf_of="alice",
    )
    assert key == "260a9ded3b438ba090a687a237a931488fc151727f50554c95dcc06c2ad262fc"


def test_canonical_json_sorts_keys_by_utf16_units_and_writes_numbers_like_javascript():
    value = {
        "b": 1.0,
        "a": [1e-7, 12345678901234567890, None],
        "é": "x",
        "\U0001f600": 1,
        "～": 2,
        "n": {"z": 1, "y": -0.0},
    }
    assert (
        js_canonical(value)
        == '{"a":[1e-7,12345678901234567000,null],"b":1,"n":{"y":0,"z":1},"é":"x","😀":1,"～":2}'
    )
    assert (
        arguments_hash(js_normalized(value))
        == "00758f953ce176b7be9707b02509450837000f918a15cc59d3603babc7c1248a"
    )
