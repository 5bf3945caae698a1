"""Hybrid knowledge retrieval: a BM25 lexical lane, a pgvector lane, rank fusion and freshness.

Lanes (per knowledge base)
    ``lexical`` (spec name ``text``)
        BM25 computed in SQL from the inverted index the indexer writes (``knowledge_posting`` with
        ``tf`` and the chunk length ``dl``, ``knowledge_termstat.df``, ``knowledge_knowledgebasestats``
        for N and the average length). The query is analysed exactly like the chunks: Han runs are
        segmented (:func:`knowledge.lexical.lexical_query`) and the terms go through
        ``to_tsvector('english', …)``, so stemming and stop words match the index. OR semantics: a
        chunk scores for every query lexeme it contains. Each lexeme's posting list is read in impact
        order (high ``tf``, then short chunk first) through the covering index
        ``knowledge_posting_impact`` and cut at :data:`POSTINGS_PER_TERM` rows: exact BM25 for every
        lexeme that occurs in fewer chunks than that, an impact-ordered approximation for very common
        lexemes (whose IDF, and so whose weight, is small anyway). One statement per KB.
    ``vector`` (spec name ``vector``)
        The query vector of the KB's own provider (a vector of one model means nothing next to
        another's) is searched in the KB's partial HNSW cosine index: the statement repeats the
        index's ``embedding::vector(<dim>)`` cast and ``kb_id = <pk>`` predicate, and
        ``hnsw.ef_search`` is raised to the candidate depth so the index can return that many.
        Score = cosine similarity = 1 − cosine distance; ``min_score`` filters this lane only (a
        BM25 score has no fixed scale to put a threshold on).

Fusion (``fusion`` = the route's ``knowledge.fusion``, defaults in ``FUSION_DEFAULTS``)
    ``rrf``         score = Σ over lanes of ``weight / (rrf_k + rank)``; rank is 1-based in the lane.
    ``normalized``  each lane's scores are min-max normalised over the KB's candidates (a single
                    candidate, or equal scores, normalise to 1) and summed with the lane weights.
    A lane whose weight is 0 is not run. Fusion happens within each KB; KBs are then merged by fused
    score. RRF scores depend only on ranks, so they are comparable across KBs; raw BM25 and cosine
    scores are not (BM25 depends on each KB's statistics, cosine on each KB's model), which is why
    they are reported per lane but never merged directly. Ties break on ``kb_id`` then chunk id, so
    equal inputs always give the same order. Scores are ranking scores, not probabilities.

Freshness (docs/protocol.md "Knowledge retrieval")
    Every candidate is re-read before it is returned: its document must be ``ready`` with the
    revision the chunk was cut from, the chunk's KB must be the searched KB and still enabled, and
    the stored chunk text must still equal ``document.content[char_start:char_end]``. The check is
    part of the KB's lane statement (its snapshot is the lanes' own) and reads the candidates in
    fused order, one by one, until ``limit`` of them passed: a search serves ``limit`` hits, so it
    re-reads about that many chunks, not all of both lanes' candidates (each re-read detoasts the
    document's text; at 100k chunks checking all of them was 9.5 of a 13.9 ms statement). Stale
    candidates keep their lane ranks but are skipped, and later ones fill the gap (each lane fetches
    more candidates than ``limit`` for this reason).

Status and degradation (docs/protocol.md "Search status values")
    ``disabled``     nothing to search (no KB configured, or every configured KB disabled).
    ``ok``           every source was searched (zero hits included). Searching lexically because
                     pgvector is missing (``vector_extension_missing``) or a KB embeds with provider
                     ``none`` (``embedding_provider_none:<kb>``) is a configured degradation: still
                     ``ok``, with ``mode`` ``lexical`` and the reason in ``degraded``.
    ``partial``      at least one source failed and at least one was searched. Failures: a KB that
                     does not exist (``kb_missing:<kb>``), a database error in a KB's lanes
                     (``kb_failed:<kb>``; its hits are dropped), a query embedding that failed
                     (``embedding_failed:<kb>``; the KB still answers lexically).
    ``unavailable``  every source failed. Never an empty ``ok`` when retrieval failed.

This module only reads (it imports no service and never calls the network):
:mod:`knowledge.services.retrieval` validates and cuts the query, decides the lanes and which KBs
need a query vector (a :class:`SearchPlan`), embeds the query for those (or takes the vector from the
query-vector cache) and hands plan and vectors to :func:`knowledge_search_run`, which runs the
lanes, the freshness check and the fusion.

Each KB's lanes, their fusion and the freshness check are one statement (the lanes as materialized
CTEs, ranks and fused scores in SQL with the same float8 arithmetic as Python's), run
with a statement timeout and the HNSW search depth set for it alone: outside a transaction the
``set_config(…, true)`` and the statement are sent together in pipeline mode, one round trip and one
implicit transaction that ends with them (no BEGIN, no ROLLBACK); inside a caller's transaction they
run in a savepoint that is always rolled back (the lanes only read). Either way the settings never
leak into what the connection does next, and a database error in one KB cannot abort the others.
Logs name the KB and the error class only, never SQL, the query text or document text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import DatabaseError, connection, transaction

from bailing import tracing
from knowledge.lexical import TS_CONFIG, lexical_query
from knowledge.metrics import SEARCH_LANE_SECONDS
from knowledge.models import Document, KnowledgeBase
from knowledge.vectors import VECTOR_TABLE, register

logger = logging.getLogger(__name__)

# BM25 parameters. k1 (term-frequency saturation) and b (length normalisation) as in the Anserini
# BM25 baseline the eval reference uses; re-check with ``knowledge_eval --split dev`` before changing.
BM25_K1 = 0.9
BM25_B = 0.4
# Rows read per query lexeme from its impact-ordered posting list (see the module docstring).
POSTINGS_PER_TERM = 2000
# Candidates fetched per lane and KB when the caller does not say: enough to refill after stale
# hits and to give fusion overlap to work with, small enough to keep a query in milliseconds.
DEFAULT_CANDIDATES = 50
# pgvector's upper bound for hnsw.ef_search, and so for what one HNSW scan returns.
MAX_CANDIDATES = 1000
# Below pgvector's default ef_search (40) recall drops sharply even for small result sets.
MIN_EF_SEARCH = 40
# A KB's lanes must not hold a connection for long; a timeout marks that KB failed.
LANE_STATEMENT_TIMEOUT_MS = 5000

LANE_LEXICAL = "lexical"
LANE_VECTOR = "vector"
LANES = (LANE_LEXICAL, LANE_VECTOR)
# Spec names of the lanes in ``Hit.retrievers`` (knowledge-mcp-tools: ``["vector", "text"]``).
_RETRIEVER_NAMES = {LANE_VECTOR: "vector", LANE_LEXICAL: "text"}

STATUS_OK = "ok"
STATUS_PARTIAL = "partial"
STATUS_UNAVAILABLE = "unavailable"
STATUS_DISABLED = "disabled"

KB_OK = "ok"
KB_LEXICAL_ONLY = "lexical_only"
KB_FAILED = "failed"
KB_MISSING = "missing"


@dataclass(frozen=True)
class Hit:
    """One returned chunk, re-checked against the current document (see Freshness)."""

    chunk_id: int
    document_id: int
    kb_id: str
    source_key: str
    seq: int
    title: str
    content: str  # exact current chunk text
    revision: str  # document revision
    score: float  # fused score (not a probability)
    lexical_rank: int | None  # 1-based rank in its KB's lexical lane
    lexical_score: float | None  # BM25
    vector_rank: int | None  # 1-based rank in its KB's vector lane
    vector_score: float | None  # cosine similarity
    retrievers: tuple[str, ...]  # spec lane names that found it: "vector", "text"
    # The document metadata's ``source`` label, when its connector recorded a non-blank string.
    source: str | None = None


@dataclass(frozen=True)
class SearchResult:
    status: str  # "ok" | "partial" | "unavailable" | "disabled"
    hits: list[Hit]  # best first, at most ``limit``
    # "hybrid" | "lexical" | "vector" (only when the caller asked for that lane alone) | "none"
    mode: str
    degraded: list[str]  # stable reason codes, see the module docstring
    kb_status: dict[str, str]  # kb_id -> "ok" | "lexical_only" | "failed" | "missing"


@dataclass(frozen=True)
class SearchPlan:
    """One search, decided before its query is embedded (:mod:`knowledge.services.retrieval`)."""

    text: str  # the query as the lanes and the embedding read it: stripped, cut
    bases: tuple[KnowledgeBase, ...]
    missing: tuple[str, ...]  # configured KBs that do not exist (failed sources)
    limit: int  # at least 1
    min_score: float | None  # cosine threshold of the vector lane; None: none
    fusion: dict[str, Any]  # FUSION_DEFAULTS with the caller's settings over them
    weights: dict[str, float]
    wanted: tuple[str, ...]  # the requested lanes whose weight is not 0
    candidates: int | None  # lane depth per KB (default DEFAULT_CANDIDATES, within limit..MAX_CANDIDATES)
    vector_ready: bool  # the vector lane is wanted and pgvector storage exists

    @property
    def disabled(self) -> bool:
        return not self.bases and not self.missing

    def embeds(self, kb: KnowledgeBase) -> bool:
        """Whether ``kb``'s vector lane runs, and so needs the query embedded with its provider."""
        return self.vector_ready and kb.has_embeddings


