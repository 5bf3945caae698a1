"""Contract tests: ``GET /agent-api/v1/tools/:name?route=&capability_revision=`` (tool detail)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_runtime.models import Route, ToolProvider
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory
from tests.support.threaded_server import ServerThread

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def get(api_client, path, token, **params):
    return api_client.get(path, params, HTTP_AUTHORIZATION=f"Bearer {token}")


def revision_of(api_client, token, route) -> str:
    response = get(api_client, "/agent-api/v1/tools", token, route=route)
    assert response.status_code == 200
    return response.json()["capability_revision"]


def detail(api_client, token, name, route="orders", revision=None):
    revision = revision or revision_of(api_client, token, route)
    return get(api_client, f"/agent-api/v1/tools/{name}", token, route=route, capability_revision=revision)


@pytest.fixture
def shop():
    return ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))


@pytest.fixture
def session(shop):
    ToolProviderFactory(name="policies", spec=load_spec("catalog_long_guidance"))
    RouteFactory(
        route_key="orders",
        permission="readwrite",
        tools={
            "sources": [
                {"provider": "shop", "allow": ["order.*", "inventory.read", "customer.read", "refund.write"]},
                {"provider": "policies", "allow": ["policy.read"]},
            ],
            "agent_direct": {"enabled": True, "write_tools": ["order_cancel", "refund_create"]},
        },
    )
    return AgentSessionFactory(allowed_routes=["orders"])


# --- 200 ------------------------------------------------------------------------------------------------


def test_detail_shape_and_guidance(api_client, session):
    revision = revision_of(api_client, session._access, "orders")
    response = detail(api_client, session._access, "order_get", revision=revision)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == ["schema_version", "route", "capability_revision", "tool", "usage_guidance"]
    assert body["schema_version"] == "bailing.agent-tool-detail.v1"
    assert body["route"] == "orders"
    assert body["capability_revision"] == revision
    catalog = get(api_client, "/agent-api/v1/tools", session._access, route="orders").json()
    assert body["tool"] == next(tool for tool in catalog["tools"] if tool["name"] == "order_get")
    text = (
        "Query one order by ID.\n\n"
        "Returns status, amount and fulfilment state of a single order.\n\n"
        "When to use: Use when the user names one order.\n\n"
        "Returns: Status, amount and fulfilment state.\n\n"
        'Example arguments: {"order_id":"SO1001"}'
    )
    assert body["usage_guidance"] == {
        "text": text,
        "truncated": False,
        "source_chars": len(text),
        "max_chars": 32768,
        "source_bytes": len(text.encode("utf-8")),
        "max_bytes": 65536,
    }
    assert list(body["usage_guidance"]) == [
        "text",
        "truncated",
        "source_chars",
        "max_chars",
        "source_bytes",
        "max_bytes",
    ]


def test_long_guidance_is_bounded_and_flagged(api_client, session):
    body = detail(api_client, session._access, "policy_explain").json()
    guidance = body["usage_guidance"]
    assert guidance["truncated"] is True
    assert len(guidance["text"]) == guidance["max_chars"] == 32768
    assert guidance["source_chars"] > 32768
    assert guidance["source_bytes"] == guidance["source_chars"]  # ASCII guidance
    assert len(guidance["text"].encode("utf-8")) <= guidance["max_bytes"]
    assert guidance["text"].startswith("Explain one store policy.\n\nPolicies apply per region")
    assert body["tool"]["usage_guidance_available"] is True
    assert body["tool"]["description"] == "Explain one store policy."
    assert body["tool"]["description_truncated"] is False


def test_short_guidance_equals_the_description(api_client, session):
    body = detail(api_client, session._access, "policy_list").json()
    assert body["usage_guidance"]["text"] == body["tool"]["description"] == "List store policies."
    assert body["usage_guidance"]["truncated"] is False
    assert body["tool"]["usage_guidance_available"] is False


def test_detail_shows_route_tightening(api_client, session):
    route = Route.objects.get(route_key="orders")
    route.tools["agent_direct"]["force_approval_tools"] = ["order_cancel"]
    route.save()
    body = detail(api_client, session._access, "order_cancel").json()
    assert body["tool"]["approval_required"] is True
    assert body["tool"]["readonly"] is False


def test_detail_works_when_the_runtime_is_off(api_client, session):
    Route.objects.filter(route_key="orders").update(agent_client={"enabled": False})
    assert detail(api_client, session._access, "order_get").status_code == 200


# --- 409 / 404 ------------------------------------------------------------------------------------------


def test_unknown_revision_is_409(api_client, session):
    response = detail(api_client, session._access, "order_get", revision="0" * 64)
    assert response.status_code == 409
    assert response.json()["error"] == "capability_changed"
    assert response["Cache-Control"] == "no-store"


def test_revision_made_stale_by_a_route_change_is_409(api_client, session):
    stale = revision_of(api_client, session._access, "orders")
    route = Route.objects.get(route_key="orders")
    route.tools["agent_direct"]["write_tools"] = ["order_cancel"]
    route.save()
    response = detail(api_client, session._access, "order_get", revision=stale)
    assert response.status_code == 409
    assert response.json()["error"] == "capability_changed"
    assert detail(api_client, session._access, "order_get").status_code == 200


def test_stale_revision_wins_over_a_missing_tool(api_client, session):
    response = detail(api_client, session._access, "no_such_tool", revision="f" * 64)
    assert response.status_code == 409
    assert response.json()["error"] == "capability_changed"


@pytest.mark.parametrize(
    "name",
    [
        "no_such_tool",
        "staff_list",  # outside the allow lists
        "order_note_add",  # a write not in write_tools
        "ORDER_GET",  # names are exact
    ],
)
def test_tool_outside_the_authorized_set_is_404(api_client, session, name):
    response = detail(api_client, session._access, name)
    assert response.status_code == 404
    assert response.json()["error"] == "tool_not_found"
    assert response["Cache-Control"] == "no-store"


def test_subject_tool_is_404_for_a_session_without_subject(api_client, session):
    anonymous = AgentSessionFactory(allowed_routes=["orders"], on_behalf_of="")
    for name in ("customer_profile_get", "refund_create"):
        response = detail(api_client, anonymous._access, name)
        assert response.status_code == 404
        assert response.json()["error"] == "tool_not_found"
        assert detail(api_client, session._access, name).status_code == 200


def test_write_on_a_readonly_route_is_404(api_client, session):
    Route.objects.filter(route_key="orders").update(permission="readonly")
    response = detail(api_client, session._access, "order_cancel")
    assert response.status_code == 404
    assert response.json()["error"] == "tool_not_found"


def test_conflicting_name_is_404(api_client, session):
    ToolProviderFactory(name="crm", spec=load_spec("catalog_crm"))
    route = Route.objects.get(route_key="orders")
    route.tools["sources"].append({"provider": "crm", "allow": ["*"]})
    route.save()
    response = detail(api_client, session._access, "order_get")
    assert response.status_code == 404
    assert response.json()["error"] == "tool_not_found"


# --- input and gate -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"capability_revision": "a" * 64}, "route"),
        ({"route": "orders"}, "capability_revision"),
        ({"route": "orders", "capability_revision": "A" * 64}, "capability_revision"),
        ({"route": "orders", "capability_revision": "a" * 63}, "capability_revision"),
        ({"route": "orders", "capability_revision": "a" * 65}, "capability_revision"),
        ({"route": "orders", "capability_revision": "g" * 64}, "capability_revision"),
        ({"route": "orders", "capability_revision": "a" * 64, "tool": "order_get"}, "tool"),
    ],
)
def test_invalid_query_parameters_are_400(api_client, session, params, field):
    response = get(api_client, "/agent-api/v1/tools/order_get", session._access, **params)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == field


def test_repeated_query_parameter_is_400(api_client, session):
    revision = revision_of(api_client, session._access, "orders")
    response = api_client.get(
        f"/agent-api/v1/tools/order_get?route=orders&capability_revision={revision}&route=orders",
        HTTP_AUTHORIZATION=f"Bearer {session._access}",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "route"


@pytest.mark.parametrize("name", ["1order", "order-get", "order.get", "o" * 65, "%C3%A9t%C3%A9"])
def test_invalid_tool_name_is_400(api_client, session, name):
    response = detail(api_client, session._access, name)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == "name"


def test_longest_valid_tool_name_is_a_404_not_a_400(api_client, session):
    response = detail(api_client, session._access, "t" * 64)
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("route", "status", "code"),
    [
        ("Orders", 400, "invalid_route"),
        ("auto", 400, "invalid_route"),
        ("elsewhere", 403, "route_not_allowed"),
    ],
)
def test_route_gate_codes(api_client, session, route, status, code):
    response = get(
        api_client,
        "/agent-api/v1/tools/order_get",
        session._access,
        route=route,
        capability_revision="a" * 64,
    )
    assert response.status_code == status
    assert response.json()["error"] == code


def test_direct_tools_off_is_403(api_client, session):
    revision = revision_of(api_client, session._access, "orders")
    route = Route.objects.get(route_key="orders")
    route.tools["agent_direct"]["enabled"] = False
    route.save()
    response = detail(api_client, session._access, "order_get", revision=revision)
    assert response.status_code == 403
    assert response.json()["error"] == "agent_direct_disabled"


def test_audience_is_revalidated(api_client, session):
    revision = revision_of(api_client, session._access, "orders")
    Route.objects.filter(route_key="orders").update(audience={"enabled": True, "roles": ["finance"]})
    response = detail(api_client, session._access, "order_get", revision=revision)
    assert response.status_code == 403
    assert response.json()["error"] == "audience_not_allowed"


def test_revoked_session_is_401(api_client, session):
    revision = revision_of(api_client, session._access, "orders")
    type(session).objects.filter(pk=session.pk).update(revoked_at=timezone.now())
    response = detail(api_client, session._access, "order_get", revision=revision)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


def _disable_client(session):
    type(session.client).objects.filter(pk=session.client_id).update(enabled=False)


def _narrow_client(session):
    type(session.client).objects.filter(pk=session.client_id).update(allowed_routes=["elsewhere"])


def _narrow_session(session):
    type(session).objects.filter(pk=session.pk).update(allowed_routes=["elsewhere"])


def _expire_session(session):
    type(session).objects.filter(pk=session.pk).update(access_expires_at=timezone.now())


def _disable_route(session):
    Route.objects.filter(route_key="orders").update(enabled=False)


def _disable_provider(session):
    ToolProvider.objects.filter(name="shop").update(enabled=False)


def _drop_write(session):
    route = Route.objects.get(route_key="orders")
    route.tools["agent_direct"]["write_tools"] = ["refund_create"]
    route.save()


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        (_disable_client, 401, "unauthorized"),
        (_expire_session, 401, "unauthorized"),
        (_narrow_client, 403, "route_not_allowed"),
        (_narrow_session, 403, "route_not_allowed"),
        (_disable_route, 404, "route_unavailable"),
        # The tool's provider or write listing is gone: the revision the agent holds is stale.
        (_disable_provider, 409, "capability_changed"),
        (_drop_write, 409, "capability_changed"),
    ],
)
def test_every_read_revalidates_what_changed_since_discovery(api_client, session, change, status, code):
    revision = revision_of(api_client, session._access, "orders")
    assert detail(api_client, session._access, "order_cancel", revision=revision).status_code == 200
    audit_before = AuditEvent.objects.count()
    change(session)
    response = detail(api_client, session._access, "order_cancel", revision=revision)
    assert response.status_code == status
    assert response.json()["error"] == code
    assert response["Cache-Control"] == "no-store"
    assert AuditEvent.objects.count() == audit_before


def test_a_de_authorized_tool_is_404_under_the_current_revision(api_client, session):
    _drop_write(session)
    response = detail(api_client, session._access, "order_cancel")
    assert response.status_code == 404
    assert response.json()["error"] == "tool_not_found"
    _disable_provider(session)
    response = detail(api_client, session._access, "order_get")
    assert response.status_code == 404
    assert response.json()["error"] == "tool_not_found"


# --- side effects ---------------------------------------------------------------------------------------


def test_detail_reads_only(api_client, session):
    revision = revision_of(api_client, session._access, "orders")  # touches last_seen_at once
    audit_before = AuditEvent.objects.count()
    with CaptureQueriesContext(connection) as queries:
        for name in ("order_get", "policy_explain", "no_such_tool"):
            detail(api_client, session._access, name, revision=revision)
        detail(api_client, session._access, "order_get", revision="0" * 64)
    statements = [query["sql"].lstrip().split(None, 1)[0].upper() for query in queries.captured_queries]
    assert statements and set(statements) == {"SELECT"}
    assert AuditEvent.objects.count() == audit_before


class _CountingHandler(BaseHTTPRequestHandler):
    hits: list[str] = []

    def _any(self):
        type(self).hits.append(self.path)
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    def log_message(self, *args):
        pass


@pytest.fixture
def business_server():
    _CountingHandler.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingHandler)
    running = ServerThread(server)
    yield server
    running.stop()


def test_tool_reads_never_call_the_business_system(api_client, business_server):
    host, port = business_server.server_address
    ToolProviderFactory(name="live", base_url=f"http://{host}:{port}", spec=load_spec("catalog_shop"))
    RouteFactory(
        route_key="live",
        tools={"sources": [{"provider": "live", "allow": ["*"]}], "agent_direct": {"enabled": True}},
    )
    session = AgentSessionFactory(allowed_routes=["live"])
    token = session._access
    revision = revision_of(api_client, token, "live")
    assert detail(api_client, token, "order_get", route="live", revision=revision).status_code == 200
    search = api_client.post(
        "/agent-api/v1/workspaces/live/capabilities/search",
        {"query": "order"},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert search.status_code == 200
    assert get(api_client, "/agent-api/v1/workspaces/live/bootstrap", token).status_code == 200
    assert _CountingHandler.hits == []
    # The counter does see requests that reach the business system.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://{host}:{port}/orders/SO1", timeout=5)
    refused.value.close()
    assert _CountingHandler.hits == ["/orders/SO1"]


def test_detail_query_count(api_client, session, django_assert_max_num_queries):
    revision = revision_of(api_client, session._access, "orders")
    with django_assert_max_num_queries(4):
        response = detail(api_client, session._access, "order_get", revision=revision)
    assert response.status_code == 200
