"""Sanitizing and chunking rules (docs/protocol.md "Knowledge ingestion"), and the exactness of chunk text."""

import random

import pytest

from knowledge.chunking import (
    IMAGE_PLACEHOLDER,
    MAX_CHUNK_CHARS,
    chunk_spans,
    chunk_text,
    embedding_text,
    looks_like_html,
    sanitize_content,
)


def _assert_exact(content, chunks, max_chars=MAX_CHUNK_CHARS):
    """Every chunk is a verbatim, trimmed slice, in order, and no non-space character is lost."""
    spans = chunk_spans(content, max_chars=max_chars)
    assert [content[start:end] for start, end in spans] == chunks
    previous_end = 0
    for (start, end), chunk in zip(spans, chunks, strict=True):
        assert start >= previous_end
        assert 0 < len(chunk) <= max_chars
        assert chunk == chunk.strip()
        assert chunk in content
        previous_end = end
    assert "".join("".join(chunks).split()) == "".join(content.split())


# --------------------------------------------------------------------------------------------------
# Sanitizing
# --------------------------------------------------------------------------------------------------


def test_html_is_converted_to_markdown():
    html = (
        "<!DOCTYPE html><html><head><title>ignored</title><style>p {color: red}</style></head><body>"
        "<h1>Refund   policy</h1><p>We refund <b>within</b> 14 days. See "
        '<a href="https://shop.example/refunds">the form</a> or <a href="/local">this page</a>.</p>'
        "<ul><li>One</li><li>Two<ul><li>Nested</li></ul></li></ul><ol><li>first</li><li>second</li></ol>"
        "<pre>def f():\n    # not a heading\n    return 1</pre>"
        "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
        "<blockquote><p>Quoted</p></blockquote><p>退款<strong>政策</strong>说明。</p>"
        "<script>alert('x')</script><!-- hidden --></body></html>"
    )
    assert looks_like_html(html)
    text = sanitize_content(html)
    assert text.startswith("# Refund policy\n\nWe refund **within** 14 days.")
    assert "[the form](https://shop.example/refunds)" in text
    assert "or this page." in text
    assert "- One\n- Two\n  - Nested" in text
    assert "1. first\n2. second" in text
    assert "```\ndef f():\n    # not a heading\n    return 1\n```" in text
    assert "| a | b |\n| --- | --- |\n| 1 | 2 |" in text
    assert "> Quoted" in text
    assert "退款**政策**说明。" in text
    for gone in ("ignored", "color", "alert", "hidden", "<", "DOCTYPE"):
        assert gone not in text


def test_html_images_inline_become_placeholders_and_http_images_stay():
    html = (
        '<p>Before <img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==" alt="chart"> middle '
        '<img src="https://cdn.example/flow.png" alt="Refund flow"> <img src="cid:part1"> after</p>'
    )
    text = sanitize_content(html)
    kept = "![Refund flow](https://cdn.example/flow.png)"
    assert text == f"Before {IMAGE_PLACEHOLDER} middle {kept} {IMAGE_PLACEHOLDER} after"


def test_markdown_inline_base64_images_become_placeholders():
    content = (
        "# Guide\n\nStep one ![shot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==) done.\n"
        'Kept ![diagram](https://example.com/d.png "Title").\n'
        "<img src='data:image/gif;base64,R0lGODlhAQABAAAAACw='> and raw "
        "data:image/jpeg;base64,/9j/4AAQSkZJRg== end"
    )
    text = sanitize_content(content)
    assert "base64" not in text
    assert text.count(IMAGE_PLACEHOLDER) == 3
    assert 'Kept ![diagram](https://example.com/d.png "Title").' in text
    assert text.startswith("# Guide\n\nStep one [image] done.")


def test_markdown_with_an_html_banner_stays_markdown():
    banner = '<p align="center"><img src="https://example.com/logo.png"></p>'
    content = banner + "\n\n# Project\n\n- item one\n- item two"
    assert not looks_like_html(content)
    assert sanitize_content(content) == content


@pytest.mark.parametrize(
    "content",
    ["plain text", "a < b and c > d", "Use <br> for breaks", "# Title\n\n<div>inline html</div>", ""],
)
def test_text_and_markdown_are_not_taken_for_html(content):
    assert not looks_like_html(content)


def test_html_can_be_forced_either_way():
    assert sanitize_content("plain <b>bold</b>", html=True) == "plain **bold**"
    assert sanitize_content("<p>kept</p>", html=False) == "<p>kept</p>"


