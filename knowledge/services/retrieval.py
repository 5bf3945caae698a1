"""Knowledge retrieval: plan the search, embed the query, run the lanes (docs/protocol.md "Knowledge
retrieval").

The one way into the hybrid retriever for every caller — the agent surfaces
(:mod:`knowledge.services.agent_knowledge`), the console's hit test, ``knowledge_eval`` and
``knowledge_bench``. :mod:`knowledge.selectors.search` only reads: it plans a search
(:func:`~knowledge.selectors.search.knowledge_search_plan`) and runs it with the query vectors it is
given (:func:`~knowledge.selectors.search.knowledge_search_run`). Embedding the query is the step
between, and it lives here because it may call the network (an OpenAI-compatible endpoint) and
must run outside any transaction.

Query vectors: one per distinct provider setting of the searched KBs (provider, model, dimension and
config: a vector of one model means nothing next to another's), taken from the process's
query-vector cache (:mod:`knowledge.query_vectors`) when it holds the exact query text, else
embedded and remembered. A failed embedding is logged with the KB and the error code only, never the
query, and that KB answers lexically (``embedding_failed:<kb>``, status ``partial``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from agent_runtime.config import FUSION_DEFAULTS
from knowledge.embeddings import EmbeddingConfigError, EmbeddingError
from knowledge.models import KnowledgeBase
from knowledge.query_vectors import query_vector_cache
from knowledge.selectors.scope import KnowledgeScope
from knowledge.selectors.search import (
    LANES,
    SearchPlan,
    SearchResult,
    knowledge_search_plan,
    knowledge_search_run,
    search_disabled,
)
from knowledge.services.providers import embedding_provider_for

logger = logging.getLogger(__name__)


class _FromScope:
    """Sentinel type: take ``min_score`` from the scope's configuration."""

    def __repr__(self) -> str:
        return "FROM_SCOPE"


FROM_SCOPE: Any = _FromScope()


def knowledge_search(
    *,
    scope: KnowledgeScope,
    query: str,
    limit: int | None = None,
    min_score: float | Any | None = FROM_SCOPE,
) -> SearchResult:
    """Search a route's knowledge scope with its ``top_k``, ``min_score`` and ``fusion`` settings.

    ``limit`` and ``min_score`` override the scope's values (``min_score=None``: no threshold).
    Disabled KBs are not in ``scope.bases`` and are not failures; ``scope.missing`` KBs are.
    """
    config = scope.config
    if not scope.configured:
        return search_disabled()
    return knowledge_search_bases(
        bases=list(scope.bases),
        query=query,
        limit=config["top_k"] if limit is None else limit,
        min_score=config["min_score"] if min_score is FROM_SCOPE else min_score,
        fusion={**FUSION_DEFAULTS, **(config.get("fusion") or {})},
        missing=list(scope.missing),
    )


def knowledge_search_bases(
    *,
    bases: list[KnowledgeBase],
    query: str,
    limit: int,
    min_score: float | None,
    fusion: dict[str, Any],
    missing: Sequence[str] = (),
    lanes: tuple[str, ...] = LANES,
    candidates: int | None = None,
) -> SearchResult:
    """Search ``bases`` (enabled KBs) for ``query`` and return at most ``limit`` fresh hits.

    The arguments are :func:`~knowledge.selectors.search.knowledge_search_plan`'s (which raises
    ``ValueError`` for a blank query, a ``limit`` below 1 or an unknown lane).
    """
    plan = knowledge_search_plan(
        bases=bases,
        query=query,
        limit=limit,
        min_score=min_score,
        fusion=fusion,
        missing=missing,
        lanes=lanes,
        candidates=candidates,
    )
    return knowledge_search_run(plan=plan, vectors=query_vectors_embed(plan=plan))


def query_vectors_embed(*, plan: SearchPlan) -> dict[int, np.ndarray | None]:
    """The query vector of each KB whose vector lane the plan runs (KB pk → vector, ``None`` when its
    embedding failed), embedded once per provider setting, outside any transaction."""
    by_provider: dict[tuple, np.ndarray | None] = {}
    vectors: dict[int, np.ndarray | None] = {}
    for kb in plan.bases:
        if not plan.embeds(kb):
            continue
        key = _provider_key(kb)
        if key not in by_provider:
            by_provider[key] = _query_vector(kb, key, plan.text)
        vectors[kb.pk] = by_provider[key]
    return vectors


def _provider_key(kb: KnowledgeBase) -> tuple[str, str, int, str]:
    """KBs with the same provider settings share one query embedding per search."""
    config = kb.embedding_config or {}
    return (kb.embedding_provider, kb.embedding_model, kb.embedding_dim, repr(sorted(config.items())))


def _query_vector(kb: KnowledgeBase, key: tuple, text: str) -> np.ndarray | None:
    remembered = query_vector_cache()
    known = remembered.get((key, text))
    if known is not None:
        return known
    try:
        provider = embedding_provider_for(kb)
        if provider is None:
            raise EmbeddingConfigError("no embedding provider")
        rows = provider.embed([text])
        if rows.shape != (1, kb.embedding_dim):
            raise EmbeddingError("embedding_dimension_mismatch")
        return remembered.put((key, text), rows[0])
    except (EmbeddingError, EmbeddingConfigError) as exc:
        logger.warning(
            "knowledge search: query embedding failed for kb %s (%s)",
            kb.kb_id,
            getattr(exc, "code", type(exc).__name__),
        )
        return None