@dataclass
class _KbOutcome:
    kb: KnowledgeBase
    status: str = KB_OK
    lanes_run: set[str] = field(default_factory=set)
    degraded: list[str] = field(default_factory=list)
    # The KB answered but one requested source failed (an embedding error): makes the search partial.
    failure: bool = False
    # Its best fresh candidates in fused order, at most the plan's ``limit``.
    hits: list[Hit] = field(default_factory=list)


def knowledge_search_run(*, plan: SearchPlan, vectors: Mapping[int, np.ndarray | None]) -> SearchResult:
    """Run ``plan``: every KB's lanes and freshness check, fusion, merge and status.

    ``vectors`` maps the pk of each KB the plan :meth:`~SearchPlan.embeds` to its query vector, or to
    ``None`` when embedding failed (that KB answers lexically and the search is ``partial``).
    """
    if plan.disabled:
        return search_disabled()
    depth = min(max(plan.candidates or DEFAULT_CANDIDATES, plan.limit), MAX_CANDIDATES)
    degraded: list[str] = []
    if LANE_VECTOR in plan.wanted and not plan.vector_ready:
        degraded.append("vector_extension_missing")
    # The lexical lane's text: the query's terms (Han runs segmented), analysed by to_tsvector in SQL.
    lexical_text = " ".join(lexical_query(plan.text)) if LANE_LEXICAL in plan.wanted else None

    outcomes = [
        _kb_plan(kb, plan=plan, vector=vectors.get(kb.pk) if plan.embeds(kb) else None) for kb in plan.bases
    ]
    for outcome, vector in outcomes:
        if outcome.status != KB_FAILED:
            _kb_search(outcome, lexical_text=lexical_text, vector=vector, depth=depth, plan=plan)
    results = [outcome for outcome, _ in outcomes]
    # Each KB's best ``limit`` fresh hits include its share of the best ``limit`` overall.
    hits = sorted(
        (hit for outcome in results for hit in outcome.hits),
        key=lambda hit: (-hit.score, hit.kb_id, hit.chunk_id),
    )[: plan.limit]

    kb_status: dict[str, str] = {}
    searched = failed = 0
    lanes_run: set[str] = set()
    for outcome in results:
        kb_status[outcome.kb.kb_id] = outcome.status
        degraded.extend(outcome.degraded)
        if outcome.status == KB_FAILED:
            failed += 1
            continue
        searched += 1
        failed += int(outcome.failure)
        lanes_run |= outcome.lanes_run
    for kb_id in plan.missing:
        kb_status[kb_id] = KB_MISSING
        degraded.append(f"kb_missing:{kb_id}")
        failed += 1

    if not failed:
        status = STATUS_OK
    elif searched:
        status = STATUS_PARTIAL
    else:
        status = STATUS_UNAVAILABLE
    return SearchResult(
        status=status,
        hits=hits if searched else [],
        mode=_mode(lanes_run),
        degraded=degraded,
        kb_status=kb_status,
    )


