"""Uploaded files → ``(title, text, content_type)`` for :func:`knowledge.services.documents.document_put`.

Supported: plain text (``.txt``), Markdown (``.md``, ``.markdown``), HTML (``.html``, ``.htm``),
PDF (``.pdf``, text layer via pypdf) and Word (``.docx``, via python-docx). The console upload and
``knowledge_ingest`` both call :func:`parse_document`; nothing here touches the database.

The type is decided by the extension *and* the file's first bytes: a PDF must start with ``%PDF-``,
a DOCX must be a ZIP holding ``word/document.xml``, and a text type must be neither and hold no NUL
byte. A mismatch (a PDF renamed ``.md``, a ZIP renamed ``.pdf``) is refused rather than guessed, so a
file is never stored as garbage text. Every failure is a :class:`DocumentParseError` with a stable
``code`` and a fixed message: no parser message is passed on, because those can quote file content.

Limits: at most :data:`MAX_FILE_BYTES` in, at most :data:`MAX_TEXT_CHARS` out (UTF-16 code units,
as BailingHub's console counts them; docs/protocol.md "Knowledge ingestion"). Over either is an
error, never a silent truncation: a knowledge base that holds half a manual answers wrongly without
anyone noticing.

Titles: the first Markdown heading (``.md``, DOCX), the HTML ``<title>`` or first heading, the PDF
or DOCX metadata title, else the file stem; whitespace collapsed, cut to 191 UTF-16 units without
splitting a character.
"""

from __future__ import annotations

import io
import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from bs4 import BeautifulSoup

from bailing.api.limits import utf16_length
from knowledge.chunking import sanitize_content
from knowledge.models import TITLE_MAX_CHARS

MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_TEXT_CHARS = 500_000
# A DOCX is a ZIP: a few MiB can inflate to gigabytes. Real documents stay far below this.
MAX_DOCX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024

_KIND_BY_EXTENSION = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
}
SUPPORTED_EXTENSIONS = frozenset(_KIND_BY_EXTENSION)

_PDF_MAGIC = b"%PDF-"
_ZIP_MAGIC = b"PK\x03\x04"
# OLE2 compound file: legacy .doc, and also what an *encrypted* .docx is wrapped in.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_UTF8_BOM = b"\xef\xbb\xbf"

_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_FENCE_BLOCK = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
_WHITESPACE = re.compile(r"\s+")
_TITLE_JUNK = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class DocumentParseError(Exception):
    """A file that cannot become a document. ``code`` is stable; the message is fixed text."""

    MESSAGES = {
        "unsupported_document_type": "The file type is not supported or does not match its extension.",
        "document_unreadable": "The file is encrypted, damaged or cannot be read.",
        "document_encoding_invalid": "The text file is not valid UTF-8.",
        "document_too_large": "The file or its extracted text is larger than allowed.",
        "document_empty": "The file contains no text.",
    }

    def __init__(self, code: str):
        self.code = code
        self.message = self.MESSAGES[code]
        super().__init__(self.message)


@dataclass(frozen=True)
class ParsedDocument:
    """What :func:`knowledge.services.documents.document_put` needs from a file.

    ``content_type`` is ``text``, ``markdown`` or ``html``; HTML is returned as HTML so that the
    one converter in :func:`knowledge.chunking.sanitize_content` runs once, inside ``document_put``.
    """

    title: str
    text: str
    content_type: str


def document_kind(filename: str) -> str | None:
    """The parser an extension selects (``text``, ``markdown``, ``html``, ``pdf``, ``docx``), or None."""
    return _KIND_BY_EXTENSION.get(PurePath(filename).suffix.lower())


