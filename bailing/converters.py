"""Path converters for every path parameter of the hub (registered by ``bailing.apps``).

Django's ``str`` and ``path`` converters accept any character but ``/`` (``str``), control
characters included; a ``%00`` then reached PostgreSQL, whose text type cannot hold NUL, and the
page answered 500. ``<segment:name>`` is one path segment and ``<segments:name>`` one or more, both
without C0/C1 control characters (U+0000–U+001F, U+007F–U+009F): such a path matches no pattern and
answers the site's 404 — the console's styled page, or the JSON envelope under an API prefix.
Views still validate what they receive; this only keeps what no identifier may contain away from
them. ``tests/bailing/test_path_parameters.py`` fails on any pattern that uses another converter
than these, ``int`` or ``uuid``.
"""

from __future__ import annotations

_CONTROL = r"\x00-\x1f\x7f-\x9f"


class SegmentConverter:
    regex = rf"[^/{_CONTROL}]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class SegmentsConverter(SegmentConverter):
    regex = rf"[^{_CONTROL}]+"


CONVERTERS = {"segment": SegmentConverter, "segments": SegmentsConverter}
