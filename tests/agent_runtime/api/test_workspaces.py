"""Contract tests: Agent bearer revalidation, the route gate, /workspaces and /bootstrap."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agent_runtime.models import AgentSession
from bailing.api.hashing import canonical_sha256
from tests.factories import AgentSessionFactory, ClientFactory, RouteFactory

pytestmark = pytest.mark.django_db

WORKSPACES = "/agent-api/v1/workspaces"


def bootstrap_url(route: str) -> str:
    return f"/agent-api/v1/workspaces/{route}/bootstrap"


def get(api_client, url, token):
    return api_client.get(url, HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def session():
    RouteFactory(route_key="orders", name="Orders", description="Order desk")
    return AgentSessionFactory(allowed_routes=["orders"])


# --- bearer -------------------------------------------------------------------------------------------


def test_missing_bearer_is_401_with_no_store(api_client):
    response = api_client.get(WORKSPACES)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response["Cache-Control"] == "no-store"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("token", ["", "bha_short", "bhr_" + "x" * 43, "Basic abc", "bha_" + "x" * 43])
def test_malformed_or_unknown_bearer_is_401(api_client, session, token):
    response = get(api_client, WORKSPACES, token)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


@pytest.mark.parametrize(
    "change",
    [
        {"revoked_at": "now"},
        {"access_expires_at": "past"},
        {"refresh_expires_at": "past"},
    ],
)
def test_revoked_or_expired_session_is_401(api_client, session, change):
    updates = {}
    for field, value in change.items():
        updates[field] = timezone.now() if value == "now" else timezone.now() - timedelta(seconds=1)
    AgentSession.objects.filter(pk=session.pk).update(**updates)
    assert get(api_client, WORKSPACES, session._access).status_code == 401


def test_disabled_client_makes_its_sessions_unusable(api_client, session):
    session.client.enabled = False
    session.client.save()
    assert get(api_client, WORKSPACES, session._access).status_code == 401


def test_client_that_lost_agent_consent_makes_sessions_unusable(api_client, session):
    session.client.hub_consent = False
    session.client.save()
    assert get(api_client, WORKSPACES, session._access).status_code == 401


def test_client_with_invalid_authorize_url_makes_sessions_unusable(api_client, session):
    session.client.hub_consent = False
    session.client.agent_authorize_url = "http://shop.example.com/authorize"  # plain http, not loopback
    session.client.save()
    assert get(api_client, WORKSPACES, session._access).status_code == 401


def test_last_seen_is_touched_at_most_once_per_interval(api_client, session):
    assert get(api_client, WORKSPACES, session._access).status_code == 200
    session.refresh_from_db()
    first = session.last_seen_at
    assert first is not None
    assert get(api_client, WORKSPACES, session._access).status_code == 200
    session.refresh_from_db()
    assert session.last_seen_at == first


# --- workspaces -----------------------------------------------------------------------------------------


def test_workspaces_is_the_intersection_of_every_gate(api_client):
    client = ClientFactory(allowed_routes=["visible", "disabled", "no-runtime", "audience", "unlisted"])
    RouteFactory(route_key="visible", name="Visible")
    RouteFactory(route_key="disabled", enabled=False)
    RouteFactory(route_key="no-runtime", agent_client={"enabled": False})
    RouteFactory(route_key="audience", audience={"enabled": True, "tenants": ["other"]})
    RouteFactory(route_key="client-denied")
    RouteFactory(route_key="unlisted")
    session = AgentSessionFactory(
        client=client,
        allowed_routes=["visible", "disabled", "no-runtime", "audience", "client-denied", "missing"],
    )
    response = get(api_client, WORKSPACES, session._access)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["schema_version"] == "bailing.agent-workspaces.v1"
    assert [w["route"] for w in body["workspaces"]] == ["visible"]
    item = body["workspaces"][0]
    assert set(item) == {
        "route",
        "name",
        "description",
        "profile",
        "permission",
        "profile_revision",
        "capability_revision",
        "authorized_tool_count",
        "active_tool_limit",
    }
    bootstrap = get(api_client, bootstrap_url("visible"), session._access).json()
    assert item["profile_revision"] == bootstrap["profile"]["revision"]
    assert item["capability_revision"] == bootstrap["capabilities"]["revision"]


# --- bootstrap ------------------------------------------------------------------------------------------


def test_bootstrap_has_exactly_the_seed_shape_and_defaults(api_client, session):
    response = get(api_client, bootstrap_url("orders"), session._access)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == ["schema_version", "workspace", "profile", "capabilities"]
    assert body["schema_version"] == "bailing.agent-runtime-profile.v1"
    assert body["workspace"] == {"route": "orders", "name": "Orders", "description": "Order desk"}
    profile = body["profile"]
    assert set(profile) == {"revision", "instructions", "memory", "knowledge", "governance"}
    assert profile["memory"] == {
        "recent_messages": 12,
        "recent_budget_chars": 8000,
        "per_message_chars": 2000,
        "summary_enabled": False,
        "summary_max_chars": 1200,
    }
    # All six fields of the spec's shape, also without knowledge: clients read one stable schema.
    assert profile["knowledge"] == {
        "enabled": False,
        "sources": 0,
        "mode": "chunk",
        "top_k": 5,
        "max_docs": 4,
        "page_boost": False,
    }
    assert profile["governance"] == {
        "planner": "local_agent",
        "execution": "bailinghub_governed",
        "authorization": "server_revalidated",
        "knowledge_trust": "reference_only",
        "tool_results_trust": "untrusted_data",
        "hidden_reasoning_sync": False,
        "max_tool_calls": 5,
        "permission": "full",
    }
    assert list(profile) == ["revision", "instructions", "memory", "knowledge", "governance"]
    assert list(body["capabilities"]) == [
        "revision",
        "authorized_total",
        "active_limit",
        "readonly",
        "writes",
        "approval_required",
    ]
    assert body["capabilities"]["authorized_total"] == 0
    assert body["capabilities"]["active_limit"] == 8
    assert {k: body["capabilities"][k] for k in ("readonly", "writes", "approval_required")} == {
        "readonly": 0,
        "writes": 0,
        "approval_required": 0,
    }
    unrevised = {k: v for k, v in profile.items() if k != "revision"}
    expected = canonical_sha256(
        {"schema": "bailing.agent-runtime-profile.v1", "workspace": body["workspace"], "profile": unrevised}
    )
    assert profile["revision"] == expected
    assert len(body["capabilities"]["revision"]) == 64


def test_bootstrap_knowledge_block_reports_configured_sources(api_client):
    RouteFactory(
        route_key="kb", knowledge={"kb_ids": ["a", "b"], "inject": "doc", "top_k": 7, "page_boost": True}
    )
    session = AgentSessionFactory(allowed_routes=["kb"])
    profile = get(api_client, bootstrap_url("kb"), session._access).json()["profile"]
    assert profile["knowledge"] == {
        "enabled": True,
        "sources": 2,
        "mode": "doc",
        "top_k": 7,
        "max_docs": 4,
        "page_boost": True,
    }


def test_bootstrap_instructions_are_system_prompt_plus_agent_instructions_and_nothing_else(api_client):
    RouteFactory(
        route_key="secretive",
        target_config={
            "system_prompt": "Be careful with refunds.",
            "credential": "prod-openai-credential",
            "model": "gpt-secret-model",
            "api_key": "sk-should-never-leak",
        },
        agent_client={"enabled": True, "instructions": "Prefer read tools first."},
        tools={
            "sources": [{"provider": "shop-provider", "allow": ["*"]}],
            "agent_direct": {"enabled": True, "write_tools": ["create_ticket"]},
        },
        permission="readwrite",
    )
    session = AgentSessionFactory(allowed_routes=["secretive"])
    response = get(api_client, bootstrap_url("secretive"), session._access)
    body = response.json()
    assert body["profile"]["instructions"] == "Be careful with refunds.\n\nPrefer read tools first."
    assert body["profile"]["governance"]["permission"] == "readwrite"
    raw = response.content.decode()
    for secret in ("prod-openai-credential", "gpt-secret-model", "sk-should-never-leak", "shop-provider"):
        assert secret not in raw


def test_knowledge_only_workspace_bootstraps_with_an_empty_catalog(api_client):
    RouteFactory(route_key="docs-only", knowledge={"kb_ids": ["handbook"]}, tools={})
    session = AgentSessionFactory(allowed_routes=["docs-only"])
    response = get(api_client, bootstrap_url("docs-only"), session._access)
    assert response.status_code == 200
    assert response.json()["capabilities"]["authorized_total"] == 0


def test_profile_revision_changes_with_the_profile_and_only_then(api_client, session):
    from agent_runtime.models import Route

    first = get(api_client, bootstrap_url("orders"), session._access).json()["profile"]["revision"]
    again = get(api_client, bootstrap_url("orders"), session._access).json()["profile"]["revision"]
    assert first == again
    route = Route.objects.get(route_key="orders")
    route.target_config = {"system_prompt": "Changed."}
    route.save()
    changed = get(api_client, bootstrap_url("orders"), session._access).json()["profile"]["revision"]
    assert changed != first


# --- route gate order and codes -------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["Orders", "auto", "a", "has.dot", "x" * 65])
def test_invalid_route_key_is_400_invalid_route(api_client, session, route):
    response = get(api_client, bootstrap_url(route), session._access)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_route"


def test_route_outside_the_session_grant_is_403_even_if_missing(api_client, session):
    # Allowlists come before existence: a session cannot probe which routes exist.
    response = get(api_client, bootstrap_url("nonexistent"), session._access)
    assert response.status_code == 403
    assert response.json()["error"] == "route_not_allowed"


def test_route_outside_the_client_allowlist_is_403(api_client):
    RouteFactory(route_key="orders")
    client = ClientFactory(allowed_routes=["other"])
    session = AgentSessionFactory(client=client, allowed_routes=["orders"])
    response = get(api_client, bootstrap_url("orders"), session._access)
    assert response.status_code == 403
    assert response.json()["error"] == "route_not_allowed"


@pytest.mark.parametrize("exists", [False, True])
def test_missing_or_disabled_route_is_404_route_unavailable(api_client, exists):
    if exists:
        RouteFactory(route_key="gone", enabled=False)
    session = AgentSessionFactory(allowed_routes=["gone"])
    response = get(api_client, bootstrap_url("gone"), session._access)
    assert response.status_code == 404
    assert response.json()["error"] == "route_unavailable"


@pytest.mark.parametrize(
    ("audience", "admitted"),
    [
        ({"enabled": False, "tenants": ["nobody"]}, True),
        ({"enabled": True}, True),
        ({"enabled": True, "principals": ["alice"]}, True),
        ({"enabled": True, "principals": ["bob"]}, False),
        ({"enabled": True, "roles": ["ops", "sales"]}, True),
        ({"enabled": True, "roles": ["finance"]}, False),
        ({"enabled": True, "tenants": ["acme"]}, True),
        ({"enabled": True, "tenants": ["globex"]}, False),
        ({"enabled": True, "clients": ["someone-else"]}, False),
        ({"enabled": True, "channels": ["agent:{app_id}"]}, True),
        ({"enabled": True, "channels": ["web"]}, False),
        ({"enabled": True, "audiences": ["staff"]}, True),
        ({"enabled": True, "audiences": ["customer"]}, False),
        ({"enabled": True, "principals": ["alice"], "tenants": ["globex"]}, False),
    ],
)
def test_audience_policy(api_client, audience, admitted):
    session = AgentSessionFactory(
        allowed_routes=["aud"],
        principal={"id": "alice", "tenant": "acme", "roles": ["sales"], "audience": "staff"},
    )
    if "channels" in audience:
        audience = {
            **audience,
            "channels": [c.format(app_id=session.client.app_id) for c in audience["channels"]],
        }
    RouteFactory(route_key="aud", audience=audience)
    response = get(api_client, bootstrap_url("aud"), session._access)
    if admitted:
        assert response.status_code == 200
    else:
        assert response.status_code == 403
        assert response.json()["error"] == "audience_not_allowed"


def test_runtime_disabled_route_is_403_agent_client_disabled(api_client):
    RouteFactory(route_key="plain", agent_client={"enabled": False})
    session = AgentSessionFactory(allowed_routes=["plain"])
    response = get(api_client, bootstrap_url("plain"), session._access)
    assert response.status_code == 403
    assert response.json()["error"] == "agent_client_disabled"


# Each gate is checked before the next: a request failing several answers with the earliest one.
GATE_ORDER = [
    # (route key, route fields or None for no route, session grant, client allowlist, expected)
    ("Auto", None, ["Auto"], ["*"], (400, "invalid_route")),
    ("auto", {"agent_client": {"enabled": False}}, ["auto"], ["*"], (400, "invalid_route")),
    ("closed", {"enabled": False}, [], ["*"], (403, "route_not_allowed")),
    ("closed", {"enabled": False}, ["closed"], ["other"], (403, "route_not_allowed")),
    (
        "closed",
        {"enabled": False, "audience": {"enabled": True, "principals": ["nobody"]}},
        ["closed"],
        ["*"],
        (404, "route_unavailable"),
    ),
    (
        "closed",
        {"audience": {"enabled": True, "principals": ["nobody"]}, "agent_client": {"enabled": False}},
        ["closed"],
        ["*"],
        (403, "audience_not_allowed"),
    ),
    ("closed", {"agent_client": {"enabled": False}}, ["closed"], ["*"], (403, "agent_client_disabled")),
]


@pytest.mark.parametrize(("route", "fields", "grant", "allowlist", "expected"), GATE_ORDER)
def test_route_gate_answers_with_the_first_failing_gate(
    api_client, route, fields, grant, allowlist, expected
):
    if fields is not None:
        RouteFactory(route_key=route, **fields)
    client = ClientFactory(allowed_routes=allowlist)
    session = AgentSessionFactory(client=client, allowed_routes=grant)
    response = get(api_client, bootstrap_url(route), session._access)
    assert (response.status_code, response.json()["error"]) == expected
    assert response["Cache-Control"] == "no-store"


def test_bearer_is_checked_before_the_route_gate(api_client):
    response = api_client.get(bootstrap_url("Not A Route"))
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


def test_unknown_agent_api_path_answers_json_404(api_client, session):
    response = get(api_client, "/agent-api/v1/workspaces/orders/nope", session._access)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "not_found"
    assert response["Cache-Control"] == "no-store"


def test_wrong_method_is_json_405(api_client, session):
    response = api_client.post(bootstrap_url("orders"), HTTP_AUTHORIZATION=f"Bearer {session._access}")
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


def test_bootstrap_query_count_is_bounded(api_client, session, django_assert_max_num_queries):
    get(api_client, bootstrap_url("orders"), session._access)  # touches last_seen_at once
    with django_assert_max_num_queries(2):
        response = get(api_client, bootstrap_url("orders"), session._access)
    assert response.status_code == 200
    assert json.loads(response.content)["workspace"]["route"] == "orders"
