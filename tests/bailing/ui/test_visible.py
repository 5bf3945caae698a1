"""The console's neutralisation of hidden characters (bailing/ui/visible.py, the ``reveal`` and
``reveal_text`` template filters): every class the console must show as a visible escape, escaping
that stays intact, and text that must come through untouched."""

from __future__ import annotations

import unicodedata

import pytest
from django.template import Context, Template
from django.utils.safestring import SafeData, mark_safe

from bailing.ui.visible import HIDDEN_CHARS, reveal_html, reveal_plain

BIDI_CONTROLS = [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
IMPLICIT_MARKS = ["\u200e", "\u200f", "\u061c"]
INVISIBLE_FORMATTERS = (
    [chr(c) for c in range(0x200B, 0x200E)]
    + [chr(c) for c in range(0x2060, 0x2065)]
    + ["\ufeff", "\u180e", "\u00ad"]
)
TAG_CHARACTERS = [chr(c) for c in range(0xE0000, 0xE0080)]
CONTROLS = (
    [chr(c) for c in range(0x00, 0x20) if c not in (0x09, 0x0A)]
    + ["\x7f"]
    + [chr(c) for c in range(0x80, 0xA0)]
)
HIDDEN = BIDI_CONTROLS + IMPLICIT_MARKS + INVISIBLE_FORMATTERS + TAG_CHARACTERS + CONTROLS


def token(char: str) -> str:
    name = unicodedata.name(char, "control character")
    return f'<span class="char-escape" title="{name}">U+{ord(char):04X}</span>'


def render(source: str, **context) -> str:
    return Template("{% load console %}" + source).render(Context(context))


@pytest.mark.parametrize("char", HIDDEN, ids=lambda char: f"U+{ord(char):04X}")
def test_every_hidden_character_is_shown_as_its_code_point(char):
    html = reveal_html(f"a{char}b")
    assert html == f"a{token(char)}b"
    assert char not in html
    assert isinstance(html, SafeData)
    assert reveal_plain(f"a{char}b") == f"a[U+{ord(char):04X}]b"


def test_the_classes_are_exactly_those_listed():
    """Nothing else in the Basic Multilingual Plane or the tag block is touched."""
    hidden = {chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and HIDDEN_CHARS.match(chr(c))}
    assert hidden == set(HIDDEN)


def test_the_spoofed_iban_reads_as_it_is_stored():
    html = reveal_html("refund to IBAN \u202eDE00 1234\u202c ok")
    assert html == f"refund to IBAN {token(chr(0x202E))}DE00 1234{token(chr(0x202C))} ok"
    assert reveal_plain("IBAN \u202eDE00\u202c") == "IBAN [U+202E]DE00[U+202C]"


def test_tab_and_line_feed_lay_out_text_as_usual():
    assert reveal_html("a\tb\nc") == "a\tb\nc"
    # A carriage return is a control like any other: shown, so a CRLF text shows where it has them.
    assert reveal_html("a\r\nb") == f"a{token(chr(13))}\nb"


def test_markup_in_the_input_is_escaped_before_the_tokens_are_added():
    html = reveal_html("<script>alert(\"x\")</script>\u200b<b class='y'>&amp;</b>")
    assert html == (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
        + token("\u200b")
        + "&lt;b class=&#x27;y&#x27;&gt;&amp;amp;&lt;/b&gt;"
    )
    assert "<script" not in html and "<b" not in html
    # A token-looking input is text like any other.
    fake = '<span class="char-escape">U+202E</span>'
    assert reveal_html(fake) == "&lt;span class=&quot;char-escape&quot;&gt;U+202E&lt;/span&gt;"
    assert reveal_plain("<i>\u202e</i>") == "<i>[U+202E]</i>"  # the template escapes it


@pytest.mark.parametrize(
    "text",
    [
        "😀 👍🏽 🇩🇪 ❤️ 𝒳 𠀋",  # astral code points (surrogate pairs in UTF-16), a modifier, flags, VS16
        "退款到账户 6222 0200 1234 5678，确认吗？",
        "日本語のテキスト・カタカナ",
        "한국어 텍스트",
        "مرحبا بالعالم שלום עולם",  # right-to-left letters are text, not controls
        "café naïve Ångström ﬁ",
        "",
    ],
)
def test_ordinary_text_is_untouched(text):
    assert reveal_html(text) == text
    assert reveal_plain(text) == text


def test_a_zero_width_joiner_is_shown_even_inside_an_emoji_sequence():
    """U+200D is on the list, and the approver must see every code point: a ZWJ family emoji shows its
    joiners (its emoji stay as they are)."""
    assert reveal_html("👨\u200d👩\u200d👧") == f"👨{token(chr(0x200D))}👩{token(chr(0x200D))}👧"


def test_safe_markup_is_kept_and_other_values_are_text():
    assert reveal_html(mark_safe("<b>ok</b>\u2066")) == f"<b>ok</b>{token(chr(0x2066))}"
    assert reveal_html(42) == "42"
    assert reveal_html(None) == "None"


def test_the_filters_in_templates():
    value = "<b>pay</b> \u202eDE00\u202c"
    assert render("<p>{{ v|reveal }}</p>", v=value) == (
        f"<p>&lt;b&gt;pay&lt;/b&gt; {token(chr(0x202E))}DE00{token(chr(0x202C))}</p>"
    )
    # Attributes and <title> take the plain form, escaped by the template as any text.
    assert render('<td title="{{ v|reveal_text }}">', v='a"\u200bb') == '<td title="a&quot;[U+200B]b">'
    # Autoescaping switched off does not switch the escaping of ``reveal`` off.
    assert render("{% autoescape off %}{{ v|reveal }}{% endautoescape %}", v="<i>") == "&lt;i&gt;"
    # After another filter: JSON of the arguments, a joined list (already escaped: not twice).
    assert render("{{ v|pretty_json|reveal }}", v={"iban": "\u202eDE"}) == (
        "{\n  &quot;iban&quot;: &quot;" + token(chr(0x202E)) + "DE&quot;\n}"
    )
    assert render('{{ v|join:", "|reveal }}', v=["a&b", "c\u200b"]) == f"a&amp;b, c{token(chr(0x200B))}"
    assert render('{{ v|join:", "|reveal_text }}', v=["a&b", "c\u200b"]) == "a&amp;b, c[U+200B]"


def test_json_keeps_its_value_and_writes_hidden_characters_as_escapes():
    import json

    from bailing.api.jsjson import js_stringify
    from bailing.ui.visible import json_escape_hidden

    value = {"all": "".join(HIDDEN), "text": "😀 退款 שלום", "nested": [{"k\u202e": "\U000e0041"}]}
    for text in (js_stringify(value), json.dumps(value, ensure_ascii=False, indent=2)):
        escaped = json_escape_hidden(text)
        assert not HIDDEN_CHARS.search(escaped)
        assert json.loads(escaped) == value
        assert "😀 退款 שלום" in escaped
    assert json_escape_hidden('"\u202e\U000e0041"') == '"\\u202e\\udb40\\udc41"'
