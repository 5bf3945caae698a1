"""Retrieval quality on a BEIR-layout collection: nDCG@10 and Recall@100 per lane (a benchmark).

``python manage.py knowledge_eval --beir DIR [--split test] [--keep] [--limit-queries N]``

1. Creates a throwaway knowledge base (local MiniLM provider) through ``knowledge_base_upsert``.
2. Ingests ``corpus.jsonl`` through the product path: :func:`document_put` (sanitizing, revision)
   then :func:`documents_index` in batches (chunking, BM25 postings, embeddings), with a progress
   bar (on a terminal, or with ``--progress``). Document ids that are not valid source keys are
   mapped to a hash-based key.
3. Runs every query of the split (the queries that appear in ``qrels/<split>.tsv``) through
   :func:`knowledge_search_bases` three times — lexical lane alone, vector lane alone, both fused —
   with :data:`EVAL_CANDIDATES` chunks per lane, no ``min_score``, and the route fusion defaults
   unless overridden on the command line.
4. Chunk hits are deduplicated to their parent documents (a document takes its best-ranked chunk's
   position) and scored like ``trec_eval -c``: every judged query counts (a query with no hits scores
   0), nDCG@10 with graded gains (gain = judged relevance, discount log2(rank + 1), ideal order from
   all judgements of the query), Recall@100 = judged-relevant documents (relevance > 0) in the top 100
   / all judged-relevant documents.
5. Prints a table; the last line is ``nDCG@10 lexical=0.xxx vector=0.xxx hybrid=0.xxx``.
6. Deletes the knowledge base unless ``--keep`` (``--kb-id`` then re-runs the queries on the kept
   knowledge base without ingesting again).

Figures are for reading, never for tests. Tune BM25 and fusion on ``--split dev``, report ``test``.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runtime.config import FUSION_DEFAULTS
from bailing.audit.actor import Actor
from knowledge.config import validate_knowledge_base_config
from knowledge.management.progress import add_progress_argument, progress_bar
from knowledge.models import SOURCE_KEY_RE, TITLE_MAX_CHARS, KnowledgeBase
from knowledge.selectors.search import (
    BM25_B,
    BM25_K1,
    LANE_LEXICAL,
    LANE_VECTOR,
    POSTINGS_PER_TERM,
)
from knowledge.services.bases import knowledge_base_delete, knowledge_base_upsert
from knowledge.services.documents import document_put
from knowledge.services.indexing import documents_index
from knowledge.services.retrieval import knowledge_search_bases

# Chunks per lane: deep enough that the deduplicated document list reaches Recall@100's cut-off.
EVAL_CANDIDATES = 1000
# Documents per indexing call: chunks of one call are embedded in full model batches.
INGEST_BATCH = 64
RUNS = (("lexical", (LANE_LEXICAL,)), ("vector", (LANE_VECTOR,)), ("hybrid", (LANE_LEXICAL, LANE_VECTOR)))
ACTOR = Actor.system("knowledge_eval")


@dataclass(frozen=True)
class BeirCollection:
    corpus: list[dict]
    queries: dict[str, str]
    # query id -> {document id: relevance}
    qrels: dict[str, dict[str, int]]


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def beir_load(directory: Path, split: str) -> BeirCollection:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` (header line, tab-separated
    ``query-id corpus-id score``)."""
    qrels_path = directory / "qrels" / f"{split}.tsv"
    for path in (directory / "corpus.jsonl", directory / "queries.jsonl", qrels_path):
        if not path.is_file():
            raise CommandError(f"missing BEIR file: {path}")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            fields = line.rstrip("\n").split("\t")
            if number == 0 and fields[0] == "query-id":
                continue
            if len(fields) != 3:
                continue
            query_id, doc_id, score = fields
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    queries = {
        str(item["_id"]): str(item.get("text", "")) for item in _read_jsonl(directory / "queries.jsonl")
    }
    missing = [query_id for query_id in qrels if query_id not in queries]
    if missing:
        raise CommandError(f"{len(missing)} judged queries are missing from queries.jsonl")
    return BeirCollection(corpus=_read_jsonl(directory / "corpus.jsonl"), queries=queries, qrels=qrels)