def search_disabled() -> SearchResult:
    """The answer when there is nothing to search (no KB configured, or all of them disabled)."""
    return SearchResult(status=STATUS_DISABLED, hits=[], mode="none", degraded=[], kb_status={})


def _mode(lanes_run: set[str]) -> str:
    if lanes_run == {LANE_LEXICAL, LANE_VECTOR}:
        return "hybrid"
    if lanes_run == {LANE_LEXICAL}:
        return "lexical"
    if lanes_run == {LANE_VECTOR}:
        return "vector"
    return "none"


def _kb_plan(
    kb: KnowledgeBase, *, plan: SearchPlan, vector: np.ndarray | None
) -> tuple[_KbOutcome, np.ndarray | None]:
    """Decide which lanes run for ``kb``, given its query vector (``None``: none, or it failed)."""
    wanted = plan.wanted
    outcome = _KbOutcome(kb=kb)
    if LANE_VECTOR in wanted:
        if not kb.has_embeddings:
            outcome.degraded.append(f"embedding_provider_none:{kb.kb_id}")
        elif plan.vector_ready and vector is None:
            outcome.degraded.append(f"embedding_failed:{kb.kb_id}")
            outcome.failure = True
    if vector is None and LANE_VECTOR in wanted:
        if LANE_LEXICAL not in wanted:
            # Nothing this KB can answer with.
            outcome.status = KB_FAILED
            outcome.failure = False
            return outcome, None
        outcome.status = KB_LEXICAL_ONLY
    return outcome, vector


