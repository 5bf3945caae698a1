"""Service tests of the authorized catalog: exposure rules one by one, ordering, revision inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import Route, ToolProvider
from agent_runtime.selectors.catalog import load_providers, route_catalog, scope_allowed, tool_name_sort_key
from agent_runtime.services.providers import provider_refresh
from agent_runtime.services.tool_specs import provider_spec_store
from agent_runtime.tools import compile_spec
from bailing.audit.actor import Actor
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory
from tests.support.tool_specs import MIXED_SPEC_CAVEATS, MIXED_SPEC_TOOLS, MIXED_SPEC_WARNINGS, mixed_spec

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
SHOP_READS = ["inventory_list", "order_get", "order_search", "staff_list"]


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def identity_for(session) -> AgentIdentity:
    return AgentIdentity(session=session, client=session.client)


def direct_tools(*, sources=None, enabled=True, **direct) -> dict:
    return {
        "sources": sources if sources is not None else [{"provider": "shop", "allow": ["*"]}],
        "agent_direct": {"enabled": enabled, **direct},
    }


def names(catalog) -> list[str]:
    return [tool.name for tool in catalog.tools]


def catalog_of(route, session=None):
    session = session or AgentSessionFactory(allowed_routes=[route.route_key])
    return route_catalog(route=route, identity=identity_for(session))


@pytest.fixture
def shop():
    return ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))


# --- exposure ---------------------------------------------------------------------------------------------


def test_readonly_tools_need_only_agent_direct_and_scope(shop):
    route = RouteFactory(tools=direct_tools())
    catalog = catalog_of(route)
    assert names(catalog) == ["customer_profile_get", *SHOP_READS]
    assert all(tool.readonly for tool in catalog.tools)


def test_without_agent_direct_the_catalog_is_empty_and_reads_nothing(shop, django_assert_num_queries):
    route = RouteFactory(tools=direct_tools(enabled=False, write_tools=["order_cancel"]))
    session = AgentSessionFactory(allowed_routes=[route.route_key])
    with django_assert_num_queries(0):
        catalog = route_catalog(route=route, identity=identity_for(session))
    assert catalog.tools == ()
    assert catalog.agent_direct is False
    assert catalog.capabilities()["authorized_total"] == 0


def test_route_without_tools_config_has_an_empty_catalog(shop):
    catalog = catalog_of(RouteFactory(tools={}))
    assert catalog.tools == ()
    assert len(catalog.revision) == 64


@pytest.mark.parametrize(
    ("allow", "expected"),
    [
        (["*"], ["customer_profile_get", *SHOP_READS]),
        (["order.read"], ["order_get", "order_search"]),
        (["order.*"], ["order_get", "order_search"]),
        (["order.read", "inventory.read"], ["inventory_list", "order_get", "order_search"]),
        (["order"], []),
        (["order.re"], []),
        (["orde.*"], []),
        (["nothing.*"], []),
    ],
)
def test_allow_list_selects_scopes(shop, allow, expected):
    route = RouteFactory(tools=direct_tools(sources=[{"provider": "shop", "allow": allow}]))
    assert names(catalog_of(route)) == expected


@pytest.mark.parametrize(
    ("scope", "allow", "admitted"),
    [
        ("order.read", ["order.read"], True),
        ("order.read", ["*"], True),
        ("order.read", ["order.*"], True),
        ("order.read.deep", ["order.*"], True),
        ("order.", ["order.*"], True),
        ("order", ["order.*"], False),
        ("orders.read", ["order.*"], False),
        ("order.read", ["order.read.*"], False),
        ("order.read", ["Order.read"], False),
        ("order.read", [], False),
    ],
)
def test_scope_matching_is_exact_star_or_dot_prefix(scope, allow, admitted):
    assert scope_allowed(scope, allow) is admitted


@pytest.mark.parametrize("permission", ["readwrite", "full", None])
def test_listed_writes_are_exposed_when_permission_allows(shop, permission):
    route = RouteFactory(
        permission=permission,
        tools=direct_tools(write_tools=["order_cancel", "order_note_add"]),
    )
    catalog = catalog_of(route)
    assert names(catalog) == [
        "customer_profile_get",
        "inventory_list",
        "order_cancel",
        "order_get",
        "order_note_add",
        "order_search",
        "staff_list",
    ]
    assert catalog.tool("order_cancel").readonly is False


def test_writes_are_hidden_on_a_readonly_route_even_when_listed(shop):
    route = RouteFactory(permission="readonly", tools=direct_tools(write_tools=["order_cancel"]))
    assert "order_cancel" not in names(catalog_of(route))


def test_unlisted_writes_are_hidden(shop):
    route = RouteFactory(permission="full", tools=direct_tools(write_tools=["order_cancel"]))
    catalog = catalog_of(route)
    assert "order_cancel" in names(catalog)
    assert "order_note_add" not in names(catalog)
    assert "refund_create" not in names(catalog)


def test_write_listing_does_not_bypass_the_allow_list(shop):
    route = RouteFactory(
        tools=direct_tools(
            sources=[{"provider": "shop", "allow": ["order.read"]}], write_tools=["order_cancel"]
        )
    )
    assert names(catalog_of(route)) == ["order_get", "order_search"]


def test_subject_required_tools_are_hidden_without_a_trusted_subject(shop):
    route = RouteFactory(tools=direct_tools(write_tools=["refund_create"]))
    with_subject = catalog_of(route, AgentSessionFactory(on_behalf_of="alice"))
    without = catalog_of(route, AgentSessionFactory(on_behalf_of=""))
    assert {"customer_profile_get", "refund_create"} <= set(names(with_subject))
    assert not {"customer_profile_get", "refund_create"} & set(names(without))
    assert with_subject.revision != without.revision


def test_console_view_without_identity_counts_subject_tools(shop):
    route = RouteFactory(tools=direct_tools())
    assert "customer_profile_get" in names(route_catalog(route=route, identity=None))


def test_acc_approval_flags_are_kept_and_force_approval_only_adds(shop):
    route = RouteFactory(
        permission="full",
        tools=direct_tools(
            write_tools=["order_cancel", "order_note_add", "refund_create"],
            force_approval_tools=["order_cancel", "refund_create"],
        ),
    )
    catalog = catalog_of(route)
    flags = {tool.name: tool.approval_required for tool in catalog.tools}
    assert flags["order_cancel"] is True  # forced by the route
    assert flags["order_note_add"] is True  # ACC approval.when, not forced
    assert flags["refund_create"] is True  # ACC risk high, forced as well
    assert flags["order_get"] is False
    assert catalog.tool("order_cancel").forced_approval is True
    assert catalog.tool("order_note_add").forced_approval is False
    assert catalog.tool("order_cancel").public()["approval_required"] is True
    # The stored projection is untouched: tightening is per route.
    stored = shop.tools.get(name="order_cancel").projection
    assert stored["approval_required"] is False


def test_deprecated_unattended_list_forces_approval_on_the_difference(shop):
    route = RouteFactory(
        permission="readwrite",
        tools=direct_tools(
            write_tools=["order_cancel", "order_note_add"], unattended_write_tools=["order_note_add"]
        ),
    )
    catalog = catalog_of(route)
    assert catalog.tool("order_cancel").forced_approval is True
    assert catalog.tool("order_note_add").forced_approval is False


def test_disabled_or_missing_provider_contributes_nothing(shop):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    route = RouteFactory(
        tools=direct_tools(
            sources=[
                {"provider": "shop", "allow": ["inventory.read"]},
                {"provider": "crm", "allow": ["crm.read"]},
                {"provider": "ghost", "allow": ["*"]},
            ]
        )
    )
    assert names(catalog_of(route)) == ["crm_contact_get", "inventory_list"]
    ToolProvider.objects.filter(name="crm").update(enabled=False)
    catalog = catalog_of(route)
    assert names(catalog) == ["inventory_list"]
    assert [(s.provider, s.present, s.enabled) for s in catalog.sources] == [
        ("shop", True, True),
        ("crm", True, False),
        ("ghost", False, False),
    ]


def test_provider_without_a_stored_spec_contributes_nothing():
    ToolProviderFactory(name="fresh")
    route = RouteFactory(tools=direct_tools(sources=[{"provider": "fresh", "allow": ["*"]}]))
    assert catalog_of(route).tools == ()


def test_a_name_exposed_by_two_sources_is_withheld_from_both(shop):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    both = [{"provider": "shop", "allow": ["order.read"]}, {"provider": "crm", "allow": ["*"]}]
    reversed_sources = list(reversed(both))
    first = catalog_of(RouteFactory(tools=direct_tools(sources=both)))
    second = catalog_of(RouteFactory(tools=direct_tools(sources=reversed_sources)))
    assert names(first) == names(second) == ["crm_contact_get", "order_search"]


def test_a_provider_listed_twice_cannot_expose_a_tool_twice(shop):
    # Config validation refuses this; the catalog still fails closed if a stored route has it.
    twice = [{"provider": "shop", "allow": ["order.read"]}, {"provider": "shop", "allow": ["inventory.*"]}]
    catalog = catalog_of(RouteFactory(tools=direct_tools(sources=twice)))
    assert names(catalog) == ["inventory_list", "order_get", "order_search"]
    twice[1]["allow"] = ["order.*"]
    assert names(catalog_of(RouteFactory(tools=direct_tools(sources=twice)))) == []


def test_conflict_is_judged_after_allow_lists(shop):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    sources = [{"provider": "shop", "allow": ["order.read"]}, {"provider": "crm", "allow": ["crm.read"]}]
    catalog = catalog_of(RouteFactory(tools=direct_tools(sources=sources)))
    assert catalog.tool("order_get").provider == "shop"


def test_conflict_with_a_disabled_provider_is_no_conflict(shop):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"), enabled=False)
    sources = [{"provider": "shop", "allow": ["order.read"]}, {"provider": "crm", "allow": ["*"]}]
    assert names(catalog_of(RouteFactory(tools=direct_tools(sources=sources)))) == [
        "order_get",
        "order_search",
    ]


def test_tools_are_ordered_like_upstream_locale_compare():
    """BailingHub's ``localeCompare`` order (docs/protocol.md "Tool order")."""
    # Expected order as printed by Node 20: [...names].sort((a, b) => a.localeCompare(b)).
    expected = [
        "_x", "a_1", "a_b", "a1", "A1", "a1_b", "a10", "a1b", "A1b", "a2", "ab", "aB", "Ab", "alpha",
        "b_tool", "B_tool", "order_get", "order_Get", "ORDER_GET", "orderGet", "x_", "x1", "X1", "Zeta",
    ]  # fmt: skip
    assert sorted(reversed(expected), key=tool_name_sort_key) == expected
    assert sorted(sorted(expected), key=tool_name_sort_key) == expected


