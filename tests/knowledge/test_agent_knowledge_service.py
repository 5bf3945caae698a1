"""Service-level tests of :mod:`knowledge.services.agent_knowledge`: time-controlled expiry, the
identity binding, hint building and fitting, and the legacy inline delivery (real PostgreSQL)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import Route
from bailing.api.limits import compact_json_utf8_bytes, utf16_length
from knowledge.errors import KnowledgeReferenceExpired, KnowledgeReferenceInvalid
from knowledge.selectors.scope import knowledge_scope
from knowledge.selectors.search import SearchResult
from knowledge.services import agent_knowledge
from knowledge.services.retrieval import knowledge_search
from knowledge.tokens import reference_open
from tests.factories import AgentSessionFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document

pytestmark = pytest.mark.django_db

REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
T0 = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def kb():
    return KnowledgeBaseFactory(
        kb_id="handbook", embedding_provider="none", embedding_model="", embedding_dim=0
    )


@pytest.fixture
def route(kb):
    return RouteFactory(route_key="docs", knowledge={"kb_ids": [kb.kb_id]})


@pytest.fixture
def identity(route):
    session = AgentSessionFactory(allowed_routes=["docs"])
    return AgentIdentity(session=session, client=session.client)


def _search(identity, query="refund", **kwargs):
    return agent_knowledge.agent_knowledge_search(identity=identity, route_key="docs", query=query, **kwargs)


def _read(identity, ref, **kwargs):
    return agent_knowledge.agent_knowledge_read(identity=identity, route_key="docs", ref=ref, **kwargs)


# --------------------------------------------------------------------------------------------------
# Expiry, controlled through ``now``
# --------------------------------------------------------------------------------------------------


def test_reference_lives_exactly_300_seconds(identity, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    [hint] = _search(identity, now=T0)["hints"]
    assert hint["expires_at"] == "2030-01-01T12:05:00.000Z"
    assert _read(identity, hint["ref"], now=T0 + timedelta(seconds=299))["content"]
    with pytest.raises(KnowledgeReferenceExpired):
        _read(identity, hint["ref"], now=T0 + timedelta(seconds=300))


def test_a_cursor_expires_with_its_reference(identity, kb):
    knowledge_document(kb, "big", "Zeppelin", "Zeppelin " + "word " * 3000, content_type="text")
    [hint] = _search(identity, query="zeppelin", now=T0)["hints"]
    page = _read(identity, hint["ref"], max_bytes=4096, now=T0 + timedelta(seconds=10))
    assert page["next_cursor"]
    second = _read(
        identity, hint["ref"], cursor=page["next_cursor"], max_bytes=4096, now=T0 + timedelta(seconds=299)
    )
    assert second["content"]
    with pytest.raises(KnowledgeReferenceExpired):
        _read(identity, hint["ref"], cursor=page["next_cursor"], now=T0 + timedelta(seconds=300))


# --------------------------------------------------------------------------------------------------
# Binding
# --------------------------------------------------------------------------------------------------


def test_binding_covers_client_session_principal_route_and_run(identity):
    session = identity.session
    run = uuid.uuid4()
    base = agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None)
    assert base == agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None)
    assert agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=run) == (
        agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=uuid.UUID(str(run)))
    )
    variants = {
        agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=run),
        agent_knowledge.caller_binding(identity=identity, route_key="docs-two", run_id=None),
    }
    session.on_behalf_of = "bob"
    variants.add(agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None))
    session.on_behalf_of, session.principal = "alice", {"id": "alice", "roles": ["admin"]}
    variants.add(agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None))
    other = AgentSessionFactory(client=identity.client, allowed_routes=["docs"])
    variants.add(
        agent_knowledge.caller_binding(
            identity=AgentIdentity(session=other, client=identity.client), route_key="docs", run_id=None
        )
    )
    assert base not in variants and len(variants) == 5


def test_foreign_binding_is_refused_before_the_run_is_looked_up(identity, kb):
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    [hint] = _search(identity)["hints"]
    # An unknown run with a reference bound to no run: the binding fails first (400, not 404).
    with pytest.raises(KnowledgeReferenceInvalid):
        _read(identity, hint["ref"], run_id=str(uuid.uuid4()))


# --------------------------------------------------------------------------------------------------
# Hints
# --------------------------------------------------------------------------------------------------


def test_hints_use_route_top_k_and_dedupe_to_documents(identity, kb, route):
    paragraphs = "\n\n".join(f"Refund clause {n}. " + "Refund receipts are checked. " * 30 for n in range(6))
    big = knowledge_document(kb, "big", "Refund manual", paragraphs)
    knowledge_document(kb, "small", "Refund note", "Refund receipts only.")
    scope = knowledge_scope(route=route)
    result = agent_knowledge.knowledge_hints_search(scope=scope, query="refund receipts", limit=3)
    assert len(result.hits) == 5  # max(top_k 5, limit 3)
    binding = agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None)
    hints = agent_knowledge.knowledge_hints_build(
        scope=scope, result=result, limit=3, binding=binding, now=T0
    )
    documents = [reference_open(h["ref"], now=T0).document_id for h in hints]
    assert len(documents) == len(set(documents))
    assert big.pk in documents
    # The best chunk of each document is the first hit of that document.
    best = {}
    for hit in result.hits:
        best.setdefault(hit.document_id, hit)
    for hint, document_id in zip(hints, documents, strict=True):
        assert best[document_id].content.startswith(hint["summary"])
        assert hint["score"] == round(best[document_id].score, 4)
    assert agent_knowledge.knowledge_hints_build(scope=scope, result=result, limit=1, binding=binding)[0][
        "ref"
    ]


def test_summary_is_cut_to_480_units_without_splitting_a_pair(identity, kb, route):
    knowledge_document(kb, "emoji", "Emoji", "Refund " + "😀" * 400)
    scope = knowledge_scope(route=route)
    result = knowledge_search(scope=scope, query="refund")
    binding = agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None)
    [hint] = agent_knowledge.knowledge_hints_build(scope=scope, result=result, limit=3, binding=binding)
    # "Refund " is 7 units; 236 emoji make 479 units, the 237th would make 481.
    assert hint["summary"] == "Refund " + "😀" * 236
    assert utf16_length(hint["summary"]) == 479


def test_delivery_block_is_at_most_4096_bytes(identity, kb, route):
    for n in range(4):
        knowledge_document(
            kb, f"cjk-{n}", (f"{n}退款政策标题" * 40)[:191], "退款政策" + "退款需要收据和订单号码" * 80
        )
    scope = knowledge_scope(route=route)
    result = agent_knowledge.knowledge_hints_search(scope=scope, query="退款政策")
    binding = agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=uuid.uuid4())
    block = agent_knowledge.knowledge_delivery_build(scope=scope, result=result, binding=binding)
    assert list(block) == [
        "schema_version",
        "mode",
        "protocol",
        "knowledge_scope_revision",
        "status",
        "hints",
    ]
    assert compact_json_utf8_bytes(block) <= 4096
    assert 1 <= len(block["hints"]) <= 3
    assert block["status"] == "ok"


def test_delivery_passes_failure_statuses_through(identity, route):
    Route.objects.filter(pk=route.pk).update(knowledge={"kb_ids": ["kb-gone"]})
    route.refresh_from_db()
    scope = knowledge_scope(route=route)
    result = agent_knowledge.knowledge_hints_search(scope=scope, query="refund")
    binding = agent_knowledge.caller_binding(identity=identity, route_key="docs", run_id=None)
    block = agent_knowledge.knowledge_delivery_build(scope=scope, result=result, binding=binding)
    assert (block["status"], block["hints"]) == ("unavailable", [])


# --------------------------------------------------------------------------------------------------
# Legacy inline delivery
# --------------------------------------------------------------------------------------------------


def _route_knowledge(route, **knowledge):
    Route.objects.filter(pk=route.pk).update(knowledge={"kb_ids": ["handbook"], **knowledge})
    route.refresh_from_db()
    return knowledge_scope(route=route)


def test_inline_chunk_mode_numbers_hits_up_to_top_k(kb, route):
    docs = [knowledge_document(kb, f"r{n}", f"Refund {n}", f"Refund rule {n} applies.") for n in range(4)]
    scope = _route_knowledge(route, top_k=3)
    inline = agent_knowledge.knowledge_inline_build(scope=scope, query="refund rule")
    assert inline.status == "ok"
    assert [item["ref"] for item in inline.knowledge] == ["knowledge:1", "knowledge:2", "knowledge:3"]
    by_id = {doc.pk: doc for doc in docs}
    for item, ref in zip(inline.knowledge, inline.refs, strict=True):
        assert list(item) == ["ref", "title", "content"]
        assert list(ref) == ["ref", "doc_id", "title", "score"]
        assert ref["ref"] == item["ref"] and ref["title"] == item["title"]
        assert item["content"] in by_id[ref["doc_id"]].content


def test_inline_doc_mode_keeps_max_docs_whole_documents_cut_at_6000_units(kb, route):
    long = knowledge_document(kb, "long", "Refund manual", "Refund " + "😀" * 3500, content_type="text")
    knowledge_document(kb, "b", "Refund b", "Refund b text.")
    knowledge_document(kb, "c", "Refund c", "Refund c text.")
    scope = _route_knowledge(route, inject="doc", top_k=1, max_docs=2)
    inline = agent_knowledge.knowledge_inline_build(scope=scope, query="refund")
    assert len(inline.knowledge) == 2
    assert len({ref["doc_id"] for ref in inline.refs}) == 2
    scope = _route_knowledge(route, inject="doc", top_k=1, max_docs=3)
    inline = agent_knowledge.knowledge_inline_build(scope=scope, query="refund")
    doc_ids = [ref["doc_id"] for ref in inline.refs]
    assert len(doc_ids) == 3
    # 7 units + 2996 emoji = 5999 units; one more emoji would end at 6001.
    assert inline.knowledge[doc_ids.index(long.pk)]["content"] == "Refund " + "😀" * 2996


def test_inline_doc_mode_skips_a_document_that_changed_after_the_search(kb, route):
    doc = knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    scope = _route_knowledge(route, inject="doc")
    result = knowledge_search(scope=scope, query="refund", limit=8)
    stale = SearchResult(
        status=result.status,
        hits=[dataclasses.replace(result.hits[0], revision="0" * 64)],
        mode=result.mode,
        degraded=result.degraded,
        kb_status=result.kb_status,
    )
    assert agent_knowledge._inline_documents(scope=scope, result=stale) == []
    assert agent_knowledge._inline_documents(scope=scope, result=result)[0][1] == doc.content


def test_inline_failure_is_empty_with_a_status(route):
    scope = _route_knowledge(route)
    Route.objects.filter(pk=route.pk).update(knowledge={"kb_ids": ["kb-gone"]})
    route.refresh_from_db()
    inline = agent_knowledge.knowledge_inline_build(scope=knowledge_scope(route=route), query="refund")
    assert (inline.status, inline.knowledge, inline.refs) == ("unavailable", [], [])
    assert scope.revision != knowledge_scope(route=route).revision