_LEXICAL_SQL = f"""
WITH stats AS (
    SELECT chunks::float8 AS n, greatest(tokens::float8 / greatest(chunks, 1), 1.0) AS avgdl
    FROM knowledge_knowledgebasestats WHERE kb_id = %(kb)s
), terms AS (
    SELECT t.term, ln(1.0 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM (SELECT lexeme FROM unnest(to_tsvector('{TS_CONFIG}'::regconfig, %(text)s))) AS q(term)
    JOIN knowledge_termstat t ON t.kb_id = %(kb)s AND t.term = q.term
    CROSS JOIN stats s
    WHERE t.df > 0
)
SELECT p.chunk_id,
       sum(terms.idf * p.tf * (%(k1)s + 1.0)
           / (p.tf + %(k1)s * (1.0 - %(b)s + %(b)s * p.dl / s.avgdl))) AS score
FROM terms
CROSS JOIN stats s
CROSS JOIN LATERAL (
    SELECT chunk_id, tf, dl FROM knowledge_posting
    WHERE kb_id = %(kb)s AND term = terms.term
    ORDER BY tf DESC, dl
    LIMIT %(per_term)s
) p
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %(depth)s
"""  # noqa: S608 - only the module constant TS_CONFIG is interpolated; values are bound parameters


def _vector_sql(kb: KnowledgeBase, *, named: bool = False) -> str:
    """The vector lane's statement for ``kb``: the literal cast and predicate of its partial index.

    Parameters are the query vector and the depth, positional or (``named``) ``%(vector)s`` and
    ``%(depth)s``."""
    dim, pk = int(kb.embedding_dim), int(kb.pk)
    vector, depth = ("%(vector)s", "%(depth)s") if named else ("%s", "%s")
    return (
        f"SELECT chunk_id, embedding::vector({dim}) <=> {vector} AS distance FROM {VECTOR_TABLE} "  # noqa: S608
        f"WHERE kb_id = {pk} ORDER BY distance LIMIT {depth}"
    )


