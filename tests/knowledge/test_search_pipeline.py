"""Retrieval outside a transaction: each KB's lanes and freshness check go to PostgreSQL as one
statement pipelined with its settings (no BEGIN, no ROLLBACK), and nothing of those settings, nor of a
failure, outlives it. Inside a transaction the same statement runs in a rolled-back savepoint
(``test_search.py``); both paths must find exactly the same hits."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agent_runtime.config import FUSION_DEFAULTS
from knowledge.services.retrieval import knowledge_search_bases
from tests.factories import KnowledgeBaseFactory, knowledge_document
from tests.support.vectors import vectors_corrupted

pytestmark = pytest.mark.django_db(transaction=True)

REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."
SHIPPING = "Parcels ship from the Berlin warehouse; delivery takes two working days."
PASSWORDS = "To reset a password, open the account page and choose a new secret phrase."
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def _search(bases, query):
    return knowledge_search_bases(bases=bases, query=query, limit=5, min_score=None, fusion=FUSION_DEFAULTS)


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [name])
        return cursor.fetchone()[0]


def test_one_round_trip_per_kb_outside_a_transaction_with_the_same_hits_as_inside_one():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    knowledge_document(kb, "passwords", "Passwords", PASSWORDS)
    _search([kb], "warm the embedding model")
    before = (_setting("statement_timeout"), _setting("hnsw.ef_search"))

    with CaptureQueriesContext(connection) as ctx:
        outside = _search([kb], "refund money back to the card")
    statements = [query["sql"] for query in ctx.captured_queries]
    assert not [sql for sql in statements if sql.strip().upper().startswith(TRANSACTION_CONTROL)]
    assert len(statements) == 2  # set_config(…) and the lanes with their freshness check
    assert statements[0].startswith("SELECT set_config('statement_timeout'")
    assert "MATERIALIZED" in statements[1] and "knowledge_document" in statements[1]
    assert (_setting("statement_timeout"), _setting("hnsw.ef_search")) == before

    with transaction.atomic():
        inside = _search([kb], "refund money back to the card")
    assert outside.status == inside.status == "ok"
    assert outside.mode == inside.mode == "hybrid"
    assert outside.hits == inside.hits
    assert outside.hits[0].source_key == "refunds"
    assert outside.hits[0].retrievers == ("vector", "text")


def test_database_error_outside_a_transaction_fails_only_that_kb():
    broken = KnowledgeBaseFactory(kb_id="kb-broken")
    healthy = KnowledgeBaseFactory(kb_id="kb-healthy")
    doc = knowledge_document(broken, "refunds", "Refund policy", REFUNDS)
    knowledge_document(healthy, "refunds", "Refund policy", REFUNDS)
    vectors_corrupted(broken, doc)

    result = _search([broken, healthy], "refund")
    assert result.status == "partial"
    assert result.kb_status == {"kb-broken": "failed", "kb-healthy": "ok"}
    assert [(hit.kb_id, hit.source_key) for hit in result.hits] == [("kb-healthy", "refunds")]
    # The connection left pipeline mode cleanly, outside any transaction, with its own settings.
    assert connection.connection.info.transaction_status == 0  # idle
    assert _setting("statement_timeout") == "0"
    assert _search([healthy], "refund").status == "ok"
