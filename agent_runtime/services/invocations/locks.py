"""Who may work on what at once: the per-invocation lock, and each provider's share of this process.

**The invocation lock.** One request at a time works on an invocation. The lock is a PostgreSQL
advisory lock keyed by (session, invocation id), held for the whole call including the business
request, so a concurrent duplicate answers ``in_progress`` at once and a dead worker's lock vanishes
with its database connection. It is transaction-scoped, in a transaction of its own that stays open
for the call (:func:`bailing.db.locks.advisory_lock`), so that it holds behind a transaction-pooling
PgBouncer too. The unique (session, invocation id) constraint backs it up.

**The provider bulkhead.** A business system that answers slowly (or drips its answer until the
deadline) holds the thread that called it. So that one business system cannot take every thread
of a hub process — ``/health``, other workspaces and other providers included — at most
``max_concurrent_calls`` calls of one provider are in flight per hub process (the provider's config,
else ``BAILING_PROVIDER_MAX_CONCURRENT_CALLS``, default 2 of gunicorn's 4 threads). The count is
in this process on purpose: what it protects is this process's threads. A call that finds its
provider full waits for a slot at most ``BAILING_PROVIDER_SLOT_WAIT_MS`` (default 250): a provider
that answers in milliseconds frees one long before, while a stalled one keeps its slots and the call
is then not sent and not stored: ``rejected_before_dispatch`` with ``auto_retry_allowed: true``
(docs/protocol.md "Provider bulkhead"). A slot is given back as soon as the business system has
answered (:meth:`ProviderSlot.release`): recording the outcome holds no thread on the provider.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from bailing.db.locks import advisory_lock

# Two-int4 advisory lock namespace of invocations ("bhIV"), apart from every other hub lock.
_LOCK_NAMESPACE = 0x62684956


def _lock_key(session_id: uuid.UUID, invocation_id: str) -> int:
    digest = hashlib.sha256(f"{session_id}\0{invocation_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


@contextmanager
def invocation_lock(session_id: uuid.UUID, invocation_id: str) -> Iterator[bool]:
    """Try to take the invocation's advisory lock; yields whether it was taken, and releases it at
    the end. Released by PostgreSQL too if the process dies (its lock connection closes), which is
    how a dead worker's ``dispatching`` call is recognised."""
    with advisory_lock(_LOCK_NAMESPACE, _lock_key(session_id, invocation_id)) as held:
        yield held


def invocation_lock_free(session_id: uuid.UUID, invocation_id: str) -> bool:
    """Is nobody working on the invocation right now (read-only probe, for receipts)?"""
    with invocation_lock(session_id, invocation_id) as held:
        return held


_in_flight: dict[str, int] = {}
_in_flight_guard = threading.Lock()
_slot_freed = threading.Condition(_in_flight_guard)


class ProviderSlot:
    """One call's share of its provider's bulkhead: true when a slot was taken. :meth:`release` gives
    it back (once; the ``provider_slot`` block's end releases it otherwise)."""

    __slots__ = ("_held", "provider")

    def __init__(self, provider: str, held: bool):
        self.provider = provider
        self._held = held

    def __bool__(self) -> bool:
        return self._held

    def release(self) -> None:
        with _slot_freed:
            if not self._held:
                return
            self._held = False
            left = _in_flight[self.provider] - 1
            if left:
                _in_flight[self.provider] = left
            else:
                del _in_flight[self.provider]
            _slot_freed.notify_all()


@contextmanager
def provider_slot(provider: str, limit: int, wait_ms: int | None = None) -> Iterator[ProviderSlot]:
    """Take one of ``limit`` in-flight slots of ``provider`` in this process, waiting at most
    ``wait_ms`` (default ``BAILING_PROVIDER_SLOT_WAIT_MS``) for one to be given back; yields the
    :class:`ProviderSlot` (false when none was free in time), released at the end at the latest."""
    wait = (settings.BAILING_PROVIDER_SLOT_WAIT_MS if wait_ms is None else wait_ms) / 1000
    deadline = time.monotonic() + wait
    with _slot_freed:
        while _in_flight.get(provider, 0) >= limit:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            _slot_freed.wait(remaining)
        taken = _in_flight.get(provider, 0) < limit
        if taken:
            _in_flight[provider] = _in_flight.get(provider, 0) + 1
    slot = ProviderSlot(provider, taken)
    try:
        yield slot
    finally:
        slot.release()


def provider_calls_in_flight(provider: str) -> int:
    """How many calls of ``provider`` this process has in flight (for tests and metrics)."""
    with _in_flight_guard:
        return _in_flight.get(provider, 0)