# The freshness check of one candidate (see Freshness): its current row when it may be served. OFFSET 0
# keeps it a subquery run per candidate (never flattened into a join over all of them), so it runs
# for the fused order's candidates one by one until ``limit`` of them passed.
_FRESH_LATERAL = """
CROSS JOIN LATERAL (
    SELECT c.document_id, c.seq, c.content, d.source_key, d.title, d.revision,
           CASE WHEN jsonb_typeof(d.metadata -> 'source') = 'string' THEN d.metadata ->> 'source' END
               AS source
    FROM knowledge_chunk c
    JOIN knowledge_document d ON d.id = c.document_id AND d.kb_id = c.kb_id
    JOIN knowledge_knowledgebase kb ON kb.id = c.kb_id
    WHERE c.id = k.chunk_id
      AND c.kb_id = %(kb)s
      AND kb.enabled
      AND d.status = %(ready)s
      AND c.revision = d.revision
      AND c.content = substr(d.content, c.char_start + 1, c.char_end - c.char_start)
    OFFSET 0
) f
"""

# A lane's score normalised over the KB's candidates (see Fusion): 0 outside the lane, 1 when every
# candidate of the lane scored the same. ``{lane}`` is ``lexical`` or ``vector``.
_NORMALISED = (
    "CASE WHEN {lane}_score IS NULL THEN 0.0::float8 WHEN {lane}_span > 0"
    " THEN ({lane}_score - {lane}_low) / {lane}_span ELSE 1.0::float8 END"
)

_SETTINGS_SQL = "SELECT set_config('statement_timeout', %s, true), set_config('hnsw.ef_search', %s, true)"


def _lane_ctes(kb: KnowledgeBase, *, lexical: bool, vector: bool) -> list[str]:
    """The lanes that run, each a materialized CTE (``lexical``: chunk_id, score; ``nearest``: chunk_id,
    distance), so each is planned exactly as its statement alone (the impact index, the partial HNSW
    index)."""
    ctes = []
    if lexical:
        ctes.append(f"lexical AS MATERIALIZED ({_LEXICAL_SQL})")
    if vector:
        ctes.append(f"nearest AS MATERIALIZED ({_vector_sql(kb, named=True)})")
    return ctes


def _lanes_only_sql(kb: KnowledgeBase, *, lexical: bool, vector: bool) -> str:
    """The lanes alone, their candidates' chunk ids: what every search of ``kb`` must run."""
    lanes = (["SELECT chunk_id FROM lexical"] if lexical else []) + (
        ["SELECT chunk_id FROM nearest"] if vector else []
    )
    return f"WITH {', '.join(_lane_ctes(kb, lexical=lexical, vector=vector))}\n{' UNION '.join(lanes)}"


