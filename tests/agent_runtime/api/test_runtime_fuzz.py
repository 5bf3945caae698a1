"""Bad input never becomes a server error on the agent runtime endpoints.

Every field of turns, completion and capability search gets every JSON type (and a few values the
JSON parser accepts but Python cannot serialise back, such as ``1e400``); objects are swapped for
arrays at every level; nesting goes as deep as the parser allows. Each answer is either accepted
or a documented 4xx with the flat error envelope, never 500. Tool detail gets hostile query strings.
"""

from __future__ import annotations

import json
import types
from urllib.parse import quote

import pytest

from agent_runtime.models import AgentRun
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory
from tests.support.module_rows import module_rows
from tests.support.runtime import complete_url, completion_body, post_json, turn_body, turns_url
from tests.support.tool_specs import load_json_spec

pytestmark = pytest.mark.django_db

# Raw JSON literals, spliced into otherwise valid bodies. ``1e400`` parses as an infinite float;
# 5,000 digits exceed Python's integer-parsing limit; the deep arrays sit near the parser's bound.
LITERALS = {
    "null": "null",
    "true": "true",
    "zero": "0",
    "negative": "-1",
    "fraction": "1.5",
    "huge-int": "1" + "0" * 40,
    "overflow": "1e400",
    "negative-overflow": "-1e400",
    "5000-digits": "9" * 5000,
    "empty-string": '""',
    "control-string": '"a\\u0000b"',
    "long-string": json.dumps("x" * 70_000),
    "empty-array": "[]",
    "array-of-null": "[null]",
    "array-of-objects": '[{"a": 1}]',
    "empty-object": "{}",
    "object-with-overflow": '{"a": {"b": [1e400]}}',
    "deep-array": "[" * 5000 + "]" * 5000,
    "deep-object": '{"a":' * 600 + "1" + "}" * 600,
}
PLACEHOLDER = "__FUZZ_VALUE__"
ERROR_STATUSES = {400, 404, 409, 413}


def splice(body: dict, path: tuple[str, ...], literal: str) -> str:
    """``body`` as JSON text with the value at ``path`` replaced by the raw ``literal``."""
    node = body
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = PLACEHOLDER
    return json.dumps(body).replace(json.dumps(PLACEHOLDER), literal)


def assert_not_a_server_error(response, path: tuple[str, ...]) -> None:
    assert response.status_code < 500, response.content[:300]
    assert response["Cache-Control"] == "no-store"
    if response.status_code == 200:
        return
    assert response.status_code in ERROR_STATUSES, response.content[:300]
    data = response.json()
    assert set(data) >= {"error", "message"}
    if response.status_code == 400 and data["error"] == "invalid_request" and "field" in data:
        # The field named is the fuzzed one (or the whole body, when the parser refused it).
        assert data["field"] == "$" or data["field"].startswith(path[0]), data


