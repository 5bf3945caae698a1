"""Knowledge benchmarks: ingestion throughput and search latency at 10k / 100k chunks (figures, not tests).

``python manage.py knowledge_bench [--chunks 10000,100000] [--queries 200] [--ingest 2000] [--beir DIR]``

Text source: a BEIR-layout collection (default ``$BAILING_SHARED_DIR/eval/nfcorpus-approx``, else
``../shared/eval/nfcorpus-approx``): real corpus text for chunks, real queries for searches.

1. Ingestion (the real path). ``--ingest`` chunks of 600–700 characters are cut from the corpus text
   at word boundaries, three to a document (blank-line separated, so each becomes one chunk), put
   with :func:`document_put` and indexed with :func:`documents_index` in batches of
   :data:`INGEST_BATCH` documents (``knowledge_worker``'s default batch) into a throwaway knowledge
   base with the local MiniLM provider. Printed: chunks per second, wall clock, put + index.

2. Search corpora (built cheaply, said so in the output). Embedding 100k chunks with MiniLM takes
   about 40 minutes on two cores, so only the ingestion sample above is embedded for real; it is the
   *base set*. Each further chunk is derived from two random base chunks i and j:
   text = the words of i plus half the words of j, shuffled, cut at 700 characters (real vocabulary
   and term frequencies, so postings, document frequencies and lengths look like real text); vector
   = normalise(v_i + 0.35·v_j + N(0, 0.02²) per dimension), a real embedding nudged towards another
   real one (cosine to v_i ≈ 0.95). Chunks are grouped ten to a ``ready`` document and bulk-loaded
   into a second throwaway knowledge base: documents with ``bulk_create``, chunks with ``COPY``,
   postings and BM25 statistics with the indexer's own SQL, vectors with the indexer's binary
   ``COPY``. The KB's HNSW index is dropped during a load and rebuilt afterwards (a bulk build is
   far faster than row-by-row inserts into the graph), then the tables are vacuumed and analysed.

3. Latency: ``--queries`` real queries through :func:`knowledge_search_bases` with the route
   defaults (top_k 5, min_score 0.35, RRF k 60), once per lane setting — lexical, vector, hybrid —
   after a warm-up; wall clock per call, query embedding included. Every run (each size, each lane,
   each warm-up, the embedding-alone timing) takes queries no earlier run used, so a cache of query
   vectors cannot flatter a later run; the collection must hold enough distinct queries. Also
   printed: the plans of the two lane statements (whether they use ``knowledge_posting_impact`` and
   the KB's HNSW index).

Both knowledge bases are deleted at the end (``--keep`` keeps them). The machine is shared, so
figures vary between runs; compare within one run.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import secrets
import statistics
import time
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction
from django.utils import timezone

from agent_runtime.config import FUSION_DEFAULTS, KNOWLEDGE_DEFAULTS
from bailing.audit.actor import Actor
from knowledge.config import validate_knowledge_base_config
from knowledge.lexical import lexical_document, lexical_query
from knowledge.management.progress import add_progress_argument, progress_bar
from knowledge.models import Document, KnowledgeBase
from knowledge.selectors.search import (
    _LEXICAL_SQL,
    BM25_B,
    BM25_K1,
    LANE_LEXICAL,
    LANE_VECTOR,
    POSTINGS_PER_TERM,
    _vector_sql,
)
from knowledge.services.bases import knowledge_base_delete, knowledge_base_upsert
from knowledge.services.documents import document_put, document_revision
from knowledge.services.indexing import chunk_postings_insert, documents_index
from knowledge.services.providers import local_provider
from knowledge.services.retrieval import knowledge_search_bases
from knowledge.vectors import (
    VECTOR_TABLE,
    register,
    vector_index_drop,
    vector_index_ensure,
    vector_rows_insert,
    vector_storage_ready,
)

ACTOR = Actor.system("knowledge_bench")
INGEST_BATCH = 16
CHUNKS_PER_DOCUMENT = 10
LOAD_BATCH = 5000
WARMUP_QUERIES = 10
MIX_WEIGHT = 0.35
NOISE_SIGMA = 0.02
LANE_RUNS = (
    ("lexical", (LANE_LEXICAL,)),
    ("vector", (LANE_VECTOR,)),
    ("hybrid", (LANE_LEXICAL, LANE_VECTOR)),
)


def _default_beir() -> Path:
    shared = os.environ.get("BAILING_SHARED_DIR")
    root = Path(shared) if shared else Path(settings.BASE_DIR).parent / "shared"
    return root / "eval" / "nfcorpus-approx"


def _paragraphs(corpus: list[dict], count: int, rng: random.Random) -> list[str]:
    """``count`` paragraphs of 600–700 characters cut at word boundaries from the corpus text."""
    words = [word for item in corpus for word in str(item.get("text", "")).split()]
    if not words:
        raise CommandError("the corpus has no text")
    paragraphs: list[str] = []
    position = 0
    while len(paragraphs) < count:
        target = rng.randint(600, 700)
        current: list[str] = []
        length = -1
        while True:
            word = words[position % len(words)]
            position += 1
            if length + 1 + len(word) > target and length >= 600:
                break
            if length + 1 + len(word) > 700:
                continue  # a single overlong "word"; skip it
            current.append(word)
            length += 1 + len(word)
        paragraphs.append(" ".join(current))
    return paragraphs


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _new_kb(prefix: str) -> KnowledgeBase:
    data = validate_knowledge_base_config(
        {"kb_id": f"{prefix}-{secrets.token_hex(4)}", "name": "knowledge_bench (throwaway)"},
        path="knowledge_bench",
    )
    kb, _, _ = knowledge_base_upsert(data=data, actor=ACTOR)
    return kb


class Command(BaseCommand):
    help = "Benchmark knowledge ingestion throughput and search latency (p50/p95) at several corpus sizes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--chunks", default="10000,100000", help="corpus sizes, comma-separated")
        parser.add_argument("--queries", type=int, default=200, help="queries per lane and size")
        parser.add_argument(
            "--ingest", type=int, default=2000, help="chunks ingested for real (the base set)"
        )
        parser.add_argument("--beir", type=Path, default=None, help="BEIR directory for text and queries")
        parser.add_argument(
            "--seed", type=int, default=7, help="random seed of the synthetic corpus and queries"
        )
        parser.add_argument("--keep", action="store_true", help="keep the benchmark knowledge bases")
        add_progress_argument(parser)

    def handle(self, *args, **options) -> None:
        self.progress = options["progress"]
        if not vector_storage_ready():
            raise CommandError("the benchmark needs pgvector (the vector lane is part of what it measures)")
        try:
            sizes = sorted({int(size) for size in str(options["chunks"]).split(",") if size.strip()})
        except ValueError:
            raise CommandError("--chunks takes comma-separated integers") from None
        if not sizes or sizes[0] < 1 or options["ingest"] < 10 or options["queries"] < 1:
            raise CommandError("sizes, --ingest and --queries must be positive (--ingest at least 10)")
        beir = Path(options["beir"]) if options["beir"] else _default_beir()
        corpus_path, queries_path = beir / "corpus.jsonl", beir / "queries.jsonl"
        if not corpus_path.is_file() or not queries_path.is_file():
            raise CommandError(f"no BEIR corpus at {beir}; pass --beir DIR")
        with corpus_path.open(encoding="utf-8") as handle:
            corpus = [json.loads(line) for line in handle if line.strip()]
        with queries_path.open(encoding="utf-8") as handle:
            queries = [str(json.loads(line)["text"]) for line in handle if line.strip()]
        rng = random.Random(options["seed"])  # noqa: S311 - benchmark data, not security
        queries = list(dict.fromkeys(queries))  # distinct texts
        rng.shuffle(queries)
        # Per size: the embedding-alone timing, then a warm-up and the measured queries per lane.
        needed = len(sizes) * (options["queries"] + len(LANE_RUNS) * (WARMUP_QUERIES + options["queries"]))
        if len(queries) < needed:
            raise CommandError(
                f"{needed} distinct queries are needed (none is searched twice) but {queries_path} has "
                f"{len(queries)}; lower --queries or pass fewer --chunks sizes"
            )
        fresh = iter(queries)

        created: list[KnowledgeBase] = []
        try:
            ingest_kb = _new_kb("bench-ingest")
            created.append(ingest_kb)
            self._ingest(ingest_kb, _paragraphs(corpus, options["ingest"], rng))
            texts, vectors = self._base_set(ingest_kb)
            search_kb = _new_kb("bench-search")
            created.append(search_kb)
            rows: list[tuple[int, str, float, float]] = []
            loaded = 0
            for size in sizes:
                self._load(search_kb, texts, vectors, start=loaded, count=size - loaded, rng=rng)
                loaded = size
                self._plans(search_kb, queries[0])
                rows.extend((size, *row) for row in self._latency(search_kb, fresh, options["queries"]))
            self.stdout.write("")
            self.stdout.write(f"{'chunks':>8} {'lanes':<8} {'p50 ms':>8} {'p95 ms':>8}")
            for size, lanes, p50, p95 in rows:
                self.stdout.write(f"{size:>8} {lanes:<8} {p50:>8.1f} {p95:>8.1f}")
        finally:
            if options["keep"]:
                self.stderr.write("kept: " + ", ".join(kb.kb_id for kb in created))
            else:
                for kb in created:
                    knowledge_base_delete(kb=kb, actor=ACTOR)

    # ----------------------------------------------------------------------------------------------

    def _ingest(self, kb: KnowledgeBase, paragraphs: list[str]) -> None:
        documents = [paragraphs[i : i + 3] for i in range(0, len(paragraphs), 3)]
        local_provider().load()  # model loading is start-up cost, not throughput
        started = time.perf_counter()
        chunks = 0
        with progress_bar(
            total=len(paragraphs), desc="ingest (put + index)", unit="chunk", force=self.progress
        ) as bar:
            for start in range(0, len(documents), INGEST_BATCH):
                ids = []
                for number, parts in enumerate(documents[start : start + INGEST_BATCH], start=start):
                    put = document_put(
                        kb=kb,
                        source_key=f"bench-{number}",
                        title=f"Benchmark document {number}",
                        content="\n\n".join(parts),
                        content_type="text",
                        actor=ACTOR,
                    )
                    ids.append(put.document.pk)
                outcomes = documents_index(document_ids=ids)
                done = sum(outcome.chunks for outcome in outcomes.values())
                if any(outcome.result != "ready" for outcome in outcomes.values()):
                    raise CommandError("a benchmark document failed to index")
                chunks += done
                bar.update(done)
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"ingestion: {chunks} chunks of 600-700 chars ({len(documents)} documents, batches of "
            f"{INGEST_BATCH}) in {elapsed:.1f} s = {chunks / elapsed:.1f} chunks/s "
            f"(document_put + documents_index, local MiniLM, "
            f"{os.environ.get('BAILING_EMBEDDING_THREADS') or 'auto'} threads, {os.cpu_count()} CPUs)"
        )

    def _base_set(self, kb: KnowledgeBase) -> tuple[list[str], np.ndarray]:
        """The really embedded chunks of the ingestion run: their text and vectors."""
        register()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT c.content, v.embedding FROM knowledge_chunk c JOIN {VECTOR_TABLE} v "  # noqa: S608
                "ON v.chunk_id = c.id WHERE c.kb_id = %s ORDER BY c.id",
                [kb.pk],
            )
            rows = cursor.fetchall()
        return [row[0] for row in rows], np.stack([np.asarray(row[1], dtype=np.float32) for row in rows])

    def _load(
        self,
        kb: KnowledgeBase,
        texts: list[str],
        vectors: np.ndarray,
        *,
        start: int,
        count: int,
        rng: random.Random,
    ) -> None:
        if count <= 0:
            return
        self.stdout.write(
            f"building {start + count} chunks: {count} derived from {len(texts)} really embedded base chunks "
            f"(text: shuffled words of two base chunks; vector: normalise(v_i + {MIX_WEIGHT}·v_j + "
            f"N(0, {NOISE_SIGMA}²))); bulk-loaded with COPY, HNSW rebuilt after the load"
        )
        noise = np.random.default_rng(rng.randrange(2**32))
        base_words = [text.split() for text in texts]
        vector_index_drop(kb_pk=kb.pk)
        started = time.perf_counter()
        with progress_bar(total=count, desc="bulk load", unit="chunk", force=self.progress) as bar:
            for offset in range(0, count, LOAD_BATCH):
                size = min(LOAD_BATCH, count - offset)
                chunk_texts: list[str] = []
                pairs: list[tuple[int, int]] = []
                for _ in range(size):
                    i, j = rng.randrange(len(texts)), rng.randrange(len(texts))
                    words = base_words[i] + base_words[j][: len(base_words[j]) // 2]
                    rng.shuffle(words)
                    text = ""
                    for word in words:
                        if len(text) + 1 + len(word) > 700:
                            break
                        text = f"{text} {word}" if text else word
                    chunk_texts.append(text)
                    pairs.append((i, j))
                mixed = vectors[[i for i, _ in pairs]] + MIX_WEIGHT * vectors[[j for _, j in pairs]]
                mixed += noise.normal(0.0, NOISE_SIGMA, size=mixed.shape).astype(np.float32)
                mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
                self._bulk_insert(kb, chunk_texts, mixed, first=start + offset)
                bar.update(size)
        build = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '1GB'")
            vector_index_ensure(kb_pk=kb.pk, dim=kb.embedding_dim)
            cursor.execute("RESET maintenance_work_mem")
            for table in ("knowledge_posting", "knowledge_chunk", VECTOR_TABLE, "knowledge_termstat"):
                cursor.execute(f"VACUUM (ANALYZE) {table}")
        self.stdout.write(
            f"  loaded in {build - started:.0f} s, HNSW index built and tables vacuumed in "
            f"{time.perf_counter() - build:.0f} s"
        )

    def _bulk_insert(self, kb: KnowledgeBase, texts: list[str], vectors: np.ndarray, *, first: int) -> None:
        now = timezone.now()
        groups = [texts[i : i + CHUNKS_PER_DOCUMENT] for i in range(0, len(texts), CHUNKS_PER_DOCUMENT)]
        documents = []
        for number, parts in enumerate(groups):
            title = f"Derived document {first // CHUNKS_PER_DOCUMENT + number}"
            content = "\n\n".join(parts)
            documents.append(
                Document(
                    kb=kb,
                    source_key=f"derived-{first + number * CHUNKS_PER_DOCUMENT}",
                    title=title,
                    content=content,
                    content_type=Document.ContentType.TEXT,
                    revision=document_revision(title, content),
                    status=Document.Status.READY,
                    chunk_count=len(parts),
                    ready_at=now,
                )
            )
        with transaction.atomic():
            Document.objects.bulk_create(documents)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence('knowledge_chunk', 'id')) "
                    "FROM generate_series(1, %s)",
                    [len(texts)],
                )
                chunk_ids = [row[0] for row in cursor.fetchall()]
            rows = []
            lexical = []
            index = 0
            for document, parts in zip(documents, groups, strict=True):
                position = 0
                for seq, text in enumerate(parts):
                    rows.append(
                        (chunk_ids[index], kb.pk, document.pk, seq, text, position, position + len(text))
                    )
                    lexical.append(lexical_document(f"{document.title}\n{text}"))
                    position += len(text) + 2
                    index += 1
            with connection.cursor() as cursor:
                statement = (
                    "COPY knowledge_chunk (id, kb_id, document_id, seq, content, char_start, char_end, "
                    "revision, length) FROM STDIN"
                )
                revisions = {document.pk: document.revision for document in documents}
                with cursor.copy(statement) as copy:
                    for chunk_id, kb_pk, document_id, seq, text, begin, end in rows:
                        copy.write_row(
                            (chunk_id, kb_pk, document_id, seq, text, begin, end, revisions[document_id], 0)
                        )
            chunk_postings_insert(kb_pk=kb.pk, chunk_ids=chunk_ids, lexical=lexical)
            vector_rows_insert([(chunk_id, kb.pk, vectors[i]) for i, chunk_id in enumerate(chunk_ids)])

    def _plans(self, kb: KnowledgeBase, query: str) -> None:
        """Print which indexes the two lane statements use on this corpus (no planner settings changed)."""
        vector = local_provider().embed([query])[0]
        register()
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('hnsw.ef_search', '50', true)")
            cursor.execute("EXPLAIN " + _vector_sql(kb), [vector, 50])
            vector_plan = "\n".join(row[0] for row in cursor.fetchall())
            params = {
                "kb": kb.pk,
                "text": " ".join(lexical_query(query)),
                "k1": BM25_K1,
                "b": BM25_B,
                "per_term": POSTINGS_PER_TERM,
                "depth": 50,
            }
            cursor.execute("EXPLAIN " + _LEXICAL_SQL, params)
            lexical_plan = "\n".join(row[0] for row in cursor.fetchall())
        uses_hnsw = f"knowledge_vec_kb_{kb.pk}" in vector_plan
        uses_impact = "knowledge_posting_impact" in lexical_plan
        index_only = "Index Only Scan using knowledge_posting_impact" in lexical_plan
        self.stdout.write(
            f"  plans: vector lane uses HNSW index knowledge_vec_kb_{kb.pk}: {uses_hnsw}; "
            f"lexical lane uses knowledge_posting_impact: {uses_impact} "
            f"({'index only scan' if index_only else 'not index only'})"
        )

    def _latency(self, kb: KnowledgeBase, fresh, count: int) -> list[tuple[str, float, float]]:
        """Latency per lane setting; every query is taken from ``fresh`` (never one searched before)."""
        results = []
        embed_times = []
        provider = local_provider()
        for query in itertools.islice(fresh, count):
            started = time.perf_counter()
            provider.embed([query])
            embed_times.append((time.perf_counter() - started) * 1000)
        self.stdout.write(
            f"  query embedding alone: p50 {statistics.median(embed_times):.1f} ms, "
            f"p95 {_percentile(embed_times, 0.95):.1f} ms"
        )
        for name, lanes in LANE_RUNS:
            timings = []
            not_ok = 0
            queries = list(itertools.islice(fresh, WARMUP_QUERIES + count))
            for number, query in enumerate(
                progress_bar(queries, desc=f"search {name}", unit="q", force=self.progress)
            ):
                started = time.perf_counter()
                result = knowledge_search_bases(
                    bases=[kb],
                    query=query,
                    limit=KNOWLEDGE_DEFAULTS["top_k"],
                    min_score=KNOWLEDGE_DEFAULTS["min_score"],
                    fusion=FUSION_DEFAULTS,
                    lanes=lanes,
                )
                elapsed = (time.perf_counter() - started) * 1000
                if number >= WARMUP_QUERIES:
                    timings.append(elapsed)
                    not_ok += int(result.status != "ok")
            if not_ok:
                self.stderr.write(f"{name}: {not_ok} searches were not ok")
            results.append((name, statistics.median(timings), _percentile(timings, 0.95)))
        return results
