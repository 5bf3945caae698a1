"""Confirmation steps for destructive console actions.

A destructive action (rotating a token, revoking a session, deleting a document, disabling a client)
is never one click: its button is a link to a GET page that says exactly what will happen, with a
confirm POST and a cancel link. The POST itself refuses to act unless it carries the confirmation
field, so a stray or forged form without it changes nothing. The page is server-rendered: the
console's Content-Security-Policy allows no inline script, so no ``confirm()`` dialog.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def is_confirmed(request) -> bool:
    return request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE


def confirm_page(request, confirmation: Confirmation):
    response = render(
        request,
        "console/confirm.html",
        {"confirmation": confirmation, "confirm_field": CONFIRM_FIELD, "confirm_value": CONFIRM_VALUE},
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
