"""The indexing queue: documents in status ``embedding``, leased by ``knowledge_worker`` processes.

There is no separate queue table. A document waiting for indexing *is* the queue entry
(``status = 'embedding'``, ordered by ``enqueued_at, id`` through the partial index
``knowledge_document_queue``), so a put and its queue entry can never disagree, and every write
path (push API, console, ``knowledge_ingest``) enqueues just by calling ``document_put``.

Claiming is one statement: the oldest unleased (or lease-expired) rows are locked with
``FOR UPDATE SKIP LOCKED`` and given a lease and one more attempt. Several workers on several
hosts therefore never claim the same document, and none waits for another's locks. A worker that
dies leaves its lease behind; when it expires the document is claimed again. A document whose
indexing keeps crashing the worker (rather than failing cleanly, which ``documents_index`` records
itself) would be retried forever, so after :data:`MAX_ATTEMPTS` leases it is marked ``error`` with
the code ``indexing_failed`` instead of being leased again.
"""

from __future__ import annotations

from django.db import connection, transaction

MAX_ATTEMPTS = 5
INDEXING_FAILED = "indexing_failed"

_CLAIM_SQL = """
WITH candidates AS (
    SELECT id, attempts FROM knowledge_document
    WHERE status = 'embedding' AND (lease_until IS NULL OR lease_until < now())
    ORDER BY enqueued_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), exhausted AS (
    UPDATE knowledge_document d
    SET status = 'error', error = %(error)s, lease_until = NULL, updated_at = now()
    FROM candidates c
    WHERE d.id = c.id AND c.attempts >= %(max_attempts)s
    RETURNING d.id
), claimed AS (
    UPDATE knowledge_document d
    SET lease_until = now() + make_interval(secs => %(lease)s), attempts = d.attempts + 1
    FROM candidates c
    WHERE d.id = c.id AND c.attempts < %(max_attempts)s
    RETURNING d.id, d.enqueued_at
)
SELECT id FROM claimed ORDER BY enqueued_at, id
"""


def documents_claim(*, limit: int, lease_seconds: int) -> list[int]:
    """Lease up to ``limit`` waiting documents for ``lease_seconds``; return their ids, oldest first.

    Safe with any number of concurrent workers. Documents that already had :data:`MAX_ATTEMPTS`
    leases are moved to ``error`` (``indexing_failed``) by the same statement and not returned.
    The lease is only a claim: indexing re-checks the revision under a row lock when it writes,
    so a worker whose lease ran out while embedding cannot overwrite newer work.
    """
    if limit < 1 or lease_seconds < 1:
        raise ValueError("limit and lease_seconds must be positive")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_SQL,
            {"limit": limit, "lease": lease_seconds, "max_attempts": MAX_ATTEMPTS, "error": INDEXING_FAILED},
        )
        return [row[0] for row in cursor.fetchall()]
