"""Hybrid retrieval: BM25 lane, vector lane, fusion, freshness, degradation (real PostgreSQL)."""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from agent_runtime.config import FUSION_DEFAULTS
from bailing.audit.actor import Actor
from knowledge.models import Chunk, KnowledgeBase
from knowledge.selectors.scope import knowledge_scope
from knowledge.selectors.search import (
    _LEXICAL_SQL,
    BM25_B,
    BM25_K1,
    _vector_sql,
)
from knowledge.services.documents import document_put
from knowledge.services.indexing import document_index
from knowledge.services.providers import local_provider
from knowledge.services.retrieval import knowledge_search, knowledge_search_bases
from knowledge.vectors import vector_storage_ready
from tests.factories import KnowledgeBaseFactory, RouteFactory, knowledge_document
from tests.support.vectors import vectors_corrupted

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]

REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
SHIPPING = "Parcels ship from the Berlin warehouse; delivery takes two working days."
PASSWORDS = "To reset a password, open the account page and choose a new secret phrase."


def _lexical_kb(**kwargs) -> KnowledgeBase:
    return KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0, **kwargs)


def _search(bases, query, *, limit=5, min_score=None, fusion=None, **kwargs):
    return knowledge_search_bases(
        bases=bases, query=query, limit=limit, min_score=min_score, fusion=fusion or FUSION_DEFAULTS, **kwargs
    )


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------------------------------
# Lexical lane
# --------------------------------------------------------------------------------------------------


def test_lexical_lane_is_bm25_with_or_semantics():
    kb = _lexical_kb()
    refunds = knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    knowledge_document(kb, "passwords", "Passwords", PASSWORDS)

    # "refunded" stems to the indexed "refund"; "zeppelin" matches nothing but does not veto (OR).
    result = _search([kb], "refunded zeppelin", lanes=("lexical",))
    assert (result.status, result.mode, result.degraded) == ("ok", "lexical", [])
    assert result.kb_status == {kb.kb_id: "ok"}
    assert [hit.source_key for hit in result.hits] == ["refunds"]
    hit = result.hits[0]
    assert (hit.lexical_rank, hit.vector_rank, hit.retrievers) == (1, None, ("text",))
    assert hit.document_id == refunds.pk and hit.revision == refunds.revision

    # BM25 by hand: "refund" occurs twice in the chunk (title + text), once in one of three chunks.
    chunk = Chunk.objects.get(pk=hit.chunk_id)
    chunks = Chunk.objects.filter(kb=kb)
    avgdl = sum(c.length for c in chunks) / chunks.count()
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    tf = 2
    expected = idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * chunk.length / avgdl))
    assert hit.lexical_score == pytest.approx(expected)
    assert hit.score == pytest.approx(1 / (60 + 1))

    # OR over two documents: both come back, the one matching more terms first.
    both = _search([kb], "refund delivery warehouse", lanes=("lexical",))
    assert [h.source_key for h in both.hits] == ["shipping", "refunds"]
    assert [h.lexical_rank for h in both.hits] == [1, 2]


def test_chinese_document_is_found_by_a_chinese_query():
    kb = _lexical_kb()
    knowledge_document(
        kb, "refund-zh", "退款政策", "订单签收后七天内可以申请退款，退款将在三个工作日内原路返回。"
    )
    knowledge_document(kb, "ship-zh", "配送说明", "包裹从上海仓库发出，一般两天送达。")
    result = _search([kb], "如何申请退款？")
    assert result.status == "ok"
    assert [hit.source_key for hit in result.hits] == ["refund-zh"]
    assert _search([kb], "仓库").hits[0].source_key == "ship-zh"


def test_lexical_statement_reads_the_impact_index():
    kb = _lexical_kb()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    params = {"kb": kb.pk, "text": "refund", "k1": BM25_K1, "b": BM25_B, "per_term": 10, "depth": 5}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + _LEXICAL_SQL, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "knowledge_posting_impact" in plan


# --------------------------------------------------------------------------------------------------
# Vector lane and fusion
# --------------------------------------------------------------------------------------------------


def test_hybrid_hits_report_lanes_and_rrf_scores():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    knowledge_document(kb, "passwords", "Passwords", PASSWORDS)

    result = _search([kb], "Can I get my cash reimbursed?", limit=3)
    assert (result.status, result.mode, result.kb_status) == ("ok", "hybrid", {kb.kb_id: "ok"})
    # No word of the query is indexed: only the vector lane finds anything, and it ranks refunds first.
    assert result.hits[0].source_key == "refunds"
    assert all(hit.retrievers == ("vector",) for hit in result.hits)

    both = _search([kb], "refund money back", limit=3)
    top = both.hits[0]
    assert top.source_key == "refunds"
    assert top.retrievers == ("vector", "text")
    assert top.score == pytest.approx(1 / (60 + top.lexical_rank) + 1 / (60 + top.vector_rank))
    assert 0 < top.vector_score <= 1
    assert [h.score for h in both.hits] == sorted((h.score for h in both.hits), reverse=True)