def parse_file(path: Path) -> ParsedDocument:
    """Parse a file on disk; the size is checked before anything is read."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise DocumentParseError("document_too_large")
        data = path.read_bytes()
    except OSError:
        raise DocumentParseError("document_unreadable") from None
    return parse_document(data, path.name)


def parse_document(data: bytes, filename: str) -> ParsedDocument:
    """Turn the bytes of an uploaded file into a document, or raise :class:`DocumentParseError`."""
    if len(data) > MAX_FILE_BYTES:
        raise DocumentParseError("document_too_large")
    kind = document_kind(filename)
    sniffed = _sniff(data)
    if kind == "docx" and sniffed == "ole":
        # Word wraps a password-protected .docx in an OLE container.
        raise DocumentParseError("document_unreadable")
    if kind is None or sniffed != _family(kind):
        raise DocumentParseError("unsupported_document_type")
    stem = PurePath(filename).stem
    if kind == "pdf":
        title, text = _parse_pdf(data)
        content_type = "text"
    elif kind == "docx":
        title, text = _parse_docx(data)
        content_type = "markdown"
    else:
        text = _decode_utf8(data)
        title = _text_title(text, kind)
        content_type = kind
    # Measured on what will be stored: HTML counts after its conversion to Markdown.
    stored = sanitize_content(text, html={"html": True, "text": False}.get(content_type))
    if utf16_length(stored) > MAX_TEXT_CHARS:
        raise DocumentParseError("document_too_large")
    if not stored:
        raise DocumentParseError("document_empty")
    title = clean_title(title) or clean_title(stem) or "Untitled"
    return ParsedDocument(title=title, text=text, content_type=content_type)


def clean_title(title: str | None) -> str:
    """Whitespace collapsed, control characters dropped, at most 191 UTF-16 units of whole characters."""
    if not title:
        return ""
    text = _WHITESPACE.sub(" ", _TITLE_JUNK.sub(" ", title)).strip()
    if utf16_length(text) <= TITLE_MAX_CHARS:
        return text
    cut: list[str] = []
    units = 0
    for char in text:
        units += 2 if ord(char) > 0xFFFF else 1
        if units > TITLE_MAX_CHARS:
            break
        cut.append(char)
    return "".join(cut).rstrip()


# --- detection -------------------------------------------------------------------------------------


def _family(kind: str) -> str:
    return kind if kind in ("pdf", "docx") else "text"


def _sniff(data: bytes) -> str:
    """``pdf``, ``docx``, ``ole``, ``text`` or ``other`` from the content alone."""
    # The PDF header may follow a little junk (the specification tolerates it in the first KiB).
    if _PDF_MAGIC in data[:1024]:
        return "pdf"
    if data.startswith(_ZIP_MAGIC):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                return "docx" if "word/document.xml" in archive.namelist() else "other"
        except (zipfile.BadZipFile, OSError, ValueError):
            return "other"
    if data.startswith(_OLE_MAGIC):
        return "ole"
    if b"\x00" in data:
        return "other"
    return "text"


def _decode_utf8(data: bytes) -> str:
    try:
        return data.removeprefix(_UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentParseError("document_encoding_invalid") from None


# --- text, Markdown, HTML --------------------------------------------------------------------------


def _first_heading(markdown: str) -> str | None:
    match = _ATX_HEADING.search(_FENCE_BLOCK.sub("", markdown))
    return match.group(1) if match else None


def _text_title(text: str, kind: str) -> str | None:
    if kind == "markdown":
        return _first_heading(text)
    if kind == "html":
        soup = BeautifulSoup(text, "html.parser")
        if soup.title and soup.title.get_text(strip=True):
            return soup.title.get_text(" ", strip=True)
        heading = soup.find(["h1", "h2", "h3", "h4", "h5", "h6"])
        return heading.get_text(" ", strip=True) if heading else None
    return None


# --- PDF -------------------------------------------------------------------------------------------


def _parse_pdf(data: bytes) -> tuple[str | None, str]:
    """Metadata title and the text layer, pages separated by a blank line.

    Encrypted files are read only when they open with the empty user password (the common
    "permissions only" case); anything else is ``document_unreadable``. A scanned PDF without a
    text layer ends as ``document_empty``.
    """
    from pypdf import PasswordType, PdfReader

    # pypdf reports recoverable damage as warnings; the parse either succeeds or raises below.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
                raise DocumentParseError("document_unreadable")
            title = _pdf_title(reader)
            pages: list[str] = []
            total = 0
            for page in reader.pages:
                text = page.extract_text() or ""
                total += len(text) + 2
                # Stop early: a hostile PDF can hold far more text than the limit.
                if total > 2 * MAX_TEXT_CHARS:
                    raise DocumentParseError("document_too_large")
                pages.append(text)
        except DocumentParseError:
            raise
        except Exception:  # any parser failure is "unreadable", never a 500
            raise DocumentParseError("document_unreadable") from None
    return title, "\n\n".join(page.strip() for page in pages)


def _pdf_title(reader: Any) -> str | None:
    metadata = reader.metadata
    title = metadata.title if metadata is not None else None
    return str(title) if title else None


# --- DOCX ------------------------------------------------------------------------------------------


def _parse_docx(data: bytes) -> tuple[str | None, str]:
    """Core title (else the first heading) and Markdown: headings as ``#`` lines, list paragraphs
    as ``-`` / ``1.`` items, tables as Markdown tables, other paragraphs as text."""
    import docx
    from docx.table import Table

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if sum(info.file_size for info in archive.infolist()) > MAX_DOCX_UNCOMPRESSED_BYTES:
                raise DocumentParseError("document_too_large")
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        for item in document.iter_inner_content():
            block = _docx_table(item) if isinstance(item, Table) else _docx_paragraph(item)
            if block:
                blocks.append(block)
        title = document.core_properties.title
    except DocumentParseError:
        raise
    except Exception:  # any parser failure is "unreadable", never a 500
        raise DocumentParseError("document_unreadable") from None
    text = _join_docx_blocks(blocks)
    return (title or _first_heading(text)), text


def _docx_paragraph(paragraph: Any) -> str:
    text = paragraph.text.replace("\v", "\n").strip()
    if not text:
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "").lower()
    if style == "title":
        return "# " + _one_line(text)
    if style.startswith("heading"):
        level = re.search(r"\d+", style)
        return "#" * min(int(level.group()) if level else 1, 6) + " " + _one_line(text)
    numbered = paragraph._p.pPr is not None and paragraph._p.pPr.numPr is not None
    if style.startswith("list") or numbered:
        marker = "1." if "number" in style else "-"
        return f"{marker} {_one_line(text)}"
    return text


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text)


def _docx_table(table: Any) -> str:
    rows = [[_one_line(cell.text).replace("|", "\\|").strip() for cell in row.cells] for row in table.rows]
    rows = [row for row in rows if any(row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _join_docx_blocks(blocks: list[str]) -> str:
    """Blank lines between blocks, except between consecutive list items (one list)."""
    out: list[str] = []
    for block in blocks:
        if out and _is_list_item(block) and _is_list_item(out[-1]):
            out.append("\n")
        elif out:
            out.append("\n\n")
        out.append(block)
    return "".join(out)


def _is_list_item(block: str) -> bool:
    return block.startswith(("- ", "1. "))
