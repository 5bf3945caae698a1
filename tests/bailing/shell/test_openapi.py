"""The OpenAPI 3.1 document (/api/schema/), its docs page (/api/docs/) and ``generateschema``."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from drf_spectacular.validation import validate_schema
from jsonschema import Draft202012Validator

from bailing.api.errors import all_error_classes
from bailing.shell.schema import HUB_ONLY_CODES
from tests.factories import AgentSessionFactory, RouteFactory

pytestmark = pytest.mark.django_db

_METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture
def document(api_client):
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return json.loads(response.content)


def _operations(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in _METHODS:
                yield path, method, operation


def _codes(schema, components):
    """Every error code a response schema allows."""
    if "$ref" in schema:
        return _codes(components[schema["$ref"].rsplit("/", 1)[1]], components)
    if "oneOf" in schema:
        return {code for part in schema["oneOf"] for code in _codes(part, components)}
    if "allOf" in schema:
        found = [_codes(part, components) for part in schema["allOf"]]
        narrowed = [codes for codes in found if codes]
        return set.intersection(*narrowed) if narrowed else set()
    error = schema.get("properties", {}).get("error", {})
    if "const" in error:
        return {error["const"]}
    return set(error.get("enum", ()))


def test_served_document_is_valid_openapi_3_1(document):
    assert document["openapi"] == "3.1.0"
    validate_schema(document)  # drf-spectacular's bundled OpenAPI 3.1 JSON Schema; raises if invalid


def test_document_covers_the_agent_auth_and_business_apis_only(document):
    paths = set(document["paths"])
    for expected in (
        "/agent-api/v1/workspaces/{route}/turns",
        "/agent-api/v1/runs/{run_id}/complete",
        "/agent-api/v1/workspaces/{route}/capabilities/search",
        "/agent-api/v1/workspaces/{route}/knowledge/search",
        "/agent-api/v1/workspaces/{route}/knowledge/read",
        "/agent-api/v1/tool-invocations",
        "/agent-api/v1/tool-invocations/{invocation_id}/resume",
        "/agent-api/v1/tool-invocations/{invocation_id}/receipt",
        "/agent-auth/v1/token",
        "/kb/{kb_id}/docs/{source_key}",
        "/approvals/{approval_id}/decision",
    ):
        assert expected in paths
    assert not [p for p in paths if p.startswith(("/console", "/mcp", "/oauth", "/health", "/api/"))]


def test_request_bodies_come_from_the_input_serializers(document):
    schemas = document["components"]["schemas"]
    body = document["paths"]["/agent-api/v1/tool-invocations"]["post"]["requestBody"]
    ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    invocation = schemas[ref]
    required = {"invocation_id", "route", "tool", "arguments", "capability_revision"}
    assert set(invocation["required"]) >= required
    assert invocation["properties"]["arguments"]["type"] == "object"
    assert invocation["properties"]["invocation_id"]["pattern"].startswith("^")
    token = document["paths"]["/agent-auth/v1/token"]["post"]["requestBody"]["content"]["application/json"]
    token_ref = token["schema"]["$ref"].rsplit("/", 1)[1]
    assert len(schemas[token_ref]["oneOf"]) == 2  # authorization_code and refresh_token
    decision = document["paths"]["/approvals/{approval_id}/decision"]["post"]["requestBody"]
    decision_ref = decision["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert "decision_id" in schemas[decision_ref]["properties"]


def test_every_error_code_is_described_where_it_can_be_returned(document):
    components = document["components"]["schemas"]
    classes = {cls.code: cls for cls in all_error_classes()}
    described: set[str] = set()
    for _path, _method, operation in _operations(document):
        for status, response in operation["responses"].items():
            if not status.startswith(("4", "5")):
                continue
            codes = _codes(response["content"]["application/json"]["schema"], components)
            assert codes, (_path, _method, status)
            for code in codes:
                assert classes[code].http_status == int(status), (code, status)
            described |= codes
    assert set(HUB_ONLY_CODES) <= set(classes)  # the exceptions name real codes
    assert described == set(classes) - set(HUB_ONLY_CODES)
    assert set(components["Error"]["properties"]["error"]["enum"]) == set(classes)
    assert components["Error"]["required"] == ["error", "message"]


def test_both_413_shapes(document):
    components = document["components"]["schemas"]
    invocation_413 = document["paths"]["/agent-api/v1/tool-invocations"]["post"]["responses"]["413"]
    refs = {part["$ref"] for part in invocation_413["content"]["application/json"]["schema"]["oneOf"]}
    assert refs == {
        "#/components/schemas/ErrorRequestBodyTooLarge",
        "#/components/schemas/ErrorArgumentsTooLarge",
    }
    scopes = {
        components["ErrorRequestBodyTooLarge"]["properties"]["limit_scope"]["const"],
        components["ErrorArgumentsTooLarge"]["properties"]["limit_scope"]["const"],
    }
    assert scopes == {"request_body", "arguments"}
    assert "observed_bytes" in components["ErrorRequestBodyTooLarge"]["required"]
    assert "actual_bytes" in components["ErrorArgumentsTooLarge"]["required"]
    # Every body endpoint has the request_body shape; only tool invocations budget their arguments.
    for path, method, operation in _operations(document):
        if method in {"post", "put"}:
            schema = operation["responses"]["413"]["content"]["application/json"]["schema"]
            text = json.dumps(schema)
            assert "ErrorRequestBodyTooLarge" in text
            assert ("ErrorArgumentsTooLarge" in text) == (path == "/agent-api/v1/tool-invocations")


def test_docs_page_uses_local_assets_only(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn" not in html.lower()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources
    for source in sources:
        assert source.startswith("/"), source
        if source.startswith("/static/"):
            assert finders.find(source.removeprefix("/static/")), source
    assert "<style" not in html
    assert not re.search(r"<script(?![^>]*\ssrc=)", html)  # no inline script: the CSP stays strict
    policy = response.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in policy
    assert "script-src 'self';" in policy
    assert "style-src 'self';" in policy
    assert "img-src 'self' data:;" in policy  # Swagger UI's icons; nothing else is loosened
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert "/api/schema/" in script.content.decode()


def test_generateschema_prints_the_spectacular_document():
    out, err = io.StringIO(), io.StringIO()
    call_command("generateschema", "--format", "openapi-json", stdout=out, stderr=err)
    document = json.loads(out.getvalue())
    assert document["openapi"] == "3.1.0"
    assert "/agent-api/v1/tool-invocations" in document["paths"]
    assert "spectacular" in err.getvalue()


def _validator(document, path: str, method: str, status: int):
    """A JSON Schema validator of one operation's response schema, refs resolved in the document."""
    pointer = "/".join(
        part.replace("~", "~0").replace("/", "~1")
        for part in ("paths", path, method, "responses", str(status), "content", "application/json", "schema")
    )
    return Draft202012Validator({**document, "$ref": f"#/{pointer}"})