def test_min_score_filters_the_vector_lane_only():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    strict = _search([kb], "refund", min_score=0.99)
    assert [(h.source_key, h.retrievers) for h in strict.hits] == [("refunds", ("text",))]
    loose = _search([kb], "refund", min_score=None)
    assert {h.source_key for h in loose.hits} == {"refunds", "shipping"}
    assert all(h.vector_rank is not None for h in loose.hits)


def test_normalized_fusion_and_lane_weights():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    knowledge_document(kb, "passwords", "Passwords", PASSWORDS)
    fusion = {"method": "normalized", "rrf_k": 60, "lexical_weight": 2.0, "vector_weight": 1.0}
    result = _search([kb], "refund warehouse", fusion=fusion, limit=3)
    lexical = [h.lexical_score for h in result.hits if h.lexical_score is not None]
    vector = [h.vector_score for h in result.hits if h.vector_score is not None]
    for hit in result.hits:
        expected = 0.0
        if hit.lexical_score is not None:
            expected += 2.0 * (hit.lexical_score - min(lexical)) / (max(lexical) - min(lexical))
        expected += 1.0 * (hit.vector_score - min(vector)) / (max(vector) - min(vector))
        assert hit.score == pytest.approx(expected)

    # A lane weighted 0 is not run at all.
    lexical_only = _search([kb], "refund", fusion={**FUSION_DEFAULTS, "vector_weight": 0})
    assert lexical_only.mode == "lexical" and lexical_only.degraded == []
    assert all(h.vector_rank is None for h in lexical_only.hits)


def test_vector_statement_uses_the_partial_hnsw_index():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    vector = local_provider().embed(["refund"])[0]
    from knowledge.vectors import register

    register()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + _vector_sql(kb), [vector, 10])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"knowledge_vec_kb_{kb.pk}" in plan


def test_multi_kb_merge_is_by_fused_score_with_deterministic_ties():
    first = _lexical_kb(kb_id="kb-alpha")
    second = _lexical_kb(kb_id="kb-beta")
    knowledge_document(second, "b", "Refunds", REFUNDS)
    knowledge_document(first, "a", "Refunds", REFUNDS)
    result = _search([second, first], "refund", lanes=("lexical",))
    # Rank 1 in each KB: equal RRF scores, ties broken by kb_id.
    assert [(h.kb_id, h.source_key) for h in result.hits] == [("kb-alpha", "a"), ("kb-beta", "b")]
    assert result.kb_status == {"kb-alpha": "ok", "kb-beta": "ok"}


# --------------------------------------------------------------------------------------------------
# Scope, status and degradation
# --------------------------------------------------------------------------------------------------


def test_scope_without_knowledge_is_disabled_and_scope_settings_apply():
    route = RouteFactory()
    result = knowledge_search(scope=knowledge_scope(route=route), query="refund")
    assert (result.status, result.mode, result.hits) == ("disabled", "none", [])

    kb = _lexical_kb()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "refunds-2", "Refund exceptions", "Refund requests for gift cards are refused.")
    scoped = RouteFactory(knowledge={"kb_ids": [kb.kb_id], "top_k": 1})
    result = knowledge_search(scope=knowledge_scope(route=scoped), query="refund")
    assert (result.status, len(result.hits)) == ("ok", 1)
    assert len(knowledge_search(scope=knowledge_scope(route=scoped), query="refund", limit=2).hits) == 2


def test_provider_none_is_lexical_and_ok():
    kb = _lexical_kb()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    result = _search([kb], "refund")
    assert (result.status, result.mode) == ("ok", "lexical")
    assert result.degraded == [f"embedding_provider_none:{kb.kb_id}"]
    assert result.kb_status == {kb.kb_id: "lexical_only"}
    assert [h.source_key for h in result.hits] == ["refunds"]


