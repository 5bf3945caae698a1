"""Table rows for ``templates/console/_table.html``, built in views.

Every console list uses the one partial so tables look and behave alike; a view decides what each
cell is (plain text, an identifier in monospace, a link, a status badge, a UTC timestamp) and the
partial only renders it. Cell text is always escaped by the template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

# Badge tones by status word; anything unknown renders neutral. The states of governed tool calls,
# their journals, approvals and notifications are not here: they have badges of their own, with
# labels and meanings (approvals/console/labels.py, bailing/ui/badges.py).
BADGE_TONES = {
    "enabled": "ok",
    "active": "ok",
    "on": "ok",
    "approved": "ok",
    "disabled": "off",
    "off": "off",
    "expired": "warn",
    "pending": "warn",
    "revoked": "bad",
    "denied": "bad",
    "broken": "bad",
    "missing": "bad",
    "completed": "ok",
    "in_progress": "warn",
    "failed": "bad",
}


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def shorten_ids(value: str) -> str:
    """``agent_session:7375793d-b55a-…`` → ``agent_session:7375793d…``: UUIDs cut to their first
    8 characters so dense tables stay readable (the full value goes in the cell's title)."""
    return _UUID.sub(lambda match: match.group(0)[:8] + "…", value)


# Revisions and digests are shown by their first 12 hex digits (the full value is in a title/detail).
HASH_PREFIX_CHARS = 12


def short_hash(value: str) -> str:
    """The displayed prefix of a revision or SHA-256 digest."""
    return value[:HASH_PREFIX_CHARS]


def utc_iso(value: datetime | None) -> str:
    """Console timestamps: UTC, ISO 8601, second precision, ``Z`` suffix; ``—`` when unset."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Cell:
    text: str
    href: str | None = None
    # text | mono (identifier, never wrapped) | list (comma list) | data (JSON preview) | badge |
    # muted | time
    kind: str = "text"
    tone: str = ""
    title: str = ""
    # A second, smaller line under the value (e.g. an audit event's target and data preview).
    sub: str = ""


def text(value, href: str | None = None) -> Cell:
    if value in (None, "", []):
        return Cell("—", kind="muted")
    return Cell(str(value), href=href)


def mono(value, href: str | None = None, title: str = "") -> Cell:
    if value in (None, ""):
        return Cell("—", kind="muted")
    return Cell(str(value), href=href, kind="mono", title=title)


def ident(value, href: str | None = None) -> Cell:
    """An identifier that may contain UUIDs, shortened for display, complete in the title."""
    if value in (None, ""):
        return Cell("—", kind="muted")
    full = str(value)
    short = shorten_ids(full)
    return Cell(short, href=href, kind="mono", title=full if short != full else "")


def badge(word: str) -> Cell:
    return Cell(word, kind="badge", tone=BADGE_TONES.get(word, "neutral"))


def time(value: datetime | None) -> Cell:
    if value is None:
        return Cell("—", kind="muted")
    return Cell(utc_iso(value), kind="time")


def words(values, empty: str = "—") -> Cell:
    """A short list (workspaces, roles) as one comma-separated monospace cell."""
    items = [str(v) for v in values or []]
    if not items:
        return Cell(empty, kind="muted")
    return Cell(", ".join(items), kind="list")


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    empty: str = "Nothing to show."


def duration(seconds: float | None) -> str:
    """A short age or lag for people: ``4 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``; ``—`` when
    unknown."""
    if seconds is None:
        return "—"
    total = round(max(seconds, 0.0))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"
