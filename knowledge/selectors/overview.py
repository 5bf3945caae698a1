"""Console overviews of knowledge: the bases a workspace names, the indexing queue and workers, and
the dashboard's counts.

Each is a fixed number of queries: the bases with their document counts in one aggregate, the
queue in one aggregate and the workers in one more, the documents by status in one and the bases in
one more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from knowledge.models import Document, KnowledgeBase, WorkerHeartbeat


@dataclass(frozen=True)
class NamedBase:
    """One ``kb_id`` a route names: the base (None when it does not exist) and its document counts."""

    kb_id: str
    base: KnowledgeBase | None
    ready: int = 0
    waiting: int = 0
    failed: int = 0


def knowledge_bases_named(kb_ids: list[str]) -> list[NamedBase]:
    """The bases ``kb_ids`` names, in that order, with ready / waiting / failed document counts."""
    if not kb_ids:
        return []
    found = {
        kb.kb_id: kb
        for kb in KnowledgeBase.objects.filter(kb_id__in=kb_ids).annotate(
            ready=Count("documents", filter=Q(documents__status=Document.Status.READY)),
            waiting=Count("documents", filter=Q(documents__status=Document.Status.EMBEDDING)),
            failed=Count("documents", filter=Q(documents__status=Document.Status.ERROR)),
        )
    }
    result = []
    for kb_id in dict.fromkeys(kb_ids):
        kb = found.get(kb_id)
        if kb is None:
            result.append(NamedBase(kb_id, None))
        else:
            result.append(NamedBase(kb_id, kb, kb.ready, kb.waiting, kb.failed))
    return result


@dataclass(frozen=True)
class IndexingStatus:
    """The knowledge worker and its queue as the dashboard shows them.

    ``heartbeat_age_s`` is the age of the newest heartbeat (None: no worker ever reported, or every
    one stopped cleanly); ``workers`` counts those seen within ``max_age_s``. ``waiting`` documents
    wait for indexing (``leased`` of them are being indexed now), ``failed`` ended in ``error``;
    ``lag_s`` is the age of the oldest waiting document (0 when none waits).
    """

    heartbeat_age_s: float | None
    workers: int
    max_age_s: int
    waiting: int
    leased: int
    failed: int
    lag_s: float
    oldest_waiting_at: datetime | None

    @property
    def worker_ok(self) -> bool:
        return self.heartbeat_age_s is not None and self.heartbeat_age_s <= self.max_age_s


def indexing_status() -> IndexingStatus:
    now = timezone.now()
    max_age = settings.BAILING_WORKER_HEARTBEAT_MAX_AGE
    beats = WorkerHeartbeat.objects.aggregate(
        newest=Max("seen_at"), recent=Count("worker", filter=Q(seen_at__gte=now - timedelta(seconds=max_age)))
    )
    waiting = Q(status=Document.Status.EMBEDDING)
    queue = Document.objects.aggregate(
        waiting=Count("id", filter=waiting),
        leased=Count("id", filter=waiting & Q(lease_until__gt=now)),
        failed=Count("id", filter=Q(status=Document.Status.ERROR)),
        oldest=Min("enqueued_at", filter=waiting),
    )
    newest = beats["newest"]
    oldest = queue["oldest"]
    return IndexingStatus(
        heartbeat_age_s=round(max((now - newest).total_seconds(), 0.0), 1) if newest else None,
        workers=beats["recent"],
        max_age_s=max_age,
        waiting=queue["waiting"],
        leased=queue["leased"],
        failed=queue["failed"],
        lag_s=round(max((now - oldest).total_seconds(), 0.0), 1) if oldest else 0.0,
        oldest_waiting_at=oldest,
    )


def knowledge_counts() -> dict[str, int]:
    """Documents ``ready``, ``waiting`` (for indexing) and ``failed``, and how many ``bases`` there
    are: two queries."""
    counts = Document.objects.aggregate(
        ready=Count("id", filter=Q(status=Document.Status.READY)),
        waiting=Count("id", filter=Q(status=Document.Status.EMBEDDING)),
        failed=Count("id", filter=Q(status=Document.Status.ERROR)),
    )
    return {**counts, "bases": KnowledgeBase.objects.count()}