def test_counts_match_the_tools(shop):
    route = RouteFactory(
        permission="full",
        agent_client={"enabled": True, "active_tool_limit": 5},
        tools=direct_tools(
            write_tools=["order_cancel", "order_note_add", "refund_create"],
            force_approval_tools=["order_cancel"],
        ),
    )
    assert catalog_of(route).capabilities() == {
        "revision": catalog_of(route).revision,
        "authorized_total": 8,
        "active_limit": 5,
        "readonly": 5,
        "writes": 3,
        "approval_required": 3,
    }


def test_projection_is_the_complete_public_allowlist_in_order(shop):
    tool = catalog_of(RouteFactory(tools=direct_tools())).tool("order_get").public()
    assert list(tool) == [
        "name",
        "description",
        "description_truncated",
        "input_schema",
        "scope",
        "risk",
        "approval_required",
        "readonly",
        "idempotent",
        "usage_guidance_available",
    ]
    assert tool["description"] == "Query one order by ID."
    assert tool["input_schema"]["required"] == ["order_id"]
    assert tool["usage_guidance_available"] is True


def test_catalog_reads_providers_and_tools_in_one_query(shop, django_assert_num_queries):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    route = RouteFactory(
        tools=direct_tools(
            sources=[{"provider": "shop", "allow": ["*"]}, {"provider": "crm", "allow": ["crm.*"]}]
        )
    )
    session = AgentSessionFactory(allowed_routes=[route.route_key])
    identity = identity_for(session)
    with django_assert_num_queries(1):
        catalog = route_catalog(route=route, identity=identity)
    assert len(catalog.tools) == 6