def _lanes_sql(
    kb: KnowledgeBase, *, lexical: bool, vector: bool, min_score: bool = False, method: str = "rrf"
) -> str:
    """One KB's lanes, their fusion and the freshness check of the fused order, as one statement.

    The lanes rank their candidates (lexical: score, then chunk id; vector: distance, then chunk id,
    after the ``%(min_score)s`` threshold when ``min_score``), fusion scores each candidate of either
    lane (``method``: ``rrf`` with ``%(rrf_k)s``, or ``normalized``; weights ``%(w_lexical)s`` and
    ``%(w_vector)s``), and the freshness check reads candidates in fused order (score descending, then
    chunk id) until ``%(limit)s`` of them passed: stale ones keep their ranks and are skipped.

    Rows: one summary row (``chunk_id`` NULL; the lexical and the vector lane's candidate counts in
    the rank columns), then at most ``limit`` hits in fused order: ``chunk_id, score, lexical_rank,
    lexical_score, vector_rank, vector_score`` (lane columns NULL outside that lane; ``vector_score`` is
    the cosine similarity), then the chunk's current ``document_id, seq, content, source_key, title,
    revision, source`` (``source``: the document metadata's ``source`` string, else NULL).
    """
    ctes = _lane_ctes(kb, lexical=lexical, vector=vector)
    if lexical:
        ctes.append(
            "lex AS (SELECT chunk_id, score, row_number() OVER (ORDER BY score DESC, chunk_id) AS rank "
            "FROM lexical)"
        )
    if vector:
        cosine = "1.0::float8 - distance"
        where = f" WHERE {cosine} >= %(min_score)s" if min_score else ""
        rank = "row_number() OVER (ORDER BY distance, chunk_id) AS rank"
        ctes.append(f"vec AS (SELECT chunk_id, {cosine} AS cosine, {rank} FROM nearest{where})")  # noqa: S608 - fixed fragments
    lexical_cols = (
        "l.rank AS lexical_rank, l.score AS lexical_score"
        if lexical
        else "NULL::bigint AS lexical_rank, NULL::float8 AS lexical_score"
    )
    vector_cols = (
        "v.rank AS vector_rank, v.cosine AS vector_score"
        if vector
        else "NULL::bigint AS vector_rank, NULL::float8 AS vector_score"
    )
    if lexical and vector:
        source, chunk = "lex l FULL JOIN vec v ON v.chunk_id = l.chunk_id", "coalesce(l.chunk_id, v.chunk_id)"
    else:
        source, chunk = ("lex l", "l.chunk_id") if lexical else ("vec v", "v.chunk_id")
    ctes.append(f"lanes AS (SELECT {chunk} AS chunk_id, {lexical_cols}, {vector_cols} FROM {source})")  # noqa: S608 - fixed fragments
    if method == "normalized":
        spread = ", ".join(
            f"min({lane}_score) OVER () AS {lane}_low, "
            f"max({lane}_score) OVER () - min({lane}_score) OVER () AS {lane}_span"
            for lane in ("lexical", "vector")
        )
        ctes.append(f"spread AS (SELECT *, {spread} FROM lanes)")  # noqa: S608 - fixed fragments
        fused = (
            f"%(w_lexical)s::float8 * {_NORMALISED.format(lane='lexical')}"
            f" + %(w_vector)s::float8 * {_NORMALISED.format(lane='vector')}"
        )
        ctes.append(f"fused AS (SELECT *, {fused} AS score FROM spread)")  # noqa: S608 - fixed fragments
    else:
        fused = (
            "coalesce(%(w_lexical)s::float8 / (%(rrf_k)s::int8 + lexical_rank), 0.0::float8)"
            " + coalesce(%(w_vector)s::float8 / (%(rrf_k)s::int8 + vector_rank), 0.0::float8)"
        )
        ctes.append(f"fused AS (SELECT *, {fused} AS score FROM lanes)")  # noqa: S608 - fixed fragments
    lexical_found = "(SELECT count(*) FROM lexical)" if lexical else "0::bigint"
    vector_found = "(SELECT count(*) FROM nearest)" if vector else "0::bigint"
    return (
        f"WITH {', '.join(ctes)}\n"  # noqa: S608 - fixed fragments
        f"SELECT NULL::bigint, NULL::float8, {lexical_found}, NULL::float8, {vector_found}, NULL::float8,\n"
        "       NULL, NULL, NULL, NULL, NULL, NULL, NULL\n"
        "UNION ALL (\n"
        "SELECT k.chunk_id, k.score, k.lexical_rank, k.lexical_score, k.vector_rank, k.vector_score,\n"
        "       f.document_id, f.seq, f.content, f.source_key, f.title, f.revision, f.source\n"
        "FROM (SELECT chunk_id, score, lexical_rank, lexical_score, vector_rank, vector_score FROM fused\n"
        "      ORDER BY score DESC, chunk_id) k"
        f"{_FRESH_LATERAL}"
        "ORDER BY k.score DESC, k.chunk_id\n"
        "LIMIT %(limit)s)"
    )


