"""Exact byte budgets of knowledge search and read responses (docs/protocol.md "Knowledge budgets").

Every size here is :func:`bailing.api.limits.compact_json_utf8_bytes` of the *whole* response dict —
the UTF-8 bytes of ``JSON.stringify(response)``, JSON escaping included — because that is what the
spec bounds. Text is only ever cut between Unicode code points (Python ``str`` indices), so no
character is split and no surrogate half is left behind. Both functions are pure: they measure and
cut, the callers supply the rest of the response.

Search (:func:`fit_search_hints`)
    Hints arrive best-first, at most three, each with a full-length ``summary`` (an excerpt the
    caller already bounded). If the response does not fit ``max_bytes`` (4096):

    1. hints are dropped from the end (the worst first) until the rest fit with *empty* summaries;
    2. the remaining summaries share the space fairly by water-filling: every summary is cut to the
       same escaped-byte cap, the largest cap that fits — short summaries stay whole and the longest
       ones are shortened first, so the best hint cannot starve the others;
    3. what is left under that cap goes to the hints best-first, each growing as far as it fits.

    ``truncated`` is true exactly when the budget made us drop a hint or shorten a summary. A
    summary is only ever a prefix of the caller's excerpt; no ellipsis is added (it is an excerpt
    of the source, never rewritten text).

Read (:func:`read_page`)
    ``offset`` is a UTF-8 byte offset into the content at a character boundary; ``served`` counts
    the content bytes already served in this reading chain (for a chain started at the beginning of
    the document the two are equal). The page is the longest run of whole characters from
    ``offset`` such that the full response fits ``max_bytes`` and ``served`` + page bytes stays
    within ``chain_max`` (131072, counted in raw UTF-8 content bytes, not escaped ones). Then:

    * the page reaches the end of the content ⇒ ``next_cursor`` null, ``truncated`` false,
      ``budget_exhausted`` false (this holds even when the chain ends exactly at ``chain_max``);
    * content remains but the next character no longer fits in the chain ⇒ ``next_cursor`` null,
      ``truncated`` true, ``budget_exhausted`` true;
    * otherwise ⇒ ``next_cursor`` = ``next_cursor_for(new_offset, new_served)``, ``truncated`` true,
      ``budget_exhausted`` false.

    A cursor's length depends on the numbers inside it, so pages are sized with the longest cursor
    the chain can produce (``next_cursor_for(len(content bytes), chain_max)``) and the response is
    then built with the real one, which is never longer. A page holds at least one character when
    any remain in the chain; a ``max_bytes`` too small for the envelope plus one character is a
    programming error (the API accepts 4096–32768, far above any envelope).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import Any

from bailing.api.limits import compact_json_utf8_bytes

SEARCH_MAX_RESULTS = 3
SEARCH_MAX_BYTES = 4096
READ_CHAIN_MAX_BYTES = 131072

# build(content, next_cursor, truncated, budget_exhausted) -> the complete read response.
ReadBuilder = Callable[[str, str | None, bool, bool], dict[str, Any]]
# next_cursor_for(new_offset, new_served) -> the signed cursor to the following page.
CursorFactory = Callable[[int, int], str]


# --------------------------------------------------------------------------------------------------
# Search
# --------------------------------------------------------------------------------------------------


def fit_search_hints(
    *, envelope: dict[str, Any], hints: list[dict[str, Any]], max_bytes: int = SEARCH_MAX_BYTES
) -> dict[str, Any]:
    """The search response ``{**envelope, "hints": [...], "truncated": bool}``, at most ``max_bytes``.

    Raises ``ValueError`` for more than ``SEARCH_MAX_RESULTS`` hints or an envelope that does not
    fit even without hints (both are the caller's bugs, not client errors).
    """
    if len(hints) > SEARCH_MAX_RESULTS:
        raise ValueError(f"at most {SEARCH_MAX_RESULTS} hints")
    summaries: list[str] = [hint["summary"] for hint in hints]

    def response(count: int, lengths: Sequence[int], truncated: bool) -> dict[str, Any]:
        fitted = [
            {**hint, "summary": summary[:length]}
            for hint, summary, length in zip(hints[:count], summaries[:count], lengths, strict=True)
        ]
        return {**envelope, "hints": fitted, "truncated": truncated}

    full = response(len(hints), [len(s) for s in summaries], False)
    if compact_json_utf8_bytes(full) <= max_bytes:
        return full

    # From here on something is cut, so every measurement uses ``"truncated": true``.
    count = len(hints)
    while (bare := compact_json_utf8_bytes(response(count, [0] * count, True))) > max_bytes:
        if count == 0:
            raise ValueError("the search envelope alone exceeds the byte budget")
        count -= 1
    # JSON escapes character by character, so a summary adds exactly the escaped size of its
    # prefix to the response measured with empty summaries: the search below is plain arithmetic
    # (and the tests re-measure every result whole).
    room = max_bytes - bare
    costs = [_escaped_prefix_sizes(summary) for summary in summaries[:count]]

    def used(lengths: Sequence[int]) -> int:
        return sum(sizes[length] for sizes, length in zip(costs, lengths, strict=True))

    # Water-filling: the largest common escaped-byte cap that fits.
    cap = _largest(
        0,
        max((sizes[-1] for sizes in costs), default=0),
        lambda c: used([_longest_prefix_within(sizes, c) for sizes in costs]) <= room,
    )
    lengths = [_longest_prefix_within(sizes, cap) for sizes in costs]
    # What is left under that cap goes to the best hints first.
    for index, sizes in enumerate(costs):
        others = used(lengths) - sizes[lengths[index]]
        lengths[index] = _longest_prefix_within(sizes, room - others)

    if count == len(hints) and lengths == [len(s) for s in summaries]:
        # Everything fits only thanks to the byte "true" saves over "false": cut for real so the
        # flag stays truthful — one character of the longest summary, else the last hint.
        if any(lengths):
            longest = max(range(count), key=lambda i: (costs[i][lengths[i]], i))
            lengths[longest] -= 1
        else:
            count -= 1
            lengths.pop()
    return response(count, lengths, True)


def _escaped_prefix_sizes(text: str) -> list[int]:
    """``sizes[n]`` = bytes of ``text[:n]`` inside a JSON string (JSON escaping is per character)."""
    return list(accumulate(map(_escaped_char_size, text), initial=0))


@lru_cache(maxsize=4096)
def _escaped_char_size(char: str) -> int:
    return compact_json_utf8_bytes(char) - 2  # without the quotes


def _longest_prefix_within(sizes: list[int], cap: int) -> int:
    return bisect.bisect_right(sizes, cap) - 1


# --------------------------------------------------------------------------------------------------
# Read
# --------------------------------------------------------------------------------------------------


def read_page(
    *,
    content: str,
    offset: int,
    served: int,
    max_bytes: int,
    build: ReadBuilder,
    next_cursor_for: CursorFactory,
    chain_max: int = READ_CHAIN_MAX_BYTES,
) -> dict[str, Any]:
    """The read response for the page of ``content`` starting at byte ``offset`` (see module docs).

    ``ValueError`` means the caller broke a precondition: an offset outside the content or inside a
    character, ``served`` outside ``0..chain_max``, or a ``max_bytes`` that cannot hold one character.
    """
    data = content.encode("utf-8")
    total = len(data)
    if not 0 <= offset <= total or (offset < total and _is_continuation(data[offset])):
        raise ValueError("offset must be a character boundary inside the content")
    if not 0 <= served <= chain_max:
        raise ValueError("served must be within the chain budget")
    if offset == total:
        return build("", None, False, False)

    chain_room = chain_max - served
    if chain_room < _char_bytes(data[offset]):
        return build("", None, True, True)
    # No page can be longer in raw bytes than the response budget, nor than the chain's room.
    end = min(offset + min(chain_room, max_bytes), total)
    while end < total and _is_continuation(data[end]):
        end -= 1
    window = data[offset:end].decode("utf-8")

    worst_cursor = next_cursor_for(total, chain_max)

    def shape(page: str) -> tuple[bool, bool, bool]:
        """(continues, truncated, budget_exhausted) of a page."""
        page_end = offset + len(page.encode("utf-8"))
        if page_end == total:
            return False, False, False
        if served + (page_end - offset) + _char_bytes(data[page_end]) > chain_max:
            return False, True, True
        return True, True, False

    def size(length: int) -> int:
        page = window[:length]
        continues, truncated, exhausted = shape(page)
        return compact_json_utf8_bytes(build(page, worst_cursor if continues else None, truncated, exhausted))

    length = len(window)
    if not length or size(length) > max_bytes:
        # Every shorter page continues (its next character lies inside the window), so the size is
        # monotonic below the full window and a binary search finds the longest page that fits.
        length = _largest(0, length - 1, lambda n: size(n) <= max_bytes)
        if length == 0:
            raise ValueError("max_bytes leaves no room for a single character")

    page = window[:length]
    page_bytes = len(page.encode("utf-8"))
    continues, truncated, exhausted = shape(page)
    cursor = next_cursor_for(offset + page_bytes, served + page_bytes) if continues else None
    response = build(page, cursor, truncated, exhausted)
    if compact_json_utf8_bytes(response) > max_bytes:
        raise RuntimeError("next_cursor_for produced a cursor longer than its worst case")
    return response


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _char_bytes(lead: int) -> int:
    """Length of the UTF-8 sequence that starts with ``lead`` (valid UTF-8 from ``str.encode``)."""
    if lead < 0x80:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


# --------------------------------------------------------------------------------------------------
# Shared
# --------------------------------------------------------------------------------------------------


def _largest(low: int, high: int, ok: Callable[[int], bool]) -> int:
    """Largest ``n`` in ``low..high`` with ``ok(n)``, for a monotonic ``ok`` that holds at ``low``
    (returns ``low`` when nothing larger qualifies)."""
    while low < high:
        middle = (low + high + 1) // 2
        if ok(middle):
            low = middle
        else:
            high = middle - 1
    return low
