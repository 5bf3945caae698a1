"""Contract tests: the older ``GET /tools?route=`` catalog, and bootstrap / workspace-list counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_runtime.models import Route
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory, ToolProviderFactory

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
CATALOG = "/agent-api/v1/tools"


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def get(api_client, url, token, **params):
    return api_client.get(url, params, HTTP_AUTHORIZATION=f"Bearer {token}")


def shop_tools(**direct) -> dict:
    return {
        "sources": [{"provider": "shop", "allow": ["*"]}],
        "agent_direct": {"enabled": True, **direct},
    }


@pytest.fixture
def shop():
    return ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))


@pytest.fixture
def session(shop):
    RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools=shop_tools(
            write_tools=["order_cancel", "refund_create"], force_approval_tools=["order_cancel"]
        ),
    )
    return AgentSessionFactory(allowed_routes=["orders"])


# --- GET /tools -------------------------------------------------------------------------------------------


def test_catalog_has_the_upstream_shape(api_client, session):
    """The older ``/tools`` catalog in BailingHub's shape (docs/compatibility.md "Tool catalog")."""
    response = get(api_client, CATALOG, session._access, route="orders")
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == ["schema_version", "route", "capability_revision", "tools"]
    assert body["schema_version"] == "bailing.agent-tool-catalog.v1"
    assert body["route"] == "orders"
    assert [tool["name"] for tool in body["tools"]] == [
        "customer_profile_get",
        "inventory_list",
        "order_cancel",
        "order_get",
        "order_search",
        "refund_create",
        "staff_list",
    ]
    cancel = next(tool for tool in body["tools"] if tool["name"] == "order_cancel")
    assert cancel == {
        "name": "order_cancel",
        "description": "Cancel an open order.",
        "description_truncated": False,
        "input_schema": cancel["input_schema"],
        "scope": "order.write",
        "risk": "medium",
        "approval_required": True,
        "readonly": False,
        "idempotent": False,
        "usage_guidance_available": False,
    }
    assert cancel["input_schema"]["required"] == ["order_id", "reason"]


def test_catalog_never_leaks_provider_or_dispatch_details(api_client, session):
    raw = get(api_client, CATALOG, session._access, route="orders").content.decode()
    for secret in ("shop", "business.example.test", "/orders/{order_id}", "x-agent-capability", '"POST"'):
        assert secret not in raw


def test_catalog_revision_matches_bootstrap(api_client, session):
    catalog = get(api_client, CATALOG, session._access, route="orders").json()
    bootstrap = get(api_client, "/agent-api/v1/workspaces/orders/bootstrap", session._access).json()
    assert catalog["capability_revision"] == bootstrap["capabilities"]["revision"]
    assert len(catalog["tools"]) == bootstrap["capabilities"]["authorized_total"]


def test_catalog_works_when_the_runtime_is_off_but_direct_tools_are_on(api_client, shop):
    RouteFactory(route_key="legacy", agent_client={"enabled": False}, tools=shop_tools())
    session = AgentSessionFactory(allowed_routes=["legacy"])
    response = get(api_client, CATALOG, session._access, route="legacy")
    assert response.status_code == 200
    assert len(response.json()["tools"]) == 5
    bootstrap = get(api_client, "/agent-api/v1/workspaces/legacy/bootstrap", session._access)
    assert bootstrap.json()["error"] == "agent_client_disabled"


@pytest.mark.parametrize("tools", [{}, {"agent_direct": {"enabled": False}}, shop_tools(enabled=False)])
def test_catalog_without_direct_tools_is_403(api_client, shop, tools):
    RouteFactory(route_key="plain", tools=tools)
    session = AgentSessionFactory(allowed_routes=["plain"])
    response = get(api_client, CATALOG, session._access, route="plain")
    assert response.status_code == 403
    assert response.json()["error"] == "agent_direct_disabled"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("route", "status", "code"),
    [
        ("Orders", 400, "invalid_route"),
        ("auto", 400, "invalid_route"),
        ("a", 400, "invalid_route"),
        ("bad\u0001key", 400, "invalid_route"),
        ("elsewhere", 403, "route_not_allowed"),
    ],
)
def test_catalog_route_gate_codes(api_client, session, route, status, code):
    response = get(api_client, CATALOG, session._access, route=route)
    assert response.status_code == status
    assert response.json()["error"] == code


def test_catalog_disabled_route_is_404(api_client, session):
    Route.objects.filter(route_key="orders").update(enabled=False)
    response = get(api_client, CATALOG, session._access, route="orders")
    assert response.status_code == 404
    assert response.json()["error"] == "route_unavailable"