def test_load_providers_of_nothing_runs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert load_providers([]) == {}


# --- revision ---------------------------------------------------------------------------------------------


def store(provider: ToolProvider, spec: dict) -> None:
    provider_spec_store(
        provider=provider,
        spec=spec,
        result=compile_spec(spec, provider=provider.name),
        actor=Actor.system("tests"),
    )


@pytest.fixture
def revised(shop):
    """A route with reads and one write exposed, and a function returning its current revision."""
    route = RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools=direct_tools(
            sources=[{"provider": "shop", "allow": ["order.*"]}], write_tools=["order_cancel"]
        ),
    )
    session = AgentSessionFactory(allowed_routes=["orders"])

    def revision() -> str:
        fresh = Route.objects.get(pk=route.pk)
        return route_catalog(route=fresh, identity=identity_for(session)).revision

    return route, revision


def edit_operation(spec: dict, path: str, method: str, **changes) -> dict:
    spec = copy.deepcopy(spec)
    operation = spec["paths"][path][method]
    for key, value in changes.items():
        if key == "acc":
            operation["x-agent-capability"].update(value)
        else:
            operation[key] = value
    return spec


def test_revision_is_stable_for_the_same_state(revised):
    _route, revision = revised
    assert revision() == revision()


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"summary": "Look up one order."}, id="projection-description"),
        pytest.param({"description": "Different long text for the guidance only."}, id="guidance-only"),
        pytest.param({"acc": {"guidance": {"returns": "Something else."}}}, id="acc-guidance"),
        pytest.param({"acc": {"risk": {"level": "high"}}}, id="risk"),
        pytest.param(
            {
                "parameters": [
                    {"name": "order_id", "in": "path", "required": True, "schema": {"type": "integer"}}
                ]
            },
            id="input-schema",
        ),
    ],
)
def test_revision_changes_with_an_exposed_tools_projection_or_guidance(revised, shop, change):
    _route, revision = revised
    before = revision()
    store(shop, edit_operation(load_spec("catalog_shop"), "/orders/{order_id}", "get", **change))
    assert revision() != before


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda r: r.tools["sources"][0].update(allow=["order.*", "inventory.read"]), id="allow"),
        pytest.param(lambda r: r.tools["agent_direct"].update(write_tools=[]), id="write-tools"),
        pytest.param(
            lambda r: r.tools["agent_direct"].update(force_approval_tools=["order_cancel"]),
            id="force-approval",
        ),
        pytest.param(lambda r: setattr(r, "permission", "readonly"), id="permission"),
        pytest.param(lambda r: setattr(r, "permission", "full"), id="permission-same-exposure"),
        pytest.param(lambda r: setattr(r, "audience", {"enabled": True}), id="audience"),
        pytest.param(lambda r: r.tools["agent_direct"].update(enabled=False), id="agent-direct-off"),
    ],
)
def test_revision_changes_with_exposure_and_governance(revised, edit):
    route, revision = revised
    before = revision()
    edit(route)
    route.save()
    assert revision() != before


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda p: setattr(p, "base_url", "https://elsewhere.example.test"), id="base-url"),
        pytest.param(lambda p: setattr(p, "enabled", False), id="provider-disabled"),
    ],
)
def test_revision_changes_with_the_providers_identity(revised, shop, edit):
    _route, revision = revised
    before = revision()
    edit(shop)
    shop.save()
    assert revision() != before


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda r: setattr(r, "name", "Renamed"), id="route-name"),
        pytest.param(lambda r: setattr(r, "description", "New description"), id="route-description"),
        pytest.param(lambda r: setattr(r, "target_config", {"system_prompt": "Changed."}), id="prompt"),
        pytest.param(lambda r: setattr(r, "memory", {"recent_messages": 3}), id="memory"),
        pytest.param(lambda r: setattr(r, "knowledge", {"kb_ids": ["handbook"]}), id="knowledge"),
        pytest.param(
            lambda r: setattr(
                r, "agent_client", {"enabled": True, "active_tool_limit": 3, "instructions": "x"}
            ),
            id="agent-client",
        ),
        pytest.param(lambda r: r.tools.update(max_calls=9), id="max-calls"),
        pytest.param(
            lambda r: r.tools["sources"][0].update(retrieval={"enabled": True, "max_tools": 5}),
            id="retrieval",
        ),
    ],
)
def test_revision_ignores_unrelated_route_edits(revised, edit):
    route, revision = revised
    before = revision()
    edit(route)
    route.save()
    assert revision() == before


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda p: setattr(p, "description", "Shop backend"), id="description"),
        pytest.param(lambda p: setattr(p, "timeout_ms", 30_000), id="timeout"),
        pytest.param(lambda p: setattr(p, "rate_limit_per_min", 5), id="rate-limit"),
        pytest.param(lambda p: setattr(p, "secret_encrypted", "v1.sealed-secret-material"), id="secret"),
        pytest.param(lambda p: setattr(p, "auto_refresh_min", 30), id="auto-refresh"),
    ],
)
def test_revision_ignores_unrelated_provider_edits(revised, shop, edit):
    _route, revision = revised
    before = revision()
    edit(shop)
    shop.save()
    assert revision() == before


