"""Template filters of the console (``{% load console %}``)."""

from __future__ import annotations

import json

from django import template

from bailing.ui.tables import BADGE_TONES, utc_iso
from bailing.ui.visible import reveal_html, reveal_plain

register = template.Library()


@register.filter
def utc(value):
    """Any datetime as UTC ISO 8601 (``2026-11-22T08:58:00Z``)."""
    return utc_iso(value)


@register.filter
def pretty_json(value):
    """Indented, key-sorted JSON for read-only display (escaped by the template like any text)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def reveal(value):
    """Text for element content with invisible and reordering characters shown as ``U+XXXX`` tokens
    (``bailing.ui.visible``). Every console template prints text through it; it escapes first, so it
    ends a filter chain: ``{{ approval.summary|reveal }}``, ``{{ args|pretty_json|reveal }}``."""
    return reveal_html(value)


@register.filter(is_safe=True)
def reveal_text(value):
    """The same for attribute values and ``<title>``, which cannot hold markup: ``[U+XXXX]``. The
    tokens add nothing that needs escaping, so already safe input stays safe (``is_safe``) and any
    other is escaped by the template as usual."""
    return reveal_plain(value)


@register.filter
def tone(word):
    """Badge tone of a status word (see ``bailing.ui.tables.BADGE_TONES``)."""
    return BADGE_TONES.get(str(word), "neutral")


@register.filter
def is_current(url_name, request):
    """Is the page being shown part of the nav section ``url_name`` (``console:client_list`` is
    current on every ``client_*`` page)?"""
    match = getattr(request, "resolver_match", None)
    if match is None or match.namespace != "console":
        return False
    section = str(url_name).split(":", 1)[-1].split("_", 1)[0]
    return match.url_name.split("_", 1)[0] == section