def test_xhtml_with_an_xml_declaration_converts_quietly():
    xhtml = '<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Hi</p></body></html>'
    assert sanitize_content(xhtml) == "Hi"


def test_sanitize_normalises_newlines_and_removes_control_characters():
    content = "\ufeffLine one\r\nLine two\rLine three   \r\n\r\n\r\n\r\nNext\x00 para\x0cPage two\x07\ud800"
    assert sanitize_content(content) == "Line one\nLine two\nLine three\n\nNext para\n\nPage two\ufffd"


def test_sanitize_rejects_non_strings():
    with pytest.raises(TypeError):
        sanitize_content(b"bytes")


def test_embedding_text_strips_image_markup_only():
    chunk = "See ![Refund flow](https://cdn.example/flow.png) and [image] here [link](https://x.example)."
    assert embedding_text(chunk) == "See Refund flow and here [link](https://x.example)."


# --------------------------------------------------------------------------------------------------
# Chunking rules
# --------------------------------------------------------------------------------------------------


def test_empty_and_blank_input_give_no_chunks():
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t \n") == []


def test_blank_lines_separate_paragraphs_that_are_packed_up_to_the_limit():
    content = "alpha beta\n\ngamma delta\n   \t\nepsilon"
    assert chunk_text(content) == [content]
    assert chunk_text(content, max_chars=12) == ["alpha beta", "gamma delta", "epsilon"]
    # The separators count: "alpha beta\n\ngamma delta" is 23 characters, and the blank line of
    # spaces and a tab stays verbatim inside "gamma delta\n   \t\nepsilon" (24).
    assert chunk_text(content, max_chars=23) == ["alpha beta\n\ngamma delta", "epsilon"]
    assert chunk_text(content, max_chars=22) == ["alpha beta", "gamma delta", "epsilon"]
    tail = content[12:]
    assert chunk_text(tail, max_chars=24) == ["gamma delta\n   \t\nepsilon"]
    assert chunk_text(tail, max_chars=23) == ["gamma delta", "epsilon"]


def test_a_heading_starts_a_paragraph_even_without_a_blank_line():
    content = "Intro text here\n## Details\nbody of details"
    assert chunk_text(content, max_chars=30) == ["Intro text here", "## Details\nbody of details"]


def test_heading_only_paragraphs_are_glued_to_the_next_paragraph():
    content = "Previous paragraph.\n\n# Title\n\n## Section\n\nSection body text."
    chunks = chunk_text(content, max_chars=40)
    assert chunks == ["Previous paragraph.", "# Title\n\n## Section\n\nSection body text."]
    assert chunk_text("Body.\n\n# Trailing\n## Headings", max_chars=22) == [
        "Body.",
        "# Trailing\n## Headings",
    ]


def test_hash_lines_inside_code_fences_are_not_headings():
    content = "```python\n# a comment\nx = 1\n```\n# Real heading\nText"
    assert chunk_text(content, max_chars=40) == ["```python\n# a comment\nx = 1\n```", "# Real heading\nText"]
    assert chunk_text("#hashtag is not a heading\nnext line", max_chars=30) == [
        "#hashtag is not a heading",
        "next line",
    ]


def test_long_paragraph_splits_at_cjk_sentence_punctuation_keeping_it():
    sentence = "这是一个关于退款政策的句子。"
    content = sentence * 60  # 840 characters, no blank line
    chunks = chunk_text(content)
    assert [len(chunk) for chunk in chunks] == [700, 140]
    assert all(chunk.endswith("。") for chunk in chunks)
    _assert_exact(content, chunks)


@pytest.mark.parametrize("mark", ["。", "！", "？", "!", "?", "；", ";"])
def test_every_sentence_mark_ends_a_sentence(mark):
    content = f"第一句{mark}第二句{mark}"
    assert chunk_text(content, max_chars=6) == [f"第一句{mark}", f"第二句{mark}"]


def test_english_sentences_split_after_a_period_and_whitespace_but_not_in_numbers():
    content = "Refunds take 3.5 days. Returns need a label! Exchanges are free."
    assert chunk_text(content, max_chars=30) == [
        "Refunds take 3.5 days.",
        "Returns need a label!",
        "Exchanges are free.",
    ]


def test_closing_quotes_stay_with_their_sentence_and_newlines_end_sentences():
    content = "他说：“可以退款。”然后离开了。\n第二行\n第三行"
    assert chunk_text(content, max_chars=10) == ["他说：“可以退款。”", "然后离开了。\n第二行", "第三行"]


