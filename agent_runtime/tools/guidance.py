"""Model-facing text of a compiled tool: the short description and the bounded usage guidance.

Two texts come out of one operation (spec "Read usage guidance by tool name"):

* the **short description** shown in catalogs and searches: the OpenAPI ``summary``, else its
  ``description``, else the ACC ``scope`` (with a ``tool_description_missing`` warning, because
  clients refuse an empty description). It is cut at **500 Unicode code points**; a cut sets
  ``description_truncated`` and raises ``tool_description_truncated``.
* the **usage guidance** read on demand from the tool-detail endpoint: ``summary`` and
  ``description`` (both kept when both are present and differ), ACC ``guidance.when_to_use``,
  ``guidance.returns`` and the *first* ``guidance.examples`` entry (compact JSON), in that order,
  separated by a blank line. Nothing else from the spec ever enters it. It is bounded by **32,768
  code points and 65,536 UTF-8 bytes**, whichever is reached first, never splitting a code point;
  ``source_chars``/``source_bytes`` measure the text after cleanup and before the cut.

Control-character cleanup (:func:`clean_text`), applied to every piece before composition and to
the short description:

1. CR LF, a lone CR, U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR become LF;
2. every other C0 control except TAB and LF (U+0000–U+0008, U+000B, U+000C, U+000E–U+001F), DEL
   (U+007F) and every C1 control (U+0080–U+009F) becomes one SPACE, so words stay apart;
3. the bidirectional embedding/override/isolate controls (U+202A–U+202E, U+2066–U+2069) are
   removed: they can make guidance read differently to a human reviewer than to a model;
4. leading and trailing whitespace is stripped.

Lone surrogates never reach this module: the compiler rejects a spec containing one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bailing.api.limits import truncate_utf8

DESCRIPTION_MAX_CODE_POINTS = 500
GUIDANCE_MAX_CHARS = 32_768
GUIDANCE_MAX_BYTES = 65_536

_NEWLINES = re.compile("\r\n|\r|\u2028|\u2029")
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str) -> str:
    """``text`` with control characters cleaned as the module docstring defines."""
    text = _NEWLINES.sub("\n", text)
    text = _CONTROLS.sub(" ", text)
    text = _BIDI_CONTROLS.sub("", text)
    return text.strip()


@dataclass(frozen=True)
class UsageGuidance:
    """The bounded guidance of one tool, with the counts the tool-detail response reports.

    Kept as a value object so the catalog can store it, hash it into the capability revision and
    serve it without recomposing (and possibly re-truncating differently after an upgrade).
    """

    text: str
    truncated: bool
    source_chars: int
    source_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """The ``usage_guidance`` object of ``bailing.agent-tool-detail.v1``."""
        return {
            "text": self.text,
            "truncated": self.truncated,
            "source_chars": self.source_chars,
            "max_chars": GUIDANCE_MAX_CHARS,
            "source_bytes": self.source_bytes,
            "max_bytes": GUIDANCE_MAX_BYTES,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UsageGuidance:
        return cls(
            text=data["text"],
            truncated=data["truncated"],
            source_chars=data["source_chars"],
            source_bytes=data["source_bytes"],
        )


def bound_guidance(text: str) -> UsageGuidance:
    """Cut already-cleaned ``text`` to both guidance budgets at a code-point boundary."""
    source_chars = len(text)
    source_bytes = len(text.encode("utf-8"))
    bounded = truncate_utf8(text[:GUIDANCE_MAX_CHARS], GUIDANCE_MAX_BYTES)
    return UsageGuidance(
        text=bounded,
        truncated=len(bounded) < source_chars,
        source_chars=source_chars,
        source_bytes=source_bytes,
    )


def short_description(summary: str, description: str, fallback: str) -> tuple[str, bool, bool]:
    """``(text, truncated, used_fallback)`` for the catalog description.

    Inputs must already be cleaned. The cut keeps exactly the first 500 code points; Python strings
    index code points, so an astral character is never split into surrogate halves.
    """
    text = summary or description
    used_fallback = not text
    if used_fallback:
        text = fallback
    if len(text) > DESCRIPTION_MAX_CODE_POINTS:
        return text[:DESCRIPTION_MAX_CODE_POINTS], True, used_fallback
    return text, False, used_fallback


def compose_guidance(
    *,
    summary: str,
    description: str,
    when_to_use: str,
    returns: str,
    examples: list[Any],
) -> str:
    """The full (unbounded) guidance text; every text input must already be cleaned."""
    parts = [summary]
    if description != summary:
        parts.append(description)
    if when_to_use:
        parts.append(f"When to use: {when_to_use}")
    if returns:
        parts.append(f"Returns: {returns}")
    if examples:
        example = clean_text(json.dumps(examples[0], ensure_ascii=False, separators=(",", ":")))
        parts.append(f"Example arguments: {example}")
    return "\n\n".join(part for part in parts if part)
