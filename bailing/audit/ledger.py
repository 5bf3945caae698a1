"""Appending to, sealing and verifying the hash-chained audit ledger (design: ``docs/audit.md``).

Every app records its milestones with :func:`audit_record`, so the ledger sits on the ground floor.
``audit_record`` must be called inside the transaction of the change it records (services own that
transaction). An append takes no lock: it inserts the event *unsealed*, with its content hash (over
the canonical content, ``X-Request-Id`` of the request being served included, if any) and no chain.

:func:`audit_seal` gives unsealed events their place in the chain: under a sealer-only advisory lock,
in short transactions, it takes the events it can see — only committed ones, at READ COMMITTED — in
id order, gives each the next dense ``chain_seq`` and ``chain_hash`` = SHA-256(previous chain hash +
content hash). The chain order is the seal order: an event whose transaction commits late is sealed
in a later batch. Every append asks for a seal after its transaction commits, which the process's
sealer thread runs off the request's path (non-blocking: when another sealer holds the lock, it is
left to that one or the next); ``approvals_audit_verify``, ``bailing_audit_seal`` and the knowledge
worker seal too.

:func:`audit_chain_verify` recomputes every sealed link in ``chain_seq`` order, checks the content
hash of every unsealed event too, and reports the unsealed tail (count and oldest).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone

from bailing import tracing
from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from bailing.metrics import AUDIT_APPEND_SECONDS
from bailing.request_context import current_request_id

logger = logging.getLogger("bailing.audit")

GENESIS_HASH = "0" * 64
# Arbitrary constant naming the sealer's advisory lock (the single-bigint pg_advisory_xact_lock key
# space is shared with nobody else in the hub). Appends never take it.
_SEAL_LOCK_KEY = 0x6261696C5345414C  # "bailSEAL"
# Events sealed per transaction: one batch is a few milliseconds of work under the lock.
SEAL_BATCH = 500
# How long an explicit seal (verify, the seal command) waits for a sealer that holds the lock.
_SEAL_WAIT = "10s"
# The next unsealed events in id order, each with the newest sealed position and chain hash.
_SEAL_SELECT = (
    "SELECT e.*, newest.chain_seq AS last_seq, newest.chain_hash AS last_hash "
    "FROM (SELECT * FROM bailing_auditevent WHERE chain_seq IS NULL {bound}ORDER BY id LIMIT %s) AS e "
    "LEFT JOIN LATERAL (SELECT chain_seq, chain_hash FROM bailing_auditevent "
    "WHERE chain_seq IS NOT NULL ORDER BY chain_seq DESC LIMIT 1) AS newest ON true ORDER BY e.id"
)
_SEAL_UPDATE = (
    "UPDATE bailing_auditevent AS e SET chain_seq = v.seq, prev_hash = v.prev, chain_hash = v.chain "
    "FROM (VALUES {rows}) AS v(id, seq, prev, chain) WHERE e.id = v.id AND e.chain_seq IS NULL"
)


def audit_event_content(event: AuditEvent) -> dict[str, Any]:
    """The event's hashed content: ``content_hash`` is the canonical SHA-256 of this object (the rules
    are in docs/audit.md "Canonical form"; the export carries it as is)."""
    content = {
        "created_at": event.created_at.isoformat(),
        "actor_type": event.actor_type,
        "actor": event.actor,
        "action": event.action,
        "client_app_id": event.client_app_id,
        "session_id": str(event.session_id) if event.session_id else None,
        "route_key": event.route_key,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "data": event.data,
    }
    # Hashed only when present, so events recorded before the field existed still verify.
    if event.request_id:
        content["request_id"] = event.request_id
    return content


def _chain(prev_hash: str, content_hash: str) -> str:
    return sha256_hex(prev_hash + content_hash)


# --- appending -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditEntry:
    """One event to append (see :func:`audit_record` for the fields)."""

    actor: Actor
    action: str
    client_app_id: str | None = None
    session_id: uuid.UUID | str | None = None
    route_key: str = ""
    target_type: str = ""
    target_id: str = ""
    data: dict[str, Any] | None = None


def audit_record(
    *,
    actor: Actor,
    action: str,
    client_app_id: str | None = None,
    session_id: uuid.UUID | str | None = None,
    route_key: str = "",
    target_type: str = "",
    target_id: str = "",
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the ledger. Must run inside the caller's transaction.

    ``client_app_id`` and ``session_id`` default to the actor's context (an agent's client and session).
    The event is returned unsealed (``chain_seq`` None); it is sealed after the transaction commits.
    """
    entry = AuditEntry(
        actor=actor,
        action=action,
        client_app_id=client_app_id,
        session_id=session_id,
        route_key=route_key,
        target_type=target_type,
        target_id=target_id,
        data=data,
    )
    return audit_record_many([entry])[0]