def _openai_kb_with_endpoint_down() -> KnowledgeBase:
    kb = KnowledgeBaseFactory(
        embedding_provider="openai",
        embedding_model="all-MiniLM-L6-v2-onnx-int8",
        embedding_dim=384,
        embedding_config={"base_url": f"http://127.0.0.1:{_unused_port()}/v1", "timeout_seconds": 2},
    )
    # Indexed while the endpoint "was up": the same model run locally (a provider override).
    result = document_put(
        kb=kb, source_key="refunds", title="Refund policy", content=REFUNDS, actor=Actor.system("test")
    )
    assert document_index(document_id=result.document.pk, provider=local_provider()).result == "ready"
    return kb


def test_embedding_endpoint_down_is_partial_with_lexical_hits():
    kb = _openai_kb_with_endpoint_down()
    result = _search([kb], "refund")
    assert (result.status, result.mode) == ("partial", "lexical")
    assert result.degraded == [f"embedding_failed:{kb.kb_id}"]
    assert result.kb_status == {kb.kb_id: "lexical_only"}
    assert [h.source_key for h in result.hits] == ["refunds"]

    # Asked for the vector lane alone, the KB has nothing to answer with: unavailable.
    vector_only = _search([kb], "refund", lanes=("vector",))
    assert (vector_only.status, vector_only.hits, vector_only.mode) == ("unavailable", [], "none")


def test_missing_kb_makes_the_search_partial_or_unavailable():
    kb = _lexical_kb()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    partial = _search([kb], "refund", missing=["kb-gone"])
    assert partial.status == "partial"
    assert partial.kb_status == {kb.kb_id: "lexical_only", "kb-gone": "missing"}
    assert "kb_missing:kb-gone" in partial.degraded
    assert [h.source_key for h in partial.hits] == ["refunds"]

    route = RouteFactory(knowledge={"kb_ids": ["kb-gone"]})
    alone = knowledge_search(scope=knowledge_scope(route=route), query="refund")
    assert (alone.status, alone.hits, alone.degraded) == ("unavailable", [], ["kb_missing:kb-gone"])


def test_database_error_in_one_kb_fails_only_that_kb(caplog):
    broken = KnowledgeBaseFactory(kb_id="kb-broken")
    healthy = _lexical_kb(kb_id="kb-healthy")
    doc = knowledge_document(broken, "refunds", "Refund policy", REFUNDS)
    knowledge_document(healthy, "refunds", "Refund policy", REFUNDS)
    vectors_corrupted(broken, doc)

    with caplog.at_level(logging.WARNING, logger="knowledge.selectors.search"):
        result = _search([broken, healthy], "secret refund question")
    assert result.status == "partial"
    assert result.kb_status == {"kb-broken": "failed", "kb-healthy": "lexical_only"}
    assert "kb_failed:kb-broken" in result.degraded
    assert [(h.kb_id, h.source_key) for h in result.hits] == [("kb-healthy", "refunds")]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "kb-broken" in logged
    assert "secret" not in logged and "SELECT" not in logged and "vector(" not in logged
    # The connection is still usable: the failure was confined to a savepoint.
    assert _search([broken], "refund").status == "unavailable"
    assert KnowledgeBase.objects.filter(pk=healthy.pk).exists()


def test_very_long_query_is_cut_and_still_searches_both_lanes():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    result = _search([kb], "refund " * 3000)
    assert (result.status, result.mode) == ("ok", "hybrid")
    assert result.hits[0].retrievers == ("vector", "text")


def test_blank_query_and_bad_limit_are_programming_errors():
    kb = _lexical_kb()
    with pytest.raises(ValueError):
        _search([kb], "   ")
    with pytest.raises(ValueError):
        _search([kb], "refund", limit=0)
    with pytest.raises(ValueError):
        _search([kb], "refund", lanes=("bm25",))


# --------------------------------------------------------------------------------------------------
# Freshness
# --------------------------------------------------------------------------------------------------


def test_changed_document_drops_out_and_later_candidates_fill_the_gap():
    kb = _lexical_kb()
    knowledge_document(kb, "a", "Refund A", "Refund refund refund: the fastest path to your money.")
    knowledge_document(kb, "b", "Refund B", "Refund refund for store credit.")
    knowledge_document(kb, "c", "Refund C", "A refund for damaged goods.")
    assert [h.source_key for h in _search([kb], "refund", limit=2).hits] == ["a", "b"]

    # Put without indexing: the stored chunks belong to the old revision.
    document_put(kb=kb, source_key="a", title="Refund A", content="Refunds changed.", actor=Actor.system("t"))
    assert [h.source_key for h in _search([kb], "refund", limit=2).hits] == ["b", "c"]


