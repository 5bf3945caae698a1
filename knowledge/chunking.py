"""Document sanitizing and chunking for the knowledge base (docs/protocol.md "Knowledge ingestion").

Pipeline: ``chunks = chunk_text(sanitize_content(raw))``. The sanitized text is what a document
stores as its content; every chunk is a verbatim slice of it, so "chunk text stored exactly as
served" holds by construction and a hit can always be re-checked against the current document.

Sanitizing (:func:`sanitize_content`)
    * newlines become ``\\n`` (``\\r\\n`` and lone ``\\r``); a form feed (PDF page break) becomes a
      blank line, a vertical tab a newline; NUL and the other C0/C1 control characters except tab
      are removed (PostgreSQL text cannot hold NUL); lone surrogates become U+FFFD; a leading BOM
      is dropped;
    * content that looks like HTML (:func:`looks_like_html`) is converted to Markdown with
      BeautifulSoup: headings, paragraphs, lists, links, tables, code, quotes; scripts, styles and
      other non-content elements are dropped;
    * inline ``data:`` images (Markdown images, ``<img>`` tags left in Markdown, bare base64 data
      URIs) become the placeholder ``[image]``; images linked over http(s) are kept as
      ``![alt](url)``; in HTML, images with any other source (relative, ``cid:``) become ``[image]``;
    * trailing spaces are removed from every line, runs of blank lines collapse to one, and the
      whole text is stripped.

Chunking (:func:`chunk_spans` / :func:`chunk_text`), sizes in *characters* = Unicode code points
(Python ``len``; never UTF-16 units or bytes):
    1. Paragraphs are separated by blank lines (a line of only whitespace counts as blank), and a
       Markdown ATX heading line (``#`` to ``######``; not inside a code fence of backticks or tildes) always
       starts a new paragraph.
    2. A heading-only paragraph is glued to the paragraph after it (several in a row glue together).
    3. Paragraphs are packed greedily, in order, while the slice from the first to the last one,
       separators included, is at most ``max_chars`` (700).
    4. A paragraph longer than that is split into sentences, each ending after ``。！？!?；;``, after
       ``…``, after a ``.`` followed by whitespace, or at a line break; closing quotes and brackets
       after the punctuation stay with the sentence. Sentences are packed like paragraphs.
       (BailingHub does not split English at ``.``; without it, long English paragraphs would be cut
       mid-word: docs/compatibility.md "Sentence splitting in chunks".)
    5. A sentence still longer than ``max_chars`` is hard-split: at the last whitespace in the second
       half of the window if there is one, else at ``max_chars``, moved back so that no cut falls
       inside a combining sequence (combining marks, ZWJ sequences, variation selectors, emoji
       modifiers and tags, regional-indicator pairs), a surrogate pair or a CRLF.
    The pieces of one long paragraph are never packed together with the next paragraph.

Exactness: each chunk is ``content[start:end]`` for the span returned by :func:`chunk_spans`, with
no leading or trailing whitespace; nothing inside the span is rewritten (separators between packed
paragraphs stay as they are in the content). Only whitespace at the edges of a chunk is trimmed.
"""

from __future__ import annotations

import re
import unicodedata

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import CData

MAX_CHUNK_CHARS = 700
IMAGE_PLACEHOLDER = "[image]"

# --------------------------------------------------------------------------------------------------
# Sanitizing
# --------------------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")

