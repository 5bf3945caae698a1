"""Two ``knowledge_worker`` processes on one queue, fed a burst of ingestions from parallel writers:
every document is indexed exactly once (one lease each, chunks cut once), none is lost, and both
workers take part. Real processes on the test database; the queue claim is ``FOR UPDATE SKIP
LOCKED`` (knowledge/services/queue.py), which is what several workers on several hosts rely on."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from bailing.audit.actor import Actor
from knowledge.models import Chunk, Document, WorkerHeartbeat
from knowledge.services.documents import document_put
from tests.factories import KnowledgeBaseFactory
from tests.support.live_hub import knowledge_worker_start

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 4
PER_WRITER = 15
DEADLINE = 120.0
PARAGRAPH = (
    "Refunds for damaged parcels are approved by a manager within two working days. "
    "The warehouse checks the return label, the order number and the photos the customer sent. "
)


def _worker(log: Path) -> subprocess.Popen:
    return knowledge_worker_start(log, args=("--batch", "3", "--idle-max", "0.2"), stdout=subprocess.PIPE)


def _wait(condition, what: str, workers: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if any(worker.poll() is not None for worker in workers):
            raise AssertionError(
                f"a worker exited while waiting for {what}:\n" + "\n".join(p.read_text() for p in logs)
            )
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n" + "\n".join(p.read_text()[-3000:] for p in logs))


def _totals(output: str) -> Counter:
    """The worker's last line, ``indexed: chunks 12, ready 4``, as a Counter."""
    line = [line for line in output.splitlines() if line.startswith("indexed: ")][-1]
    return Counter({name: int(count) for name, count in re.findall(r"(\w+) (\d+)", line)})


def _burst(kb, writer: int, errors: list[BaseException]) -> None:
    try:
        for n in range(PER_WRITER):
            document_put(
                kb=kb,
                source_key=f"w{writer}-doc{n}",
                title=f"Returns, writer {writer}, note {n}",
                content=f"# Note {n} of writer {writer}\n\n" + PARAGRAPH * (3 + n % 4),
                actor=Actor.system("test"),
            )
    except BaseException as error:  # reported by the test thread
        errors.append(error)
    finally:
        connection.close()


def test_two_workers_index_a_burst_once_each_and_lose_nothing(tmp_path):
    kb = KnowledgeBaseFactory()
    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    workers = [_worker(log) for log in logs]
    try:
        _wait(lambda: WorkerHeartbeat.objects.count() == 2, "both workers polling", workers, logs)
        errors: list[BaseException] = []
        writers = [threading.Thread(target=_burst, args=(kb, n, errors)) for n in range(WRITERS)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        assert not errors, errors
        expected = WRITERS * PER_WRITER
        assert Document.objects.filter(kb=kb).count() == expected
        _wait(
            lambda: not Document.objects.filter(kb=kb).exclude(status=Document.Status.READY).exists(),
            "every document ready",
            workers,
            logs,
        )
    finally:
        outputs = []
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            out, _ = worker.communicate(timeout=60)
            outputs.append(out)
    assert [worker.returncode for worker in workers] == [0, 0], [log.read_text() for log in logs]

    documents = Document.objects.filter(kb=kb)
    assert documents.count() == expected
    assert set(documents.values_list("status", flat=True)) == {Document.Status.READY}
    # One lease per document: no document was claimed twice, whichever worker took it.
    assert set(documents.values_list("attempts", flat=True)) == {1}
    totals = [_totals(out) for out in outputs]
    # What the two processes say they indexed adds up to the burst, and both took part.
    assert sum(t["ready"] for t in totals) == expected, totals
    assert all(t["ready"] > 0 for t in totals), totals
    # Chunks were cut once per document: the workers' counts are exactly the rows, every document has some.
    chunks = Chunk.objects.filter(document__kb=kb)
    assert sum(t["chunks"] for t in totals) == chunks.count(), totals
    assert chunks.values("document").distinct().count() == expected
    assert not WorkerHeartbeat.objects.exists()  # both stopped cleanly and said so
