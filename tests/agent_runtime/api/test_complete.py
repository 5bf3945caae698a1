"""Contract tests: ``POST /agent-api/v1/runs/:run_id/complete`` (``bailing.agent-run-completion.v1``)."""

from __future__ import annotations

import json
import re
import threading
import uuid

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agent_runtime.models import AgentRun, Route, VisibleMessage
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory, RouteFactory
from tests.support.runtime import (
    COMPLETION_SCHEMA,
    complete_url,
    completion_body,
    post_complete,
    post_json,
    post_turn,
    turn_body,
)

ISO_MS_Z = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


@pytest.fixture
def session():
    RouteFactory(route_key="orders")
    return AgentSessionFactory(allowed_routes=["orders", "billing"])


def start_run(api_client, session, n=1, route="orders") -> str:
    response = post_turn(api_client, session, route, turn_body(n))
    assert response.status_code == 200
    return response.json()["run_id"]


@pytest.fixture
def run_id(api_client, session):
    return start_run(api_client, session)


# --- happy path -------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_complete_returns_the_completion_record(api_client, session, run_id):
    body = completion_body(
        model="optional-model-name",
        runtime="optional-runtime-name",
        usage={
            "input_tokens": 120,
            "cached_input_tokens": 80,
            "output_tokens": 30,
            "total_tokens": 150,
            "tool_calls": 1,
        },
    )
    response = post_complete(api_client, session, run_id, body)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert list(data) == [
        "schema_version",
        "run_id",
        "assistant_message_id",
        "status",
        "idempotent_replay",
        "completed_at",
    ]
    assert data["schema_version"] == COMPLETION_SCHEMA
    assert data["run_id"] == run_id
    assert data["assistant_message_id"] == "assistant-1"
    assert data["status"] == "completed"
    assert data["idempotent_replay"] is False
    assert ISO_MS_Z.fullmatch(data["completed_at"])
    run = AgentRun.objects.get(pk=run_id)
    assert run.status == "completed"
    assert (run.final_content, run.model, run.runtime) == (
        "Done (1).",
        "optional-model-name",
        "optional-runtime-name",
    )
    assert run.usage == body["usage"]
    assert len(run.completion_hash) == 64
    message = VisibleMessage.objects.get(direction="out")
    assert (message.run_id, message.external_message_id, message.content) == (
        run.run_id,
        "assistant-1",
        "Done (1).",
    )


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_complete_records_failed_and_cancelled_runs(api_client, session, run_id, status):
    response = post_complete(api_client, session, run_id, completion_body(status=status, content="Stopped."))
    assert response.status_code == 200
    assert response.json()["status"] == status
    assert AgentRun.objects.get(pk=run_id).status == status


@pytest.mark.django_db
def test_complete_audit_event_has_numbers_not_content(api_client, session, run_id):
    body = completion_body(content="The secret answer is 42", usage={"total_tokens": 7, "cost_usd": 0.25})
    post_complete(api_client, session, run_id, body)
    event = AuditEvent.objects.get(action="agent_runtime.run.completed")
    assert event.target_id == run_id
    assert event.route_key == "orders"
    assert event.session_id == session.id
    assert event.data["status"] == "completed"
    assert event.data["usage"] == {"cost_usd": 0.25, "total_tokens": 7}
    assert "secret answer" not in json.dumps(event.data)


@pytest.mark.django_db
def test_complete_needs_a_bearer(api_client, run_id):
    response = api_client.post(complete_url(run_id), data=completion_body(), format="json")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_complete_does_not_rerun_the_route_gate(api_client, session, run_id):
    # Completing records what the agent already showed; a later route change cannot strand the run.
    Route.objects.filter(route_key="orders").update(agent_client={"enabled": False})
    assert post_complete(api_client, session, run_id, completion_body()).status_code == 200


