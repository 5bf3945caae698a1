"""The hot path: one bearer statement, row versions bumped by triggers, per-process caches.

Caches are observed through their build counters (``catalog_cache.builds``), never through timing.
Every revision served from a cache is compared with a rebuild from an empty cache, so a revision
changes exactly when an uncached build's would.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from django.db import connection

from agent_runtime.identity import AgentIdentity, identity_load
from agent_runtime.models import Route, ToolProvider
from agent_runtime.selectors import catalog as catalog_selectors
from agent_runtime.selectors.catalog import catalog_cache, route_catalog
from agent_runtime.selectors.routes import route_for_identity
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tokens import secret_hash
from agent_runtime.tools import compile_spec
from bailing.audit.actor import Actor
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
BOOTSTRAP = "/agent-api/v1/workspaces/orders/bootstrap"
WORKSPACES = "/agent-api/v1/workspaces"
SEARCH = "/agent-api/v1/workspaces/orders/capabilities/search"


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


@pytest.fixture
def session():
    ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))
    RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools={
            "sources": [{"provider": "shop", "allow": ["*"]}],
            "agent_direct": {"enabled": True, "write_tools": ["order_cancel"]},
        },
    )
    return AgentSessionFactory(allowed_routes=["orders"])


def auth(session) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {session._access}"}


def bootstrap(api_client, session) -> dict:
    response = api_client.get(BOOTSTRAP, **auth(session))
    assert response.status_code == 200
    return response.json()


def tools_of(api_client, session) -> dict:
    response = api_client.get("/agent-api/v1/tools", {"route": "orders"}, **auth(session))
    assert response.status_code == 200
    return response.json()


def uncached_revision(session) -> str:
    """The capability revision an empty cache would compute right now."""
    catalog_cache.clear()
    identity = AgentIdentity(session=session, client=session.client)
    route = Route.objects.get(route_key="orders")
    return route_catalog(route=route, identity=identity).revision


def raw(sql: str, params=()) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# --- versions -------------------------------------------------------------------------------------------


def version_of(table: str, pk: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT version FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_triggers_bump_versions_on_every_write_even_raw_sql(session):
    provider = ToolProvider.objects.get(name="shop")
    route = Route.objects.get(route_key="orders")
    p0, r0 = (
        version_of("agent_runtime_toolprovider", provider.pk),
        version_of("agent_runtime_route", route.pk),
    )
    assert p0 > 0 and r0 > 0 and p0 != r0
    raw("UPDATE agent_runtime_route SET description = 'x' WHERE id = %s", [route.pk])
    assert version_of("agent_runtime_route", route.pk) > r0
    # A write of one of the provider's tools (any statement kind) bumps the provider.
    raw("UPDATE agent_runtime_providertool SET scope = scope WHERE provider_id = %s", [provider.pk])
    p1 = version_of("agent_runtime_toolprovider", provider.pk)
    assert p1 > p0
    raw(
        "DELETE FROM agent_runtime_providertool WHERE provider_id = %s AND name = 'staff_list'", [provider.pk]
    )
    p2 = version_of("agent_runtime_toolprovider", provider.pk)
    assert p2 > p1
    # A re-created row never gets a version an earlier row had.
    ToolProvider.objects.filter(pk=provider.pk).delete()
    again = ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))
    assert version_of("agent_runtime_toolprovider", again.pk) > p2


# --- one statement ----------------------------------------------------------------------------------------


def test_identity_statement_reads_the_route_and_its_provider_versions(session):
    session_row, client, prefetch = identity_load(secret_hash(session._access), route_key="orders")
    assert session_row.pk == session.pk and client.pk == session.client_id
    assert session_row.client is client
    route = prefetch.routes["orders"]
    provider = ToolProvider.objects.get(name="shop")
    assert route.version == Route.objects.get(route_key="orders").version
    assert route._bailing_dependencies["providers"] == (("shop", provider.pk, provider.version),)
    # A disabled route is not read: the gate answers route_unavailable without another query.
    Route.objects.filter(route_key="orders").update(enabled=False)
    _, _, prefetch = identity_load(secret_hash(session._access), route_key="orders")
    assert prefetch.knows("orders") and "orders" not in prefetch.routes
    # An invalid key is never sent to the database (the gate answers invalid_route).
    _, _, prefetch = identity_load(secret_hash(session._access), route_key="bad\x00key")
    assert prefetch is None


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("get", BOOTSTRAP, None),
        ("get", WORKSPACES, None),
        ("post", SEARCH, {"query": "order", "limit": 5}),
        ("get", "/agent-api/v1/tools?route=orders", None),
    ],
)
def test_bootstrap_search_and_catalog_are_one_statement_when_cached(
    api_client, session, django_assert_max_num_queries, method, url, body
):
    def send():
        if method == "get":
            return api_client.get(url, **auth(session))
        return api_client.post(url, body, format="json", **auth(session))

    assert send().status_code == 200  # touches last_seen_at, fills the cache
    with django_assert_max_num_queries(1):
        assert send().status_code == 200


def test_tool_detail_is_one_statement_once_its_guidance_is_cached(
    api_client, session, django_assert_max_num_queries
):
    revision = bootstrap(api_client, session)["capabilities"]["revision"]
    url = f"/agent-api/v1/tools/order_get?route=orders&capability_revision={revision}"
    with django_assert_max_num_queries(2):
        first = api_client.get(url, **auth(session))
    assert first.status_code == 200
    with django_assert_max_num_queries(1):
        again = api_client.get(url, **auth(session))
    assert again.json() == first.json()


def test_the_touch_of_last_seen_is_the_only_extra_statement(api_client, session, django_assert_num_queries):
    bootstrap(api_client, session)  # fills the catalog cache
    other = AgentSessionFactory(allowed_routes=["orders"], client=session.client)
    with django_assert_num_queries(2):  # identity + last_seen_at (first request of the interval)
        bootstrap(api_client, other)
    with django_assert_num_queries(1):
        bootstrap(api_client, other)


# --- catalog cache ----------------------------------------------------------------------------------------


def test_unchanged_rows_reuse_the_same_catalog(api_client, session):
    first = bootstrap(api_client, session)
    builds = catalog_cache.builds
    for _ in range(3):
        assert bootstrap(api_client, session) == first
        tools_of(api_client, session)
    assert catalog_cache.builds == builds
    # The very same object, not an equal rebuild.
    identity_a = _identity(session)
    identity_b = _identity(session)
    catalog_a = route_catalog(
        route=identity_a.prefetch.routes["orders"],
        identity=identity_a,
    )
    catalog_b = route_catalog(
        route=identity_b.prefetch.routes["orders"],
        identity=identity_b,
    )
    assert catalog_a is catalog_b
    assert catalog_cache.builds == builds


def _identity(session) -> AgentIdentity:
    session_row, client, prefetch = identity_load(secret_hash(session._access), route_key="orders")
    return AgentIdentity(session=session_row, client=client, prefetch=prefetch)


def test_spec_stored_through_the_service_reaches_the_next_request(api_client, session):
    before = bootstrap(api_client, session)["capabilities"]
    spec = copy.deepcopy(load_spec("catalog_shop"))
    spec["paths"]["/orders/{order_id}"]["get"]["summary"] = "Returns one order, changed."
    provider = ToolProvider.objects.get(name="shop")
    provider_spec_store(
        provider=provider, spec=spec, result=compile_spec(spec, provider="shop"), actor=Actor.system("tests")
    )
    builds = catalog_cache.builds
    after = bootstrap(api_client, session)["capabilities"]
    assert catalog_cache.builds == builds + 1
    assert after["revision"] != before["revision"]
    order_get = next(t for t in tools_of(api_client, session)["tools"] if t["name"] == "order_get")
    assert order_get["description"] == "Returns one order, changed."
    assert after["revision"] == uncached_revision(session)


def test_raw_sql_change_of_a_tool_row_reaches_the_next_request(api_client, session):
    before = tools_of(api_client, session)
    raw(
        """UPDATE agent_runtime_providertool
              SET projection = jsonb_set(projection, '{description}', '"Changed by SQL."')
            WHERE name = 'order_get'"""
    )
    after = tools_of(api_client, session)
    order_get = next(t for t in after["tools"] if t["name"] == "order_get")
    assert order_get["description"] == "Changed by SQL."
    # The revision binds the material digest, which this write left alone: exactly as an uncached build.
    assert after["capability_revision"] == before["capability_revision"] == uncached_revision(session)


def test_raw_sql_change_of_the_provider_or_route_reaches_the_next_request(api_client, session):
    first = bootstrap(api_client, session)["capabilities"]
    raw("UPDATE agent_runtime_toolprovider SET spec_sha256 = repeat('0', 64) WHERE name = 'shop'")
    second = bootstrap(api_client, session)["capabilities"]
    assert second["revision"] != first["revision"]
    assert second["revision"] == uncached_revision(session)

    raw(
        """UPDATE agent_runtime_route
              SET tools = jsonb_set(tools, '{agent_direct,write_tools}', '[]'::jsonb)
            WHERE route_key = 'orders'"""
    )
    third = bootstrap(api_client, session)["capabilities"]
    assert third["writes"] == 0 and second["writes"] == 1
    assert third["revision"] == uncached_revision(session)

    raw("UPDATE agent_runtime_toolprovider SET enabled = false WHERE name = 'shop'")
    assert bootstrap(api_client, session)["capabilities"]["authorized_total"] == 0
    raw("UPDATE agent_runtime_route SET enabled = false WHERE route_key = 'orders'")
    response = api_client.get(BOOTSTRAP, **auth(session))
    assert response.status_code == 404
    assert response.json()["error"] == "route_unavailable"


def test_subject_and_no_subject_sessions_get_their_own_catalogs(api_client, session):
    anonymous = AgentSessionFactory(allowed_routes=["orders"], on_behalf_of="", client=session.client)
    with_subject = tools_of(api_client, session)
    without = tools_of(api_client, anonymous)
    assert with_subject["capability_revision"] == uncached_revision(session)
    assert without["capability_revision"] == uncached_revision(anonymous)


def test_gate_order_is_unchanged_with_a_prefetched_route(session):
    identity = _identity(session)
    route_for_identity(identity=identity, route_key="orders")
    assert catalog_selectors.tool_surface_resolve(identity=identity, route_key="orders", runtime=True)
