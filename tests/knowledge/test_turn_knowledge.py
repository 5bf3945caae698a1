"""Contract tests: knowledge in turns — legacy inline bodies and ``knowledge_delivery: "on_demand"``.

Inline (no option): ``context.knowledge[]`` / ``context.knowledge_refs[]`` in chunk or doc mode with
their caps, ``page_boost`` deciding whether page hints join the query, and a retrieval failure
leaving empty arrays (the turn succeeds, the audit says why). On demand: empty arrays and
``context.knowledge_delivery`` with hints bound to the run, readable once the run is context_ready.
Replays stay byte-identical. The rules: docs/protocol.md "Knowledge in turns".
"""

from __future__ import annotations

import pytest

from agent_runtime.models import AgentRun, Route
from bailing.api.limits import compact_json_utf8_bytes
from bailing.audit.models import AuditEvent
from knowledge.models import KnowledgeBase
from knowledge.selectors.scope import knowledge_scope
from knowledge.tokens import reference_open
from tests.factories import AgentSessionFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document
from tests.support.runtime import post_json, post_turn, turn_body

pytestmark = pytest.mark.django_db

REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
SHIPPING = "Parcels ship from the Berlin warehouse; delivery takes two working days."


@pytest.fixture
def kb():
    return KnowledgeBaseFactory(
        kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0
    )


@pytest.fixture
def route(kb):
    return RouteFactory(route_key="docs", knowledge={"kb_ids": [kb.kb_id]})


@pytest.fixture
def session(route):
    return AgentSessionFactory(allowed_routes=["docs"])


def configure(**knowledge) -> None:
    Route.objects.filter(route_key="docs").update(knowledge={"kb_ids": ["handbook"], **knowledge})


def turn(api_client, session, n=1, **body):
    response = post_turn(api_client, session, "docs", turn_body(n, **body))
    assert response.status_code == 200, response.content
    return response


def turn_audit() -> dict:
    return AuditEvent.objects.filter(action="agent_runtime.turn.context_ready").latest("id").data["knowledge"]


# --------------------------------------------------------------------------------------------------
# Inline
# --------------------------------------------------------------------------------------------------


def test_inline_chunk_mode(api_client, session, kb):
    docs = {
        doc.pk: doc
        for doc in (
            knowledge_document(kb, f"r{n}", f"Refund {n}", f"Refund rule {n}: {REFUNDS}") for n in range(4)
        )
    }
    configure(top_k=2)
    context = turn(api_client, session, user_input="How do refunds work?").json()["context"]
    assert "knowledge_delivery" not in context
    assert [item["ref"] for item in context["knowledge"]] == ["knowledge:1", "knowledge:2"]
    assert [ref["ref"] for ref in context["knowledge_refs"]] == ["knowledge:1", "knowledge:2"]
    for item, ref in zip(context["knowledge"], context["knowledge_refs"], strict=True):
        assert list(item) == ["ref", "title", "content"]
        assert list(ref) == ["ref", "doc_id", "title", "score"]
        doc = docs[ref["doc_id"]]
        assert item["title"] == ref["title"] == doc.title
        assert item["content"] in doc.content
        assert isinstance(ref["score"], float) and ref["score"] > 0
    assert turn_audit() == {"status": "ok", "items": 2}


def test_inline_chunk_content_is_capped_at_3000_units(api_client, session, kb):
    # One paragraph without sentence punctuation is hard-split at 700 characters, so a chunk never
    # reaches 3000 units: the cap holds trivially and the chunk is served whole.
    doc = knowledge_document(kb, "long", "Refund", "Refund " + "x" * 2000, content_type="text")
    context = turn(api_client, session, user_input="refund").json()["context"]
    for item in context["knowledge"]:
        assert len(item["content"]) <= 3000
        assert item["content"] in doc.content


def test_inline_doc_mode_whole_documents_capped(api_client, session, kb):
    long = knowledge_document(kb, "long", "Refund manual", "Refund " + "😀" * 3500, content_type="text")
    knowledge_document(kb, "short", "Refund note", REFUNDS)
    knowledge_document(kb, "other", "Refund other", "Refund other text.")
    configure(inject="doc", top_k=1, max_docs=3)
    context = turn(api_client, session, user_input="refund").json()["context"]
    ids = [ref["doc_id"] for ref in context["knowledge_refs"]]
    assert len(ids) == len(set(ids)) == 3
    by_id = dict(zip(ids, context["knowledge"], strict=True))
    assert by_id[long.pk]["content"] == "Refund " + "😀" * 2996  # 5999 units, pair not split
    configure(inject="doc", top_k=1, max_docs=2)
    context = turn(api_client, session, n=2, user_input="refund").json()["context"]
    assert len(context["knowledge"]) == len({ref["doc_id"] for ref in context["knowledge_refs"]}) == 2


