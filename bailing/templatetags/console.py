"""Template filters of the console (``{% load console %}``)."""

from __future__ import annotations

import json

from django import template

from bailing.ui.tables import BADGE_TONES, utc_iso

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
