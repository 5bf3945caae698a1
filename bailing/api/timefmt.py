"""Timestamps on the wire: ISO-8601 UTC with milliseconds and ``Z`` (docs/protocol.md "Timestamps"),
exactly what JavaScript's ``Date.prototype.toISOString`` writes, so agent SDKs parse them unchanged."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