@pytest.fixture(scope="module")
def _access_token(django_db_setup, django_db_blocker):
    """One provider, route and session for the module's hundreds of cases (tests/support/module_rows)."""
    with module_rows(django_db_blocker):
        ToolProviderFactory(name="shop", spec=load_json_spec("catalog_shop.json"))
        RouteFactory(
            route_key="orders",
            tools={"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}},
        )
        yield AgentSessionFactory(allowed_routes=["orders"])._access


@pytest.fixture
def session(_access_token):
    """What the cases use of the session: its access token (``session._access``)."""
    return types.SimpleNamespace(_access=_access_token)


TURN_FIELDS = [
    ("client_conversation_id",),
    ("client_turn_id",),
    ("user_message_id",),
    ("user_input",),
    ("page_context",),
    ("page_context", "title"),
    ("renderers",),
    ("knowledge_delivery",),
]


@pytest.mark.parametrize("literal", LITERALS.values(), ids=LITERALS.keys())
@pytest.mark.parametrize("path", TURN_FIELDS, ids=".".join)
def test_turn_fields(api_client, session, path, literal):
    raw = splice(turn_body(), path, literal)
    response = post_json(api_client, turns_url("orders"), session._access, raw)
    assert_not_a_server_error(response, path)
    if response.status_code != 200:
        assert AgentRun.objects.count() == 0


@pytest.mark.parametrize("literal", ["1e400", "-1e400", '{"a": [1, {"b": 1e400}]}'])
def test_page_context_numbers_must_be_finite(api_client, session, literal):
    raw = splice(turn_body(), ("page_context", "x"), literal)
    response = post_json(api_client, turns_url("orders"), session._access, raw)
    # Refused as input (the parser knows no JSON form for an infinite number), never a 500.
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert AgentRun.objects.count() == 0


COMPLETE_FIELDS = [
    ("assistant_message_id",),
    ("status",),
    ("content",),
    ("model",),
    ("runtime",),
    ("usage",),
    *[
        ("usage", key)
        for key in (
            "input_tokens",
            "cached_input_tokens",
            "output_tokens",
            "total_tokens",
            "tool_calls",
            "cost_usd",
        )
    ],
]


@pytest.fixture
def run_id(api_client, session):
    response = post_json(api_client, turns_url("orders"), session._access, turn_body())
    assert response.status_code == 200
    return response.json()["run_id"]


@pytest.mark.parametrize("literal", LITERALS.values(), ids=LITERALS.keys())
@pytest.mark.parametrize("path", COMPLETE_FIELDS, ids=".".join)
def test_completion_fields(api_client, session, run_id, path, literal):
    raw = splice(completion_body(), path, literal)
    response = post_json(api_client, complete_url(run_id), session._access, raw)
    assert_not_a_server_error(response, path)
    if response.status_code != 200:
        assert AgentRun.objects.get(pk=run_id).status == "context_ready"


SEARCH_FIELDS = [("query",), ("limit",), ("run_id",)]


@pytest.mark.parametrize("literal", LITERALS.values(), ids=LITERALS.keys())
@pytest.mark.parametrize("path", SEARCH_FIELDS, ids=".".join)
def test_search_fields(api_client, session, path, literal):
    raw = splice({"query": "order"}, path, literal)
    response = post_json(
        api_client, "/agent-api/v1/workspaces/orders/capabilities/search", session._access, raw
    )
    assert_not_a_server_error(response, path)


@pytest.mark.parametrize(
    "raw",
    # The deep ones stay under the search's 8 KiB body budget, so they reach the parser everywhere.
    ["[]", "[{}]", "null", "1e400", '"text"', '{"usage": []}', "[" * 8000, '{"a":' * 1600],
)
@pytest.mark.parametrize("endpoint", ["turns", "complete", "search"])
def test_bodies_that_are_not_objects(api_client, session, run_id, endpoint, raw):
    url = {
        "turns": turns_url("orders"),
        "complete": complete_url(run_id),
        "search": "/agent-api/v1/workspaces/orders/capabilities/search",
    }[endpoint]
    response = post_json(api_client, url, session._access, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


HOSTILE_TEXT = ["", " ", "\x00", "%00", "a" * 5000, "é", "\U0001f600", "../orders", "orders\n", "*", "auto"]


@pytest.mark.parametrize("value", HOSTILE_TEXT)
@pytest.mark.parametrize("param", ["route", "capability_revision", "name"])
def test_tool_detail_query_strings(api_client, session, param, value):
    params = {"route": "orders", "capability_revision": "a" * 64}
    name = "order_get"
    if param == "name":
        name = quote(value, safe="") or "%20"
    else:
        params[param] = value
    response = api_client.get(
        f"/agent-api/v1/tools/{name}", params, HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    assert response.status_code in {400, 403, 404, 409}, response.content[:300]
    assert "error" in response.json()


@pytest.mark.parametrize("value", HOSTILE_TEXT)
def test_tool_catalog_query_strings(api_client, session, value):
    response = api_client.get(
        "/agent-api/v1/tools", {"route": value}, HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    assert response.status_code in {400, 403, 404}, response.content[:300]
    assert "error" in response.json()