# --- idempotency ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_identical_replay_returns_the_original_result(api_client, session, run_id):
    body = completion_body(model="m", usage={"total_tokens": 3})
    first = post_complete(api_client, session, run_id, body).json()
    # Same values with keys in another order: the fingerprint is canonical.
    replay = post_complete(api_client, session, run_id, dict(reversed(list(body.items()))))
    assert replay.status_code == 200
    assert replay.json() == first | {"idempotent_replay": True}
    assert VisibleMessage.objects.filter(direction="out").count() == 1
    assert AuditEvent.objects.filter(action="agent_runtime.run.completed").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change",
    [
        {"status": "failed"},
        {"content": "Done (1)!"},
        {"model": "other-model"},
        {"model": ""},
        {"runtime": "r"},
        {"usage": {"total_tokens": 4}},
        {"usage": {}},
        {"assistant_message_id": "assistant-other"},
    ],
)
def test_any_change_after_completion_is_409(api_client, session, run_id, change):
    assert (
        post_complete(
            api_client, session, run_id, completion_body(model="m", usage={"total_tokens": 3})
        ).status_code
        == 200
    )
    changed = completion_body(model="m", usage={"total_tokens": 3}) | change
    response = post_complete(api_client, session, run_id, changed)
    assert response.status_code == 409
    assert response.json()["error"] == "run_completion_conflict"
    assert response["Cache-Control"] == "no-store"
    assert AgentRun.objects.get(pk=run_id).final_content == "Done (1)."


@pytest.mark.django_db
def test_dropping_an_optional_field_is_a_change(api_client, session, run_id):
    post_complete(api_client, session, run_id, completion_body(runtime="r"))
    response = post_complete(api_client, session, run_id, completion_body())
    assert response.status_code == 409
    assert response.json()["error"] == "run_completion_conflict"


@pytest.mark.django_db
def test_assistant_message_id_of_another_run_is_409(api_client, session, run_id):
    other = start_run(api_client, session, 2)
    assert post_complete(api_client, session, run_id, completion_body("shared")).status_code == 200
    response = post_complete(api_client, session, other, completion_body("shared"))
    assert response.status_code == 409
    assert response.json()["error"] == "assistant_message_conflict"
    assert AgentRun.objects.get(pk=other).status == "context_ready"
    assert post_complete(api_client, session, other, completion_body("own")).status_code == 200


@pytest.mark.django_db
def test_assistant_message_id_is_scoped_to_session_and_workspace(api_client, session, run_id):
    RouteFactory(route_key="billing")
    elsewhere = start_run(api_client, session, 1, route="billing")
    other_session = AgentSessionFactory(client=session.client, allowed_routes=["orders"])
    foreign = start_run(api_client, other_session, 1)
    for run, owner in ((run_id, session), (elsewhere, session), (foreign, other_session)):
        assert post_complete(api_client, owner, run, completion_body("shared")).status_code == 200


# --- run lookup -------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad_id",
    ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "12345678-1234-4234-c234-123456789012", "x" * 36],
)
def test_malformed_run_id_is_400(api_client, session, bad_id):
    response = post_complete(api_client, session, bad_id, completion_body())
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "message": response.json()["message"],
        "field": "run_id",
    }


@pytest.mark.django_db
def test_unknown_run_is_404(api_client, session, run_id):
    response = post_complete(api_client, session, str(uuid.uuid4()), completion_body())
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"


@pytest.mark.django_db
def test_run_of_another_session_is_404(api_client, session, run_id):
    other = AgentSessionFactory(client=session.client, allowed_routes=["orders"])
    response = post_complete(api_client, other, run_id, completion_body())
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"
    stranger = AgentSessionFactory(allowed_routes=["orders"])
    assert post_complete(api_client, stranger, run_id, completion_body()).status_code == 404
    assert AgentRun.objects.get(pk=run_id).status == "context_ready"


@pytest.mark.django_db
def test_a_run_still_preparing_is_invisible(api_client, session, run_id):
    AgentRun.objects.filter(pk=run_id).update(status="preparing")
    response = post_complete(api_client, session, run_id, completion_body())
    assert response.status_code == 404
    assert response.json()["error"] == "run_not_found"