@pytest.fixture
def agent(api_client):
    RouteFactory(route_key="orders", agent_client={"enabled": True})
    return AgentSessionFactory(allowed_routes=["orders"])


def test_real_413_answers_match_their_documented_shapes(api_client, document, agent):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {agent._access}"}
    invocations = "/agent-api/v1/tool-invocations"
    body = {
        "invocation_id": "b" * 64,
        "route": "orders",
        "tool": "order_get",
        "arguments": {"blob": "x" * (1_048_576 + 10)},
        "capability_revision": "0" * 64,
    }
    arguments = api_client.post(invocations, json.dumps(body), content_type="application/json", **auth)
    assert arguments.status_code == 413
    assert arguments.json()["limit_scope"] == "arguments"
    raw = api_client.post(
        invocations,
        json.dumps({**body, "arguments": {"blob": "x" * 2_200_000}}),
        content_type="application/json",
        **auth,
    )
    assert raw.status_code == 413
    assert raw.json()["limit_scope"] == "request_body"
    turn = api_client.post(
        "/agent-api/v1/workspaces/orders/turns",
        "[" + " " * 600_000 + "]",
        content_type="application/json",
        **auth,
    )
    assert turn.status_code == 413
    assert turn.json()["limit_scope"] == "request_body"

    validator = _validator(document, invocations, "post", 413)
    for response in (arguments, raw):
        validator.validate(response.json())
    _validator(document, "/agent-api/v1/workspaces/{route}/turns", "post", 413).validate(turn.json())
    # The shapes are told apart: an arguments answer is not a request_body one, nor the reverse.
    request_body_only = _validator(document, "/agent-api/v1/workspaces/{route}/turns", "post", 413)
    assert not request_body_only.is_valid(arguments.json())
    assert not validator.is_valid({**raw.json(), "error": "invalid_request"})


def test_a_real_error_envelope_matches_its_operation(api_client, document, agent):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {agent._access}"}
    response = api_client.get("/agent-api/v1/workspaces/nowhere/bootstrap", **auth)
    assert response.status_code == 403
    assert response.json()["error"] == "route_not_allowed"
    validator = _validator(document, "/agent-api/v1/workspaces/{route}/bootstrap", "get", 403)
    validator.validate(response.json())
    assert not validator.is_valid({**response.json(), "error": "hub_consent_only"})  # not this operation's