def audit_record_many(entries: Sequence[AuditEntry], *, seal: bool = True) -> list[AuditEvent]:
    """Append ``entries`` in this order (ascending ids, so sealed in this order), in two round trips
    whatever their number. Must run inside the caller's transaction, like :func:`audit_record`.

    ``seal=False``: ask for no seal after this transaction commits, for a caller whose next
    transaction, moments later, appends again and so seals both (a governed call's journal, sealed with
    its outcome); the events are committed either way, and any later seal takes them.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    if not entries:
        return []
    with AUDIT_APPEND_SECONDS.time(), tracing.span("audit.append", events=len(entries)):
        events = _append(entries)
    if seal:
        _seal_after_commit_register()
    return events


def _append(entries: Sequence[AuditEntry]) -> list[AuditEvent]:
    texts = [json.dumps(entry.data or {}, ensure_ascii=False, allow_nan=False) for entry in entries]
    with connection.cursor() as cursor:
        # Every ``data`` back as jsonb will store it: the content hash must be computed over what
        # verification reads back, and jsonb rewrites some numbers (1e20 comes back as the integer
        # 100000000000000000000).
        casts = ", ".join(["%s::jsonb::text"] * len(texts))
        cursor.execute(f"SELECT {casts}", texts)
        stored = [json.loads(text) for text in cursor.fetchone()]
    now = timezone.now()
    request_id = current_request_id()
    trace_id = tracing.current_trace_id()
    events = []
    for entry, data in zip(entries, stored, strict=True):
        actor = entry.actor
        event = AuditEvent(
            created_at=now,
            actor_type=actor.type,
            actor=actor.name,
            action=entry.action,
            client_app_id=actor.client_app_id if entry.client_app_id is None else entry.client_app_id,
            session_id=actor.session_id if entry.session_id is None else entry.session_id,
            route_key=entry.route_key,
            target_type=entry.target_type,
            target_id=entry.target_id,
            data=data,
            request_id=request_id,
            trace_id=trace_id,
        )
        event.content_hash = canonical_sha256(audit_event_content(event))
        events.append(event)
    if len(events) == 1:
        events[0].save(force_insert=True)
    else:
        AuditEvent.objects.bulk_create(events)
    return events


def _seal_after_commit_register() -> None:
    """Ask for one seal after the outermost transaction commits (once per transaction)."""
    pending = transaction.get_connection().run_on_commit
    if not any(callback is _seal_after_commit for _, callback, _ in pending):
        transaction.on_commit(_seal_after_commit, robust=True)


def _seal_after_commit() -> None:
    """Hand the seal to the process's sealer thread: the caller (a request) goes on at once."""
    _sealer.request()


