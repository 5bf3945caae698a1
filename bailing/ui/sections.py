"""Page sections an app contributes to another app's console page, and dashboard panels.

A lower app's page may show what a higher app knows (a workspace's knowledge bases, the approvals
waiting on the dashboard) without importing it: the higher app registers a builder that returns a
:class:`Section` (or a :class:`Panel`), and the page renders it with ``console/_section.html`` /
``console/_panel.html``. Both carry only escaped text: facts and :class:`~bailing.ui.tables.Table`
cells, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bailing.ui.tables import Table


@dataclass(frozen=True)
class Fact:
    """One ``<dt>``/``<dd>`` pair; ``tone`` makes the value a badge, ``note`` follows it muted."""

    label: str
    value: str
    tone: str = ""
    note: str = ""
    mono: bool = False


@dataclass(frozen=True)
class Section:
    """A titled block of a page: facts and/or a table, with an optional link to more."""

    order: int
    title: str
    note: str = ""
    facts: list[Fact] = field(default_factory=list)
    table: Table | None = None
    # Shown when there are neither facts nor a table (a sentence, never an empty box).
    empty: str = ""
    more_url: str = ""
    more_label: str = ""


@dataclass(frozen=True)
class Panel(Section):
    """A dashboard panel (a :class:`Section` shown as a card); ``wide`` spans the whole row."""

    wide: bool = False