# --- input rules ------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["assistant_message_id", "status", "content"])
def test_complete_required_fields(api_client, session, run_id, field):
    body = completion_body()
    del body[field]
    response = post_complete(api_client, session, run_id, body)
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("assistant_message_id", " assistant-1"),
        ("assistant_message_id", "a" * 129),
        ("assistant_message_id", "a/b"),
        ("assistant_message_id", 1),
        ("status", "done"),
        ("status", "Completed"),
        ("status", "completed "),
        ("status", "context_ready"),
        ("status", None),
        ("content", ""),
        ("content", " \n\t "),
        ("content", "bell\x07"),
        ("content", "a" * 64_001),
        ("content", "😀" * 32_000 + "a"),
        ("content", ["Done"]),
        ("model", "m" * 192),
        ("model", "line\nbreak"),
        ("model", 5),
        ("model", None),
        ("runtime", "r" * 192),
        ("runtime", "tab\there"),
        # 96 code points but 192 UTF-16 units: characters are counted as JavaScript counts them.
        ("model", "😀" * 96),
        ("runtime", "😀" * 95 + "ab"),
    ],
)
def test_complete_field_rules(api_client, session, run_id, field, value):
    response = post_complete(api_client, session, run_id, completion_body() | {field: value})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert response.json()["field"] == field
    assert AgentRun.objects.get(pk=run_id).status == "context_ready"


@pytest.mark.django_db
@pytest.mark.parametrize("char", ["\u202a", "\u202e", "\u2066", "\u2069"], ids=repr)
@pytest.mark.parametrize("field", ["model", "runtime"])
def test_model_and_runtime_refuse_bidi_controls(api_client, session, run_id, field, char):
    """Both are shown in the console's conversation page, where an override would reorder them."""
    response = post_complete(api_client, session, run_id, completion_body() | {field: f"gpt{char}-x"})
    assert response.status_code == 400
    assert (response.json()["error"], response.json()["field"]) == ("invalid_request", field)
    assert AgentRun.objects.get(pk=run_id).status == "context_ready"


@pytest.mark.django_db
def test_complete_limits_are_inclusive(api_client, session, run_id):
    body = completion_body(content="😀" * 32_000, model="m" * 191, runtime="")
    response = post_complete(api_client, session, run_id, body)
    assert response.status_code == 200
    run = AgentRun.objects.get(pk=run_id)
    assert run.final_content == "😀" * 32_000
    assert run.runtime == ""


@pytest.mark.django_db
def test_model_and_runtime_of_191_utf16_units_are_accepted(api_client, session, run_id):
    body = completion_body(model="😀" * 95 + "a", runtime="r" * 191)
    assert post_complete(api_client, session, run_id, body).status_code == 200
    run = AgentRun.objects.get(pk=run_id)
    assert (run.model, run.runtime) == ("😀" * 95 + "a", "r" * 191)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"reasoning_tokens": 5}, "usage.reasoning_tokens"),
        ({"input_tokens": -1}, "usage.input_tokens"),
        ({"output_tokens": 1.5}, "usage.output_tokens"),
        ({"total_tokens": 3.0}, "usage.total_tokens"),
        ({"tool_calls": True}, "usage.tool_calls"),
        ({"cached_input_tokens": "5"}, "usage.cached_input_tokens"),
        ({"total_tokens": 2**53}, "usage.total_tokens"),
        ({"cost_usd": -0.01}, "usage.cost_usd"),
        ({"cost_usd": "0.1"}, "usage.cost_usd"),
        ({"cost_usd": None}, "usage.cost_usd"),
        ([1, 2], "usage"),
        ("tokens", "usage"),
        (None, "usage"),
    ],
)
def test_usage_accepts_only_public_non_negative_numbers(api_client, session, run_id, usage, field):
    response = post_complete(api_client, session, run_id, completion_body() | {"usage": usage})
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.django_db
def test_usage_accepts_every_public_key(api_client, session, run_id):
    usage = {
        "input_tokens": 0,
        "cached_input_tokens": 2**53 - 1,
        "output_tokens": 30,
        "total_tokens": 150,
        "tool_calls": 1,
        "cost_usd": 0.0123,
    }
    response = post_complete(api_client, session, run_id, completion_body(usage=usage))
    assert response.status_code == 200
    assert AgentRun.objects.get(pk=run_id).usage == usage


