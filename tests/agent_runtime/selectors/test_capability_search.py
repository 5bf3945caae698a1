"""Contract tests: ``POST /agent-api/v1/workspaces/:route/capabilities/search`` and its ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.models import Route
from agent_runtime.selectors import catalog as catalog_service
from agent_runtime.selectors.catalog import CatalogTool, lexical_order
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
SHOP_READS = ["customer_profile_get", "inventory_list", "order_get", "order_search", "staff_list"]


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def numbered_spec(count: int, *, prefix: str = "bulk") -> dict:
    """``count`` read-only tools ``<prefix>_01`` … with distinct paths and one shared scope."""
    paths = {}
    for index in range(1, count + 1):
        paths[f"/{prefix}/{index}"] = {
            "get": {
                "operationId": f"{prefix}_{index:02d}",
                "summary": f"Read {prefix} record number {index}.",
                "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
                "x-agent-capability": {"version": 1, "enabled": True, "scope": f"{prefix}.read"},
            }
        }
    return {"openapi": "3.1.0", "info": {"title": f"{prefix} tools", "version": "1"}, "paths": paths}


def search_url(route: str) -> str:
    return f"/agent-api/v1/workspaces/{route}/capabilities/search"


def search(api_client, route, token, body, **extra):
    return api_client.post(
        search_url(route), body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}", **extra
    )


def raw_search(api_client, route, token, raw: bytes, content_type="application/json"):
    return api_client.generic(
        "POST", search_url(route), raw, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def workspace(route_key, provider, *, allow=("*",), agent_client=None, **direct):
    return RouteFactory(
        route_key=route_key,
        agent_client=agent_client or {"enabled": True},
        tools={
            "sources": [{"provider": provider, "allow": list(allow)}],
            "agent_direct": {"enabled": True, **direct},
        },
    )


@pytest.fixture
def shop():
    return ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))


@pytest.fixture
def session(shop):
    workspace("orders", "shop")
    return AgentSessionFactory(allowed_routes=["orders"])


@pytest.fixture
def bulk_session():
    ToolProviderFactory(name="bulk", spec=numbered_spec(14))
    workspace("bulk", "bulk")
    return AgentSessionFactory(allowed_routes=["bulk"])


# --- response shape -----------------------------------------------------------------------------------------


def test_search_response_shape(api_client, session):
    response = search(api_client, "orders", session._access, {"query": "order"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == ["schema_version", "route", "capability_revision", "query", "tools", "discovery"]
    assert body["schema_version"] == "bailing.agent-capability-search.v1"
    assert body["route"] == "orders"
    assert body["query"] == "order"
    assert body["discovery"] == {
        "mode": "ranked_candidates",
        "scope": "current_authorization",
        "returned_count": 5,
        "authorized_total": 5,
        "matched_total": None,
        "matched_total_exact": False,
        "limit": 8,
        "truncated": False,
        "has_more": False,
        "truncation_scope": "authorized_catalog",
        "pagination": "unsupported",
    }


def test_search_tools_are_complete_projections_of_the_same_catalog(api_client, session):
    token = session._access
    body = search(api_client, "orders", token, {"query": "order", "limit": 12}).json()
    catalog = api_client.get("/agent-api/v1/tools", {"route": "orders"}, HTTP_AUTHORIZATION=f"Bearer {token}")
    by_name = {tool["name"]: tool for tool in catalog.json()["tools"]}
    assert body["capability_revision"] == catalog.json()["capability_revision"]
    for tool in body["tools"]:
        assert tool == by_name[tool["name"]]
    bootstrap = api_client.get(
        "/agent-api/v1/workspaces/orders/bootstrap", HTTP_AUTHORIZATION=f"Bearer {token}"
    ).json()
    assert body["capability_revision"] == bootstrap["capabilities"]["revision"]


def test_discovery_twelve_of_fourteen(api_client, bulk_session):
    body = search(api_client, "bulk", bulk_session._access, {"query": "record", "limit": 12}).json()
    assert len(body["tools"]) == 12
    assert body["discovery"] == {
        "mode": "ranked_candidates",
        "scope": "current_authorization",
        "returned_count": 12,
        "authorized_total": 14,
        "matched_total": None,
        "matched_total_exact": False,
        "limit": 12,
        "truncated": True,
        "has_more": True,
        "truncation_scope": "authorized_catalog",
        "pagination": "unsupported",
    }


def test_default_limit_is_the_active_tool_limit(api_client, bulk_session):
    body = search(api_client, "bulk", bulk_session._access, {"query": "record"}).json()
    assert body["discovery"]["limit"] == 8
    assert body["discovery"]["returned_count"] == len(body["tools"]) == 8
    Route.objects.filter(route_key="bulk").update(agent_client={"enabled": True, "active_tool_limit": 12})
    body = search(api_client, "bulk", bulk_session._access, {"query": "record"}).json()
    assert body["discovery"]["limit"] == 12
    assert body["discovery"]["truncated"] is True


def test_explicit_limit_is_not_capped_by_the_active_tool_limit(api_client, bulk_session):
    Route.objects.filter(route_key="bulk").update(agent_client={"enabled": True, "active_tool_limit": 2})
    body = search(api_client, "bulk", bulk_session._access, {"query": "record", "limit": 10}).json()
    assert body["discovery"]["limit"] == 10
    assert len(body["tools"]) == 10


def test_limit_above_the_catalog_is_not_truncated(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "stock", "limit": 12}).json()
    assert body["discovery"]["limit"] == 12
    assert body["discovery"]["returned_count"] == 5
    assert body["discovery"]["truncated"] is False
    assert body["discovery"]["has_more"] is False


def test_limit_equal_to_the_catalog_is_not_truncated(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "stock", "limit": 5}).json()
    assert body["discovery"]["truncated"] is False


def test_limit_one_below_the_catalog_is_truncated(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "stock", "limit": 4}).json()
    assert body["discovery"]["returned_count"] == 4
    assert body["discovery"]["truncated"] is True
    assert body["discovery"]["has_more"] is True


def test_empty_authorized_catalog(api_client, shop):
    workspace("empty", "shop", allow=["nothing.*"])
    session = AgentSessionFactory(allowed_routes=["empty"])
    body = search(api_client, "empty", session._access, {"query": "order"}).json()
    assert body["tools"] == []
    discovery = body["discovery"]
    assert (discovery["returned_count"], discovery["authorized_total"]) == (0, 0)
    assert discovery["truncated"] is False and discovery["has_more"] is False
    assert discovery["matched_total"] is None and discovery["matched_total_exact"] is False


# --- ranking ------------------------------------------------------------------------------------------------


def test_zero_score_tools_are_kept_so_an_inventory_query_still_returns_order_tools(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "inventory", "limit": 12}).json()
    names = [tool["name"] for tool in body["tools"]]
    assert names[0] == "inventory_list"
    assert set(names) == set(SHOP_READS)


def test_unmatched_query_returns_the_authorized_set_in_name_order(api_client, session):
    first = search(api_client, "orders", session._access, {"query": "qqqq", "limit": 12}).json()
    again = search(api_client, "orders", session._access, {"query": "qqqq", "limit": 12}).json()
    assert [tool["name"] for tool in first["tools"]] == SHOP_READS
    assert first == again


def test_exact_name_ranks_first(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "ORDER_SEARCH"}).json()
    assert [tool["name"] for tool in body["tools"]][:2] == ["order_search", "order_get"]


def test_tied_scores_fall_back_to_name_order(api_client, session):
    body = search(api_client, "orders", session._access, {"query": "order"}).json()
    assert [tool["name"] for tool in body["tools"]][:2] == ["order_get", "order_search"]


def tool(name, scope="x.read", description="") -> CatalogTool:
    return CatalogTool(
        name=name,
        provider="p",
        tool_id=1,
        projection={"name": name, "scope": scope, "description": description, "approval_required": False},
        readonly=True,
        forced_approval=False,
        material_digest="0" * 64,
    )


@pytest.mark.parametrize(
    ("query", "candidate", "score"),
    [
        # exact name 10000 + haystack 1000 + word in name 240 + bigrams "ab", "bc" 2 + 2
        ("abc", tool("abc"), 11_244),
        # name contains 2000 + haystack 1000 + word in name 240 + 2 bigrams
        ("abc", tool("xabcx"), 3_244),
        # only the description: haystack 1000 + word 60 + 2 bigrams
        ("abc", tool("zzz", scope="q.read", description="an abc thing"), 1_064),
        # only the scope: haystack 1000 + word 120 + 2 bigrams
        ("abc", tool("zzz", scope="abc.read"), 1_124),
        # two words in the description: 2 × 60; bigrams of "abcdef" present: ab, bc, de, ef
        ("abc def", tool("zzz", scope="q", description="abc then def"), 128),
        # punctuation splits words; case folds
        ("ABC-def!", tool("zzz", scope="q", description="abc then def"), 128),
        # nothing at all
        ("abc", tool("zzz", scope="q.read", description="nothing"), 0),
        # a query of punctuation only scores nothing (and still returns every tool)
        ("?!", tool("abc"), 0),
    ],
)
def test_lexical_weights(query, candidate, score):
    assert catalog_service._lexical_scores([candidate], query) == {candidate.name: score}


def test_lexical_order_keeps_every_tool_and_breaks_ties_by_name():
    tools = [tool("b_two"), tool("A_one"), tool("a_two", description="match"), tool("c")]
    assert [t.name for t in lexical_order(tools, "match")] == ["a_two", "A_one", "b_two", "c"]


def test_semantic_ranking_applies_only_when_every_source_has_it(api_client, shop, monkeypatch):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    RouteFactory(
        route_key="mixed",
        tools={
            "sources": [
                {"provider": "shop", "allow": ["inventory.*"], "retrieval": {"enabled": True}},
                {"provider": "crm", "allow": ["crm.*"], "retrieval": {"enabled": True}},
            ],
            "agent_direct": {"enabled": True},
        },
    )
    session = AgentSessionFactory(allowed_routes=["mixed"])
    seen = []

    def ranker(source, tools, query, limit):
        seen.append((source.provider, sorted(t.name for t in tools), query, limit))
        return {"crm_contact_get": 0.9} if source.provider == "crm" else {"inventory_list": 0.4}

    monkeypatch.setattr(catalog_service, "semantic_ranker", ranker)
    body = search(api_client, "mixed", session._access, {"query": "inventory"}).json()
    assert [t["name"] for t in body["tools"]] == ["crm_contact_get", "inventory_list"]
    assert seen == [
        ("shop", ["inventory_list"], "inventory", 8),
        ("crm", ["crm_contact_get"], "inventory", 8),
    ]

    route = Route.objects.get(route_key="mixed")
    route.tools["sources"][1]["retrieval"] = {"enabled": False}
    route.save()
    body = search(api_client, "mixed", session._access, {"query": "inventory"}).json()
    assert [t["name"] for t in body["tools"]] == ["inventory_list", "crm_contact_get"]


def test_a_source_whose_semantic_index_is_unavailable_makes_the_search_lexical(api_client, shop, monkeypatch):
    RouteFactory(
        route_key="semantic",
        tools={
            "sources": [{"provider": "shop", "allow": ["*"], "retrieval": {"enabled": True}}],
            "agent_direct": {"enabled": True},
        },
    )
    session = AgentSessionFactory(allowed_routes=["semantic"])
    monkeypatch.setattr(catalog_service, "semantic_ranker", lambda source, tools, query, limit: None)
    body = search(api_client, "semantic", session._access, {"query": "inventory"}).json()
    assert body["tools"][0]["name"] == "inventory_list"


def test_without_a_plugged_ranker_search_is_lexical_even_with_retrieval_enabled(api_client, shop):
    assert catalog_service.semantic_ranker is None
    RouteFactory(
        route_key="semantic",
        tools={
            "sources": [{"provider": "shop", "allow": ["*"], "retrieval": {"enabled": True}}],
            "agent_direct": {"enabled": True},
        },
    )
    session = AgentSessionFactory(allowed_routes=["semantic"])
    body = search(api_client, "semantic", session._access, {"query": "stock levels", "limit": 12}).json()
    assert body["tools"][0]["name"] == "inventory_list"


# --- input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": "\n\t\r "},
        {"query": None},
        {"query": 42},
        {"query": ["order"]},
        {"query": "x" * 2001},
        {"query": "\U0001f600" * 1000 + "x"},
        {"query": "order\x00"},
        {"query": "order\x1b[31m"},
        {"query": "order\x7f"},
        {"query": "order\x85"},
        {"limit": 5},
    ],
)
def test_invalid_query_is_400(api_client, session, body):
    response = search(api_client, "orders", session._access, body)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == "query"


@pytest.mark.parametrize(
    "query", ["x" * 2000, "\U0001f600" * 1000, "line one\nline two\ttabbed\r", "  order  ", "订单 库存"]
)
def test_valid_query_edges(api_client, session, query):
    response = search(api_client, "orders", session._access, {"query": query})
    assert response.status_code == 200
    assert response.json()["query"] == query


def test_lone_surrogate_in_query_is_400(api_client, session):
    response = raw_search(api_client, "orders", session._access, b'{"query": "order \\ud800"}')
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize("limit", [0, 13, -1, 100, 1.5, 5.0, "5", True, False, None, [5]])
def test_invalid_limit_is_400(api_client, session, limit):
    response = search(api_client, "orders", session._access, {"query": "order", "limit": limit})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == "limit"


@pytest.mark.parametrize("limit", [1, 12])
def test_limit_bounds_are_accepted(api_client, session, limit):
    response = search(api_client, "orders", session._access, {"query": "order", "limit": limit})
    assert response.status_code == 200
    assert response.json()["discovery"]["limit"] == limit


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "order", "route": "orders"}, "route"),
        ({"query": "order", "Limit": 3}, "Limit"),
    ],
)
def test_unknown_fields_are_400(api_client, session, body, field):
    response = search(api_client, "orders", session._access, body)
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize("raw", [b"[]", b'"order"', b"null", b"{", b'{"query": "a", "query": "b"}'])
def test_body_must_be_one_json_object(api_client, session, raw):
    response = raw_search(api_client, "orders", session._access, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_empty_body_is_a_missing_query(api_client, session):
    response = raw_search(api_client, "orders", session._access, b"")
    assert response.status_code == 400
    assert response.json()["field"] == "query"


def test_body_over_8_kib_is_413(api_client, session):
    raw = b'{"query": "order"' + b" " * (8193 - 18) + b"}"
    assert len(raw) == 8193
    response = raw_search(api_client, "orders", session._access, raw)
    assert response.status_code == 413
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["error"] == "arguments_too_large"
    assert body["limit_scope"] == "request_body"
    assert body["max_bytes"] == 8192
    assert body["observed_bytes"] >= 8193
    assert body["origin"] == "core"
    assert body["dispatch"] == "not_dispatched"
    assert "order" not in json.dumps(body)


def test_body_of_exactly_8_kib_is_accepted(api_client, session):
    raw = b'{"query": "order"' + b" " * (8192 - 18) + b"}"
    assert len(raw) == 8192
    assert raw_search(api_client, "orders", session._access, raw).status_code == 200


def test_non_json_content_type_is_415(api_client, session):
    response = raw_search(api_client, "orders", session._access, b"query=order", "text/plain")
    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"


def test_get_is_405(api_client, session):
    response = api_client.get(search_url("orders"), HTTP_AUTHORIZATION=f"Bearer {session._access}")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


# --- gate ---------------------------------------------------------------------------------------------------


def test_search_needs_a_bearer(api_client, session):
    response = api_client.post(search_url("orders"), {"query": "order"}, format="json")
    assert response.status_code == 401
    assert response["Cache-Control"] == "no-store"


def test_search_without_direct_tools_is_403(api_client, shop):
    RouteFactory(route_key="docs", knowledge={"kb_ids": ["handbook"]})
    session = AgentSessionFactory(allowed_routes=["docs"])
    response = search(api_client, "docs", session._access, {"query": "order"})
    assert response.status_code == 403
    assert response.json()["error"] == "agent_direct_disabled"
    assert response["Cache-Control"] == "no-store"


def test_search_needs_the_runtime(api_client, shop):
    workspace("legacy", "shop", agent_client={"enabled": False})
    session = AgentSessionFactory(allowed_routes=["legacy"])
    response = search(api_client, "legacy", session._access, {"query": "order"})
    assert response.status_code == 403
    assert response.json()["error"] == "agent_client_disabled"


@pytest.mark.parametrize(
    ("route", "status", "code"),
    [("Orders", 400, "invalid_route"), ("auto", 400, "invalid_route"), ("other", 403, "route_not_allowed")],
)
def test_search_route_gate(api_client, session, route, status, code):
    response = search(api_client, route, session._access, {"query": "order"})
    assert response.status_code == status
    assert response.json()["error"] == code


def test_search_audience_gate(api_client, session):
    Route.objects.filter(route_key="orders").update(audience={"enabled": True, "tenants": ["globex"]})
    response = search(api_client, "orders", session._access, {"query": "order"})
    assert response.status_code == 403
    assert response.json()["error"] == "audience_not_allowed"


def test_search_hides_subject_tools_from_a_session_without_subject(api_client, session):
    anonymous = AgentSessionFactory(allowed_routes=["orders"], on_behalf_of="")
    body = search(api_client, "orders", anonymous._access, {"query": "customer profile", "limit": 12}).json()
    assert "customer_profile_get" not in [t["name"] for t in body["tools"]]
    assert body["discovery"]["authorized_total"] == 4


def test_search_query_count(api_client, session, django_assert_max_num_queries):
    search(api_client, "orders", session._access, {"query": "order"})  # touches last_seen_at once
    with django_assert_max_num_queries(3):
        response = search(api_client, "orders", session._access, {"query": "order"})
    assert response.status_code == 200
