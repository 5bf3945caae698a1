"""The consent page says what the agent will be able to do in each workspace it asks for: the
knowledge bases it reads, the business tools it may call (reads and writes) and which calls wait for
a human approval, read from the same route-level catalog the agent is served. One test drives the
page in headless Chromium (``consent-grants-*.png``)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.console.consent import GRANT_NAMES_SHOWN, workspace_grants
from agent_runtime.models import AgentAuthorization
from tests.factories import ClientFactory, RouteFactory, ToolProviderFactory
from tests.support.console import PASSWORD, signed_in

AMOUNT_BODY = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"amount": {"type": "number", "description": "Amount to refund."}},
                "required": ["amount"],
            }
        }
    }
}


def _operation(operation_id: str, scope: str, **acc) -> dict:
    return {
        "operationId": operation_id,
        "summary": f"{operation_id} summary.",
        "x-agent-capability": {"version": 1, "enabled": True, "scope": scope, **acc},
    }


def desk_spec() -> dict:
    """One read, one write that needs approval above 500, one high-risk write, one plain write."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Desk", "version": "1"},
        "paths": {
            "/orders": {"get": _operation("order_list", "order.read")},
            "/refunds": {
                "post": {
                    **_operation(
                        "refund_create",
                        "refund.write",
                        approval={"when": [{"param": "amount", "op": ">", "value": 500}]},
                    ),
                    "requestBody": AMOUNT_BODY,
                }
            },
            "/orders/cancel": {
                "post": {
                    **_operation("order_cancel", "order.write", risk={"level": "high"}),
                    "requestBody": AMOUNT_BODY,
                }
            },
            "/notes": {"post": {**_operation("note_add", "note.write"), "requestBody": AMOUNT_BODY}},
        },
    }


def desk_route(route_key: str = "desk", *, write_tools=("refund_create",), **fields):
    return RouteFactory(
        route_key=route_key,
        name="Refund desk",
        permission="readwrite",
        knowledge={"kb_ids": ["handbook", "policies"]},
        tools={
            "sources": [{"provider": "desk", "allow": ["*"]}],
            "agent_direct": {"enabled": True, "write_tools": list(write_tools)},
        },
        **fields,
    )


@pytest.mark.django_db
def test_grants_follow_the_catalog_and_the_approval_rules():
    ToolProviderFactory(name="desk", spec=desk_spec())
    desk_route()  # writes: only refund_create is listed
    desk_route("full-desk", write_tools=("refund_create", "order_cancel", "note_add"))
    RouteFactory(route_key="docs", knowledge={}, tools={})
    RouteFactory(route_key="off", enabled=False)
    RouteFactory(route_key="closed", agent_client={"enabled": False})

    grants = {
        grant.route_key: grant
        for grant in workspace_grants(["desk", "full-desk", "docs", "off", "closed", "nowhere"])
    }

    desk = grants["desk"]
    assert (desk.name, desk.unusable, desk.kb_ids) == ("Refund desk", "", ["handbook", "policies"])
    assert desk.business_tools and desk.tool_total == 2
    assert (desk.read_tools.shown, desk.write_tools.shown) == (["order_list"], ["refund_create"])
    assert desk.approvals == [("refund_create", "when amount > 500")]

    full = grants["full-desk"]
    assert full.write_tools.shown == ["note_add", "order_cancel", "refund_create"]
    assert full.approvals == [("order_cancel", "always (high risk)"), ("refund_create", "when amount > 500")]

    docs = grants["docs"]
    assert (docs.kb_ids, docs.business_tools, docs.tool_total) == ([], False, 0)
    assert grants["off"].unusable and grants["closed"].unusable and grants["nowhere"].unusable
    assert [grant.route_key for grant in workspace_grants(["off", "desk"])] == ["off", "desk"]


@pytest.mark.django_db
def test_forced_approval_and_long_lists_are_said():
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Many", "version": "1"},
        "paths": {
            f"/r{n:02d}": {"get": _operation(f"read_{n:02d}", "x.read")} for n in range(GRANT_NAMES_SHOWN + 3)
        },
    }
    ToolProviderFactory(name="many", spec=spec)
    RouteFactory(
        route_key="many",
        tools={
            "sources": [{"provider": "many", "allow": ["*"]}],
            "agent_direct": {"enabled": True, "force_approval_tools": ["read_00"]},
        },
    )
    (grant,) = workspace_grants(["many"])
    assert grant.read_tools.total == GRANT_NAMES_SHOWN + 3
    assert (len(grant.read_tools.shown), grant.read_tools.more) == (GRANT_NAMES_SHOWN, 3)
    assert grant.approvals == [("read_00", "always (forced by this workspace)")]


@pytest.mark.django_db
def test_the_page_shows_the_grants_of_the_offered_workspaces_only(administrator, start_hub_login):
    ToolProviderFactory(name="desk", spec=desk_spec())
    desk_route()
    RouteFactory(route_key="hidden")
    client = ClientFactory(app_id="desk-agent", hub_consent=True, allowed_routes=["desk"])
    login = start_hub_login(client=client, routes=("desk",))
    AgentAuthorization.objects.filter(pk=login.authorization.pk).update(requested_routes=["desk", "hidden"])
    response = signed_in(administrator).get(
        reverse("console:consent") + f"?authorization_id={login.authorization.id}"
    )
    assert response.status_code == 200
    # "hidden" was asked for but the client may not use it: the page offers and describes only "desk".
    assert [grant.route_key for grant in response.context["grants"]] == ["desk"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_consent_page_says_what_the_agent_will_be_able_to_do(
    hub_server, administrator, start_hub_login, browser_page, screenshot
):
    ToolProviderFactory(name="desk", spec=desk_spec())
    desk_route()
    client = ClientFactory(app_id="desk-agent", name="Desk agent", hub_consent=True, allowed_routes=["desk"])
    login = start_hub_login(client=client, routes=("desk",))
    page = browser_page
    base = hub_server.url
    consent = reverse("console:consent") + f"?authorization_id={login.authorization.id}"
    page.goto(base + consent)
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + consent)

    grants = page.get_by_role("region", name="This agent will be able to")
    assert grants.is_visible()
    grant = grants.locator(".grant[data-route=desk]")
    assert "Refund desk" in grant.locator("h3").inner_text()
    assert grant.locator(".grant-knowledge").inner_text() == (
        "Read knowledge of 2 knowledge bases: handbook, policies"
    )
    assert grant.locator(".grant-tools").first.inner_text().startswith("Call 2 business tools")
    assert grant.locator(".grant-reads").inner_text() == "1 that only read: order_list"
    assert grant.locator(".grant-writes").inner_text() == "1 that change data: refund_create"
    approvals = grant.locator(".grant-approvals")
    assert "Send these only after a human approves the call" in approvals.inner_text()
    assert "refund_create when amount > 500" in approvals.inner_text()
    assert "order_list" not in approvals.inner_text()
    screenshot(page, "consent-grants-01")
    page.set_viewport_size({"width": 1024, "height": 860})
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    screenshot(page, "consent-grants-02-1024")