def test_catalog_audience_gate(api_client, session):
    Route.objects.filter(route_key="orders").update(audience={"enabled": True, "principals": ["bob"]})
    response = get(api_client, CATALOG, session._access, route="orders")
    assert response.status_code == 403
    assert response.json()["error"] == "audience_not_allowed"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "route"),
        ("?route=orders&verbose=1", "verbose"),
        ("?route=orders&route=orders", "route"),
        ("?capability_revision=" + "0" * 64 + "&route=orders", "capability_revision"),
    ],
)
def test_catalog_query_string_is_strict(api_client, session, query, field):
    response = api_client.get(CATALOG + query, HTTP_AUTHORIZATION=f"Bearer {session._access}")
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": field,
    }


def test_catalog_needs_a_bearer(api_client, session):
    response = api_client.get(CATALOG, {"route": "orders"})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response["Cache-Control"] == "no-store"


def test_catalog_query_count(api_client, session, django_assert_max_num_queries):
    get(api_client, CATALOG, session._access, route="orders")  # touches last_seen_at once
    with django_assert_max_num_queries(3):
        response = get(api_client, CATALOG, session._access, route="orders")
    assert response.status_code == 200


# --- bootstrap and workspace list --------------------------------------------------------------------------


def test_bootstrap_reports_the_real_catalog(api_client, session):
    response = get(api_client, "/agent-api/v1/workspaces/orders/bootstrap", session._access)
    assert response.status_code == 200
    capabilities = response.json()["capabilities"]
    assert list(capabilities) == [
        "revision",
        "authorized_total",
        "active_limit",
        "readonly",
        "writes",
        "approval_required",
    ]
    assert {k: v for k, v in capabilities.items() if k != "revision"} == {
        "authorized_total": 7,
        "active_limit": 8,
        "readonly": 5,
        "writes": 2,
        "approval_required": 2,
    }


def test_bootstrap_counts_follow_the_session_subject(api_client, session):
    anonymous = AgentSessionFactory(allowed_routes=["orders"], on_behalf_of="")
    capabilities = get(api_client, "/agent-api/v1/workspaces/orders/bootstrap", anonymous._access).json()[
        "capabilities"
    ]
    assert capabilities["authorized_total"] == 5
    assert capabilities["writes"] == 1


def test_knowledge_only_workspace_bootstraps_with_zero_tools(api_client, shop):
    RouteFactory(route_key="docs", knowledge={"kb_ids": ["handbook"]}, tools=shop_tools(enabled=False))
    session = AgentSessionFactory(allowed_routes=["docs"])
    response = get(api_client, "/agent-api/v1/workspaces/docs/bootstrap", session._access)
    assert response.status_code == 200
    assert response.json()["capabilities"]["authorized_total"] == 0
    workspaces = get(api_client, "/agent-api/v1/workspaces", session._access).json()["workspaces"]
    assert workspaces[0]["authorized_tool_count"] == 0


def test_workspace_list_counts_and_revisions_follow_the_catalog(api_client, shop):
    client = ClientFactory()
    RouteFactory(route_key="orders", tools=shop_tools())
    RouteFactory(
        route_key="stock",
        agent_client={"enabled": True, "active_tool_limit": 4},
        tools={
            "sources": [{"provider": "shop", "allow": ["inventory.*"]}],
            "agent_direct": {"enabled": True},
        },
    )
    RouteFactory(route_key="docs")
    session = AgentSessionFactory(client=client, allowed_routes=["orders", "stock", "docs"])
    body = get(api_client, "/agent-api/v1/workspaces", session._access).json()
    counts = {
        item["route"]: (item["authorized_tool_count"], item["active_tool_limit"])
        for item in body["workspaces"]
    }
    assert counts == {"docs": (0, 8), "orders": (5, 8), "stock": (1, 4)}
    for item in body["workspaces"]:
        bootstrap = get(
            api_client, f"/agent-api/v1/workspaces/{item['route']}/bootstrap", session._access
        ).json()
        assert item["capability_revision"] == bootstrap["capabilities"]["revision"]


def test_workspace_list_reads_every_provider_in_one_query(api_client, shop, django_assert_max_num_queries):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    keys = []
    for index in range(5):
        key = f"desk-{index}"
        keys.append(key)
        RouteFactory(
            route_key=key,
            tools={
                "sources": [{"provider": "shop", "allow": ["*"]}, {"provider": "crm", "allow": ["crm.*"]}],
                "agent_direct": {"enabled": True},
            },
        )
    session = AgentSessionFactory(allowed_routes=keys)
    get(api_client, "/agent-api/v1/workspaces", session._access)  # touches last_seen_at once
    with django_assert_max_num_queries(3):
        response = get(api_client, "/agent-api/v1/workspaces", session._access)
    assert [item["authorized_tool_count"] for item in response.json()["workspaces"]] == [6] * 5


def test_bootstrap_with_tools_query_count(api_client, session, django_assert_max_num_queries):
    url = "/agent-api/v1/workspaces/orders/bootstrap"
    get(api_client, url, session._access)
    with django_assert_max_num_queries(3):
        response = get(api_client, url, session._access)
    assert response.json()["capabilities"]["authorized_total"] == 7
