"""Exact byte budgets of knowledge search and read responses (docs/protocol.md "Knowledge budgets")."""

import json
import random
from datetime import UTC, datetime

import pytest

from bailing.api.limits import compact_json_utf8_bytes
from knowledge.budget import READ_CHAIN_MAX_BYTES, SEARCH_MAX_BYTES, fit_search_hints, read_page
from knowledge.tokens import (
    cursor_issue,
    cursor_open,
    identity_binding,
    reference_issue,
    reference_open,
)

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
HEX = "0123456789abcdef" * 4
BINDING = identity_binding(client_id=1, session_id="s", principal="p", route_key="support", run_id=None)
REF = reference_issue(binding=BINDING, scope_revision=HEX, document_id=2**40, revision=HEX, now=NOW)
REF_CLAIMS = reference_open(REF.token, now=NOW)

# Character classes whose JSON-escaped UTF-8 sizes are 1, 2 (\" \\ \n), 6 (\u0001), 2, 3 and 4 bytes.
ALPHABET = ["a", " ", '"', "\\", "\n", "\x01", "\x7f", "é", "中", "😀", "\u0301", "\u2028"]


def _bytes(value):
    return compact_json_utf8_bytes(value)


def _envelope(**extra):
    return {
        "schema_version": "bailing.agent-knowledge-search.v1",
        "route": "support",
        "knowledge_scope_revision": HEX,
        "status": "ok",
        "trust": "reference_only",
        **extra,
    }


def _hint(summary, *, title="Refund policy", score=0.8123456789):
    return {
        "ref": REF.token,
        "title": title,
        "summary": summary,
        "revision": HEX,
        "score": score,
        "expires_at": "2030-01-02T03:09:05.000Z",
    }


# --------------------------------------------------------------------------------------------------
# Search hints
# --------------------------------------------------------------------------------------------------


def _assert_fitted(result, envelope, hints, max_bytes=SEARCH_MAX_BYTES):
    """The universal guarantees, plus maximality: nothing more could have been kept."""
    assert _bytes(result) <= max_bytes
    assert list(result) == [*envelope, "hints", "truncated"]
    assert {k: result[k] for k in envelope} == envelope
    kept = result["hints"]
    assert len(kept) <= len(hints)
    for original, fitted in zip(hints, kept, strict=False):
        assert list(fitted) == list(original)
        assert {k: v for k, v in fitted.items() if k != "summary"} == {
            k: v for k, v in original.items() if k != "summary"
        }
        assert original["summary"].startswith(fitted["summary"])
        fitted["summary"].encode("utf-8")  # no lone surrogate
    changed = len(kept) < len(hints) or any(
        f["summary"] != o["summary"] for o, f in zip(hints, kept, strict=False)
    )
    assert result["truncated"] is changed
    if len(kept) < len(hints):
        # The next hint did not fit even with every kept summary emptied.
        emptied = [{**h, "summary": ""} for h in hints[: len(kept) + 1]]
        # (Unless that would be everything unchanged, which fits only by claiming "truncated".)
        unchanged = len(kept) + 1 == len(hints) and not any(h["summary"] for h in hints)
        assert unchanged or _bytes({**envelope, "hints": emptied, "truncated": True}) > max_bytes
    for index, fitted in enumerate(kept):
        full = hints[index]["summary"]
        if fitted["summary"] != full:
            grown = [dict(h) for h in kept]
            grown[index]["summary"] = full[: len(fitted["summary"]) + 1]
            everything = len(kept) == len(hints) and all(
                g["summary"] == h["summary"] for g, h in zip(grown, hints, strict=True)
            )
            assert everything or _bytes({**envelope, "hints": grown, "truncated": True}) > max_bytes


def test_hints_that_fit_are_returned_whole():
    envelope = _envelope()
    hints = [_hint("退款需在 14 天内申请。"), _hint("Refunds within 14 days.")]
    result = fit_search_hints(envelope=envelope, hints=hints)
    assert result == {**envelope, "hints": hints, "truncated": False}


def test_zero_hints():
    assert fit_search_hints(envelope=_envelope(), hints=[]) == {
        **_envelope(),
        "hints": [],
        "truncated": False,
    }


def test_response_of_exactly_max_bytes_is_not_truncated():
    envelope = _envelope()
    base = _bytes({**envelope, "hints": [_hint("")], "truncated": False})
    hints = [_hint("x" * (SEARCH_MAX_BYTES - base))]
    result = fit_search_hints(envelope=envelope, hints=hints)
    assert _bytes(result) == SEARCH_MAX_BYTES
    assert result["truncated"] is False
    assert result["hints"] == hints