class _Sealer:
    """The process's after-commit sealer: one daemon thread, started by the first request for a seal
    (again in a forked child), with a database connection of its own.

    Each request for a seal is counted; the thread runs non-blocking seals until it has answered every
    request made before its last seal began, so an event committed while a seal runs is sealed by the
    next one (appends arriving together share a batch), and the request that asked never waits for
    the seal's statements and commit. A seal that finds another sealer holding the lock (another
    process) leaves the events to it or to the next seal, as one that fails does (logged by type;
    the events stay unsealed, the knowledge worker's poll seals them). The thread closes its
    connection after :data:`SEALER_IDLE_SECONDS` without requests and on :meth:`stop`; at interpreter
    exit it is given :data:`SEALER_EXIT_SECONDS` to finish what was asked.
    """

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)
        atexit.register(self.drain, SEALER_EXIT_SECONDS)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._requested = self._answered = 0
        self._thread: threading.Thread | None = None
        self._stopping = False

    def request(self) -> None:
        with self._cond:
            self._requested += 1
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(target=self._run, name="audit-sealer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait until every seal asked for so far has run (at most ``timeout`` seconds)."""
        with self._cond:
            target = self._requested
            return self._cond.wait_for(
                lambda: self._answered >= target or self._thread is None or not self._thread.is_alive(),
                timeout,
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Answer what was asked, then end the thread and close its connection."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while self._answered >= self._requested and not self._stopping:
                        if not self._cond.wait(SEALER_IDLE_SECONDS):
                            break
                    if self._answered >= self._requested:
                        if self._stopping:
                            return
                        idle = True
                    else:
                        idle, target = False, self._requested
                if idle:
                    connection.close()  # nothing asked for a while: give the connection back
                    continue
                self._seal()
                with self._cond:
                    self._answered = max(self._answered, target)
                    self._cond.notify_all()
        finally:
            connection.close()

    @staticmethod
    def _seal() -> None:
        try:
            connection.close_if_unusable_or_obsolete()
            with tracing.span("audit.seal"):
                while audit_seal(wait=False, max_batches=1).sealed == SEAL_BATCH:
                    pass  # more than a batch was waiting: seal on while the lock is free
        except Exception as exc:  # the events stay unsealed until the next seal; the change is committed
            logger.warning("audit seal after commit failed: %s", type(exc).__name__)
            connection.close()


# Seconds without a request after which the sealer thread closes its connection.
SEALER_IDLE_SECONDS = 30.0
# What the sealer thread is given at interpreter exit to answer what was asked.
SEALER_EXIT_SECONDS = 5.0
_sealer = _Sealer()


def audit_sealer_drain(timeout: float = 10.0) -> bool:
    """Wait until this process's after-commit seals asked for so far have run (False: timed out)."""
    return _sealer.drain(timeout)


def audit_sealer_stop(timeout: float = 10.0) -> None:
    """Answer this process's pending after-commit seals, then end the sealer thread and close its
    connection (a test session before it drops its database; a new request starts a new thread)."""
    _sealer.stop(timeout)


# --- sealing -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SealReport:
    sealed: int  # events this call sealed
    batches: int  # transactions that sealed at least one event
    busy: bool = False  # a non-blocking call found another sealer holding the lock
    # Events whose content no longer matched their content hash when sealed: chained anyway (over the
    # content hash recorded at append), so verification names them for good.
    mismatched: tuple[int, ...] = field(default=())


def audit_seal(
    *, wait: bool = True, batch_size: int = SEAL_BATCH, max_batches: int | None = None
) -> SealReport:
    """Seal the events committed when the call starts, ``batch_size`` per short transaction.

    ``wait=False`` gives up at once when another sealer holds the lock (``busy``); ``wait=True``
    waits for it (at most ``_SEAL_WAIT``, then raises). Inside an atomic block (tests) the batches
    run in savepoints of the caller's transaction and seal what it sees, its own events included.
    """
    # Events appended after the call starts are left to the next call, so a busy ledger cannot keep
    # this one going; one batch needs no such bound.
    upto = None if max_batches == 1 else AuditEvent.objects.aggregate(top=Max("id"))["top"]
    if upto is None and max_batches != 1:
        return SealReport(0, 0)
    sealed = batches = 0
    mismatched: list[int] = []
    while max_batches is None or batches < max_batches:
        outcome = _seal_batch(upto=upto, limit=batch_size, wait=wait)
        if outcome is None:
            return SealReport(sealed, batches, busy=True, mismatched=tuple(mismatched))
        count, bad = outcome
        if not count:
            break
        sealed += count
        batches += 1
        mismatched.extend(bad)
    return SealReport(sealed, batches, mismatched=tuple(mismatched))


def _seal_batch(*, upto: int | None, limit: int, wait: bool) -> tuple[int, list[int]] | None:
    """One sealing transaction: three statements and the commit."""
    outermost = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        with connection.cursor() as cursor:
            # A lost seal (crash before its WAL reached disk) is only undone, never half-done: its
            # events are unsealed again and sealed by the next sealer. So the sealer does not wait
            # for its own fsync; the events themselves committed synchronously.
            settings = "set_config('synchronous_commit', 'off', true), " if outermost else ""
            if wait:
                if outermost:
                    cursor.execute(f"SELECT {settings}set_config('lock_timeout', %s, true)", [_SEAL_WAIT])
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SEAL_LOCK_KEY])
            else:
                cursor.execute(f"SELECT {settings}pg_try_advisory_xact_lock(%s)", [_SEAL_LOCK_KEY])
                if not cursor.fetchone()[-1]:
                    return None
        # A statement of its own, after the lock is held: at READ COMMITTED it sees the previous
        # sealer's committed work and every event committed so far, nothing in flight.
        bound = "AND id <= %s " if upto is not None else ""
        params = [upto, limit] if upto is not None else [limit]
        events = list(AuditEvent.objects.raw(_SEAL_SELECT.format(bound=bound), params))
        if not events:
            return 0, []
        position = events[0].last_seq or 0
        prev_hash = events[0].last_hash or GENESIS_HASH
        values, mismatched = [], []
        for event in events:
            if canonical_sha256(audit_event_content(event)) != event.content_hash:
                mismatched.append(event.id)
                logger.error("audit event %s does not match its content hash; sealed as recorded", event.id)
            position += 1
            chain_hash = _chain(prev_hash, event.content_hash)
            values.extend([event.id, position, prev_hash, chain_hash])
            prev_hash = chain_hash
        rows = ", ".join(["(%s::bigint, %s::bigint, %s, %s)"] * len(events))  # placeholders only
        with connection.cursor() as cursor:
            cursor.execute(_SEAL_UPDATE.format(rows=rows), values)
            if cursor.rowcount != len(events):  # sealed meanwhile without the lock: seal nothing
                raise RuntimeError("audit events were sealed by someone not holding the sealer lock")
        return len(events), mismatched