def test_sentences_of_a_long_paragraph_are_packed_and_not_mixed_with_the_next_paragraph():
    content = "One. Two. Three. Four.\n\nNext."
    assert chunk_text(content, max_chars=12) == ["One. Two.", "Three. Four.", "Next."]


def test_very_long_word_is_hard_split_at_the_limit():
    content = "x" * 1500
    chunks = chunk_text(content)
    assert [len(chunk) for chunk in chunks] == [700, 700, 100]
    _assert_exact(content, chunks)


def test_long_sentence_without_punctuation_breaks_at_whitespace():
    content = " ".join(["word"] * 300)  # 1499 characters, no sentence mark
    chunks = chunk_text(content)
    assert all(len(chunk) <= 700 for chunk in chunks)
    assert all(chunk.startswith("word") and chunk.endswith("word") for chunk in chunks)
    _assert_exact(content, chunks)


def test_hard_split_never_separates_combining_sequences():
    content = "e\u0301" * 500  # 1000 code points, 500 user-perceived characters
    chunks = chunk_text(content, max_chars=701)
    assert [len(chunk) for chunk in chunks] == [700, 300]
    assert all(not chunk.startswith("\u0301") for chunk in chunks)


def test_hard_split_never_separates_emoji_sequences_or_flags():
    family = "👨\u200d👩\u200d👧"  # 5 code points joined by ZWJ
    assert chunk_text(family * 3, max_chars=7) == [family, family, family]
    flags = "🇨🇳🇺🇸🇯🇵"
    assert chunk_text(flags, max_chars=3) == ["🇨🇳", "🇺🇸", "🇯🇵"]
    thumbs = "👍🏽" * 4  # emoji + skin-tone modifier
    assert chunk_text(thumbs, max_chars=3) == ["👍🏽"] * 4


def test_hard_split_keeps_surrogate_pairs_together():
    pair = "\ud83d\ude00"  # an astral character as two code units, as surrogatepass decoding leaves it
    content = "a" + pair * 3
    assert chunk_text(content, max_chars=2) == ["a", pair, pair, pair]


def test_windows_newlines_split_paragraphs_and_stay_verbatim():
    content = "First line\r\nsecond line\r\n\r\n# Heading\r\n\r\nBody text\r\n"
    chunks = chunk_text(content, max_chars=25)
    assert chunks == ["First line\r\nsecond line", "# Heading\r\n\r\nBody text"]
    _assert_exact(content, chunks, max_chars=25)
    assert chunk_text(sanitize_content(content), max_chars=25) == [
        "First line\nsecond line",
        "# Heading\n\nBody text",
    ]


def test_max_chars_must_be_a_positive_integer():
    with pytest.raises(ValueError):
        chunk_text("x", max_chars=0)
    with pytest.raises(ValueError):
        chunk_text("x", max_chars=True)
    with pytest.raises(TypeError):
        chunk_text(None)


def test_chunks_of_sanitized_html_appear_verbatim_in_the_sanitized_content():
    paragraphs = "".join(
        f"<h2>Section {n}</h2><p>{'Refunds are processed within fourteen days. ' * (n + 3)}</p>"
        f"<p>{'退款将在十四天内处理。' * (n * 9)}</p>"
        for n in range(1, 8)
    )
    sanitized = sanitize_content(f"<html><body>{paragraphs}</body></html>")
    chunks = chunk_text(sanitized)
    assert len(chunks) > 5
    _assert_exact(sanitized, chunks)
    assert all(not chunk.endswith("#") for chunk in chunks)


@pytest.mark.parametrize("seed", range(25))
def test_chunks_are_exact_slices_for_random_documents(seed):
    rng = random.Random(seed)
    pieces = [
        "Refund policy applies to all orders.",
        "退款政策适用于所有订单。",
        "# Heading",
        "## Sub heading",
        "- list item",
        "e\u0301\u0323",
        "👨\u200d👩\u200d👧",
        "🇨🇳",
        "x" * rng.randint(1, 900),
        "word " * rng.randint(1, 200),
        "“引号。”",
        "3.14 is not a sentence end",
        "```",
        "\t  ",
    ]
    separators = ["\n\n", "\n", " ", "\r\n", "\r\n\r\n", "", "\n \n"]
    content = "".join(rng.choice(pieces) + rng.choice(separators) for _ in range(rng.randint(0, 80)))
    max_chars = rng.choice([7, 50, 700])
    _assert_exact(content, chunk_text(content, max_chars=max_chars), max_chars=max_chars)