def test_one_byte_over_cuts_for_real_and_says_so():
    envelope = _envelope()
    base = _bytes({**envelope, "hints": [_hint("")], "truncated": False})
    hints = [_hint("x" * (SEARCH_MAX_BYTES - base + 1))]
    result = fit_search_hints(envelope=envelope, hints=hints)
    # "true" is one byte shorter than "false", but claiming truncation without cutting would lie.
    assert result["truncated"] is True
    assert result["hints"][0]["summary"] == hints[0]["summary"][:-1]
    assert _bytes(result) == SEARCH_MAX_BYTES - 1
    _assert_fitted(result, envelope, hints)


def test_one_byte_over_with_empty_summaries_drops_the_last_hint():
    hints = [_hint(""), _hint("")]
    base = _bytes({**_envelope(), "hints": hints, "truncated": False})
    envelope = _envelope(pad="p" * (SEARCH_MAX_BYTES - base + 1 - len(',"pad":""')))
    assert _bytes({**envelope, "hints": hints, "truncated": False}) == SEARCH_MAX_BYTES + 1
    result = fit_search_hints(envelope=envelope, hints=hints)
    assert result["truncated"] is True
    assert len(result["hints"]) == 1
    _assert_fitted(result, envelope, hints)


@pytest.mark.parametrize("char", ["a", "中", "😀", '"', "\\", "\x01", "é"])
def test_long_summaries_share_the_budget_fairly(char):
    envelope = _envelope()
    hints = [_hint(char * 1000, title=f"Document {i}") for i in range(3)]
    result = fit_search_hints(envelope=envelope, hints=hints)
    _assert_fitted(result, envelope, hints)
    assert result["truncated"] is True
    assert len(result["hints"]) == 3
    lengths = [len(h["summary"]) for h in result["hints"]]
    # Equal shares; only the last few bytes of slack go to the best hints.
    assert max(lengths) - min(lengths) <= 2
    assert lengths == sorted(lengths, reverse=True)
    assert min(lengths) > 0
    # Nearly all of the budget is used (less than one character per hint is left).
    assert SEARCH_MAX_BYTES - _bytes(result) < 3 * _bytes(char)


def test_first_hint_cannot_starve_short_later_hints():
    envelope = _envelope()
    hints = [_hint("长" * 1200), _hint("Short answer."), _hint("Another short one.")]
    result = fit_search_hints(envelope=envelope, hints=hints)
    _assert_fitted(result, envelope, hints)
    assert [h["summary"] for h in result["hints"][1:]] == ["Short answer.", "Another short one."]
    assert 0 < len(result["hints"][0]["summary"]) < 1200
    assert result["truncated"] is True


def test_longest_summary_is_shortened_first():
    envelope = _envelope()
    hints = [_hint("a" * 300), _hint("b" * 480), _hint("c" * 3000)]
    result = fit_search_hints(envelope=envelope, hints=hints)
    _assert_fitted(result, envelope, hints)
    summaries = [h["summary"] for h in result["hints"]]
    assert summaries[0] == "a" * 300
    assert summaries[1] == "b" * 480
    assert 0 < len(summaries[2]) < 3000


def test_hints_that_do_not_fit_even_empty_are_dropped_with_the_ones_after():
    envelope = _envelope()
    big_title = "\x01" * 191  # 1146 bytes escaped
    hints = [
        _hint("第一。" * 100, title=big_title),
        _hint("second", title=big_title),
        _hint("third", title=big_title),
    ]
    result = fit_search_hints(envelope=envelope, hints=hints)
    _assert_fitted(result, envelope, hints)
    assert len(result["hints"]) == 2
    assert result["hints"][0]["summary"]
    assert result["truncated"] is True


def test_dropping_stops_at_the_first_hint_that_does_not_fit():
    envelope = _envelope(pad="p" * 2500)
    hints = [_hint("one"), _hint("two", title="t" * 700), _hint("three")]
    result = fit_search_hints(envelope=envelope, hints=hints)
    # The third would fit on its own, but a worse hint is never kept in place of a better one.
    assert [h["summary"] for h in result["hints"]] == ["one"]
    assert result["truncated"] is True
    _assert_fitted(result, envelope, hints)


def test_envelope_that_cannot_fit_and_too_many_hints_are_programming_errors():
    with pytest.raises(ValueError):
        fit_search_hints(envelope=_envelope(pad="p" * SEARCH_MAX_BYTES), hints=[_hint("x")])
    with pytest.raises(ValueError):
        fit_search_hints(envelope=_envelope(), hints=[_hint("x")] * 4)