def test_tampered_chunk_text_and_disabled_kb_drop_out():
    kb = _lexical_kb()
    knowledge_document(kb, "a", "Refund A", REFUNDS)
    knowledge_document(kb, "b", "Refund B", "Refund requests for gift cards are refused.")
    Chunk.objects.filter(document__source_key="a", kb=kb).update(content="Refunds are paid in cash.")
    result = _search([kb], "refund")
    assert [h.source_key for h in result.hits] == ["b"]
    assert result.hits[0].content == "Refund requests for gift cards are refused."

    # A chunk cut from another revision of a ready document is stale too.
    knowledge_document(kb, "c", "Refund C", "Refund of shipping costs.")
    Chunk.objects.filter(document__source_key="c", kb=kb).update(revision="0" * 64)
    assert [h.source_key for h in _search([kb], "refund").hits] == ["b"]

    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    after = _search([kb], "refund")
    assert (after.status, after.hits) == ("ok", [])


# --------------------------------------------------------------------------------------------------
# A real server without pgvector
# --------------------------------------------------------------------------------------------------

_PROBE = """
import json
from agent_runtime.config import FUSION_DEFAULTS
from bailing.audit.actor import Actor
from knowledge.models import KnowledgeBase, KnowledgeBaseStats
from knowledge.services.documents import document_put
from knowledge.services.indexing import document_index
from knowledge.services.retrieval import knowledge_search_bases
kb = KnowledgeBase.objects.create(kb_id="kb-probe", name="Probe", embedding_provider="local",
    embedding_model="all-MiniLM-L6-v2-onnx-int8", embedding_dim=384)
KnowledgeBaseStats.objects.create(kb=kb)
doc = document_put(kb=kb, source_key="refunds", title="Refund policy",
    content="Refunds are paid back within fourteen days.", actor=Actor.system("probe")).document
document_index(document_id=doc.pk)
r = knowledge_search_bases(bases=[kb], query="refund", limit=5, min_score=None, fusion=FUSION_DEFAULTS)
print(json.dumps({"status": r.status, "mode": r.mode, "degraded": r.degraded, "kb_status": r.kb_status,
    "hits": [[h.source_key, list(h.retrievers)] for h in r.hits]}))
"""


def test_server_without_pgvector_searches_lexically_and_says_so(external_database_url):
    """The machine's PostgreSQL 15 has no pgvector: the hub must search lexically, status ok."""
    env = {**os.environ, "DATABASE_URL": external_database_url}

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    migrated = manage("migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    probe = manage("shell", "-c", _PROBE)
    assert probe.returncode == 0, probe.stderr
    outcome = json.loads(probe.stdout.strip().splitlines()[-1])
    assert outcome == {
        "status": "ok",
        "mode": "lexical",
        "degraded": ["vector_extension_missing"],
        "kb_status": {"kb-probe": "lexical_only"},
        "hits": [["refunds", ["text"]]],
    }
    assert vector_storage_ready()  # the test database itself does have pgvector


def test_lane_statement_keeps_both_lane_indexes():
    from knowledge.selectors.search import _lanes_sql
    from knowledge.vectors import register

    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    vector = local_provider().embed(["refund"])[0]
    params = {
        "kb": kb.pk,
        "ready": "ready",
        "text": "refund",
        "k1": BM25_K1,
        "b": BM25_B,
        "per_term": 10,
        "depth": 10,
        "vector": vector,
        "limit": 5,
        "w_lexical": 1.0,
        "w_vector": 1.0,
        "rrf_k": 60,
    }
    register()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + _lanes_sql(kb, lexical=True, vector=True), params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert f"knowledge_vec_kb_{kb.pk}" in plan
    assert "knowledge_posting_impact" in plan


def test_freshness_check_reads_the_fused_order_only_until_limit_hits_passed():
    from knowledge.selectors.search import _lanes_statement

    kb = _lexical_kb()
    for n in range(20):
        knowledge_document(kb, f"refunds-{n}", f"Refunds {n}", f"{REFUNDS} Case {n}.")
    sql, params = _lanes_statement(
        kb,
        lexical_text="refund",
        vector=None,
        depth=50,
        limit=3,
        min_score=None,
        fusion=FUSION_DEFAULTS,
        weights={"lexical": 1.0, "vector": 1.0},
    )
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    nodes, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    lexical = [n for n in nodes if n.get("Subplan Name") == "CTE lexical"]
    assert [n["Actual Rows"] for n in lexical] == [20]  # every chunk is a lexical candidate
    # The document row is read once per candidate checked: 3, not 20.
    documents = [n for n in nodes if n.get("Relation Name") == "knowledge_document"]
    assert documents and sum(n["Actual Loops"] for n in documents) == 3
