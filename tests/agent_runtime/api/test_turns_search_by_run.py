"""Capability search bound to a run: ``{"run_id": …}`` instead of (or with) a query (spec "Turn")."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agent_runtime.models import Route
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory
from tests.support.runtime import completion_body, post_complete, post_json, post_turn, turn_body

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
TOOLS = {"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True}}


def search(api_client, session, body, route="shop"):
    return post_json(
        api_client, f"/agent-api/v1/workspaces/{route}/capabilities/search", session._access, body
    )


def names(response) -> list[str]:
    return [tool["name"] for tool in response.json()["tools"]]


@pytest.fixture
def session():
    ToolProviderFactory(
        name="shop", spec=json.loads((SPECS / "catalog_shop.json").read_text(encoding="utf-8"))
    )
    RouteFactory(route_key="shop", tools=TOOLS)
    RouteFactory(route_key="shop-two", tools=TOOLS)
    return AgentSessionFactory(allowed_routes=["shop", "shop-two"])


@pytest.fixture
def run_id(api_client, session):
    response = post_turn(api_client, session, "shop", turn_body(1, user_input="staff members"))
    assert response.status_code == 200
    return response.json()["run_id"]


def test_search_by_run_ranks_for_the_runs_user_input(api_client, session, run_id):
    by_run = search(api_client, session, {"run_id": run_id, "limit": 12})
    assert by_run.status_code == 200
    assert by_run["Cache-Control"] == "no-store"
    by_query = search(api_client, session, {"query": "staff members", "limit": 12})
    assert names(by_run) == names(by_query)
    assert names(by_run)[0] == "staff_list"
    assert by_run.json()["capability_revision"] == by_query.json()["capability_revision"]


@pytest.mark.parametrize("query", ["", "   "])
def test_search_by_run_with_a_blank_query_uses_the_run(api_client, session, run_id, query):
    response = search(api_client, session, {"run_id": run_id, "query": query})
    assert response.status_code == 200
    assert names(response)[0] == "staff_list"


def test_a_non_blank_query_wins_but_the_run_is_still_checked(api_client, session, run_id):
    response = search(api_client, session, {"run_id": run_id, "query": "inventory stock"})
    assert names(response)[0] == "inventory_list"
    unknown = search(api_client, session, {"run_id": str(uuid.uuid4()), "query": "inventory stock"})
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "run_not_found"


def test_search_by_a_completed_run_still_works(api_client, session, run_id):
    post_complete(api_client, session, run_id, completion_body())
    assert search(api_client, session, {"run_id": run_id}).status_code == 200


def test_unknown_run_is_404(api_client, session, run_id):
    response = search(api_client, session, {"run_id": str(uuid.uuid4())})
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"
    assert response["Cache-Control"] == "no-store"


def test_run_of_another_session_is_404(api_client, session, run_id):
    other = AgentSessionFactory(client=session.client, allowed_routes=["shop"])
    response = search(api_client, other, {"run_id": run_id})
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"


def test_run_of_another_workspace_is_404(api_client, session, run_id):
    response = search(api_client, session, {"run_id": run_id}, route="shop-two")
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"


def test_the_route_gate_comes_before_the_run(api_client, session, run_id):
    Route.objects.filter(route_key="shop").update(agent_client={"enabled": False})
    response = search(api_client, session, {"run_id": run_id})
    assert response.status_code == 403
    assert response.json()["error"] == "agent_client_disabled"
    Route.objects.filter(route_key="shop").update(agent_client={"enabled": True}, tools={})
    response = search(api_client, session, {"run_id": str(uuid.uuid4())})
    assert response.status_code == 403
    assert response.json()["error"] == "agent_direct_disabled"


@pytest.mark.parametrize("bad", ["not-a-uuid", "", " " + str(uuid.UUID(int=1, version=4)), 5, None, ["x"]])
def test_malformed_run_id_is_400(api_client, session, run_id, bad):
    response = search(api_client, session, {"run_id": bad})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": "run_id",
    }


@pytest.mark.parametrize("body", [{}, {"query": ""}, {"query": " \n "}, {"limit": 3}])
def test_without_query_or_run_it_is_400(api_client, session, body):
    response = search(api_client, session, body)
    assert response.status_code == 400
    assert response.json()["field"] == "query"


def test_search_by_run_query_count(api_client, session, run_id, django_assert_max_num_queries):
    search(api_client, session, {"run_id": run_id})  # touches last_seen_at once
    with django_assert_max_num_queries(4):
        response = search(api_client, session, {"run_id": run_id})
    assert response.status_code == 200