def _lanes_execute(sql: str, params: dict[str, Any], *, depth: int) -> list[tuple]:
    """Run one KB's lane statement with its own statement timeout and HNSW depth (see the module
    docstring): pipelined with its settings outside a transaction, in a rolled-back savepoint inside
    one."""
    settings = [str(LANE_STATEMENT_TIMEOUT_MS), str(max(depth, MIN_EF_SEARCH))]
    if connection.in_atomic_block:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_SETTINGS_SQL, settings)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            # The lanes only read: rolling back undoes the SET LOCALs instead of leaking them.
            transaction.set_rollback(True)
        return rows
    connection.ensure_connection()
    # Both statements before one Sync: one implicit transaction, so the local settings hold for the
    # lanes and end with them. Errors of the pipeline itself become Django's DatabaseError too.
    with connection.wrap_database_errors, connection.connection.pipeline(), connection.cursor() as cursor:
        cursor.execute(_SETTINGS_SQL, settings)
        cursor.execute(sql, params)
        return cursor.fetchall()


def _lanes_statement(
    kb: KnowledgeBase,
    *,
    lexical_text: str | None,
    vector: np.ndarray | None,
    depth: int,
    limit: int,
    min_score: float | None,
    fusion: Mapping[str, Any],
    weights: Mapping[str, float],
) -> tuple[str, dict[str, Any]]:
    """One KB's search statement and its parameters (see :func:`_lanes_sql`)."""
    params = _lane_params(kb, lexical_text=lexical_text, vector=vector, depth=depth)
    params.update(
        limit=limit,
        w_lexical=float(weights[LANE_LEXICAL]),
        w_vector=float(weights[LANE_VECTOR]),
        rrf_k=int(fusion["rrf_k"]),
        min_score=min_score,
    )
    sql = _lanes_sql(
        kb,
        lexical=bool(lexical_text),
        vector=vector is not None,
        min_score=min_score is not None,
        method=fusion["method"],
    )
    return sql, params


def _lane_params(
    kb: KnowledgeBase, *, lexical_text: str | None, vector: np.ndarray | None, depth: int
) -> dict[str, Any]:
    params: dict[str, Any] = {"kb": kb.pk, "ready": Document.Status.READY}
    if lexical_text:
        params.update(text=lexical_text, k1=BM25_K1, b=BM25_B, per_term=POSTINGS_PER_TERM, depth=depth)
    if vector is not None:
        params.update(vector=vector, depth=depth)
    return params


def knowledge_lanes_rows(
    kb: KnowledgeBase, *, text: str, vector: np.ndarray | None, limit: int
) -> list[tuple]:
    """The candidates of ``kb``'s lanes for the query ``text`` (already cut as retrieval cuts it) and
    its query ``vector`` (``None``: the lexical lane alone), with the lane statements and settings a
    search of ``limit`` hits runs — without the fusion and the freshness check around them. For the
    benchmarks' floor (``benchmarks/views.py``): what a search must cost in the database."""
    depth = min(max(DEFAULT_CANDIDATES, limit), MAX_CANDIDATES)
    lexical_text = " ".join(lexical_query(text)) or None
    params = _lane_params(kb, lexical_text=lexical_text, vector=vector, depth=depth)
    if vector is not None:
        register()
    return _lanes_execute(
        _lanes_only_sql(kb, lexical=bool(lexical_text), vector=vector is not None), params, depth=depth
    )


