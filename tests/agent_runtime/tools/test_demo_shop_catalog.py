"""End to end on the real Demo Shop process: refresh → bootstrap → ``/tools`` → search → detail.

The provider is refreshed over HTTP from ``python -m demo_business`` (signed spec fetch and negative
probes) and exposed through the demo workspace exactly as ``examples/demo.yaml`` configures it, so
the flags an agent sees are the ones the shipped demo produces, field by field.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent_runtime.models import Route, ToolProvider
from agent_runtime.services.providers import provider_refresh, provider_set_secret
from bailing.audit.actor import Actor
from tests.factories import AgentSessionFactory, RouteFactory
from tests.support.demo_business import REPO_ROOT, running_demo_business

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("tests")
SECRET = "demo-shop-e2e-" + "s" * 24
# name → (risk, readonly, approval_required, idempotent), as the demo spec's ACC declares them.
EXPECTED = {
    "cancel_order": ("high", False, True, False),
    "create_ticket": ("medium", False, False, False),
    "demo_failure_probe": ("low", True, False, True),
    "get_order": ("low", True, False, True),
    "list_orders": ("low", True, False, True),
    "request_refund": ("medium", False, True, False),
}


def demo_route_config() -> dict:
    document = yaml.safe_load((Path(REPO_ROOT) / "examples" / "demo.yaml").read_text(encoding="utf-8"))
    (route,) = [item for item in document["routes"] if item["route_key"] == "demo"]
    return route


@pytest.fixture(scope="module")
def shop():
    with running_demo_business(secret=SECRET) as business:
        yield business


@pytest.fixture
def demo(shop):
    """The demo provider refreshed from the live shop and the demo workspace of ``examples/demo.yaml``."""
    provider = ToolProvider.objects.create(name="demo-shop", base_url=shop.base_url, timeout_ms=5000)
    provider_set_secret(provider=provider, secret=SECRET, actor=ACTOR)
    outcome = provider_refresh(provider=provider, actor=ACTOR)
    assert outcome.ok, outcome
    assert (outcome.tools, outcome.warnings) == (6, 0)
    config = demo_route_config()
    RouteFactory(
        route_key="demo",
        name=config["name"],
        permission=config["permission"],
        target_config=config["target_config"],
        tools=config["tools"],
        agent_client=config["agent_client"],
    )
    return AgentSessionFactory(allowed_routes=["demo"], on_behalf_of="alice")


def get(api_client, path, token, **params):
    return api_client.get(path, params, HTTP_AUTHORIZATION=f"Bearer {token}")


def search(api_client, token, body):
    return api_client.post(
        "/agent-api/v1/workspaces/demo/capabilities/search",
        body,
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def flags(tool: dict) -> tuple:
    return (tool["risk"], tool["readonly"], tool["approval_required"], tool["idempotent"])


def test_demo_shop_tools_reach_the_agent_with_their_governance(api_client, demo, shop):
    token = demo._access
    records_before = shop.records()

    bootstrap = get(api_client, "/agent-api/v1/workspaces/demo/bootstrap", token)
    assert bootstrap.status_code == 200
    capabilities = bootstrap.json()["capabilities"]
    assert {key: value for key, value in capabilities.items() if key != "revision"} == {
        "authorized_total": 6,
        "active_limit": 8,
        "readonly": 3,
        "writes": 3,
        "approval_required": 2,
    }

    catalog = get(api_client, "/agent-api/v1/tools", token, route="demo")
    assert catalog.status_code == 200
    revision = catalog.json()["capability_revision"]
    assert revision == capabilities["revision"]
    tools = {tool["name"]: tool for tool in catalog.json()["tools"]}
    assert {name: flags(tool) for name, tool in tools.items()} == EXPECTED
    assert all(tool["usage_guidance_available"] is True for tool in tools.values())
    assert all(tool["description_truncated"] is False for tool in tools.values())
    refund_schema = tools["request_refund"]["input_schema"]
    assert refund_schema["properties"]["amount"]["type"] == "number"
    assert sorted(refund_schema["required"]) == ["amount", "order_id", "reason"]

    found = search(api_client, token, {"query": "refund money back", "limit": 12})
    assert found.status_code == 200
    body = found.json()
    assert body["capability_revision"] == revision
    assert body["tools"][0]["name"] == "request_refund"
    assert body["tools"][0] == tools["request_refund"]
    assert body["discovery"]["authorized_total"] == 6
    assert body["discovery"]["returned_count"] == 6
    assert body["discovery"]["truncated"] is False

    # A query matching nothing still returns authorized candidates (zero scores are kept).
    unmatched = search(api_client, token, {"query": "inventory", "limit": 2}).json()
    assert unmatched["discovery"]["returned_count"] == 2
    assert unmatched["discovery"]["truncated"] is True

    for name in EXPECTED:
        response = get(
            api_client, f"/agent-api/v1/tools/{name}", token, route="demo", capability_revision=revision
        )
        assert response.status_code == 200, name
        detail = response.json()
        assert detail["tool"] == tools[name]
        guidance = detail["usage_guidance"]
        assert guidance["truncated"] is False
        assert "When to use: " in guidance["text"] and "Returns: " in guidance["text"]
        assert "Example arguments: " in guidance["text"]
        assert shop.base_url not in guidance["text"]

    # Reading the catalog made no business request that could have changed the shop.
    assert shop.records() == records_before


def test_demo_shop_tools_follow_the_session_subject_and_route_permission(api_client, demo):
    anonymous = AgentSessionFactory(allowed_routes=["demo"], on_behalf_of="")
    catalog = get(api_client, "/agent-api/v1/tools", anonymous._access, route="demo").json()
    names = [tool["name"] for tool in catalog["tools"]]
    # Every Demo Shop tool but the diagnostics probe acts for a customer.
    assert names == ["demo_failure_probe"]

    Route.objects.filter(route_key="demo").update(permission="readonly")
    readonly = get(api_client, "/agent-api/v1/workspaces/demo/bootstrap", demo._access).json()["capabilities"]
    assert (readonly["authorized_total"], readonly["writes"], readonly["approval_required"]) == (3, 0, 0)


def test_a_failed_refresh_keeps_serving_the_last_good_demo_catalog(api_client, demo):
    token = demo._access
    before = get(api_client, "/agent-api/v1/tools", token, route="demo").json()
    provider = ToolProvider.objects.get(name="demo-shop")
    provider_set_secret(provider=provider, secret="not-the-demo-shop-secret", actor=ACTOR)
    assert provider_refresh(provider=provider, actor=ACTOR).ok is False
    assert get(api_client, "/agent-api/v1/tools", token, route="demo").json() == before
