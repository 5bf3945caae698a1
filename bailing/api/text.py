"""Checks on client-supplied text: control characters and lone surrogates are rejected, never stripped."""

from __future__ import annotations

import re

# C0 controls except TAB, LF, CR; DEL; C1 controls. Multi-line text fields allow \t \n \r.
_CONTROL_MULTILINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# Bidirectional embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): in text a
# page displays they reorder what the reader sees ("Trojan Source"), so displayed client text refuses
# them like control characters. The implicit marks (U+200E, U+200F, U+061C) stay allowed: they
# reorder nothing past a neighbouring character and right-to-left text uses them.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def has_lone_surrogate(text: str) -> bool:
    # Python strings decoded from JSON keep unpaired \\uD8xx escapes as lone surrogate code points;
    # paired escapes are already combined into one astral code point by the json module.
    return bool(_SURROGATE.search(text))


def has_control_chars(text: str, *, multiline: bool, display: bool = False) -> bool:
    """Whether ``text`` holds a control character (TAB, LF, CR allowed when ``multiline``), or, when
    it is ``display`` text (shown in the console or on a consent page), a bidirectional control."""
    pattern = _CONTROL_MULTILINE if multiline else _CONTROL_SINGLE_LINE
    return bool(pattern.search(text)) or (display and has_bidi_controls(text))


def has_bidi_controls(text: str) -> bool:
    return bool(_BIDI_CONTROLS.search(text))
