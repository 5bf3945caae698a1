"""Status badges that say what a state means, not only its code.

A :class:`Badge` is what a page shows for one state: a short label, a tone (the colour class
``badge-<tone>``), the raw code operators grep and filter by, and one sentence saying what the
state means for the person reading. An app keeps the mapping from its states to badges in one
module (the operators' app: ``approvals/console/labels.py``); pages render a badge with
``console/_badge.html`` (templates) or :meth:`Badge.cell` (tables), never by picking a colour
themselves, so a state looks the same on every page.
"""

from __future__ import annotations

from dataclasses import dataclass

from bailing.ui.tables import Cell

# The tones a badge may take (classes badge-<tone> in static/console/console.css). ``alarm`` is
# for what needs a person now (an unknown outcome), ``progress`` for what is under way, ``dark``
# for a deliberate stop by a person (a denial), ``refused`` for a refusal by another system.
TONES = ("ok", "warn", "bad", "off", "neutral", "alarm", "progress", "dark", "refused")


@dataclass(frozen=True)
class Badge:
    label: str
    tone: str
    # The raw state code (``reconciliation_required``), kept in the title for operators.
    code: str = ""
    # What the state means, one sentence.
    meaning: str = ""
    # A second line, when the state alone would mislead (``approved`` but not yet resumed).
    note: str = ""

    def __post_init__(self) -> None:
        if self.tone not in TONES:
            raise ValueError(f"unknown badge tone {self.tone!r}")

    @property
    def title(self) -> str:
        """The tooltip: the code, then the meaning (``reconciliation_required — outcome unknown…``)."""
        return " — ".join(part for part in (self.code, self.meaning) if part)

    def cell(self, sub: str | None = None) -> Cell:
        """The badge as a table cell; its second line is ``sub``, else the badge's note."""
        return Cell(
            self.label, kind="badge", tone=self.tone, title=self.title, sub=self.note if sub is None else sub
        )
