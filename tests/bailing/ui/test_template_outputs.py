"""Every console template prints text through the ``reveal`` filters (bailing/ui/visible.py).

The neutralisation is only as good as its coverage: a ``{{ … }}`` that forgets it shows a
right-to-left override raw. This walks every template and fails on any output that prints text
without ``|reveal`` (element content) or ``|reveal_text`` (tooltips, accessible names, ``<title>``);
form widgets and filters whose output the code makes (``utc``, ``yesno``, ``pluralize``,
``floatformat``, ``length``) are exempt, as are attributes nobody reads as text (``href``, ``class``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings

from tests.support.template_outputs import outputs

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# Swagger UI's page: static asset URLs and a fixed title, no data.
NOT_CONSOLE = {"api_docs.html"}


def console_templates() -> list[Path]:
    found = sorted(path for path in TEMPLATES.rglob("*.html") if path.name not in NOT_CONSOLE)
    assert len(found) > 40
    return found


@pytest.mark.parametrize("path", console_templates(), ids=lambda path: str(path.relative_to(TEMPLATES)))
def test_every_printed_text_goes_through_reveal(path):
    source = path.read_text()
    missing = [
        f"line {source.count(chr(10), 0, out.start) + 1}: {{{{ {out.expression} }}}} needs |{out.needs}"
        for out in outputs(source)
        if not out.ok
    ]
    assert not missing, missing
    if any(out.needs for out in outputs(source)):
        assert "{% load console" in source or "{% load static console" in source


def test_the_places_are_told_apart():
    source = (
        "{% block title %}Tool {{ a }}{% endblock %}"
        '<p title="{{ b }}" class="x-{{ c }}">{% if n > 1 %}{{ d }}{% endif %}</p>'
        '<a href="{{ e }}" aria-label="Delete {{ f }}">{{ g|utc }} {{ field }} {{ h|default:"—" }}</a>'
    )
    found = {out.expression: (out.place, out.needs) for out in outputs(source)}
    assert found == {
        "a": ("title", "reveal_text"),
        "b": ("text-attribute", "reveal_text"),
        "c": ("attribute", None),
        "d": ("content", "reveal"),
        "e": ("attribute", None),
        "f": ("text-attribute", "reveal_text"),
        "g|utc": ("content", None),
        "field": ("content", None),
        'h|default:"—"': ("content", "reveal"),
    }
    assert not next(out for out in outputs(source) if out.expression == "d").ok
    assert outputs("<p>{{ d|reveal }}</p>")[0].ok
    # ``reveal`` must be last: a filter after it could drop the escaping or the tokens.
    assert not outputs("<p>{{ d|reveal|upper }}</p>")[0].ok