# --- verifying -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainReport:
    checked: int  # sealed events whose links hold, in chain order up to the first broken one
    first_broken_id: int | None
    reason: str
    sealed: int = 0  # sealed events in the ledger
    unsealed: int = 0  # events not sealed yet (their content hashes are checked too)
    oldest_unsealed_at: datetime | None = None

    @property
    def ok(self) -> bool:
        return self.first_broken_id is None

    def oldest_unsealed_age(self, now: datetime | None = None) -> float | None:
        """Seconds since the oldest unsealed event was recorded (by the recording process's clock)."""
        if self.oldest_unsealed_at is None:
            return None
        return max(0.0, ((now or timezone.now()) - self.oldest_unsealed_at).total_seconds())


def audit_chain_verify(*, batch_size: int = 2000) -> ChainReport:
    """Recompute every sealed link in ``chain_seq`` order and every unsealed event's content hash,
    from one snapshot; report the first event that does not hold and the unsealed tail. Read-only:
    it seals nothing (``approvals_audit_verify`` seals first)."""
    if transaction.get_connection().in_atomic_block:
        return _verify(batch_size)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return _verify(batch_size)


def _sealed_in_order(batch_size: int) -> Iterator[AuditEvent]:
    return AuditEvent.objects.filter(chain_seq__isnull=False).order_by("chain_seq").iterator(batch_size)


def _verify(batch_size: int) -> ChainReport:
    unsealed = AuditEvent.objects.filter(chain_seq__isnull=True)
    tail = unsealed.aggregate(n=Count("id"), oldest=Min("created_at"))
    sealed_total = AuditEvent.objects.filter(chain_seq__isnull=False).count()

    def report(checked: int, broken: int | None, reason: str) -> ChainReport:
        return ChainReport(checked, broken, reason, sealed_total, tail["n"], tail["oldest"])

    prev_hash = GENESIS_HASH
    checked = 0
    for event in _sealed_in_order(batch_size):
        if event.prev_hash != prev_hash:
            return report(checked, event.id, "prev_hash does not match the previous event")
        if canonical_sha256(audit_event_content(event)) != event.content_hash:
            return report(checked, event.id, "content does not match content_hash")
        if _chain(prev_hash, event.content_hash) != event.chain_hash:
            return report(checked, event.id, "chain_hash does not match")
        if event.chain_seq != checked + 1:
            return report(checked, event.id, "chain_seq is not the next position")
        prev_hash = event.chain_hash
        checked += 1
    for event in unsealed.order_by("id").iterator(batch_size):
        if event.prev_hash is not None or event.chain_hash is not None:
            return report(checked, event.id, "unsealed event carries chain hashes")
        if canonical_sha256(audit_event_content(event)) != event.content_hash:
            return report(checked, event.id, "unsealed event's content does not match content_hash")
    return report(checked, None, "ok")