@pytest.mark.parametrize(
    ("page_boost", "expected"), [(False, {"Refund policy"}), (True, {"Refund policy", "Shipping"})]
)
def test_page_boost_adds_page_hints_to_the_query(api_client, session, kb, page_boost, expected):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    configure(page_boost=page_boost)
    body = {"user_input": "refund", "page_context": {"title": "Warehouse parcels"}}
    context = turn(api_client, session, **body).json()["context"]
    assert {item["title"] for item in context["knowledge"]} == expected


def test_retrieval_failure_leaves_empty_arrays_and_audits_the_status(api_client, session):
    configure(kb_ids=["kb-gone"])
    context = turn(api_client, session, user_input="refund").json()["context"]
    assert (context["knowledge"], context["knowledge_refs"]) == ([], [])
    assert turn_audit() == {"status": "unavailable", "items": 0}


def test_route_without_knowledge_is_disabled(api_client):
    RouteFactory(route_key="plain")
    session = AgentSessionFactory(allowed_routes=["plain"])
    response = post_turn(api_client, session, "plain", turn_body())
    context = response.json()["context"]
    assert (context["knowledge"], context["knowledge_refs"]) == ([], [])
    assert turn_audit() == {"status": "disabled", "items": 0}


def test_inline_replay_is_byte_identical_after_the_knowledge_changes(api_client, session, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    first = turn(api_client, session, user_input="refund")
    knowledge_document(kb, "refunds", "Refund policy", "Refunds are no longer offered.")
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    again = turn(api_client, session, user_input="refund")
    assert again.content == first.content


# --------------------------------------------------------------------------------------------------
# On demand
# --------------------------------------------------------------------------------------------------


def test_on_demand_turn_has_run_bound_readable_hints(api_client, session, kb, route):
    doc = knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    response = turn(api_client, session, user_input="refund", knowledge_delivery="on_demand")
    data = response.json()
    context = data["context"]
    assert (context["knowledge"], context["knowledge_refs"]) == ([], [])
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
    assert (delivery["mode"], delivery["protocol"]) == ("on_demand", "bailing.agent-knowledge.v1")
    assert delivery["knowledge_scope_revision"] == knowledge_scope(route=route).revision
    assert delivery["status"] == "ok"
    [hint] = delivery["hints"]
    assert list(hint) == ["ref", "title", "summary", "revision", "score", "expires_at"]
    assert (hint["title"], hint["revision"]) == ("Refund policy", doc.revision)
    assert reference_open(hint["ref"]).document_id == doc.pk
    assert turn_audit() == {"status": "ok", "hints": 1}

    url = "/agent-api/v1/workspaces/docs/knowledge/read"
    read = post_json(api_client, url, session._access, {"ref": hint["ref"], "run_id": data["run_id"]})
    assert read.status_code == 200
    assert (read.json()["content"], read.json()["run_id"]) == (doc.content, data["run_id"])
    # Bound to the run: without it the reference is not this caller's.
    unbound = post_json(api_client, url, session._access, {"ref": hint["ref"]})
    assert (unbound.status_code, unbound.json()["error"]) == (400, "knowledge_reference_invalid")
    # Replays return the frozen body byte for byte.
    replay = turn(api_client, session, user_input="refund", knowledge_delivery="on_demand")
    assert replay.content == response.content
    assert AgentRun.objects.count() == 1


def test_on_demand_delivery_is_bounded_to_4096_bytes(api_client, session, kb):
    for n in range(5):
        knowledge_document(
            kb, f"cjk-{n}", (f"{n}退款政策标题" * 40)[:191], "退款政策" + "退款需要收据和订单号码" * 80
        )
    context = turn(api_client, session, user_input="退款政策", knowledge_delivery="on_demand").json()[
        "context"
    ]
    delivery = context["knowledge_delivery"]
    assert compact_json_utf8_bytes(delivery) <= 4096
    assert 1 <= len(delivery["hints"]) <= 3
    documents = {reference_open(h["ref"]).document_id for h in delivery["hints"]}
    assert len(documents) == len(delivery["hints"])


@pytest.mark.parametrize(
    ("knowledge", "status"),
    [({"kb_ids": ["handbook", "kb-gone"]}, "partial"), ({"kb_ids": ["kb-gone"]}, "unavailable")],
)
def test_on_demand_status_reports_retrieval_failures(api_client, session, kb, knowledge, status):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    Route.objects.filter(route_key="docs").update(knowledge=knowledge)
    delivery = turn(api_client, session, user_input="refund", knowledge_delivery="on_demand").json()[
        "context"
    ]["knowledge_delivery"]
    assert delivery["status"] == status
    assert len(delivery["hints"]) == (1 if status == "partial" else 0)


def test_on_demand_with_every_knowledge_base_disabled(api_client, session, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    delivery = turn(api_client, session, user_input="refund", knowledge_delivery="on_demand").json()[
        "context"
    ]["knowledge_delivery"]
    assert (delivery["status"], delivery["hints"]) == ("disabled", [])
