"""Byte and character budgets, measured exactly as the protocol says.

* "UTF-8 bytes of ``JSON.stringify(x)``" (docs/protocol.md "Byte budgets"): compact separators,
  non-ASCII kept as UTF-8, with numbers rendered by ECMAScript's rules (``1.0`` is ``1``), see
  :mod:`bailing.api.jsjson`; lone surrogates are rejected before any measurement.
* "characters" of client text (docs/protocol.md "Counting characters"): UTF-16 code units, as
  JavaScript's ``.length`` counts.
* Unicode code points are used only where the spec says so (tool descriptions and guidance).
"""

from __future__ import annotations

from typing import Any

from bailing.api.jsjson import js_stringify

# The short-text width of BailingHub's schema (titles, labels, subjects, scopes, model names): 191
# characters, what an index-safe utf8mb4 column holds. One limit, used wherever the protocol says
# "≤ 191".
SHORT_TEXT_MAX_CHARS = 191


def compact_json_utf8_bytes(value: Any) -> int:
    """Size in UTF-8 bytes of ``JSON.stringify(value)`` (numbers rendered as JavaScript does)."""
    return len(js_stringify(value).encode("utf-8"))


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units (JavaScript ``String.length``)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def truncate_utf8(text: str, max_bytes: int) -> str:
    """Longest prefix of whole characters whose UTF-8 encoding fits ``max_bytes``."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", "ignore")


def cut_utf16(text: str, max_units: int) -> tuple[str, bool]:
    """Longest prefix of ``text`` within ``max_units`` UTF-16 units, never splitting a pair."""
    if max_units <= 0:
        return "", bool(text)
    if len(text) <= max_units // 2 or utf16_length(text) <= max_units:
        return text, False
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > max_units:
            return text[:index], True
    return text, False
