"""Contract tests: ``POST /agent-api/v1/workspaces/:route/turns`` (``bailing.agent-turn-context.v1``).

Input rules, the route gate, the response shape, idempotency (replay / 409), the 413s and the
task-control refusal. Memory contents are covered in ``test_memory_api.py``; races in
``test_turns_race.py``.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from agent_runtime.models import AgentConversation, AgentRun, Route, VisibleMessage
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory, RouteFactory, ToolProviderFactory
from tests.support.runtime import TURN_SCHEMA, post_json, post_turn, turn_body, turns_url

pytestmark = pytest.mark.django_db

SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
PROJECTION_KEYS = [
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


def load_spec(name: str) -> dict:
    return json.loads((SPECS / f"{name}.json").read_text(encoding="utf-8"))


def shop_tools(**direct) -> dict:
    return {"sources": [{"provider": "shop", "allow": ["*"]}], "agent_direct": {"enabled": True, **direct}}


@pytest.fixture
def route():
    return RouteFactory(
        route_key="orders",
        name="Orders",
        target_config={"system_prompt": "You help with orders."},
        agent_client={"enabled": True, "instructions": "Answer briefly."},
    )


@pytest.fixture
def session(route):
    return AgentSessionFactory(allowed_routes=["orders"])


@pytest.fixture
def shop_session():
    ToolProviderFactory(name="shop", spec=load_spec("catalog_shop"))
    RouteFactory(route_key="shop", permission="readwrite", tools=shop_tools(write_tools=["order_cancel"]))
    return AgentSessionFactory(allowed_routes=["shop"])


def error_of(response) -> str:
    return response.json()["error"]


def bootstrap(api_client, session, route="orders") -> dict:
    response = api_client.get(
        f"/agent-api/v1/workspaces/{route}/bootstrap", HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    assert response.status_code == 200
    return response.json()


# --- response shape ---------------------------------------------------------------------------------------


def test_turn_returns_the_frozen_context(api_client, session):
    body = turn_body(
        page_context={"url": "/staff", "title": "Staff"}, renderers=["markdown", "bailing-form.v1"]
    )
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response["Content-Type"] == "application/json"
    data = response.json()
    assert list(data) == [
        "schema_version",
        "run_id",
        "profile_revision",
        "capability_revision",
        "context",
        "active_tools",
    ]
    assert data["schema_version"] == TURN_SCHEMA
    assert uuid.UUID(data["run_id"]).version == 4
    profile = bootstrap(api_client, session)
    assert data["profile_revision"] == profile["profile"]["revision"]
    assert data["capability_revision"] == profile["capabilities"]["revision"]
    context = data["context"]
    assert list(context) == [
        "instructions",
        "page_context",
        "renderers",
        "memory",
        "memory_refs",
        "knowledge",
        "knowledge_refs",
        "governance",
    ]
    assert context["instructions"] == "You help with orders.\n\nAnswer briefly."
    assert context["page_context"] == {"url": "/staff", "title": "Staff"}
    assert context["renderers"] == ["markdown", "bailing-form.v1"]
    assert context["memory"] == {"summary": None, "recent": []}
    conversation = AgentConversation.objects.get()
    assert context["memory_refs"] == [
        {"thread_id": str(conversation.id), "summary_upto_id": 0, "prior_messages": 0}
    ]
    assert context["knowledge"] == [] and context["knowledge_refs"] == []
    assert context["governance"] == profile["profile"]["governance"]
    assert data["active_tools"] == []


def test_turn_defaults_page_context_and_renderers_to_empty(api_client, session):
    context = post_turn(api_client, session, "orders", turn_body()).json()["context"]
    assert context["page_context"] == {}
    assert context["renderers"] == []


def test_turn_stores_a_context_ready_run_and_the_user_message(api_client, session):
    response = post_turn(api_client, session, "orders", turn_body(user_input="Hello\n\tthere"))
    run = AgentRun.objects.get()
    assert str(run.run_id) == response.json()["run_id"]
    assert run.status == AgentRun.Status.CONTEXT_READY
    assert run.context_body.encode() == response.content
    assert (run.client_turn_id, run.user_message_id, run.user_input) == (
        "turn-1",
        "message-1",
        "Hello\n\tthere",
    )
    assert run.profile_revision == response.json()["profile_revision"]
    assert run.capability_revision == response.json()["capability_revision"]
    message = VisibleMessage.objects.get()
    assert (message.direction, message.external_message_id, message.content) == (
        "in",
        "message-1",
        run.user_input,
    )
    assert message.run_id == run.run_id


def test_turn_records_an_audit_event_without_user_text(api_client, session):
    secret_text = "my card number is 4111"
    response = post_turn(api_client, session, "orders", turn_body(user_input=secret_text))
    event = AuditEvent.objects.get(action="agent_runtime.turn.context_ready")
    assert event.route_key == "orders"
    assert event.session_id == session.id
    assert event.client_app_id == session.client.app_id
    assert event.target_id == response.json()["run_id"]
    assert event.data["prior_messages"] == 0 and event.data["active_tools"] == 0
    assert secret_text not in json.dumps(event.data)


# --- route gate -------------------------------------------------------------------------------------------


def test_turn_needs_a_bearer(api_client, session):
    response = api_client.post(turns_url("orders"), data=turn_body(), format="json")
    assert response.status_code == 401
    assert error_of(response) == "unauthorized"
    assert response["Cache-Control"] == "no-store"
    assert AgentRun.objects.count() == 0


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"agent_client": {"enabled": False}}, 403, "agent_client_disabled"),
        ({"enabled": False}, 404, "route_unavailable"),
        ({"audience": {"enabled": True, "principals": ["bob"]}}, 403, "audience_not_allowed"),
    ],
)
def test_turn_runs_the_route_gate(api_client, session, change, status, code):
    Route.objects.filter(route_key="orders").update(**change)
    response = post_turn(api_client, session, "orders", turn_body())
    assert response.status_code == status
    assert error_of(response) == code
    assert response["Cache-Control"] == "no-store"
    assert AgentRun.objects.count() == 0


def test_turn_outside_the_session_allowlist_is_403(api_client, session):
    RouteFactory(route_key="billing")
    response = post_turn(api_client, session, "billing", turn_body())
    assert response.status_code == 403
    assert error_of(response) == "route_not_allowed"


def test_turn_with_an_invalid_route_key_is_400(api_client, session):
    response = post_turn(api_client, session, "Orders!", turn_body())
    assert response.status_code == 400
    assert error_of(response) == "invalid_route"


# --- input rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["client_conversation_id", "client_turn_id", "user_message_id", "user_input"]
)
def test_turn_required_fields(api_client, session, field):
    body = turn_body()
    del body[field]
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == field


@pytest.mark.parametrize("field", ["client_conversation_id", "client_turn_id", "user_message_id"])
@pytest.mark.parametrize(
    "value",
    ["", " turn-1", "turn-1 ", "-turn", ".turn", "turn/1", "turn 1", "tür", "a" * 129, 5, None, ["turn-1"]],
)
def test_turn_identifiers_follow_the_pattern_and_are_never_trimmed(api_client, session, field, value):
    body = turn_body()
    body[field] = value
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": field,
    }
    assert AgentRun.objects.count() == 0


def test_turn_identifiers_allow_the_full_alphabet_and_128_characters(api_client, session):
    body = turn_body(
        client_conversation_id="C0nv_.:-" + "x" * 120,
        client_turn_id="T" * 128,
        user_message_id="m:1.2_3-4",
    )
    assert post_turn(api_client, session, "orders", body).status_code == 200


@pytest.mark.parametrize(
    "value",
    ["", "   ", "\n\t\r ", "bell\x07", "nul\x00", "esc\x1b[0m", "del\x7f", "c1\x85", 12, None, ["hi"]],
)
def test_user_input_must_be_non_empty_text_without_control_characters(api_client, session, value):
    response = post_turn(api_client, session, "orders", turn_body(user_input=value) | {"user_input": value})
    assert response.status_code == 400
    assert response.json()["field"] == "user_input"


def test_user_input_keeps_tabs_and_newlines(api_client, session):
    response = post_turn(api_client, session, "orders", turn_body(user_input="  line 1\r\n\tline 2  "))
    assert response.status_code == 200
    assert AgentRun.objects.get().user_input == "  line 1\r\n\tline 2  "


@pytest.mark.parametrize(
    ("value", "status"),
    [
        ("a" * 64_000, 200),
        ("a" * 64_001, 400),
        ("😀" * 32_000, 200),  # 64,000 UTF-16 units
        ("😀" * 32_000 + "a", 400),  # 32,001 code points but 64,001 UTF-16 units
    ],
)
def test_user_input_is_limited_to_64000_utf16_units(api_client, session, value, status):
    response = post_turn(api_client, session, "orders", turn_body(user_input=value))
    assert response.status_code == status
    if status == 400:
        assert response.json()["field"] == "user_input"


def test_lone_surrogates_are_rejected(api_client, session):
    raw = json.dumps(turn_body()).replace("Find", "\\ud800Find")
    response = post_json(api_client, turns_url("orders"), session._access, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    "renderers",
    [
        [f"r{i}" for i in range(21)],
        ["markdown", "markdown"],
        ["mark down"],
        ["-markdown"],
        ["m" * 65],
        [""],
        [5],
        "markdown",
        None,
    ],
)
def test_renderers_are_at_most_20_unique_valid_names(api_client, session, renderers):
    response = post_turn(api_client, session, "orders", turn_body() | {"renderers": renderers})
    assert response.status_code == 400
    assert response.json()["field"].startswith("renderers")


def test_twenty_renderers_of_64_characters_are_accepted(api_client, session):
    renderers = [f"{i:02d}" + "r" * 62 for i in range(20)]
    response = post_turn(api_client, session, "orders", turn_body(renderers=renderers))
    assert response.status_code == 200
    assert response.json()["context"]["renderers"] == renderers


@pytest.mark.parametrize("page_context", [[], "page", 5, None, True])
def test_page_context_must_be_an_object(api_client, session, page_context):
    response = post_turn(api_client, session, "orders", turn_body() | {"page_context": page_context})
    assert response.status_code == 400
    assert response.json()["field"] == "page_context"


def _page_context_of(size: int) -> dict:
    # {"k":"…"} is 8 bytes of framing; "é" is two UTF-8 bytes, so the budget counts UTF-8 bytes.
    filler = size - 8
    return {"k": "é" * (filler // 2) + "a" * (filler % 2)}


def test_page_context_of_16_kib_is_accepted(api_client, session):
    page_context = _page_context_of(16 * 1024)
    assert len(json.dumps(page_context, ensure_ascii=False, separators=(",", ":")).encode()) == 16384
    response = post_turn(api_client, session, "orders", turn_body(page_context=page_context))
    assert response.status_code == 200
    assert response.json()["context"]["page_context"] == page_context


def test_page_context_over_16_kib_is_413(api_client, session):
    response = post_turn(
        api_client, session, "orders", turn_body(page_context=_page_context_of(16 * 1024 + 1))
    )
    assert response.status_code == 413
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {
        "error": "page_context_too_large",
        "message": response.json()["message"],
        "max_bytes": 16384,
        "actual_bytes": 16385,
    }
    assert AgentRun.objects.count() == 0


def test_body_over_512_kib_is_413_before_parsing(api_client, session):
    body = turn_body(user_input="x") | {"padding": " " * (600 * 1024)}
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 413
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert data["error"] == "arguments_too_large"
    assert data["limit_scope"] == "request_body"
    assert data["max_bytes"] == 524288
    assert data["observed_bytes"] > 524288
    assert (data["origin"], data["dispatch"]) == ("core", "not_dispatched")
    assert "padding" not in response.content.decode()


def test_body_just_under_512_kib_is_parsed(api_client, session):
    # Proves the turn budget is 512 KiB (not smaller): the body is read and then judged field by field.
    body = turn_body() | {"unknown": "x" * (510 * 1024)}
    response = post_turn(api_client, session, "orders", body)
    assert response.status_code == 400
    assert response.json()["field"] == "unknown"


def _padded_turn(size: int) -> bytes:
    """A valid turn body of exactly ``size`` bytes (insignificant whitespace pads it)."""
    raw = json.dumps(turn_body()).encode()
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_body_of_exactly_512_kib_is_accepted_and_one_byte_more_is_413(api_client, session):
    exact = _padded_turn(512 * 1024)
    assert len(exact) == 524288
    assert post_json(api_client, turns_url("orders"), session._access, exact).status_code == 200
    over = _padded_turn(512 * 1024 + 1)
    response = post_json(api_client, turns_url("orders"), session._access, over)
    assert response.status_code == 413
    assert response.json()["observed_bytes"] == 524289
    assert AgentRun.objects.count() == 1


def test_a_declared_length_over_the_budget_is_refused_before_the_body_is_read(api_client, session):
    # observed_bytes is the declared length: the body itself was never read (tests/bailing/
    # test_body_streaming.py counts the bytes taken from the stream).
    raw = _padded_turn(4 * 1024 * 1024)
    response = post_json(api_client, turns_url("orders"), session._access, raw)
    assert response.status_code == 413
    assert response.json()["error"] == "arguments_too_large"
    assert response.json()["observed_bytes"] == len(raw)
    assert AgentRun.objects.count() == 0


@pytest.mark.parametrize("field", ["reasoning", "hidden_reasoning", "session_id", "route", "Client_turn_id"])
def test_unknown_fields_are_rejected(api_client, session, field):
    response = post_turn(api_client, session, "orders", turn_body() | {field: "x"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": field,
    }


@pytest.mark.parametrize("raw", ["[]", '"turn"', "{", '{"client_turn_id":"a","client_turn_id":"b"}', "NaN"])
def test_body_must_be_one_strict_json_object(api_client, session, raw):
    response = post_json(api_client, turns_url("orders"), session._access, raw)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


# --- task control -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "binding",
    [
        {
            "schema_version": "bailing.agent-task-binding.v1",
            "task_id": str(uuid.uuid4()),
            "scope_hash": "a" * 64,
        },
        None,
        {},
    ],
)
def test_task_binding_is_refused_not_ignored(api_client, session, binding):
    response = post_turn(api_client, session, "orders", turn_body() | {"task_binding": binding})
    assert response.status_code == 400
    assert response.json()["error"] == "task_control_unsupported"
    assert response["Cache-Control"] == "no-store"
    assert AgentRun.objects.count() == 0


def test_task_binding_is_refused_even_with_other_invalid_fields(api_client, session):
    response = post_turn(api_client, session, "orders", {"task_binding": {}, "user_input": ""})
    assert response.status_code == 400
    assert response.json()["error"] == "task_control_unsupported"


def test_task_control_capabilities_say_unsupported(api_client, session):
    response = api_client.get(
        "/agent-api/v1/task-control/capabilities", HTTP_AUTHORIZATION=f"Bearer {session._access}"
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert data["schema_version"] == "bailing.agent-task-control-capabilities.v1"
    assert data["supported"] is False
    assert data["inspect_invocation"] is False


def test_task_control_capabilities_need_a_bearer(api_client):
    response = api_client.get("/agent-api/v1/task-control/capabilities")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


# --- knowledge delivery -----------------------------------------------------------------------------------


def test_knowledge_delivery_on_demand_is_echoed_honestly(api_client, session):
    response = post_turn(api_client, session, "orders", turn_body(knowledge_delivery="on_demand"))
    assert response.status_code == 200
    context = response.json()["context"]
    assert list(context)[-1] == "knowledge_delivery"
    delivery = context["knowledge_delivery"]
    assert list(delivery) == [
        "schema_version",
        "mode",
        "protocol",
        "knowledge_scope_revision",
        "status",
        "hints",
    ]
    assert delivery["schema_version"] == "bailing.agent-knowledge-delivery.v1"
    assert delivery["mode"] == "on_demand"
    assert delivery["protocol"] == "bailing.agent-knowledge.v1"
    assert re.fullmatch(r"[0-9a-f]{64}", delivery["knowledge_scope_revision"])
    assert delivery["status"] == "disabled"
    assert delivery["hints"] == []
    assert context["knowledge"] == [] and context["knowledge_refs"] == []
    assert AgentRun.objects.get().knowledge_delivery == "on_demand"


def test_knowledge_delivery_with_a_missing_knowledge_base_reports_retrieval_unavailable(api_client, session):
    Route.objects.filter(route_key="orders").update(knowledge={"kb_ids": ["handbook"]})
    response = post_turn(api_client, session, "orders", turn_body(knowledge_delivery="on_demand"))
    delivery = response.json()["context"]["knowledge_delivery"]
    # "handbook" does not exist: every source failed, which is never an "ok" with empty hints.
    assert delivery["status"] == "unavailable"
    assert delivery["hints"] == []


@pytest.mark.parametrize("value", ["inline", "ON_DEMAND", "on_demand ", "", None, True])
def test_knowledge_delivery_accepts_only_on_demand(api_client, session, value):
    response = post_turn(api_client, session, "orders", turn_body() | {"knowledge_delivery": value})
    assert response.status_code == 400
    assert response.json()["field"] == "knowledge_delivery"


def test_dropping_knowledge_delivery_on_replay_is_409(api_client, session):
    first = post_turn(api_client, session, "orders", turn_body(knowledge_delivery="on_demand"))
    assert first.status_code == 200
    response = post_turn(api_client, session, "orders", turn_body())
    assert response.status_code == 409
    assert error_of(response) == "turn_conflict"
    replay = post_turn(api_client, session, "orders", turn_body(knowledge_delivery="on_demand"))
    assert replay.content == first.content


def test_legacy_turn_has_no_knowledge_delivery_block(api_client, session):
    context = post_turn(api_client, session, "orders", turn_body()).json()["context"]
    assert "knowledge_delivery" not in context


# --- idempotency ------------------------------------------------------------------------------------------


def test_identical_replay_returns_the_same_bytes_and_writes_nothing(api_client, session):
    first = post_turn(api_client, session, "orders", turn_body(page_context={"a": 1, "b": [1, 2]}))
    # Same JSON value with keys in another order: the request hash is canonical.
    reordered = dict(reversed(list(turn_body(page_context={"b": [1, 2], "a": 1}).items())))
    second = post_turn(api_client, session, "orders", reordered)
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second["Cache-Control"] == "no-store"
    assert AgentRun.objects.count() == 1
    assert VisibleMessage.objects.count() == 1
    assert AuditEvent.objects.filter(action="agent_runtime.turn.context_ready").count() == 1


def test_replay_is_byte_identical_after_the_route_changed(api_client, shop_session):
    body = turn_body(user_input="show the inventory", knowledge_delivery="on_demand")
    first = post_turn(api_client, shop_session, "shop", body)
    assert first.status_code == 200
    assert first.json()["active_tools"]
    Route.objects.filter(route_key="shop").update(
        target_config={"system_prompt": "Completely new rules."},
        agent_client={"enabled": True, "instructions": "New", "active_tool_limit": 1},
        memory={"recent_messages": 1},
        knowledge={"kb_ids": ["handbook"]},
        tools=shop_tools(enabled=True),
        permission="readonly",
    )
    post_turn(api_client, shop_session, "shop", turn_body(2))  # memory moved on too
    replay = post_turn(api_client, shop_session, "shop", body)
    assert replay.status_code == 200
    assert replay.content == first.content
    fresh = post_turn(api_client, shop_session, "shop", turn_body(3, user_input="show the inventory"))
    assert fresh.json()["context"]["instructions"] == "Completely new rules.\n\nNew"
    assert len(fresh.json()["active_tools"]) == 1


def test_replay_still_runs_the_route_gate(api_client, session):
    assert post_turn(api_client, session, "orders", turn_body()).status_code == 200
    Route.objects.filter(route_key="orders").update(agent_client={"enabled": False})
    response = post_turn(api_client, session, "orders", turn_body())
    assert response.status_code == 403
    assert error_of(response) == "agent_client_disabled"


@pytest.mark.parametrize(
    "change",
    [
        {"user_input": "Something else"},
        {"page_context": {"url": "/other"}},
        {"renderers": ["markdown"]},
        {"knowledge_delivery": "on_demand"},
        {"user_message_id": "message-other"},
    ],
)
def test_changed_payload_under_the_same_turn_key_is_409(api_client, session, change):
    first = post_turn(api_client, session, "orders", turn_body())
    response = post_turn(api_client, session, "orders", turn_body() | change)
    assert response.status_code == 409
    assert error_of(response) == "turn_conflict"
    assert response["Cache-Control"] == "no-store"
    assert AgentRun.objects.count() == 1
    # The original stays replayable.
    assert post_turn(api_client, session, "orders", turn_body()).content == first.content


@pytest.mark.parametrize(
    "other",
    [
        {"client_turn_id": "turn-other"},
        {"client_turn_id": "turn-other", "user_input": "Find the employee named Ada (1)"},
        {"client_conversation_id": "conversation-other"},
    ],
)
def test_same_user_message_id_under_another_turn_is_409(api_client, session, other):
    assert post_turn(api_client, session, "orders", turn_body()).status_code == 200
    response = post_turn(api_client, session, "orders", turn_body() | other)
    assert response.status_code == 409
    assert error_of(response) == "turn_conflict"
    assert AgentRun.objects.count() == 1


def test_the_same_ids_in_another_session_or_workspace_are_independent(api_client, session):
    RouteFactory(route_key="billing")
    session.allowed_routes = ["orders", "billing"]
    session.save(update_fields=["allowed_routes"])
    other = AgentSessionFactory(client=session.client, allowed_routes=["orders"])
    run_ids = {
        post_turn(api_client, session, "orders", turn_body()).json()["run_id"],
        post_turn(api_client, session, "billing", turn_body()).json()["run_id"],
        post_turn(api_client, other, "orders", turn_body()).json()["run_id"],
    }
    assert len(run_ids) == 3
    assert AgentConversation.objects.count() == 3


def test_turns_of_one_conversation_share_its_thread(api_client, session):
    first = post_turn(api_client, session, "orders", turn_body(1)).json()
    second = post_turn(api_client, session, "orders", turn_body(2)).json()
    assert first["run_id"] != second["run_id"]
    assert first["context"]["memory_refs"][0]["thread_id"] == second["context"]["memory_refs"][0]["thread_id"]
    third = post_turn(
        api_client, session, "orders", turn_body(3, client_conversation_id="conversation-2")
    ).json()
    assert third["context"]["memory_refs"][0]["thread_id"] != first["context"]["memory_refs"][0]["thread_id"]


# --- active tools -----------------------------------------------------------------------------------------


def test_active_tools_are_public_projections_ranked_for_the_input(api_client, shop_session):
    response = post_turn(api_client, shop_session, "shop", turn_body(user_input="inventory stock levels"))
    assert response.status_code == 200
    tools = response.json()["active_tools"]
    assert tools[0]["name"] == "inventory_list"
    assert all(list(tool) == PROJECTION_KEYS for tool in tools)
    names = [tool["name"] for tool in tools]
    assert len(names) == len(set(names)) <= 8
    # Subject-required tools and unlisted writes stay out; the authorized catalog has 6 tools here.
    assert "refund_create" not in names and "order_note_add" not in names
    assert (
        response.json()["capability_revision"]
        == bootstrap(api_client, shop_session, "shop")["capabilities"]["revision"]
    )


def test_active_tools_match_capability_search_with_page_hints(api_client, shop_session):
    page_context = {
        "title": "Staff",
        "page_name": "team",
        "page_key": "staff-page",
        "url": "/staff",
        "x": "order",
    }
    response = post_turn(
        api_client, shop_session, "shop", turn_body(user_input="list", page_context=page_context)
    )
    tools = [tool["name"] for tool in response.json()["active_tools"]]
    assert tools[0] == "staff_list"
    search = post_json(
        api_client,
        "/agent-api/v1/workspaces/shop/capabilities/search",
        shop_session._access,
        {"query": "Staff team staff-page /staff\nlist"},
    )
    assert [tool["name"] for tool in search.json()["tools"]] == tools


def test_active_tools_are_limited_by_active_tool_limit(api_client, shop_session):
    Route.objects.filter(route_key="shop").update(agent_client={"enabled": True, "active_tool_limit": 2})
    tools = post_turn(api_client, shop_session, "shop", turn_body(user_input="order")).json()["active_tools"]
    assert len(tools) == 2
    search = post_json(
        api_client,
        "/agent-api/v1/workspaces/shop/capabilities/search",
        shop_session._access,
        {"query": "order", "limit": 12},
    )
    assert search.json()["discovery"]["authorized_total"] == 6
    assert [tool["name"] for tool in tools] == [tool["name"] for tool in search.json()["tools"][:2]]


def test_knowledge_only_workspace_prepares_a_turn_without_tools(api_client, shop_session):
    Route.objects.filter(route_key="shop").update(tools=shop_tools(enabled=False))
    response = post_turn(api_client, shop_session, "shop", turn_body())
    assert response.status_code == 200
    assert response.json()["active_tools"] == []


# --- query budget -----------------------------------------------------------------------------------------


def test_turn_creation_and_replay_query_counts(api_client, shop_session, django_assert_max_num_queries):
    post_turn(api_client, shop_session, "shop", turn_body(0))  # touches last_seen_at once
    with django_assert_max_num_queries(16):
        created = post_turn(api_client, shop_session, "shop", turn_body(1))
    assert created.status_code == 200
    with django_assert_max_num_queries(3):
        replay = post_turn(api_client, shop_session, "shop", turn_body(1))
    assert replay.content == created.content
