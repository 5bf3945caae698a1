"""Invisible and reordering characters in displayed text, made visible.

Text the console shows comes from agents (tool arguments, approval summaries rendered from them,
answers), business systems and users. A character that renders as nothing, or that reorders what
follows it, lets such text show an approver something other than what it holds:
``refund to IBAN \\u202eDE00 1234\\u202c ok`` reads as a different account number. The console
therefore never puts these characters into the page: each is shown as a small visible token naming
its code point (``U+202E``), and the text around it is shown as it is. The data is never changed;
what is stored, hashed, approved and sent on stays exactly what the agent sent.

Neutralised: bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069); the
implicit marks (U+200E, U+200F, U+061C); zero-width and invisible formatters (U+200B–U+200D,
U+2060–U+2064, U+FEFF, U+180E, U+00AD soft hyphen); Unicode tag characters (U+E0000–U+E007F); and
every C0 or C1 control character and DEL except TAB and LF, which lay out text as they should.

:func:`reveal_html` is for element content (the ``reveal`` template filter); :func:`reveal_plain`
is for places that cannot hold markup (attributes, ``<title>``; the ``reveal_text`` filter);
:func:`json_escape_hidden` for JSON the console serves to a browser to read.
"""

from __future__ import annotations

import re
import unicodedata

from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

HIDDEN_CHARS = re.compile(
    "["
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls except TAB (09) and LF (0A); DEL; C1 controls
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u180e"  # Mongolian vowel separator
    "\u200b-\u200f"  # zero-width space, non-joiner, joiner; left-to-right and right-to-left marks
    "\u202a-\u202e"  # LRE RLE PDF LRO RLO
    "\u2060-\u2064"  # word joiner, invisible function application, times, separator, plus
    "\u2066-\u2069"  # LRI RLI FSI PDI
    "\ufeff"  # zero-width no-break space (byte order mark)
    "\U000e0000-\U000e007f"  # tag characters
    "]"
)


def code_point(char: str) -> str:
    """``U+202E``: how a hidden character is shown."""
    return f"U+{ord(char):04X}"


def _name(char: str) -> str:
    # Controls have no character name in the Unicode database; every other hidden character does.
    return unicodedata.name(char, "control character")


def _token(match: re.Match[str]) -> str:
    char = match.group(0)
    # Only hex digits, capital letters, spaces and hyphens: nothing here needs escaping.
    return f'<span class="char-escape" title="{_name(char)}">{code_point(char)}</span>'


def reveal_html(value) -> SafeString:
    """``value`` as HTML for element content: escaped like any template text (already safe markup
    is kept as it is, as Django's autoescaping keeps it), then every hidden character replaced by
    a ``<span class="char-escape">U+XXXX</span>`` token. Escaping never produces or removes a
    hidden character, so the tokens are the only markup added and no input is marked safe unescaped.
    """
    escaped = str(conditional_escape(value))
    return mark_safe(HIDDEN_CHARS.sub(_token, escaped))  # noqa: S308 - escaped above


def reveal_plain(value) -> str:
    """``value`` as plain text with every hidden character written ``[U+XXXX]``; for attribute values
    and ``<title>``, where markup is not possible. The template escapes the result as usual."""
    return HIDDEN_CHARS.sub(lambda match: f"[{code_point(match.group(0))}]", str(value))


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    # Tag characters lie outside the Basic Multilingual Plane: JSON writes them as a surrogate pair.
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_escape_hidden(text: str) -> str:
    """Serialized JSON with every hidden character written as a ``\\uXXXX`` escape, for a document
    the console serves to be read in the browser. Outside its strings JSON is printable ASCII and
    whitespace, and no raw control character may stand inside a string, so in JSON written without
    carriage returns between tokens (as ``js_stringify`` and ``json.dumps`` write it) every hidden
    character is inside a string, where the escape parses back to the same character: the document
    means exactly what it meant, and a browser showing it shows the escapes."""
    return HIDDEN_CHARS.sub(_json_escape, text)
