"""Knowledge retrieval: plan the search, embed the query, run the lanes (docs/protocol.md "Knowledge
retrieval").

The one way into the hybrid retriever for every caller — the agent surfaces
(:mod:`knowledge.services.agent_knowledge`), the console's hit test, ``knowledge_eval`` and
``knowledge_bench``. A search is planned here (the query validated and cut to
:data:`RETRIEVAL_QUERY_MAX_CHARS`, the lanes and their weights, which KBs need a query vector), the
query is embedded for those, outside any transaction (embedding may call the network: an
OpenAI-compatible endpoint), and :func:`knowledge.selectors.search.knowledge_search_run` reads:
lanes, freshness check, fusion.

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
from bailing import tracing
from knowledge.embeddings import EmbeddingConfigError, EmbeddingError
from knowledge.models import KnowledgeBase
from knowledge.query_vectors import query_vector_cache
from knowledge.selectors.scope import KnowledgeScope
from knowledge.selectors.search import (
    LANE_LEXICAL,
    LANE_VECTOR,
    LANES,
    SearchPlan,
    SearchResult,
    knowledge_search_run,
    search_disabled,
)
from knowledge.services.providers import embedding_provider_for
from knowledge.vectors import vector_storage_ready

logger = logging.getLogger(__name__)

# What retrieval reads of a query, for the lexical lane and the query embedding alike: a turn's input
# may be 64,000 characters and embedding windows truncate long input anyway, so this bounds what is
# analysed, tokenised and sent. (What an agent may ask is a surface limit, checked before this:
# knowledge.services.agent_knowledge.AGENT_QUERY_MAX_CHARS.)
RETRIEVAL_QUERY_MAX_CHARS = 4000


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

    ``missing`` names configured KBs that do not exist (failed sources). ``lanes`` picks the lanes
    (the eval runs each alone); a requested vector lane that cannot run for a KB degrades that KB to
    lexical. ``candidates`` is the depth of each lane per KB (default
    :data:`~knowledge.selectors.search.DEFAULT_CANDIDATES`, at least ``limit``, at most
    :data:`~knowledge.selectors.search.MAX_CANDIDATES`). ``min_score`` (cosine) filters the vector
    lane only; ``None`` means no threshold. Raises ``ValueError`` for a blank query, a ``limit``
    below 1 or an unknown lane — callers validate user input before calling.
    """
    text = query.strip()[:RETRIEVAL_QUERY_MAX_CHARS] if isinstance(query, str) else ""
    if not text:
        raise ValueError("query must be a non-empty string")
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if not lanes or any(lane not in LANES for lane in lanes):
        raise ValueError("unknown retrieval lane")
    settings = {**FUSION_DEFAULTS, **fusion}
    weights = {LANE_LEXICAL: float(settings["lexical_weight"]), LANE_VECTOR: float(settings["vector_weight"])}
    wanted = tuple(lane for lane in lanes if weights[lane] > 0)
    plan = SearchPlan(
        text=text,
        bases=tuple(bases),
        missing=tuple(missing),
        limit=limit,
        min_score=min_score,
        fusion=settings,
        weights=weights,
        wanted=wanted,
        candidates=candidates,
        # Nothing to search asks nothing of the database.
        vector_ready=bool(bases or missing) and LANE_VECTOR in wanted and vector_storage_ready(),
    )
    with tracing.span("knowledge.search", kbs=len(plan.bases)):
        result = knowledge_search_run(plan=plan, vectors=query_vectors_embed(plan=plan))
        tracing.annotate(status=result.status, mode=result.mode, hits=len(result.hits))
    return result


@tracing.traced("knowledge.query_embedding")
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
        tracing.annotate(cached=True)
        return known
    try:
        provider = embedding_provider_for(kb)
        if provider is None:
            raise EmbeddingConfigError("no embedding provider")
        with tracing.span("knowledge.embed", provider=kb.embedding_provider, model=kb.embedding_model):
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