def source_key_for(doc_id: str) -> str:
    """The document's source key: its BEIR id when that is a valid key, else a stable hash."""
    if SOURCE_KEY_RE.fullmatch(doc_id):
        return doc_id
    return "h:" + hashlib.sha256(doc_id.encode()).hexdigest()[:40]


def ndcg_at(ranked: list[str], judged: dict[str, int], k: int = 10) -> float:
    """trec_eval ``ndcg_cut``: gain = relevance, discount log2(rank + 1), ideal from the judgements."""
    dcg = sum(judged.get(doc, 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], start=1))
    ideal_gains = sorted((rel for rel in judged.values() if rel > 0), reverse=True)[:k]
    ideal = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at(ranked: list[str], judged: dict[str, int], k: int = 100) -> float:
    relevant = {doc for doc, rel in judged.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def parent_documents(source_keys: list[str]) -> list[str]:
    """Chunk hits (best first) to distinct parent documents, each at its best chunk's position."""
    return list(dict.fromkeys(source_keys))


class Command(BaseCommand):
    help = "Ingest a BEIR collection into a throwaway knowledge base and print nDCG@10 / Recall@100."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--beir", required=True, type=Path, help="BEIR-layout directory")
        parser.add_argument("--split", default="test", help="qrels split (default test)")
        parser.add_argument("--keep", action="store_true", help="keep the knowledge base afterwards")
        parser.add_argument(
            "--kb-id", default="", help="search this kept knowledge base instead of ingesting"
        )
        parser.add_argument("--limit-queries", type=int, default=0, help="evaluate the first N queries only")
        parser.add_argument("--candidates", type=int, default=EVAL_CANDIDATES, help="chunks per lane")
        parser.add_argument(
            "--fusion-method",
            choices=("rrf", "normalized"),
            default=FUSION_DEFAULTS["method"],
            help="how the hybrid run fuses the two lanes (default: the route default, %(default)s)",
        )
        parser.add_argument(
            "--rrf-k",
            type=int,
            default=FUSION_DEFAULTS["rrf_k"],
            help="RRF constant k of the hybrid run (default %(default)s)",
        )
        for lane in ("lexical", "vector"):
            parser.add_argument(
                f"--{lane}-weight",
                type=float,
                default=FUSION_DEFAULTS[f"{lane}_weight"],
                help=f"weight of the {lane} lane in the hybrid run (default %(default)s)",
            )
        add_progress_argument(parser)

    def handle(self, *args, **options) -> None:
        collection = beir_load(Path(options["beir"]), options["split"])
        query_ids = list(collection.qrels)
        if options["limit_queries"] > 0:
            query_ids = query_ids[: options["limit_queries"]]
        fusion = {
            "method": options["fusion_method"],
            "rrf_k": options["rrf_k"],
            "lexical_weight": options["lexical_weight"],
            "vector_weight": options["vector_weight"],
        }
        if options["kb_id"]:
            kb = KnowledgeBase.objects.filter(kb_id=options["kb_id"]).first()
            if kb is None:
                raise CommandError("no such knowledge base")
            keep = True
        else:
            kb = self._ingest(collection, progress=options["progress"])
            keep = options["keep"]
        try:
            self._evaluate(
                kb,
                collection,
                query_ids,
                fusion=fusion,
                candidates=options["candidates"],
                progress=options["progress"],
            )
        finally:
            if keep:
                self.stderr.write(f"kept knowledge base {kb.kb_id} (re-run with --kb-id {kb.kb_id})")
            else:
                knowledge_base_delete(kb=kb, actor=ACTOR)

    def _ingest(self, collection: BeirCollection, *, progress: bool = False) -> KnowledgeBase:
        kb_id = f"eval-{secrets.token_hex(4)}"
        data = validate_knowledge_base_config(
            {"kb_id": kb_id, "name": "knowledge_eval (throwaway)"}, path="knowledge_eval"
        )
        kb, _, _ = knowledge_base_upsert(data=data, actor=ACTOR)
        started = time.perf_counter()
        chunks = errors = skipped = 0
        try:
            with progress_bar(total=len(collection.corpus), desc="ingest", unit="doc", force=progress) as bar:
                for start in range(0, len(collection.corpus), INGEST_BATCH):
                    batch = collection.corpus[start : start + INGEST_BATCH]
                    ids = []
                    for item in batch:
                        title = str(item.get("title") or "")[:TITLE_MAX_CHARS]
                        text = str(item.get("text") or "")
                        if not text.strip():
                            skipped += 1
                            continue
                        put = document_put(
                            kb=kb,
                            source_key=source_key_for(str(item["_id"])),
                            title=title,
                            content=text,
                            content_type="text",
                            actor=ACTOR,
                        )
                        ids.append(put.document.pk)
                    for outcome in documents_index(document_ids=ids).values():
                        chunks += outcome.chunks
                        errors += int(outcome.result == "error")
                    bar.update(len(batch))
                    bar.set_postfix(chunks=chunks)
        except BaseException:
            knowledge_base_delete(kb=kb, actor=ACTOR)
            raise
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"ingested {len(collection.corpus) - skipped} documents "
            f"({skipped} empty skipped, {errors} errors) "
            f"as {chunks} chunks in {elapsed:.0f} s ({chunks / max(elapsed, 1e-9):.1f} chunks/s)"
        )
        return kb

    def _evaluate(
        self,
        kb: KnowledgeBase,
        collection: BeirCollection,
        query_ids: list[str],
        *,
        fusion: dict,
        candidates: int,
        progress: bool = False,
    ) -> None:
        self.stdout.write(
            f"kb {kb.kb_id}; {len(query_ids)} judged queries; BM25 k1={BM25_K1} b={BM25_B}, "
            f"{POSTINGS_PER_TERM} postings/term; {candidates} chunks/lane; fusion {json.dumps(fusion)}"
        )
        results: dict[str, tuple[float, float, float, int]] = {}
        for name, lanes in RUNS:
            ndcgs, recalls, latencies = [], [], []
            not_ok = 0
            for query_id in progress_bar(query_ids, desc=name, unit="q", force=progress):
                started = time.perf_counter()
                result = knowledge_search_bases(
                    bases=[kb],
                    query=collection.queries[query_id],
                    limit=candidates,
                    min_score=None,
                    fusion=fusion,
                    lanes=lanes,
                    candidates=candidates,
                )
                latencies.append((time.perf_counter() - started) * 1000)
                not_ok += int(result.status != "ok")
                ranked = parent_documents([hit.source_key for hit in result.hits])
                judged = {source_key_for(doc): rel for doc, rel in collection.qrels[query_id].items()}
                ndcgs.append(ndcg_at(ranked, judged, 10))
                recalls.append(recall_at(ranked, judged, 100))
            count = len(query_ids)
            results[name] = (
                sum(ndcgs) / count if count else 0.0,
                sum(recalls) / count if count else 0.0,
                statistics.median(latencies) if latencies else 0.0,
                not_ok,
            )
        self.stdout.write(f"{'lanes':<8} {'nDCG@10':>8} {'R@100':>8} {'p50 ms':>8} {'not ok':>7}")
        for name, (ndcg, recall, p50, not_ok) in results.items():
            self.stdout.write(f"{name:<8} {ndcg:>8.3f} {recall:>8.3f} {p50:>8.1f} {not_ok:>7}")
        self.stdout.write(
            "nDCG@10 "
            + " ".join(f"{name}={results[name][0]:.3f}" for name in ("lexical", "vector", "hybrid"))
        )
