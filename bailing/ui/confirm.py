"""Confirmation steps for destructive console actions.

A destructive action (rotating a token, revoking a session, deleting a document, disabling a client)
is never one click: its button is a link to a GET page that says exactly what will happen, with a
confirm POST and a cancel link. The POST itself refuses to act unless it carries the confirmation
field, so a stray or forged form without it changes nothing. The page is server-rendered: the
console's Content-Security-Policy allows no inline script, so no ``confirm()`` dialog.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.shortcuts import render
from django.utils.cache import add_never_cache_headers

from bailing.ui.pages import error_page

CONFIRM_FIELD = "confirm"
CONFIRM_VALUE = "yes"


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation page shows. Every string is fixed text or a value the template escapes."""

    title: str
    action_url: str
    cancel_url: str
    button: str
    # What happens, one consequence a line ("the agent on <device> loses access at once").
    consequences: list[str]
    # (label, value) facts identifying what the action applies to.
    facts: list[tuple[str, str]] = field(default_factory=list)
    # Extra hidden fields the action needs (e.g. enabled=false).
    hidden: dict[str, str] = field(default_factory=dict)
    crumbs: list[tuple[str, str]] = field(default_factory=list)
    # The sentence the action is about, shown large under the title (an approval's "Refund 650 on
    # order SO-1002?"): what the person confirms, restated in their words rather than as facts.
    lead: str = ""
    # A form whose fields go with the confirmation (an approver's optional comment): its visible
    # fields are shown above the button, its hidden ones travel with the POST.
    form: Any = None
    # The confirm button's class: ``btn-danger`` for what takes something away, ``btn-primary``
    # for a consequential yes (approving a call).
    button_class: str = "btn-danger"


def is_confirmed(request) -> bool:
    return request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE


def confirm_page(request, confirmation: Confirmation, *, status: int = 200):
    """The confirmation page; ``status`` 400 re-shows it with the errors of its form."""
    response = render(
        request,
        "console/confirm.html",
        {"confirmation": confirmation, "confirm_field": CONFIRM_FIELD, "confirm_value": CONFIRM_VALUE},
        status=status,
    )
    add_never_cache_headers(response)
    return response


def not_confirmed(request):
    """The answer to a destructive POST without the confirmation field: 400, nothing done."""
    return error_page(
        request,
        status=400,
        title="Not confirmed",
        detail="This action needs its confirmation step. Nothing was changed.",
        code="not_confirmed",
    )