@pytest.mark.django_db
@pytest.mark.parametrize(
    "field", ["reasoning", "hidden_reasoning", "thinking", "reasoning_content", "messages"]
)
def test_hidden_reasoning_and_unknown_fields_are_rejected(api_client, session, run_id, field):
    response = post_complete(api_client, session, run_id, completion_body() | {field: "I thought..."})
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert AgentRun.objects.get(pk=run_id).status == "context_ready"


@pytest.mark.django_db
def test_complete_body_over_512_kib_is_413(api_client, session, run_id):
    body = completion_body() | {"padding": "p" * (520 * 1024)}
    response = post_complete(api_client, session, run_id, body)
    assert response.status_code == 413
    data = response.json()
    assert data["error"] == "arguments_too_large"
    assert data["limit_scope"] == "request_body"
    assert data["max_bytes"] == 524288
    assert data["observed_bytes"] > 524288
    assert response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_complete_body_must_be_a_json_object(api_client, session, run_id):
    response = post_json(api_client, complete_url(run_id), session._access, "[]")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


# --- query budget -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_complete_and_replay_query_counts(api_client, session, run_id, django_assert_max_num_queries):
    with django_assert_max_num_queries(13):
        assert post_complete(api_client, session, run_id, completion_body()).status_code == 200
    with django_assert_max_num_queries(2):
        assert (
            post_complete(api_client, session, run_id, completion_body()).json()["idempotent_replay"] is True
        )


# --- races ------------------------------------------------------------------------------------------------


def complete_parallel(session, jobs):
    """POST every (run_id, body) at once, each on its own thread and connection."""
    results: list = [None] * len(jobs)
    barrier = threading.Barrier(len(jobs))

    def worker(index, run, body):
        try:
            client = APIClient()
            barrier.wait()
            response = post_complete(client, session, run, body)
            results[index] = (response.status_code, response.json())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, *job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_parallel_identical_completions_write_once(session):
    run_id = start_run(APIClient(), session)
    results = complete_parallel(session, [(run_id, completion_body())] * 20)
    assert [status for status, _ in results] == [200] * 20
    assert sorted(data["idempotent_replay"] for _, data in results) == [False] + [True] * 19
    assert len({data["completed_at"] for _, data in results}) == 1
    assert VisibleMessage.objects.filter(direction="out").count() == 1
    assert AuditEvent.objects.filter(action="agent_runtime.run.completed").count() == 1


@pytest.mark.django_db(transaction=True)
def test_parallel_different_completions_give_one_200_and_one_409(session):
    run_id = start_run(APIClient(), session)
    results = complete_parallel(
        session, [(run_id, completion_body(content="A")), (run_id, completion_body(content="B"))]
    )
    assert sorted(status for status, _ in results) == [200, 409]
    assert next(data for status, data in results if status == 409)["error"] == "run_completion_conflict"
    assert VisibleMessage.objects.filter(direction="out").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_runs_racing_for_one_assistant_message_id(session):
    client = APIClient()
    first, second = start_run(client, session, 1), start_run(client, session, 2)
    results = complete_parallel(
        session, [(first, completion_body("shared")), (second, completion_body("shared"))]
    )
    assert sorted(status for status, _ in results) == [200, 409]
    assert next(data for status, data in results if status == 409)["error"] == "assistant_message_conflict"
    assert AgentRun.objects.filter(assistant_message_id="assistant-shared").count() == 1
