"""Contract tests: the agent knowledge protocol ``bailing.agent-knowledge.v1`` over HTTP.

Every limit and error code of the spec (docs/protocol.md "Knowledge protocol limits" and the sections
after it): capabilities, search (input rules, run binding, the 4096-byte budget, one hint per
document, statuses) and read (budgets, reading chains, reference binding, expiry, scope and document
changes, database failure). Real PostgreSQL, real retrieval; knowledge bases are lexical-only unless
a test needs an embedding endpoint.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentConversation, AgentRun, Route
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from knowledge.models import KnowledgeBase
from knowledge.selectors.scope import knowledge_scope
from knowledge.services import agent_knowledge
from knowledge.services.documents import document_delete, document_put
from knowledge.services.indexing import document_index
from knowledge.services.providers import local_provider
from knowledge.tokens import cursor_issue, reference_issue, reference_open
from tests.factories import (
    AgentSessionFactory,
    ClientFactory,
    KnowledgeBaseFactory,
    RouteFactory,
    knowledge_document,
)
from tests.support.runtime import complete_url, post_json, post_turn, turn_body

pytestmark = pytest.mark.django_db

CAPABILITIES_KEYS = [
    "schema_version",
    "protocol",
    "supported",
    "route",
    "enabled",
    "knowledge_scope_revision",
    "delivery_modes",
    "limits",
]
SEARCH_KEYS = ["schema_version", "route", "knowledge_scope_revision", "status", "trust", "hints", "truncated"]
HINT_KEYS = ["ref", "title", "summary", "revision", "score", "expires_at"]
READ_KEYS = [
    "schema_version",
    "route",
    "knowledge_scope_revision",
    "ref",
    "revision",
    "title",
    "content",
    "trust",
    "next_cursor",
    "truncated",
    "budget_exhausted",
    "total_content_bytes",
    "read_chain_max_bytes",
]
REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
SHIPPING = "Parcels ship from the Berlin warehouse; delivery takes two working days."
SECRET_QUERY = "zanzibar-query-marker refund"


def _lexical_kb(**kwargs) -> KnowledgeBase:
    return KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0, **kwargs)


@pytest.fixture
def kb():
    return _lexical_kb(kb_id="handbook")


@pytest.fixture
def route(kb):
    return RouteFactory(route_key="docs", knowledge={"kb_ids": [kb.kb_id]})


@pytest.fixture
def session(route):
    return AgentSessionFactory(allowed_routes=["docs"])


@pytest.fixture
def refunds(kb):
    return knowledge_document(kb, "refunds", "Refund policy", REFUNDS)


def url(route: str, action: str) -> str:
    return f"/agent-api/v1/workspaces/{route}/knowledge/{action}"


def capabilities(api_client, session, route="docs", query=""):
    return api_client.get(url(route, "capabilities") + query, HTTP_AUTHORIZATION=f"Bearer {session._access}")


def search(api_client, session, body, route="docs"):
    return post_json(api_client, url(route, "search"), session._access, body)


def read(api_client, session, body, route="docs"):
    return post_json(api_client, url(route, "read"), session._access, body)


def error_of(response) -> str:
    return response.json()["error"]


def first_ref(api_client, session, query="refund", route="docs", **extra) -> str:
    response = search(api_client, session, {"query": query, **extra}, route=route)
    assert response.status_code == 200, response.content
    hints = response.json()["hints"]
    assert hints, response.json()  # the body names a degraded lane, if that is why
    return hints[0]["ref"]


def context_ready_run(api_client, session, route="docs", n=1) -> str:
    response = post_turn(api_client, session, route, turn_body(n))
    assert response.status_code == 200
    return response.json()["run_id"]


def identity_of(session) -> AgentIdentity:
    return AgentIdentity(session=session, client=session.client)


# --------------------------------------------------------------------------------------------------
# Capabilities (docs/protocol.md "Knowledge protocol limits")
# --------------------------------------------------------------------------------------------------


def test_capabilities_shape_and_limits(api_client, session, route, kb):
    response = capabilities(api_client, session)
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert list(data) == CAPABILITIES_KEYS
    assert data["schema_version"] == "bailing.agent-knowledge-capabilities.v1"
    assert data["protocol"] == "bailing.agent-knowledge.v1"
    assert data["supported"] is True
    assert data["route"] == "docs"
    assert data["enabled"] is True
    assert data["knowledge_scope_revision"] == knowledge_scope(route=route).revision
    assert data["delivery_modes"] == ["inline", "on_demand"]
    assert data["limits"] == {
        "search_max_results": 3,
        "search_max_bytes": 4096,
        "read_default_bytes": 16384,
        "read_max_bytes": 32768,
        "reference_ttl_seconds": 300,
        "read_chain_max_bytes": 131072,
    }


def test_capabilities_enabled_only_with_an_enabled_knowledge_base(api_client, session, kb):
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    assert capabilities(api_client, session).json()["enabled"] is False
    RouteFactory(route_key="plain")
    plain = AgentSessionFactory(allowed_routes=["plain"])
    data = capabilities(api_client, plain, route="plain").json()
    assert (data["supported"], data["enabled"]) == (True, False)


def test_capabilities_scope_revision_follows_the_route_and_kb_state(api_client, session, kb):
    before = capabilities(api_client, session).json()["knowledge_scope_revision"]
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": [kb.kb_id], "top_k": 7})
    edited = capabilities(api_client, session).json()["knowledge_scope_revision"]
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    disabled = capabilities(api_client, session).json()["knowledge_scope_revision"]
    assert len({before, edited, disabled}) == 3


def test_capabilities_reject_query_parameters(api_client, session):
    response = capabilities(api_client, session, query="?kb_id=handbook")
    assert response.status_code == 400
    assert (error_of(response), response.json()["field"]) == ("invalid_request", "kb_id")


@pytest.mark.parametrize("action", ["capabilities", "search", "read"])
def test_every_endpoint_needs_the_agent_bearer(api_client, session, action):
    if action == "capabilities":
        response = api_client.get(url("docs", action))
    else:
        response = api_client.post(url("docs", action), data="{}", content_type="application/json")
    assert response.status_code == 401
    assert error_of(response) == "unauthorized"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        (lambda: Route.objects.filter(route_key="docs").update(enabled=False), 404, "route_unavailable"),
        (
            lambda: Route.objects.filter(route_key="docs").update(agent_client={"enabled": False}),
            403,
            "agent_client_disabled",
        ),
    ],
    ids=["route-disabled", "agent-client-disabled"],
)
def test_every_endpoint_revalidates_the_route_gate(api_client, session, refunds, change, status, code):
    ref = first_ref(api_client, session)
    change()
    for response in (
        capabilities(api_client, session),
        search(api_client, session, {"query": "refund"}),
        read(api_client, session, {"ref": ref}),
    ):
        assert (response.status_code, error_of(response)) == (status, code)
        assert response["Cache-Control"] == "no-store"


def test_route_outside_the_session_grant_is_403(api_client, session):
    RouteFactory(route_key="other", knowledge={"kb_ids": ["handbook"]})
    response = search(api_client, session, {"query": "refund"}, route="other")
    assert (response.status_code, error_of(response)) == (403, "route_not_allowed")


# --------------------------------------------------------------------------------------------------
# Search input (docs/protocol.md "Strict input", "Knowledge protocol limits")
# --------------------------------------------------------------------------------------------------


def test_search_shape(api_client, session, refunds, route):
    before = timezone.now()
    response = search(api_client, session, {"query": "refund"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert list(data) == SEARCH_KEYS
    assert data["schema_version"] == "bailing.agent-knowledge-search.v1"
    assert data["route"] == "docs"
    assert data["knowledge_scope_revision"] == knowledge_scope(route=route).revision
    assert (data["status"], data["trust"], data["truncated"]) == ("ok", "reference_only", False)
    [hint] = data["hints"]
    assert list(hint) == HINT_KEYS
    assert hint["title"] == "Refund policy"
    assert REFUNDS.startswith(hint["summary"]) or hint["summary"] in refunds.content
    assert hint["revision"] == refunds.revision
    assert isinstance(hint["score"], float) and hint["score"] == round(hint["score"], 4)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z", hint["expires_at"])
    expires = datetime.fromisoformat(hint["expires_at"].replace("Z", "+00:00"))
    assert before + timedelta(seconds=298) <= expires <= timezone.now() + timedelta(seconds=300)
    assert reference_open(hint["ref"]).document_id == refunds.pk


@pytest.mark.parametrize("field", ["kb_id", "kb_ids", "doc_id", "document_id", "top_k", "min_score"])
def test_search_rejects_unknown_fields(api_client, session, field):
    response = search(api_client, session, {"query": "refund", field: "handbook"})
    assert response.status_code == 400
    assert (error_of(response), response.json()["field"]) == ("invalid_request", field)


@pytest.mark.parametrize("field", ["kb_id", "doc_id", "document_id", "offset"])
def test_read_rejects_unknown_fields(api_client, session, refunds, field):
    ref = first_ref(api_client, session)
    response = read(api_client, session, {"ref": ref, field: 1})
    assert response.status_code == 400
    assert (error_of(response), response.json()["field"]) == ("invalid_request", field)


@pytest.mark.parametrize(
    ("query", "ok"),
    [
        ("", False),
        ("   \n\t", False),
        ("a" * 2000, True),
        ("a" * 2001, False),
        ("退" * 2000, True),
        ("退" * 2001, False),
        ("😀" * 1000, True),  # 2000 UTF-16 units
        ("😀" * 1000 + "a", False),  # 2001 units although only 1001 code points
        (None, False),
        (5, False),
        (["refund"], False),
        ("refund\x00", False),
        ("refund\ud800", False),
    ],
    ids=[
        "empty",
        "whitespace",
        "2000",
        "2001",
        "cjk-2000",
        "cjk-2001",
        "emoji-2000-units",
        "emoji-2001-units",
        "null",
        "number",
        "array",
        "control",
        "lone-surrogate",
    ],
)
def test_search_query_limits(api_client, session, refunds, query, ok):
    body = json.dumps({"query": query}) if query != "refund\ud800" else '{"query": "refund\\ud800"}'
    response = post_json(api_client, url("docs", "search"), session._access, body)
    if ok:
        assert response.status_code == 200
        assert response.json()["status"] == "ok"
    else:
        assert response.status_code == 400
        assert (error_of(response), response.json()["field"]) == ("invalid_request", "query")


def test_search_query_is_required(api_client, session):
    response = search(api_client, session, {"limit": 1})
    assert (response.status_code, error_of(response), response.json()["field"]) == (
        400,
        "invalid_request",
        "query",
    )


@pytest.mark.parametrize("limit", [0, 4, -1, True, False, "2", 2.0, 1.5, None])
def test_search_limit_is_an_integer_from_1_to_3(api_client, session, limit):
    response = search(api_client, session, {"query": "refund", "limit": limit})
    assert response.status_code == 400
    assert (error_of(response), response.json()["field"]) == ("invalid_request", "limit")


def _many_documents(kb, count=5):
    for n in range(count):
        knowledge_document(
            kb, f"refund-{n}", f"Refund note {n}", f"Refund rule number {n}: refunds need a receipt."
        )


@pytest.mark.parametrize(("limit", "expected"), [(1, 1), (2, 2), (3, 3), (None, 3)])
def test_search_limit_bounds_the_hints(api_client, session, kb, limit, expected):
    _many_documents(kb)
    body = {"query": "refund receipt"} | ({} if limit is None else {"limit": limit})
    hints = search(api_client, session, body).json()["hints"]
    assert len(hints) == expected


def test_search_returns_at_most_three_distinct_documents(api_client, session, kb):
    # One document with many matching chunks (each paragraph > 700 characters is its own chunk).
    paragraphs = "\n\n".join(
        f"Refund clause {n}. " + "Refund receipts are checked carefully. " * 20 for n in range(8)
    )
    big = knowledge_document(kb, "big", "Refund manual", paragraphs)
    assert big.chunk_count >= 5
    knowledge_document(kb, "small", "Refund summary", "Refund receipts in short.")
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": [kb.kb_id], "top_k": 20})
    hints = search(api_client, session, {"query": "refund receipts", "limit": 3}).json()["hints"]
    documents = [reference_open(hint["ref"]).document_id for hint in hints]
    assert len(documents) == len(set(documents)) == 2
    assert big.pk in documents


def test_search_summary_is_a_bounded_excerpt_of_a_current_chunk(api_client, session, kb):
    long_chunk = "Refund " + "x" * 690
    doc = knowledge_document(kb, "long", "Refund long", long_chunk)
    [hint] = search(api_client, session, {"query": "refund"}).json()["hints"]
    assert len(hint["summary"]) == 480
    assert doc.content.startswith(hint["summary"])


@pytest.mark.parametrize("state", ["unknown", "foreign", "preparing", "completed", "other-route"])
def test_search_run_must_be_a_current_run_of_this_session_and_route(api_client, session, kb, refunds, state):
    if state == "unknown":
        run_id = str(uuid.uuid4())
    elif state == "foreign":
        other = AgentSessionFactory(allowed_routes=["docs"])
        run_id = context_ready_run(api_client, other)
    elif state == "preparing":
        conversation = AgentConversation.objects.create(
            session=session,
            client=session.client,
            route=Route.objects.get(route_key="docs"),
            client_conversation_id="c",
        )
        run = AgentRun.objects.create(
            session=session,
            client=session.client,
            route=conversation.route,
            conversation=conversation,
            client_turn_id="t",
            user_message_id="m",
            request_hash="0" * 64,
            user_input="refund",
        )
        run_id = str(run.run_id)
    elif state == "completed":
        run_id = context_ready_run(api_client, session)
        done = post_json(
            api_client,
            complete_url(run_id),
            session._access,
            {
                "assistant_message_id": "a-1",
                "status": "completed",
                "content": "Done.",
            },
        )
        assert done.status_code == 200
    else:
        RouteFactory(route_key="docs-two", knowledge={"kb_ids": [kb.kb_id]})
        session.allowed_routes = ["docs", "docs-two"]
        session.save(update_fields=["allowed_routes"])
        run_id = context_ready_run(api_client, session, route="docs-two")
    response = search(api_client, session, {"query": "refund", "run_id": run_id})
    assert (response.status_code, error_of(response)) == (404, "run_not_found")


@pytest.mark.parametrize("run_id", ["not-a-uuid", 5, "", "9F3C2A1E-4B7D-4E8A-9C2B-1D0E5F6A7B8C "])
def test_search_malformed_run_id_is_400(api_client, session, run_id):
    response = search(api_client, session, {"query": "refund", "run_id": run_id})
    assert (response.status_code, error_of(response), response.json()["field"]) == (
        400,
        "invalid_request",
        "run_id",
    )


def test_search_with_a_current_run_echoes_it_and_binds_the_hints(api_client, session, refunds):
    run_id = context_ready_run(api_client, session)
    response = search(api_client, session, {"query": "refund", "run_id": run_id})
    data = response.json()
    assert list(data) == ["schema_version", "route", "run_id", *SEARCH_KEYS[2:]]
    assert data["run_id"] == run_id
    ref = data["hints"][0]["ref"]
    assert read(api_client, session, {"ref": ref, "run_id": run_id}).status_code == 200
    # Bound to the run: without it (or with another run) the reference is someone else's.
    assert error_of(read(api_client, session, {"ref": ref})) == "knowledge_reference_invalid"
    other_run = context_ready_run(api_client, session, n=2)
    response = read(api_client, session, {"ref": ref, "run_id": other_run})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


# --------------------------------------------------------------------------------------------------
# Search budget and statuses (docs/protocol.md "Knowledge budgets", "Search status values")
# --------------------------------------------------------------------------------------------------


def test_search_response_fits_4096_bytes_with_long_cjk_titles_and_summaries(api_client, session, kb):
    for n in range(5):
        title = (f"{n}退款政策说明文档标题" * 30)[:191]
        content = "退款政策" + "。".join(f"第{n}{m}条退款规则需要收据和订单号码" for m in range(60))
        knowledge_document(kb, f"cjk-{n}", title, content)
    response = search(api_client, session, {"query": "退款政策", "limit": 3})
    assert response.status_code == 200
    assert len(response.content) <= 4096
    data = response.json()
    assert data["status"] == "ok"
    assert data["truncated"] is True
    assert 1 <= len(data["hints"]) <= 3
    for hint in data["hints"]:
        assert len(hint["title"]) == 191
        assert "\ufffd" not in hint["summary"]
        document_id = reference_open(hint["ref"]).document_id
        from knowledge.models import Document

        assert Document.objects.get(pk=document_id).content.find(hint["summary"]) >= 0


def test_search_emoji_titles_are_cut_to_191_units_without_splitting(api_client, session, kb):
    knowledge_document(kb, "emoji", "😀" * 191, "Refund emoji policy.")
    [hint] = search(api_client, session, {"query": "refund emoji"}).json()["hints"]
    assert hint["title"] == "😀" * 95  # 190 UTF-16 units: the 96th would make 192


def test_status_disabled_without_knowledge(api_client):
    RouteFactory(route_key="plain")
    session = AgentSessionFactory(allowed_routes=["plain"])
    data = search(api_client, session, {"query": "refund"}, route="plain").json()
    assert (data["status"], data["hints"], data["truncated"]) == ("disabled", [], False)


def test_status_disabled_when_every_knowledge_base_is_disabled(api_client, session, kb, refunds):
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    data = search(api_client, session, {"query": "refund"}).json()
    assert (data["status"], data["hints"]) == ("disabled", [])


def test_status_ok_with_zero_hits(api_client, session, refunds):
    data = search(api_client, session, {"query": "zeppelin"}).json()
    assert (data["status"], data["hints"], data["truncated"]) == ("ok", [], False)


def test_status_partial_with_one_missing_knowledge_base(api_client, session, kb, refunds):
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": [kb.kb_id, "kb-gone"]})
    data = search(api_client, session, {"query": "refund"}).json()
    assert data["status"] == "partial"
    assert [hint["title"] for hint in data["hints"]] == ["Refund policy"]


def test_status_unavailable_when_every_source_fails(api_client, session):
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": ["kb-gone"]})
    data = search(api_client, session, {"query": "refund"}).json()
    assert (data["status"], data["hints"]) == ("unavailable", [])


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_status_partial_when_an_embedding_endpoint_is_down(api_client, session):
    kb = KnowledgeBaseFactory(
        kb_id="remote",
        embedding_provider="openai",
        embedding_model="all-MiniLM-L6-v2-onnx-int8",
        embedding_dim=384,
        embedding_config={"base_url": f"http://127.0.0.1:{_unused_port()}/v1", "timeout_seconds": 2},
    )
    put = document_put(
        kb=kb, source_key="refunds", title="Refund policy", content=REFUNDS, actor=Actor.system("t")
    )
    # Indexed while the endpoint "was up": the same model run locally.
    assert document_index(document_id=put.document.pk, provider=local_provider()).result == "ready"
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": ["remote"]})
    data = search(api_client, session, {"query": "refund"}).json()
    assert data["status"] == "partial"
    assert [hint["title"] for hint in data["hints"]] == ["Refund policy"]


def test_search_audits_counts_and_status_but_never_the_query(api_client, session, refunds):
    runs_before = AgentRun.objects.count()
    search(api_client, session, {"query": SECRET_QUERY})
    [event] = AuditEvent.objects.filter(action="knowledge.agent.search")
    assert event.data["status"] == "ok" and event.data["hints"] == 1
    assert "zanzibar" not in json.dumps(event.data) and "zanzibar" not in json.dumps(event.target_id)
    # Read-only: no run, invocation or other audit side effect.
    assert AgentRun.objects.count() == runs_before
    assert set(AuditEvent.objects.values_list("action", flat=True)) >= {"knowledge.agent.search"}


# --------------------------------------------------------------------------------------------------
# Read (docs/protocol.md "Knowledge budgets")
# --------------------------------------------------------------------------------------------------


def test_read_shape_of_a_whole_small_document(api_client, session, refunds, route):
    ref = first_ref(api_client, session)
    response = read(api_client, session, {"ref": ref})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert list(data) == READ_KEYS
    assert data["schema_version"] == "bailing.agent-knowledge-read.v1"
    assert (data["route"], data["ref"], data["revision"]) == ("docs", ref, refunds.revision)
    assert data["knowledge_scope_revision"] == knowledge_scope(route=route).revision
    assert (data["title"], data["content"], data["trust"]) == (
        "Refund policy",
        refunds.content,
        "reference_only",
    )
    assert (data["next_cursor"], data["truncated"], data["budget_exhausted"]) == (None, False, False)
    assert data["total_content_bytes"] == len(refunds.content.encode("utf-8"))
    assert data["read_chain_max_bytes"] == 131072
    [event] = AuditEvent.objects.filter(action="knowledge.agent.read")
    assert event.data["kb_id"] == "handbook" and event.data["source_key"] == "refunds"
    assert event.data["bytes"] == data["total_content_bytes"]
    assert "Refunds are paid" not in json.dumps(event.data)


def _big_document(kb, kib: int, key="big"):
    # Mixed 1-, 3- and 4-byte characters so page ends fall inside multi-byte sequences.
    unit = "ab€😀 退款 "
    reps = kib * 1024 // len(unit.encode("utf-8")) + 1
    return knowledge_document(
        kb, key, "Zeppelin manual", "Zeppelin manual\n\n" + unit * reps, content_type="text"
    )


@pytest.mark.parametrize(
    ("max_bytes", "ok"), [(4095, False), (4096, True), (16384, True), (32768, True), (32769, False)]
)
def test_read_budget_bounds(api_client, session, kb, max_bytes, ok):
    _big_document(kb, 40)
    ref = first_ref(api_client, session, query="zeppelin")
    response = read(api_client, session, {"ref": ref, "max_bytes": max_bytes})
    if not ok:
        assert (response.status_code, error_of(response), response.json()["field"]) == (
            400,
            "invalid_request",
            "max_bytes",
        )
        return
    assert response.status_code == 200
    assert max_bytes - 8 <= len(response.content) <= max_bytes
    assert response.json()["next_cursor"] is not None


@pytest.mark.parametrize("max_bytes", [True, "16384", 16384.5, None])
def test_read_budget_must_be_an_integer(api_client, session, refunds, max_bytes):
    ref = first_ref(api_client, session)
    response = read(api_client, session, {"ref": ref, "max_bytes": max_bytes})
    assert (response.status_code, response.json()["field"]) == (400, "max_bytes")


def test_read_default_budget_is_16384_bytes(api_client, session, kb):
    _big_document(kb, 40)
    ref = first_ref(api_client, session, query="zeppelin")
    response = read(api_client, session, {"ref": ref})
    assert 16384 - 8 <= len(response.content) <= 16384


def test_reading_chain_over_200_kib_stops_at_128_kib_with_whole_characters(api_client, session, kb):
    doc = _big_document(kb, 200)
    total = len(doc.content.encode("utf-8"))
    assert total > 200 * 1024
    ref = first_ref(api_client, session, query="zeppelin")
    pages, cursor = [], None
    while True:
        body = {"ref": ref, "max_bytes": 32768} | ({"cursor": cursor} if cursor else {})
        response = read(api_client, session, body)
        assert response.status_code == 200
        assert len(response.content) <= 32768
        data = response.json()
        assert data["total_content_bytes"] == total
        pages.append(data)
        cursor = data["next_cursor"]
        if cursor is None:
            break
        assert (data["truncated"], data["budget_exhausted"]) == (True, False)
    served = "".join(page["content"] for page in pages)
    assert doc.content.startswith(served)  # whole characters, in order, nothing skipped
    assert 131072 - 4 < len(served.encode("utf-8")) <= 131072
    assert (pages[-1]["truncated"], pages[-1]["budget_exhausted"], pages[-1]["next_cursor"]) == (
        True,
        True,
        None,
    )
    assert len(pages) >= 5


def test_reading_a_chain_to_the_end_is_not_truncated(api_client, session, kb):
    doc = _big_document(kb, 20)
    ref = first_ref(api_client, session, query="zeppelin")
    pages, cursor = [], None
    while True:
        data = read(
            api_client, session, {"ref": ref, "max_bytes": 4096} | ({"cursor": cursor} if cursor else {})
        ).json()
        pages.append(data)
        cursor = data["next_cursor"]
        if cursor is None:
            break
    assert "".join(page["content"] for page in pages) == doc.content
    assert (pages[-1]["truncated"], pages[-1]["budget_exhausted"]) == (False, False)


# --------------------------------------------------------------------------------------------------
# References and cursors (docs/protocol.md "References and cursors", "Scope and document revisions")
# --------------------------------------------------------------------------------------------------


def test_reference_of_another_session_or_client_is_400(api_client, session, refunds):
    ref = first_ref(api_client, session)
    same_client = AgentSessionFactory(client=session.client, allowed_routes=["docs"])
    other_client = AgentSessionFactory(client=ClientFactory(), allowed_routes=["docs"])
    for caller in (same_client, other_client):
        response = read(api_client, caller, {"ref": ref})
        assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_reference_of_another_principal_is_400(api_client, session, refunds):
    ref = first_ref(api_client, session)
    session.on_behalf_of = "mallory"
    session.save(update_fields=["on_behalf_of"])
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_reference_of_another_route_is_400(api_client, session, kb, refunds):
    RouteFactory(route_key="docs-two", knowledge={"kb_ids": [kb.kb_id]})
    session.allowed_routes = ["docs", "docs-two"]
    session.save(update_fields=["allowed_routes"])
    ref = first_ref(api_client, session)
    response = read(api_client, session, {"ref": ref}, route="docs-two")
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_reference_without_a_run_cannot_be_read_with_one(api_client, session, refunds):
    ref = first_ref(api_client, session)
    run_id = context_ready_run(api_client, session)
    response = read(api_client, session, {"ref": ref, "run_id": run_id})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_run_bound_reference_of_a_completed_run_is_404(api_client, session, refunds):
    run_id = context_ready_run(api_client, session)
    ref = first_ref(api_client, session, run_id=run_id)
    done = post_json(
        api_client,
        complete_url(run_id),
        session._access,
        {"assistant_message_id": "a", "status": "completed", "content": "ok"},
    )
    assert done.status_code == 200
    response = read(api_client, session, {"ref": ref, "run_id": run_id})
    assert (response.status_code, error_of(response)) == (404, "run_not_found")


def test_expired_reference_is_410(api_client, session, refunds, route):
    scope = knowledge_scope(route=route)
    binding = agent_knowledge.caller_binding(identity=identity_of(session), route_key="docs", run_id=None)
    issued_at = timezone.now() - timedelta(seconds=300)
    ref = reference_issue(
        binding=binding,
        scope_revision=scope.revision,
        document_id=refunds.pk,
        revision=refunds.revision,
        now=issued_at,
    ).token
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (410, "knowledge_reference_expired")
    fresh = reference_issue(
        binding=binding, scope_revision=scope.revision, document_id=refunds.pk, revision=refunds.revision
    ).token
    assert read(api_client, session, {"ref": fresh}).status_code == 200


def test_expired_reference_with_a_cursor_is_410(api_client, session, kb, route):
    doc = _big_document(kb, 20)
    scope = knowledge_scope(route=route)
    binding = agent_knowledge.caller_binding(identity=identity_of(session), route_key="docs", run_id=None)
    issued = reference_issue(
        binding=binding,
        scope_revision=scope.revision,
        document_id=doc.pk,
        revision=doc.revision,
        now=datetime.now(UTC) - timedelta(seconds=301),
    )
    claims = reference_open(issued.token, now=datetime.now(UTC) - timedelta(seconds=300))
    cursor = cursor_issue(ref=issued.token, ref_claims=claims, offset=10, served=10).token
    response = read(api_client, session, {"ref": issued.token, "cursor": cursor})
    assert (response.status_code, error_of(response)) == (410, "knowledge_reference_expired")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda ref: ref[:-2] + ("AA" if not ref.endswith("AA") else "BB"),
        lambda ref: ref.replace("v1.", "v2.", 1),
        lambda ref: ref + ".x",
        lambda ref: "",
        lambda ref: "not a reference",
        lambda ref: "x" * 3000,
    ],
    ids=["mac", "version", "extra-part", "empty", "garbage", "too-long"],
)
def test_tampered_reference_is_400(api_client, session, refunds, tamper):
    ref = first_ref(api_client, session)
    response = read(api_client, session, {"ref": tamper(ref)})
    assert response.status_code == 400
    assert error_of(response) in ("knowledge_reference_invalid", "invalid_request")
    if tamper(ref) and len(tamper(ref)) <= 2048:
        assert error_of(response) == "knowledge_reference_invalid"


def test_cursor_of_another_reference_is_400(api_client, session, kb):
    _big_document(kb, 20, key="big-a")
    _big_document(kb, 20, key="big-b")
    hints = search(api_client, session, {"query": "zeppelin", "limit": 2}).json()["hints"]
    first, second = hints[0]["ref"], hints[1]["ref"]
    cursor = read(api_client, session, {"ref": first, "max_bytes": 4096}).json()["next_cursor"]
    assert cursor
    response = read(api_client, session, {"ref": second, "cursor": cursor})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")
    # A reference is not a cursor and a cursor is not a reference.
    response = read(api_client, session, {"ref": first, "cursor": first})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")
    response = read(api_client, session, {"ref": cursor})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_scope_change_is_409_knowledge_scope_changed(api_client, session, kb, refunds):
    ref = first_ref(api_client, session)
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": [kb.kb_id], "top_k": 6})
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (409, "knowledge_scope_changed")


def test_disabled_knowledge_base_is_409_knowledge_scope_changed(api_client, session, kb, refunds):
    ref = first_ref(api_client, session)
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (409, "knowledge_scope_changed")


def test_document_put_again_is_409_knowledge_changed(api_client, session, kb, refunds):
    ref = first_ref(api_client, session)
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS + " Updated.")
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (409, "knowledge_changed")


def test_document_waiting_for_reindex_is_409_knowledge_changed(api_client, session, kb, refunds):
    ref = first_ref(api_client, session)
    document_put(
        kb=kb, source_key="refunds", title="Refund policy", content="Other text.", actor=Actor.system("t")
    )
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (409, "knowledge_changed")


def test_deleted_document_is_409_knowledge_changed(api_client, session, kb, refunds):
    ref = first_ref(api_client, session)
    assert document_delete(kb=kb, source_key="refunds", actor=Actor.system("t"))
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (409, "knowledge_changed")


def test_key_rotation_invalidates_references(api_client, session, refunds, settings):
    ref = first_ref(api_client, session)
    settings.SECRET_KEY = "rotated-" + settings.SECRET_KEY
    response = read(api_client, session, {"ref": ref})
    assert (response.status_code, error_of(response)) == (400, "knowledge_reference_invalid")


def test_error_bodies_never_carry_query_content_token_or_sql(api_client, session, kb, refunds):
    ref = first_ref(api_client, session, query=SECRET_QUERY)
    responses = [
        search(api_client, session, {"query": SECRET_QUERY, "limit": 9}),
        search(api_client, session, {"query": SECRET_QUERY, "run_id": str(uuid.uuid4())}),
        read(api_client, session, {"ref": ref[:-3] + "AAA"}),
        read(api_client, session, {"ref": ref, "cursor": ref}),
        read(api_client, AgentSessionFactory(allowed_routes=["docs"]), {"ref": ref}),
    ]
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS + " Changed.")
    responses.append(read(api_client, session, {"ref": ref}))
    for response in responses:
        assert response.status_code >= 400
        text = response.content.decode("utf-8")
        assert set(response.json()) <= {"error", "message", "field"}
        for secret in ("zanzibar", "Refunds are paid", ref, ref[:40], "SELECT", "knowledge_document"):
            assert secret not in text


@pytest.mark.django_db(transaction=True)
def test_database_failure_while_reading_is_503(api_client, monkeypatch):
    kb = _lexical_kb(kb_id="handbook")
    RouteFactory(route_key="docs", knowledge={"kb_ids": [kb.kb_id]})
    session = AgentSessionFactory(allowed_routes=["docs"])
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    ref = first_ref(api_client, session)
    monkeypatch.setattr(agent_knowledge, "READ_LOCK_TIMEOUT_MS", 200)

    locked, release = threading.Event(), threading.Event()

    def hold_lock():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("LOCK TABLE knowledge_document IN ACCESS EXCLUSIVE MODE")
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(10)
        response = read(api_client, session, {"ref": ref})
    finally:
        release.set()
        holder.join()
    assert (response.status_code, error_of(response)) == (503, "knowledge_unavailable")
    assert "LOCK" not in response.content.decode() and "Refunds" not in response.content.decode()
    # The connection is healthy afterwards and the same reference reads.
    assert read(api_client, session, {"ref": ref}).status_code == 200


def test_knowledge_endpoints_work_without_business_tools(api_client, session, refunds):
    route = Route.objects.get(route_key="docs")
    assert not (route.tools or {}).get("agent_direct", {}).get("enabled")
    ref = first_ref(api_client, session)
    assert read(api_client, session, {"ref": ref}).status_code == 200
    assert capabilities(api_client, session).status_code == 200
