"""``knowledge_worker`` heartbeats: a row per worker, touched on every poll (``WorkerHeartbeat``)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from knowledge.models import WorkerHeartbeat

# Rows of workers gone this long (killed, never stopped cleanly) are removed by the next heartbeat.
_FORGET_AFTER = timedelta(days=1)


def worker_name() -> str:
    return f"{socket.gethostname()[:150]}:{os.getpid()}"


def heartbeat_record(worker: str, *, started_at) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        worker=worker, defaults={"seen_at": now}, create_defaults={"started_at": started_at, "seen_at": now}
    )


def heartbeat_forget(worker: str) -> None:
    WorkerHeartbeat.objects.filter(worker=worker).delete()
    WorkerHeartbeat.objects.filter(seen_at__lt=timezone.now() - _FORGET_AFTER).delete()


def worker_heartbeat_check() -> dict:
    """Readiness: some worker polled the queue within ``BAILING_WORKER_HEARTBEAT_MAX_AGE`` seconds."""
    max_age = settings.BAILING_WORKER_HEARTBEAT_MAX_AGE
    newest = WorkerHeartbeat.objects.order_by("-seen_at").values_list("seen_at", flat=True).first()
    if newest is None:
        return {"ok": False, "error": "no_worker", "max_age_s": max_age}
    age = round(max((timezone.now() - newest).total_seconds(), 0.0), 1)
    recent = WorkerHeartbeat.objects.filter(seen_at__gte=timezone.now() - timedelta(seconds=max_age)).count()
    result = {"ok": age <= max_age, "age_s": age, "max_age_s": max_age, "workers": recent}
    if age > max_age:
        result["error"] = "heartbeat_stale"
    return result
