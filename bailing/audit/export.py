"""Exporting the sealed audit ledger for offline verification (docs/audit.md "Export and offline
verification").

:func:`audit_export` writes the signed manifest and then every sealed event of a contiguous stretch
of the chain, one canonical JSON line each, from one REPEATABLE READ snapshot, streaming the events
through a server-side cursor (the ledger is never held in memory). The format, its canonical form
and its checks live in :mod:`bailing.audit.export_verify`, the standalone verifier; this module only
reads the ledger and signs.

Which events a time range exports: the chain order is the seal order, not ``created_at``, so the
events recorded in ``[since, until)`` need not sit next to each other in the chain. The export is the
contiguous stretch from the lowest chain position of a sealed event recorded at or after ``since``
to the highest position of one recorded before ``until`` (the chain's start or its sealed head when
a bound is not given): every sealed event recorded in the range is in it, and so is any event
sealed between two of them (a late committer recorded just before ``since``, for instance), so the
stretch has no gap and verifies as one piece of the chain. Unsealed events are never exported.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import IO

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
)
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max, Min

from bailing.audit import export_verify
from bailing.audit.ledger import audit_event_content
from bailing.audit.models import AuditEvent

# Events fetched per round trip of the server-side cursor.
EXPORT_CHUNK = 2000


class NothingToExport(Exception):
    """No sealed event in the requested range."""


class ExportInconsistent(Exception):
    """The snapshot's chain is not dense between its bounds: the ledger broke its own invariants
    (``approvals_audit_verify`` names where); the export would not verify."""


class SigningKeyError(Exception):
    """The signing key file is missing, unreadable or not an Ed25519 private key."""


@dataclass(frozen=True)
class ExportReport:
    count: int
    first_seq: int
    last_seq: int
    head_hash: str
    unsealed: int  # events of the ledger not sealed in the snapshot: not exported
    key_sha256: str


# --- the signing key -----------------------------------------------------------------------------------


def signing_key_generate(path: Path) -> Ed25519PrivateKey:
    """A new Ed25519 private key written to ``path`` (PEM, PKCS#8, unencrypted), created with mode
    0600 and never over an existing file (FileExistsError)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)
    return key


def signing_key_load(path: Path) -> Ed25519PrivateKey:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SigningKeyError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise SigningKeyError(f"{path} is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} is not an Ed25519 private key")
    return key


# --- the export ----------------------------------------------------------------------------------------


def _exporter() -> dict[str, str]:
    try:
        version = metadata.version("bailing-hub")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "hub": "bailing-hub",
        "version": version,
        "public_url": settings.BAILING_PUBLIC_URL,
        "host": socket.gethostname(),
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _event_line(event: AuditEvent) -> bytes:
    line = {
        "type": "event",
        "seq": event.chain_seq,
        "prev_hash": event.prev_hash,
        "content_hash": event.content_hash,
        "chain_hash": event.chain_hash,
        "content": audit_event_content(event),
    }
    return export_verify.canonical_json(line) + b"\n"


def audit_export(
    *,
    out: IO[bytes],
    key: Ed25519PrivateKey,
    since: datetime | None = None,
    until: datetime | None = None,
    chunk_size: int = EXPORT_CHUNK,
    on_bounds: Callable[[int], None] | None = None,
    on_event: Callable[[], None] | None = None,
) -> ExportReport:
    """Write the signed manifest and the sealed events of ``[since, until)`` (module docstring) to
    ``out``, from one snapshot. ``on_bounds(count)`` is called once the count is known,
    ``on_event()`` after each event written (a progress bar). Raises :class:`NothingToExport`."""
    # Inside a caller's transaction (tests) its snapshot is the one read.
    outermost = not transaction.get_connection().in_atomic_block
    with transaction.atomic():
        if outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        sealed = AuditEvent.objects.filter(chain_seq__isnull=False)
        lower = sealed.filter(created_at__gte=since) if since is not None else sealed
        upper = sealed.filter(created_at__lt=until) if until is not None else sealed
        first_seq = lower.aggregate(seq=Min("chain_seq"))["seq"]
        last_seq = upper.aggregate(seq=Max("chain_seq"))["seq"]
        if first_seq is None or last_seq is None or first_seq > last_seq:
            raise NothingToExport("no sealed audit event in that range")
        anchor_hash = sealed.values_list("prev_hash", flat=True).get(chain_seq=first_seq)
        head_hash = sealed.values_list("chain_hash", flat=True).get(chain_seq=last_seq)
        unsealed = AuditEvent.objects.filter(chain_seq__isnull=True).count()
        count = last_seq - first_seq + 1
        manifest = export_verify.manifest_sign(
            {
                "type": "manifest",
                "format": export_verify.FORMAT,
                "first_seq": first_seq,
                "last_seq": last_seq,
                "count": count,
                "anchor_hash": anchor_hash,
                "head_hash": head_hash,
                "range": {"since": _iso(since), "until": _iso(until)},
                "exporter": _exporter(),
                "exported_at": datetime.now(UTC).isoformat(),
            },
            key,
        )
        if on_bounds is not None:
            on_bounds(count)
        out.write(export_verify.canonical_json(manifest) + b"\n")
        written = 0
        last_hash = None
        events = sealed.filter(chain_seq__gte=first_seq, chain_seq__lte=last_seq).order_by("chain_seq")
        for event in events.iterator(chunk_size):
            out.write(_event_line(event))
            written += 1
            last_hash = event.chain_hash
            if on_event is not None:
                on_event()
        # One snapshot and a dense chain_seq: anything else is a ledger that broke its own invariants
        # (the export would not verify; say so now rather than hand it over).
        if written != count or last_hash != head_hash:
            raise ExportInconsistent(
                f"{written} sealed events between positions {first_seq} and {last_seq}, not {count}"
            )
    return ExportReport(
        count=count,
        first_seq=first_seq,
        last_seq=last_seq,
        head_hash=head_hash,
        unsealed=unsealed,
        key_sha256=manifest["key_sha256"],
    )
