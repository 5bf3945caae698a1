"""Where each ``{{ … }}`` of a console template prints, for the check that every printed text goes
through the ``reveal`` filters (tests/bailing/ui/test_visible.py).

A template's variable output lands in one of three places: element content (needs ``|reveal``, which
may emit markup), an attribute value or the document ``<title>`` (``|reveal_text``: no markup there),
or an attribute that no one reads as text (``href``, ``class``, ``value`` …: left alone). Template
tags and comments are blanked out before the HTML context is worked out, so ``{% if a > 1 %}`` is
not taken for the end of a tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OUTPUT = re.compile(r"{{\s*(.*?)\s*}}", re.DOTALL)
_TEMPLATE_TAG = re.compile(r"{%.*?%}|{#.*?#}", re.DOTALL)
_TITLE_BLOCK = re.compile(r"{%\s*block title\s*%}(.*?){%\s*endblock\s*%}", re.DOTALL)
_OPEN_ATTRIBUTE = re.compile(r"([A-Za-z][\w:-]*)\s*=\s*\"[^\"]*$")
# Attributes a person reads (tooltips, accessible names): text without markup.
TEXT_ATTRIBUTES = {"title", "aria-label", "alt", "placeholder"}
# Form widgets and their parts render their own escaped markup (and what a user is typing).
WIDGET = re.compile(r"^(field|form\.\w+|\w+\.tag)$")
# Filters whose output the code makes (a timestamp, fixed words, a number), never passed-in text.
CODE_MADE = {"utc", "yesno", "pluralize", "floatformat", "length"}


@dataclass(frozen=True)
class Output:
    start: int
    end: int
    expression: str
    # "content", "text-attribute", "title" or "attribute"
    place: str

    @property
    def filters(self) -> list[str]:
        return [part.split(":", 1)[0].strip() for part in self.expression.split("|")[1:]]

    @property
    def needs(self) -> str | None:
        """The filter this output must end with, or None when it is exempt."""
        if self.place == "attribute":
            return None
        if self.place in ("title", "text-attribute"):
            return "reveal_text"
        base = self.expression.split("|", 1)[0].strip()
        if WIDGET.match(base) or (self.filters and self.filters[-1] in CODE_MADE):
            return None
        return "reveal"

    @property
    def ok(self) -> bool:
        need = self.needs
        return need is None or (bool(self.filters) and self.filters[-1] == need)


def outputs(source: str) -> list[Output]:
    blanked = _TEMPLATE_TAG.sub(lambda match: " " * len(match.group(0)), source)
    titles = [match.span(1) for match in _TITLE_BLOCK.finditer(source)]
    found = []
    for match in OUTPUT.finditer(source):
        start = match.start()
        before = blanked[:start]
        in_tag = before.rfind("<") > before.rfind(">")
        if in_tag:
            attribute = _OPEN_ATTRIBUTE.search(before)
            name = attribute.group(1).lower() if attribute else ""
            place = "text-attribute" if name in TEXT_ATTRIBUTES else "attribute"
        elif any(begin <= start < end for begin, end in titles):
            place = "title"
        else:
            place = "content"
        found.append(Output(start, match.end(), match.group(1), place))
    return found