_HTML_OPENING = re.compile(
    r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*"
    r"<(?:!doctype\s+html|html|head|body|meta|title|style|p|div|span|section|article|header|footer|main|"
    r"nav|aside|h[1-6]|ul|ol|dl|table|blockquote|pre|figure|a|img|b|strong|em|i|br|hr)\b",
    re.IGNORECASE | re.DOTALL,
)
_HTML_CLOSING = re.compile(
    r"</(?:html|head|body|title|p|div|span|section|article|header|footer|main|nav|aside|h[1-6]|ul|ol|li|"
    r"dl|dt|dd|table|tr|td|th|blockquote|pre|figure|a|b|strong|em|i|code)\s*>",
    re.IGNORECASE,
)
_HTML_DOCTYPE = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?<!doctype\s+html", re.IGNORECASE)
_HTML_VERBATIM = re.compile(r"<(pre|code|script|style|textarea)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_MARKDOWN_BLOCK = re.compile(r"^(?: {0,3}#{1,6}[ \t]+\S| {0,3}(?:```|~~~))", re.MULTILINE)
_XML_DECLARATION = re.compile(r"\A\s*<\?xml[^>]*>", re.IGNORECASE)

_MD_DATA_IMAGE = re.compile(
    r"!\[[^\]\n]{0,1000}\]\(\s*<?\s*data:[^)\s>]*>?(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)",
    re.IGNORECASE,
)
_HTML_DATA_IMG = re.compile(
    r"<img\b[^>]*?\bsrc\s*=\s*(?:\"\s*data:[^\"]*\"|'\s*data:[^']*'|data:[^\s>]*)[^>]*>",
    re.IGNORECASE,
)
_BARE_DATA_IMAGE = re.compile(
    r"data:image/[a-z0-9.+-]+(?:;[a-z0-9=._+-]+)*;base64,[a-z0-9+/=]+", re.IGNORECASE
)
_HTTP_URL = re.compile(r"\Ahttps?://\S+\Z", re.IGNORECASE)

_BLANK_RUNS = re.compile(r"\n{3,}")
_TRAILING_SPACE = re.compile(r"[ \t\u00a0]+$", re.MULTILINE)
_WHITESPACE = re.compile(r"\s+")


def looks_like_html(content: str) -> bool:
    """Whether ``content`` should be read as HTML rather than Markdown or plain text.

    It must start with an HTML tag (after an optional XML declaration and comments) and contain a
    closing tag or an HTML doctype. Markdown that merely opens with an HTML banner (common in
    READMEs) is left alone when it has Markdown headings or code fences outside ``<pre>``/``<code>``:
    converting it would collapse its line structure.
    """
    if not _HTML_OPENING.match(content):
        return False
    if not (_HTML_DOCTYPE.match(content) or _HTML_CLOSING.search(content)):
        return False
    return not _MARKDOWN_BLOCK.search(_HTML_VERBATIM.sub(" ", content))


def _normalise_text(content: str) -> str:
    text = content.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\x0c", "\n\n").replace("\x0b", "\n")
    text = _CONTROL.sub("", text)
    text = _LONE_SURROGATE.sub("\ufffd", text)
    return text.removeprefix("\ufeff")


def _replace_data_images(text: str) -> str:
    text = _MD_DATA_IMAGE.sub(IMAGE_PLACEHOLDER, text)
    text = _HTML_DATA_IMG.sub(IMAGE_PLACEHOLDER, text)
    return _BARE_DATA_IMAGE.sub(IMAGE_PLACEHOLDER, text)


def sanitize_content(content: str, *, html: bool | None = None) -> str:
    """Turn uploaded or pushed content into the Markdown/text a document stores and chunks.

    ``html=None`` detects HTML with :func:`looks_like_html`; ``True``/``False`` force the choice
    (e.g. a ``.html`` upload, or a push declared ``markdown``).
    """
    if not isinstance(content, str):
        raise TypeError("content must be a string")
    text = _normalise_text(content)
    if html is None:
        html = looks_like_html(text)
    if html:
        text = html_to_markdown(text)
    text = _replace_data_images(text)
    text = _TRAILING_SPACE.sub("", text)
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()


# HTML → Markdown ----------------------------------------------------------------------------------

# fmt: off
_DROPPED = frozenset((
    "head", "script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "math",
    "canvas", "audio", "video", "source", "track", "map", "button", "input", "select", "option",
    "textarea", "form", "rp", "rt",
))
# fmt: on
# fmt: off
_BLOCKS = frozenset((
    "address", "article", "aside", "body", "dd", "details", "dialog", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "header", "hgroup", "html", "main", "nav", "p", "section",
    "summary",
))
# fmt: on
_LIST_ITEM = re.compile(r"\A {0,}(?:[-*+]|\d+\.)[ \t]")


def html_to_markdown(html: str) -> str:
    """Readable Markdown from an HTML document or fragment (text for retrieval, not a round trip)."""
    soup = BeautifulSoup(_XML_DECLARATION.sub("", html), "html.parser")
    rendered = _render_children(soup)
    lines: list[str] = []
    in_fence = False
    for line in rendered.split("\n"):
        if line.startswith("```"):
            in_fence = not in_fence
            lines.append(line)
        elif in_fence or _LIST_ITEM.match(line) or line.startswith(">"):
            lines.append(line.rstrip())
        else:
            lines.append(line.strip())
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _render_children(node: Tag) -> str:
    return "".join(_render(child) for child in node.children)


def _inline(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _block(text: str) -> str:
    body = text.strip()
    return f"\n\n{body}\n\n" if body else ""


def _wrap(raw: str, opening: str, closing: str) -> str:
    """Inline markup around the text of ``raw``, keeping the whitespace that surrounded it."""
    text = _inline(raw)
    if not text:
        return " " if raw.strip() != raw else ""
    before = " " if raw[:1].isspace() else ""
    after = " " if raw[-1:].isspace() else ""
    return f"{before}{opening}{text}{closing}{after}"


def _render(node: object) -> str:
    if isinstance(node, NavigableString):
        if type(node) not in (NavigableString, CData):
            return ""  # comments, doctypes, processing instructions
        return _WHITESPACE.sub(" ", str(node))
    if not isinstance(node, Tag):
        return ""
    name = node.name.lower()
    if name in _DROPPED:
        return ""
    if name in {"h1", "h2", "h3", "h4", "h5", "h6"}:
        text = _inline(_render_children(node))
        return f"\n\n{'#' * int(name[1])} {text}\n\n" if text else ""
    if name == "br":
        return "\n"
    if name == "hr":
        return "\n\n---\n\n"
    if name == "pre":
        code = node.get_text().strip("\n")
        return f"\n\n```\n{code}\n```\n\n" if code.strip() else ""
    if name in {"code", "kbd", "samp"}:
        return _wrap(node.get_text(), "`", "`")
    if name in {"strong", "b"}:
        return _wrap(_render_children(node), "**", "**")
    if name in {"em", "i"}:
        return _wrap(_render_children(node), "*", "*")
    if name == "a":
        raw = _render_children(node)
        href = str(node.get("href") or "").strip()
        if not _HTTP_URL.match(href):
            return raw
        return _wrap(raw, "[", f"]({href})") if raw.strip() else f"<{href}>"
    if name == "img":
        src = str(node.get("src") or "").strip()
        if _HTTP_URL.match(src):
            alt = _inline(str(node.get("alt") or "")).replace("[", "(").replace("]", ")")
            return f"![{alt}]({src})"
        return IMAGE_PLACEHOLDER
    if name in {"ul", "ol"}:
        return _render_list(node, ordered=name == "ol")
    if name == "blockquote":
        inner = html_to_markdown_fragment(node)
        return _block("\n".join(f"> {line}" if line else ">" for line in inner.split("\n")))
    if name == "table":
        return _render_table(node)
    if name in _BLOCKS or name == "li":
        return _block(_render_children(node))
    return _render_children(node)


def html_to_markdown_fragment(node: Tag) -> str:
    """Markdown for one element's children, normalised like a whole document."""
    rendered = _render_children(node)
    lines = [line.rstrip() if _LIST_ITEM.match(line) else line.strip() for line in rendered.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def _render_list(node: Tag, *, ordered: bool) -> str:
    items: list[str] = []
    number = 1
    for child in node.children:
        if not isinstance(child, Tag) or child.name.lower() != "li":
            continue
        marker = f"{number}. " if ordered else "- "
        number += 1
        body = html_to_markdown_fragment(child)
        body = _BLANK_RUNS.sub("\n", re.sub(r"\n\n", "\n", body))
        if not body:
            continue
        first, *rest = body.split("\n")
        items.append(marker + first + "".join(f"\n  {line}" if line else "" for line in rest))
    return _block("\n".join(items))


def _render_table(node: Tag) -> str:
    rows: list[list[str]] = []
    for row in node.find_all("tr"):
        cells = [_inline(_render_children(cell)).replace("|", "\\|") for cell in row.find_all(["td", "th"])]
        if any(cells):
            rows.append(cells)
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = []
    for index, row in enumerate(rows):
        padded = row + [""] * (width - len(row))
        lines.append("| " + " | ".join(padded) + " |")
        if index == 0:
            lines.append("| " + " | ".join(["---"] * width) + " |")
    return _block("\n".join(lines))


def embedding_text(chunk: str) -> str:
    """The text of a chunk as sent to the embedding model: image markup stripped.

    ``![alt](url)`` keeps only its alt text and ``[image]`` placeholders disappear; URLs would
    otherwise dominate the 256-token window with meaningless word pieces. The stored and served chunk
    is unchanged (docs/protocol.md "Knowledge ingestion").
    """
    text = re.sub(r"!\[([^\]\n]*)\]\([^)\n]*\)", r"\1", chunk)
    text = text.replace(IMAGE_PLACEHOLDER, " ")
    return re.sub(r"[ \t]{2,}", " ", text).strip()


# --------------------------------------------------------------------------------------------------
# Chunking
# --------------------------------------------------------------------------------------------------

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(```+|~~~+)")
_SENTENCE_END = re.compile(
    r"(?:[。！？!?；;]+|…+|\.(?=\s))[\"'”’」』）)\]】》〉]*"
    r"|\r\n|\r|\n"
)
_ZWJ = "\u200d"


def _is_extender(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char in (_ZWJ, "\u200c")
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF
        or 0xE0020 <= code <= 0xE007F
    )


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _breakable(content: str, index: int) -> bool:
    """Whether a cut between ``content[index - 1]`` and ``content[index]`` keeps characters whole."""
    before, after = content[index - 1], content[index]
    if _is_extender(after) or before == _ZWJ:
        return False
    if before == "\r" and after == "\n":
        return False
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return False
    if _is_regional_indicator(before) and _is_regional_indicator(after):
        run = 0
        position = index - 1
        while position >= 0 and _is_regional_indicator(content[position]):
            run += 1
            position -= 1
        return run % 2 == 0
    return True


def _trim(content: str, start: int, end: int) -> tuple[int, int]:
    while start < end and content[start].isspace():
        start += 1
    while end > start and content[end - 1].isspace():
        end -= 1
    return start, end


def _paragraphs(content: str) -> list[tuple[int, int, bool]]:
    """``(start, end, heading_only)`` for each paragraph, trimmed of surrounding whitespace."""
    paragraphs: list[tuple[int, int, bool]] = []
    start: int | None = None
    end = 0
    heading_only = False
    fence: str | None = None

    def close() -> None:
        nonlocal start
        if start is not None:
            paragraphs.append((start, end, heading_only))
        start = None

    for match in _LINE.finditer(content):
        line_start = match.start()
        line = match.group().rstrip("\r\n")
        if not match.group():
            break
        if not line.strip():
            close()
            continue
        fence_match = _FENCE.match(line)
        is_heading = fence is None and _HEADING.match(line) is not None
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        if is_heading:
            close()
        if start is None:
            start = line_start + (len(line) - len(line.lstrip()))
            heading_only = is_heading
        else:
            heading_only = False
        end = line_start + len(line.rstrip())
    close()
    return paragraphs


def _units(content: str) -> list[tuple[int, int]]:
    """Paragraphs with heading-only ones glued to what follows them."""
    units: list[tuple[int, int]] = []
    pending: int | None = None
    last_end = 0
    for start, end, heading_only in _paragraphs(content):
        if heading_only:
            if pending is None:
                pending = start
            last_end = end
            continue
        units.append((pending if pending is not None else start, end))
        pending = None
    if pending is not None:
        units.append((pending, last_end))
    return units


def _pack(spans: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    packed: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for start, end in spans:
        if current is None:
            current = (start, end)
        elif end - current[0] <= max_chars:
            current = (current[0], end)
        else:
            packed.append(current)
            current = (start, end)
    if current is not None:
        packed.append(current)
    return packed


def _sentences(content: str, start: int, end: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    position = start
    for match in _SENTENCE_END.finditer(content, start, end):
        piece = _trim(content, position, match.end())
        if piece[0] < piece[1]:
            spans.append(piece)
        position = match.end()
    piece = _trim(content, position, end)
    if piece[0] < piece[1]:
        spans.append(piece)
    return spans


def _hard_split(content: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = limit
        for index in range(limit, start + max_chars // 2, -1):
            if content[index].isspace():
                cut = index
                break
        else:
            while cut > start + 1 and not _breakable(content, cut):
                cut -= 1
            if cut == start + 1 and not _breakable(content, cut):
                cut = limit  # a single "character" longer than the window: nothing better exists
        piece = _trim(content, start, cut)
        if piece[0] < piece[1]:
            pieces.append(piece)
        start, end = _trim(content, cut, end)
    if start < end:
        pieces.append((start, end))
    return pieces


def chunk_spans(content: str, *, max_chars: int = MAX_CHUNK_CHARS) -> list[tuple[int, int]]:
    """``(start, end)`` code-point offsets of each chunk of ``content``, in order (see module doc)."""
    if not isinstance(content, str):
        raise TypeError("content must be a string")
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
        raise ValueError("max_chars must be a positive integer")
    chunks: list[tuple[int, int]] = []
    fitting: list[tuple[int, int]] = []
    for start, end in _units(content):
        if end - start <= max_chars:
            fitting.append((start, end))
            continue
        chunks.extend(_pack(fitting, max_chars))
        fitting = []
        sentences: list[tuple[int, int]] = []
        for sentence_start, sentence_end in _sentences(content, start, end):
            if sentence_end - sentence_start <= max_chars:
                sentences.append((sentence_start, sentence_end))
            else:
                sentences.extend(_hard_split(content, sentence_start, sentence_end, max_chars))
        chunks.extend(_pack(sentences, max_chars))
    chunks.extend(_pack(fitting, max_chars))
    return chunks


def chunk_text(content: str, *, max_chars: int = MAX_CHUNK_CHARS) -> list[str]:
    """The chunks of ``content``: verbatim slices of at most ``max_chars`` code points, in order."""
    return [content[start:end] for start, end in chunk_spans(content, max_chars=max_chars)]