def test_random_hints_always_fit_and_are_maximal():
    rng = random.Random(20300102)
    for _ in range(300):
        count = rng.randint(0, 3)
        hints = [
            _hint(
                "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 480))),
                title="".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 191))),
                score=rng.random(),
            )
            for _ in range(count)
        ]
        envelope = _envelope(run_id="9f1c2f49-3a3e-4b4e-9a55-3d3a7f0a6c11")
        max_bytes = rng.choice([SEARCH_MAX_BYTES, rng.randint(1200, 6000)])
        result = fit_search_hints(envelope=envelope, hints=hints, max_bytes=max_bytes)
        _assert_fitted(result, envelope, hints, max_bytes)


# --------------------------------------------------------------------------------------------------
# Read pages
# --------------------------------------------------------------------------------------------------


def _builder(content, title="Refund policy"):
    total = len(content.encode("utf-8"))

    def build(page, next_cursor, truncated, budget_exhausted):
        return {
            "schema_version": "bailing.agent-knowledge-read.v1",
            "route": "support",
            "run_id": "9f1c2f49-3a3e-4b4e-9a55-3d3a7f0a6c11",
            "knowledge_scope_revision": HEX,
            "ref": REF.token,
            "revision": HEX,
            "title": title,
            "content": page,
            "trust": "reference_only",
            "next_cursor": next_cursor,
            "truncated": truncated,
            "budget_exhausted": budget_exhausted,
            "total_content_bytes": total,
            "read_chain_max_bytes": READ_CHAIN_MAX_BYTES,
        }

    return build


def _next_cursor(offset, served):
    return cursor_issue(ref=REF.token, ref_claims=REF_CLAIMS, offset=offset, served=served).token


def _page(content, *, offset=0, served=0, max_bytes=16384, chain_max=READ_CHAIN_MAX_BYTES, build=None):
    return read_page(
        content=content,
        offset=offset,
        served=served,
        max_bytes=max_bytes,
        chain_max=chain_max,
        build=build or _builder(content),
        next_cursor_for=_next_cursor,
    )


def _read_chain(content, *, max_bytes=16384, chain_max=READ_CHAIN_MAX_BYTES):
    """Follow next_cursor to the end, checking every page; returns (pages, last response)."""
    offset = served = 0
    pages = []
    while True:
        response = _page(content, offset=offset, served=served, max_bytes=max_bytes, chain_max=chain_max)
        assert _bytes(response) <= max_bytes
        page = response["content"]
        page.encode("utf-8")
        page.encode("utf-16-le")  # whole characters: no surrogate halves in JavaScript either
        assert content.encode("utf-8")[offset:].startswith(page.encode("utf-8"))
        pages.append(page)
        if response["next_cursor"] is None:
            return pages, response
        assert page, "a continuing page holds at least one character"
        assert (response["truncated"], response["budget_exhausted"]) == (True, False)
        cursor = cursor_open(response["next_cursor"], ref=REF.token, now=NOW)
        assert cursor.offset == offset + len(page.encode("utf-8"))
        assert cursor.served == served + len(page.encode("utf-8"))
        offset, served = cursor.offset, cursor.served
        assert served <= chain_max


