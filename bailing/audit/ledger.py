"""Appending to and verifying the hash-chained audit ledger.

Every app records its milestones with :func:`audit_record`, so the ledger sits on the ground floor.
``audit_record`` must be called inside the transaction of the change it records (services own that
transaction). Appends are serialised with a transaction-scoped advisory lock so two concurrent
transactions can never chain onto the same predecessor; each event carries the ``X-Request-Id`` of the
request being served (``bailing.request_context``), if any; services take it last, after their own row
locks, so the lock order is always rows → audit chain.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.audit.actor import Actor
from bailing.audit.models import AuditEvent
from bailing.metrics import AUDIT_APPEND_SECONDS
from bailing.request_context import current_request_id

GENESIS_HASH = "0" * 64
# Arbitrary constant naming the audit-chain advisory lock (pg_advisory_xact_lock key space is shared).
_AUDIT_LOCK_KEY = 0x6261696C696E67  # "bailing"


def _content(event: AuditEvent) -> dict[str, Any]:
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
    """Append one event to the chain. Must run inside the caller's transaction.

    ``client_app_id`` and ``session_id`` default to the actor's context (an agent's client and session).
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


def audit_record_many(entries: Sequence[AuditEntry]) -> list[AuditEvent]:
    """Append ``entries`` to the chain in this order, in three round trips whatever their number.

    Must run inside the caller's transaction, like :func:`audit_record`.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    if not entries:
        return []
    with AUDIT_APPEND_SECONDS.time():
        return _append(entries)


def _append(entries: Sequence[AuditEntry]) -> list[AuditEvent]:
    texts = [json.dumps(entry.data or {}, ensure_ascii=False, allow_nan=False) for entry in entries]
    with connection.cursor() as cursor:
        # One round trip takes the chain lock and gives every ``data`` back as jsonb will store it: the
        # content hash must be computed over what verification reads back, and jsonb rewrites some
        # numbers (1e20 comes back as the integer 100000000000000000000).
        casts = ", ".join(["%s::jsonb::text"] * len(texts))
        cursor.execute(f"SELECT pg_advisory_xact_lock(%s), {casts}", [_AUDIT_LOCK_KEY, *texts])
        stored = [json.loads(text) for text in cursor.fetchone()[1:]]
    # A statement of its own, after the lock is held: a snapshot taken before it could miss the event
    # the previous holder just committed.
    last = AuditEvent.objects.order_by("-id").values_list("chain_hash", flat=True).first()
    prev_hash = last or GENESIS_HASH
    now = timezone.now()
    request_id = current_request_id()
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
            prev_hash=prev_hash,
        )
        event.content_hash = canonical_sha256(_content(event))
        event.chain_hash = _chain(prev_hash, event.content_hash)
        prev_hash = event.chain_hash
        events.append(event)
    if len(events) == 1:
        events[0].save(force_insert=True)
    else:
        AuditEvent.objects.bulk_create(events)
    return events


@dataclass(frozen=True)
class ChainReport:
    checked: int
    first_broken_id: int | None
    reason: str

    @property
    def ok(self) -> bool:
        return self.first_broken_id is None


def audit_chain_verify(*, batch_size: int = 2000) -> ChainReport:
    """Recompute every link in id order; report the first event whose link does not hold."""
    prev_hash = GENESIS_HASH
    checked = 0
    for event in AuditEvent.objects.order_by("id").iterator(chunk_size=batch_size):
        if event.prev_hash != prev_hash:
            return ChainReport(checked, event.id, "prev_hash does not match the previous event")
        if canonical_sha256(_content(event)) != event.content_hash:
            return ChainReport(checked, event.id, "content does not match content_hash")
        if _chain(prev_hash, event.content_hash) != event.chain_hash:
            return ChainReport(checked, event.id, "chain_hash does not match")
        prev_hash = event.chain_hash
        checked += 1
    return ChainReport(checked, None, "ok")
