"""The per-process query-vector LRU and the embedding thread settings (real model, real PostgreSQL)."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge import embeddings
from knowledge.embeddings import LocalMiniLMProvider
from knowledge.query_vectors import QueryVectorCache, query_vector_cache
from knowledge.services import providers
from knowledge.services.retrieval import knowledge_search_bases
from tests.factories import KnowledgeBaseFactory, knowledge_document

REFUNDS = "Refunds are paid back to the original card within fourteen days of the return."


def test_lru_keeps_the_most_recently_used_entries():
    cache = QueryVectorCache(2)
    cache.put("a", np.ones(3))
    cache.put("b", np.zeros(3))
    assert cache.get("a") is not None  # "a" is now the most recent
    cache.put("c", np.ones(3))
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    assert len(cache) == 2 and (cache.hits, cache.misses) == (3, 1)


def test_cached_vectors_are_read_only_copies():
    cache = QueryVectorCache(4)
    original = np.ones(3, dtype=np.float32)
    stored = cache.put("q", original)
    original[0] = 5
    assert cache.get("q")[0] == 1
    with pytest.raises(ValueError):
        stored[0] = 2


def test_capacity_zero_keeps_nothing():
    cache = QueryVectorCache(0)
    cache.put("q", np.ones(3))
    assert cache.get("q") is None and len(cache) == 0


@pytest.fixture
def embed_calls(monkeypatch):
    calls: list[list[str]] = []
    real = LocalMiniLMProvider.embed

    def counting(self, texts):
        calls.append(list(texts))
        return real(self, texts)

    monkeypatch.setattr(LocalMiniLMProvider, "embed", counting)
    return calls


def _search(kb, query):
    from agent_runtime.config import FUSION_DEFAULTS

    return knowledge_search_bases(bases=[kb], query=query, limit=5, min_score=None, fusion=FUSION_DEFAULTS)


@pytest.mark.django_db
def test_a_repeated_query_is_embedded_once_and_ranks_the_same(embed_calls):
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    embed_calls.clear()
    first = _search(kb, "how long does a refund take")
    second = _search(kb, "how long does a refund take")
    assert embed_calls == [["how long does a refund take"]]
    assert first.mode == second.mode == "hybrid"
    assert [(h.chunk_id, h.score) for h in first.hits] == [(h.chunk_id, h.score) for h in second.hits]
    # The text is the key: another spelling is another query.
    _search(kb, "How long does a refund take?")
    assert len(embed_calls) == 2


@pytest.mark.django_db
def test_the_cache_can_be_turned_off(embed_calls, settings, monkeypatch):
    monkeypatch.setattr("knowledge.query_vectors._CACHE", QueryVectorCache(0))
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    embed_calls.clear()
    _search(kb, "refund")
    _search(kb, "refund")
    assert len(embed_calls) == 2
    assert len(query_vector_cache()) == 0


def test_queries_and_indexing_use_their_own_thread_counts(settings, monkeypatch):
    settings.BAILING_EMBEDDING_THREADS = 1
    settings.BAILING_EMBEDDING_INDEX_THREADS = 3
    monkeypatch.setattr(providers, "_LOCAL", {})
    assert providers.local_provider().threads == 1
    assert providers.local_provider(for_indexing=True).threads == 3
    assert providers.local_provider() is providers.local_provider()


def test_default_settings_embed_queries_on_one_thread():
    from django.conf import settings

    assert settings.BAILING_EMBEDDING_THREADS == 1


@pytest.mark.django_db
def test_indexing_embeds_with_the_indexing_provider(settings, monkeypatch):
    settings.BAILING_EMBEDDING_INDEX_THREADS = 2
    monkeypatch.setattr(providers, "_LOCAL", {})
    used: list[int] = []
    real = embeddings._runtime

    def spying(threads):
        used.append(threads)
        return real(threads)

    monkeypatch.setattr(embeddings, "_runtime", spying)
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    assert used and set(used) == {2}