def _kb_search(
    outcome: _KbOutcome,
    *,
    lexical_text: str | None,
    vector: np.ndarray | None,
    depth: int,
    plan: SearchPlan,
) -> None:
    """Run ``outcome.kb``'s lanes, fusion and freshness check in one statement; a database error fails
    the KB."""
    kb = outcome.kb
    run_lexical, run_vector = bool(lexical_text), vector is not None
    rows: list[tuple] = []
    if run_lexical or run_vector:
        sql, params = _lanes_statement(
            kb,
            lexical_text=lexical_text,
            vector=vector,
            depth=depth,
            limit=plan.limit,
            min_score=plan.min_score,
            fusion=plan.fusion,
            weights=plan.weights,
        )
        try:
            if run_vector:
                register()  # before the cursor is opened: it copies the connection's adapters
            started = time.perf_counter()
            with tracing.span("knowledge.lanes", kb=kb.kb_id, lexical=run_lexical, vector=run_vector):
                begun = tracing.clock()
                rows = _lanes_execute(sql, params, depth=depth)
                if begun:
                    _lane_spans(kb, rows, begun, lexical=run_lexical, vector=run_vector)
            lane = "hybrid" if run_lexical and run_vector else LANE_LEXICAL if run_lexical else LANE_VECTOR
            SEARCH_LANE_SECONDS.labels(lane=lane).observe(time.perf_counter() - started)
        except DatabaseError as exc:
            logger.warning("knowledge search: kb %s failed (%s)", kb.kb_id, type(exc).__name__)
            outcome.status = KB_FAILED
            outcome.failure = False
            outcome.degraded.append(f"kb_failed:{kb.kb_id}")
            return
    # A query without lexical terms still searched the lexical lane (and found nothing there).
    if lexical_text is not None:
        outcome.lanes_run.add(LANE_LEXICAL)
    if vector is not None:
        outcome.lanes_run.add(LANE_VECTOR)
    outcome.hits = [_hit(kb, row) for row in rows if row[0] is not None]


def _lane_spans(kb: KnowledgeBase, rows: list[tuple], begun: int, *, lexical: bool, vector: bool) -> None:
    """One span per lane that ran (tracing on): the lanes share one statement, so each lane's span
    covers that statement, and carries the candidates the lane returned (the summary row's counts)."""
    ended = tracing.clock()
    summary = next(row for row in rows if row[0] is None)
    if lexical:
        tracing.span_record("knowledge.lane.lexical", begun, ended, kb=kb.kb_id, candidates=int(summary[2]))
    if vector:
        tracing.span_record("knowledge.lane.vector", begun, ended, kb=kb.kb_id, candidates=int(summary[4]))


def _hit(kb: KnowledgeBase, row: tuple) -> Hit:
    """A hit row of :func:`_lanes_sql` as a :class:`Hit`."""
    chunk_id, score, lexical_rank, lexical_score, vector_rank, vector_score = row[:6]
    document_id, seq, content, source_key, title, revision, source = row[6:]
    retrievers = tuple(
        _RETRIEVER_NAMES[lane]
        for lane, rank in ((LANE_VECTOR, vector_rank), (LANE_LEXICAL, lexical_rank))
        if rank is not None
    )
    return Hit(
        chunk_id=int(chunk_id),
        document_id=document_id,
        kb_id=kb.kb_id,
        source_key=source_key,
        seq=seq,
        title=title,
        content=content,
        revision=revision,
        score=float(score),
        lexical_rank=None if lexical_rank is None else int(lexical_rank),
        lexical_score=None if lexical_score is None else float(lexical_score),
        vector_rank=None if vector_rank is None else int(vector_rank),
        vector_score=None if vector_score is None else float(vector_score),
        retrievers=retrievers,
        source=source if source is not None and source.strip() else None,
    )
