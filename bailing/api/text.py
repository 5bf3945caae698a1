"""Checks on client-supplied text: control characters and lone surrogates are rejected, never stripped."""

from __future__ import annotations

import re

# C0 controls except TAB, LF, CR; DEL; C1 controls. Multi-line text fields allow \t \n \r.
_CONTROL_MULTILINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_CONTROL_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    # Python strings decoded from JSON keep unpaired \\uD8xx escapes as lone surrogate code points;
    # paired escapes are already combined into one astral code point by the json module.
    return bool(_SURROGATE.search(text))


def has_control_chars(text: str, *, multiline: bool) -> bool:
    pattern = _CONTROL_MULTILINE if multiline else _CONTROL_SINGLE_LINE
    return bool(pattern.search(text))