def test_storing_the_same_spec_again_keeps_the_revision(revised, shop):
    _route, revision = revised
    before = revision()
    # Storing the identical spec again rewrites every tool row: nothing observable changed.
    store(shop, load_spec("catalog_shop"))
    assert revision() == before


def test_migrating_unattended_to_force_approval_keeps_the_revision(revised):
    route, revision = revised
    route.tools["agent_direct"] = {
        "enabled": True,
        "write_tools": ["order_cancel"],
        "unattended_write_tools": [],
    }
    route.save()
    deprecated = revision()
    route.tools["agent_direct"] = {
        "enabled": True,
        "write_tools": ["order_cancel"],
        "force_approval_tools": ["order_cancel"],
    }
    route.save()
    assert revision() == deprecated


def test_same_catalog_on_two_routes_has_two_revisions(shop):
    one = catalog_of(RouteFactory(tools=direct_tools()))
    two = catalog_of(RouteFactory(tools=direct_tools()))
    assert names(one) == names(two)
    assert one.revision != two.revision


def test_guidance_only_change_bumps_the_revision_but_not_the_execution_fingerprint(revised, shop):
    _route, revision = revised
    before_revision = revision()
    before = ToolProvider.objects.get(pk=shop.pk).tools.get(name="order_get")
    store(
        shop,
        edit_operation(
            load_spec("catalog_shop"),
            "/orders/{order_id}",
            "get",
            description="Rewritten guidance text only.",
            acc={"guidance": {"when_to_use": "Only when the user names an order."}},
        ),
    )
    after = ToolProvider.objects.get(pk=shop.pk).tools.get(name="order_get")
    assert revision() != before_revision
    assert after.usage_guidance["text"] != before.usage_guidance["text"]
    assert after.material_digest != before.material_digest
    assert after.execution_fingerprint == before.execution_fingerprint


