"""What an app contributes to the console shell: navigation entries and dashboard cards.

Each app's ``console/nav.py`` declares ``NAV`` (a list of :class:`NavItem`) and ``dashboard_cards``
(user → list of :class:`Card`); the shell (``bailing.shell.console``) orders and shows them. Entries
and cards carry their position, so the navigation reads in a fixed order whichever app adds what.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class NavItem:
    """A navigation entry, shown to users holding ``permission``. ``badge`` counts something that
    waits for this user (pending approvals): None shows no badge."""

    order: int
    label: str
    url_name: str
    permission: str
    badge: Callable[[object], int | None] | None = None


@dataclass(frozen=True)
class Card:
    """A dashboard figure linking to the page it summarises. ``alarm`` marks a figure that needs
    someone now (unknown outcomes to reconcile): the card is styled as an alarm, and says so."""

    order: int
    label: str
    value: int
    note: str
    url: str
    alarm: bool = False
