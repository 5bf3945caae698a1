"""``python manage.py knowledge_worker``: index queued knowledge documents until stopped.

Web requests and ``knowledge_ingest`` only store documents and queue them (status ``embedding``);
this process embeds and indexes them, so no request waits for the model. Queue state lives in
PostgreSQL (:mod:`knowledge.services.queue`), so any number of workers may run, on any host.

Loop: lease a batch (``--batch``, default 16: the embedding model is much faster on full batches),
index it with :func:`knowledge.services.indexing.documents_index`, repeat; when the queue is empty,
sleep with exponential backoff (0.5 s doubling up to ``--idle-max``). ``--once`` drains the queue
and exits. SIGTERM/SIGINT stop it after the batch in hand, so a deploy never abandons half-written
work (and if it is killed anyway, the leases expire and another worker takes the documents over).

Every poll also seals the audit ledger's unsealed tail without waiting (``bailing.audit``): requests
seal after their own commit, and this catches what they left when another sealer held the lock, so on
an idle hub the tail is sealed within ``--idle-max`` seconds.

Logs name counts and document ids only, never document text.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter
from types import FrameType

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from bailing import tracing
from bailing.audit.ledger import audit_seal
from bailing.db.outage import database_unavailable, log_database_unavailable
from knowledge.services.heartbeat import heartbeat_forget, heartbeat_record, worker_name
from knowledge.services.indexing import IndexOutcome, document_index, documents_index
from knowledge.services.queue import documents_claim
from knowledge.vectors import vector_storage_ensure

logger = logging.getLogger("knowledge.worker")

IDLE_MIN_SECONDS = 0.5


class Command(BaseCommand):
    help = "Index queued knowledge documents (status 'embedding'); several workers may run at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Drain the queue, then exit.")
        parser.add_argument("--batch", type=int, default=16, help="Documents leased per batch (1-256).")
        parser.add_argument(
            "--lease", type=int, default=600, help="Seconds a leased batch is reserved for this worker."
        )
        parser.add_argument(
            "--idle-max", type=float, default=5.0, help="Longest sleep, in seconds, while the queue is empty."
        )

    def handle(self, *args, once: bool, batch: int, lease: int, idle_max: float, **options) -> None:
        if not 1 <= batch <= 256:
            raise CommandError("--batch must be between 1 and 256")
        if lease < 1 or idle_max <= 0:
            raise CommandError("--lease and --idle-max must be positive")
        # Tracing (OTEL_* set, docs/production.md "Tracing"): each batch is a trace of its own.
        tracing.setup()
        stop = threading.Event()
        restore = _install_stop_handlers(stop)
        try:
            vectors = vector_storage_ensure()
            logger.info("knowledge worker started (batch %d, vector storage %s)", batch, vectors)
            totals = self._run(stop=stop, once=once, batch=batch, lease=lease, idle_max=idle_max)
        finally:
            restore()
            tracing.force_flush()
        summary = ", ".join(f"{name} {count}" for name, count in sorted(totals.items())) or "nothing"
        logger.info("knowledge worker stopped: %s", summary)
        self.stdout.write(f"indexed: {summary}")

    def _run(self, *, stop: threading.Event, once: bool, batch: int, lease: int, idle_max: float) -> Counter:
        totals: Counter = Counter()
        worker, started_at = worker_name(), timezone.now()
        try:
            self._poll(
                stop, totals, worker, started_at, once=once, batch=batch, lease=lease, idle_max=idle_max
            )
        finally:
            try:
                heartbeat_forget(worker)
            except DatabaseError:  # the database is away (already logged): the row will just grow old
                logger.debug("knowledge worker could not remove its heartbeat")
        return totals

    def _poll(
        self, stop: threading.Event, totals: Counter, worker: str, started_at, *, once, batch, lease, idle_max
    ) -> None:
        delay = IDLE_MIN_SECONDS
        while not stop.is_set():
            # A long-lived process must drop connections the server closed meanwhile (never inside
            # an atomic block, whose transaction the close would break: a caller's, or a test's).
            if not connection.in_atomic_block:
                close_old_connections()
            try:
                # Every poll says "alive" (``/health/ready``'s knowledge_worker check reads it).
                heartbeat_record(worker, started_at=started_at)
                if not connection.in_atomic_block:
                    audit_seal(wait=False)
                ids = documents_claim(limit=batch, lease_seconds=lease)
            except DatabaseError as exc:
                outage = database_unavailable(exc)
                if outage is not None:  # one line per poll while the database is away, no traceback
                    log_database_unavailable(outage)
                else:
                    logger.exception("knowledge worker could not claim documents")
                ids = []
                if once:
                    raise
            if not ids:
                if once:
                    break
                stop.wait(delay)
                delay = min(delay * 2, idle_max)
                continue
            delay = IDLE_MIN_SECONDS
            started = time.monotonic()
            with tracing.span("knowledge.index_batch", documents=len(ids)):
                outcomes = _index_batch(ids)
            counts = Counter(outcome.result for outcome in outcomes.values())
            chunks = sum(outcome.chunks for outcome in outcomes.values())
            totals.update(counts)
            totals["chunks"] += chunks
            logger.info(
                "knowledge batch: %d documents, %d chunks in %.2f s (%s)",
                len(ids),
                chunks,
                time.monotonic() - started,
                ", ".join(f"{name} {count}" for name, count in sorted(counts.items())),
            )


def _index_batch(ids: list[int]) -> dict[int, IndexOutcome]:
    """Index a claimed batch; if the batch as a whole crashes, index its documents one by one so
    that one bad document cannot keep the others from becoming ready. A document that crashes on
    its own keeps its lease; it is retried after the lease expires, up to the attempts cap."""
    try:
        return documents_index(document_ids=ids)
    except Exception:
        logger.exception("knowledge batch of %d documents failed; indexing them one by one", len(ids))
    outcomes: dict[int, IndexOutcome] = {}
    for document_id in ids:
        try:
            outcomes[document_id] = document_index(document_id=document_id)
        except Exception:
            logger.exception("knowledge document %d failed to index", document_id)
            outcomes[document_id] = IndexOutcome("crashed")
    return outcomes


def _install_stop_handlers(stop: threading.Event):
    """Make SIGTERM/SIGINT set ``stop``; return a function restoring the previous handlers.
    Signal handlers can only be installed from the main thread (tests may call from others)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: FrameType | None) -> None:
        logger.info("knowledge worker stopping after the current batch (signal %d)", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