@pytest.mark.parametrize(
    "unit",
    ["Refunds are processed within 14 days. ", "退款在十四天内处理。", "😀👍🏽🇨🇳", "é\u0301a"],
)
def test_chain_reads_whole_document_in_pages(unit):
    content = unit * (60000 // len(unit.encode("utf-8")))
    pages, last = _read_chain(content)
    assert "".join(pages) == content
    assert len(pages) > 3
    assert (last["truncated"], last["budget_exhausted"]) == (False, False)


def test_pages_are_as_large_as_the_budget_allows():
    content = "".join(random.Random(7).choice(ALPHABET) for _ in range(40000))
    build = _builder(content)
    worst = _next_cursor(len(content.encode("utf-8")), READ_CHAIN_MAX_BYTES)
    offset = 0
    for _ in range(3):
        response = _page(content, offset=offset, max_bytes=8192)
        page = response["content"]
        rest = content.encode("utf-8")[offset + len(page.encode("utf-8")) :].decode("utf-8")
        grown = build(page + rest[0], worst, True, False)
        assert _bytes(grown) > 8192
        offset += len(page.encode("utf-8"))


@pytest.mark.parametrize("char", ['"', "\\", "\x01", "\n", "\x1f"])
def test_escaping_heavy_content_is_measured_escaped(char):
    content = char * 50000
    pages, last = _read_chain(content, max_bytes=4096)
    assert "".join(pages) == content
    escaped = len(json.dumps(char)) - 2
    # The raw bytes per page shrink by the escape factor, never overflowing the budget.
    assert max(len(p) for p in pages) * escaped <= 4096
    assert last["truncated"] is False


def test_final_page_of_exactly_max_bytes():
    build = _builder("")
    empty_final = _bytes(build("", None, False, False))
    # total_content_bytes also grows with the content size; pick a size with the same digit count.
    content = "z" * (16384 - empty_final - len(str(16384 - empty_final)) + 1)
    response = _page(content, max_bytes=16384)
    assert _bytes(response) == 16384
    assert response["content"] == content
    assert (response["next_cursor"], response["truncated"], response["budget_exhausted"]) == (
        None,
        False,
        False,
    )
    longer = content + "z"
    response = _page(longer, max_bytes=16384)
    assert response["next_cursor"] is not None
    assert response["truncated"] is True
    assert _bytes(response) <= 16384


def test_chain_stops_at_exactly_128_kib_with_budget_exhausted():
    content = "k" * (200 * 1024)
    pages, last = _read_chain(content, max_bytes=32768)
    served = "".join(pages)
    assert len(served.encode("utf-8")) == READ_CHAIN_MAX_BYTES
    assert content.startswith(served)
    assert (last["next_cursor"], last["truncated"], last["budget_exhausted"]) == (None, True, True)
    assert last["total_content_bytes"] == 200 * 1024


def test_document_of_exactly_the_chain_cap_ends_normally():
    content = "k" * READ_CHAIN_MAX_BYTES
    pages, last = _read_chain(content, max_bytes=32768)
    assert "".join(pages) == content
    assert (last["next_cursor"], last["truncated"], last["budget_exhausted"]) == (None, False, False)


def test_document_one_byte_over_the_chain_cap_is_exhausted():
    content = "k" * (READ_CHAIN_MAX_BYTES + 1)
    pages, last = _read_chain(content, max_bytes=32768)
    assert len("".join(pages)) == READ_CHAIN_MAX_BYTES
    assert (last["next_cursor"], last["truncated"], last["budget_exhausted"]) == (None, True, True)


def test_chain_cap_never_splits_a_character():
    content = "中" * 50000  # 131072 is not a multiple of 3
    pages, last = _read_chain(content, max_bytes=32768)
    served = len("".join(pages).encode("utf-8"))
    assert served == READ_CHAIN_MAX_BYTES - READ_CHAIN_MAX_BYTES % 3
    assert (last["next_cursor"], last["truncated"], last["budget_exhausted"]) == (None, True, True)


def test_chain_with_cap_room_smaller_than_next_character():
    content = "a😀"
    response = _page(content, offset=1, served=1, chain_max=4)
    assert (response["content"], response["next_cursor"]) == ("", None)
    assert (response["truncated"], response["budget_exhausted"]) == (True, True)


def test_reading_at_the_end_returns_an_empty_final_page():
    content = "abc"
    response = _page(content, offset=3, served=3)
    assert (response["content"], response["next_cursor"], response["truncated"]) == ("", None, False)
    assert _page("")["content"] == ""


def test_random_contents_respect_every_invariant():
    rng = random.Random(131072)
    for _ in range(40):
        content = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30000)))
        max_bytes = rng.randint(4096, 32768)
        chain_max = rng.choice([READ_CHAIN_MAX_BYTES, rng.randint(1, 40000)])
        pages, last = _read_chain(content, max_bytes=max_bytes, chain_max=chain_max)
        served = "".join(pages)
        assert content.startswith(served)
        served_bytes = len(served.encode("utf-8"))
        assert served_bytes <= chain_max
        if served == content:
            assert (last["truncated"], last["budget_exhausted"]) == (False, False)
        else:
            assert (last["truncated"], last["budget_exhausted"]) == (True, True)
            next_char = content[len(served)]
            assert served_bytes + len(next_char.encode("utf-8")) > chain_max


@pytest.mark.parametrize(
    ("content", "offset", "served", "max_bytes"),
    [
        ("中文", 1, 0, 16384),  # inside a character
        ("abc", 4, 0, 16384),  # past the end
        ("abc", -1, 0, 16384),
        ("abc", 0, -1, 16384),
        ("abc", 0, READ_CHAIN_MAX_BYTES + 1, 16384),
        ("abc", 0, 0, 100),  # the envelope alone is larger
    ],
)
def test_broken_preconditions_are_programming_errors(content, offset, served, max_bytes):
    with pytest.raises(ValueError):
        _page(content, offset=offset, served=served, max_bytes=max_bytes)


def test_cursor_factory_that_grows_for_smaller_numbers_is_caught():
    content = "x" * 20000

    def perverse(offset, served):
        return "c" if offset == len(content) else "c" * 3000

    with pytest.raises(RuntimeError):
        read_page(
            content=content,
            offset=0,
            served=0,
            max_bytes=8192,
            build=_builder(content),
            next_cursor_for=perverse,
        )