@pytest.mark.parametrize("version", ["3.0.3", "3.1.0"])
def test_a_spec_with_ref_chains_and_malformed_acc_is_stored_with_its_warnings(version):
    provider = ToolProvider.objects.create(
        name="mixed",
        base_url="https://mixed.example.test",
        spec_source=ToolProvider.SpecSource.INLINE,
        spec_inline=mixed_spec(version),
    )
    outcome = provider_refresh(provider=provider, actor=Actor.system("tests"))
    assert outcome.ok, outcome
    assert (outcome.tools, outcome.warnings) == (5, len(MIXED_SPEC_WARNINGS) + len(MIXED_SPEC_CAVEATS))
    provider.refresh_from_db()
    assert provider.last_refresh_status == "ok"
    assert sorted(warning["tool"] for warning in provider.compile_warnings) == sorted(
        [*MIXED_SPEC_WARNINGS, *MIXED_SPEC_CAVEATS]
    )
    route = RouteFactory(
        permission="readwrite",
        tools=direct_tools(
            sources=[{"provider": "mixed", "allow": ["*"]}], write_tools=["order_update", "good_write"]
        ),
    )
    assert names(catalog_of(route)) == MIXED_SPEC_TOOLS


def test_compile_warnings_are_stored_on_the_tool_they_concern():
    provider = ToolProviderFactory(name="texts", spec=load_spec("long_description"))
    tools = {tool.name: tool for tool in provider.tools.all()}
    assert [warning["code"] for warning in tools["long_description"].warnings] == [
        "tool_description_truncated"
    ]
    assert tools["exact_description"].warnings == []
    assert tools["summary_and_long_description"].warnings == []
    assert tools["long_description"].projection["description_truncated"] is True
    provider.refresh_from_db()
    assert [(w["tool"], w["code"]) for w in provider.compile_warnings] == [
        ("long_description", "tool_description_truncated")
    ]
