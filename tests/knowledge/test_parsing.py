"""File parsing: every supported type from real bytes, and every refusal by its stable code."""

from __future__ import annotations

import io
import zipfile

import docx
import pytest
from pypdf import PdfReader, PdfWriter

from bailing.api.limits import utf16_length
from knowledge.parsing import (
    MAX_FILE_BYTES,
    MAX_TEXT_CHARS,
    DocumentParseError,
    clean_title,
    parse_document,
    parse_file,
)


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return b"(" + escaped.encode("latin-1") + b")"


def make_pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """A minimal valid PDF (Helvetica text, one line per page), objects and xref written by hand."""
    objects: list[bytes] = []
    page_ids = [3 + 2 * i for i in range(len(pages))]
    font_id = 3 + 2 * len(pages)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(pages))
    for i, text in enumerate(pages):
        stream = b"BT /F1 12 Tf 72 720 Td " + _pdf_string(text) + b" Tj ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (page_ids[i] + 1, font_id)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info_id = None
    if title is not None:
        objects.append(b"<< /Title " + _pdf_string(title) + b" >>")
        info_id = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = b"<< /Size %d /Root 1 0 R" % (len(objects) + 1)
    if info_id:
        trailer += b" /Info %d 0 R" % info_id
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def make_docx(build, *, title: str = "") -> bytes:
    document = docx.Document()
    document.core_properties.title = title
    build(document)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _code(data: bytes, filename: str) -> str:
    with pytest.raises(DocumentParseError) as info:
        parse_document(data, filename)
    return info.value.code


# --- text types ------------------------------------------------------------------------------------


def test_text_file_title_is_the_stem_and_bom_is_dropped():
    parsed = parse_document("\ufeffRefunds take 14 days.\r\n".encode(), "refund-policy.txt")
    assert parsed.title == "refund-policy"
    assert parsed.content_type == "text"
    assert parsed.text.startswith("Refunds take 14 days.")


def test_markdown_title_is_the_first_heading_outside_code_fences():
    body = "```\n# not a title\n```\n\nIntro.\n\n## Shipping rules ##\n\nTwo days."
    parsed = parse_document(body.encode(), "notes.MD")
    assert (parsed.title, parsed.content_type) == ("Shipping rules", "markdown")
    assert parsed.text == body


def test_markdown_without_heading_uses_the_stem():
    assert parse_document(b"just text", "faq.markdown").title == "faq"


def test_html_keeps_html_for_the_sanitizer_and_takes_the_title_element():
    html = (
        "<html><head><title>Returns  guide</title></head>"
        "<body><h1>Other</h1><p>Keep receipts.</p></body></html>"
    )
    parsed = parse_document(html.encode(), "returns.htm")
    assert (parsed.title, parsed.content_type, parsed.text) == ("Returns guide", "html", html)


def test_html_without_title_element_uses_the_first_heading():
    parsed = parse_document(b"<body><h2>Warranty</h2><p>One year.</p></body>", "w.html")
    assert parsed.title == "Warranty"


def test_invalid_utf8_is_refused():
    assert _code(b"caf\xe9 au lait", "menu.txt") == "document_encoding_invalid"


def test_binary_renamed_to_text_is_refused():
    assert _code(b"abc\x00def", "data.txt") == "unsupported_document_type"


def test_unknown_extension_is_refused():
    assert _code(b"plain", "notes.rtf") == "unsupported_document_type"
    assert _code(b"plain", "README") == "unsupported_document_type"


def test_empty_text_is_refused():
    assert _code(b"  \n\n\t ", "blank.md") == "document_empty"


def test_extracted_text_over_the_limit_is_an_error_not_a_truncation():
    parse_document(b"a" * MAX_TEXT_CHARS, "max.txt")
    assert _code(b"a" * (MAX_TEXT_CHARS + 1), "over.txt") == "document_too_large"
    # Counted in UTF-16 units, as BailingHub's console counts: 250,001 emoji are 500,002 units.
    assert _code(("😀" * 250_001).encode(), "emoji.txt") == "document_too_large"


def test_file_over_the_byte_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (MAX_FILE_BYTES + 1))
    with pytest.raises(DocumentParseError) as info:
        parse_file(path)
    assert info.value.code == "document_too_large"
    assert _code(b"a" * (MAX_FILE_BYTES + 1), "big.txt") == "document_too_large"


def test_missing_file_is_unreadable(tmp_path):
    with pytest.raises(DocumentParseError) as info:
        parse_file(tmp_path / "absent.md")
    assert info.value.code == "document_unreadable"


def test_title_is_cut_to_191_units_at_a_character_boundary():
    assert clean_title("a\tb\n c") == "a b c"
    cut = clean_title("x" + "😀" * 200)
    assert utf16_length(cut) <= 191
    assert cut == "x" + "😀" * 95
    parsed = parse_document(("# " + "T" * 300 + "\n\nbody").encode(), "long.md")
    assert parsed.title == "T" * 191


# --- PDF -------------------------------------------------------------------------------------------


def test_pdf_text_and_metadata_title():
    data = make_pdf(["Refunds take 14 days.", "Shipping takes two days."], title="Store policy")
    parsed = parse_document(data, "policy.pdf")
    assert parsed.title == "Store policy"
    assert parsed.content_type == "text"
    assert "Refunds take 14 days." in parsed.text
    assert "Shipping takes two days." in parsed.text
    assert parsed.text.index("Refunds") < parsed.text.index("Shipping")


def test_pdf_without_title_uses_the_stem():
    assert parse_document(make_pdf(["Hello"]), "Manual v2.PDF").title == "Manual v2"


def test_pdf_without_text_layer_is_empty():
    assert _code(make_pdf([""]), "scan.pdf") == "document_empty"


def test_encrypted_pdf_is_unreadable_but_empty_password_opens():
    reader = PdfReader(io.BytesIO(make_pdf(["Secret plans"])))
    locked = PdfWriter(clone_from=reader)
    locked.encrypt(user_password="s3cret", owner_password="owner", algorithm="AES-128")
    buffer = io.BytesIO()
    locked.write(buffer)
    assert _code(buffer.getvalue(), "locked.pdf") == "document_unreadable"

    open_ = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Open plans"]))))
    open_.encrypt(user_password="", owner_password="owner", algorithm="AES-128")
    buffer = io.BytesIO()
    open_.write(buffer)
    assert "Open plans" in parse_document(buffer.getvalue(), "open.pdf").text


def test_corrupt_pdf_is_unreadable():
    assert _code(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\ngarbage", "bad.pdf") == "document_unreadable"


def test_pdf_extension_with_other_content_is_refused():
    assert _code(b"not a pdf at all", "fake.pdf") == "unsupported_document_type"
    # and the other way round: a PDF renamed to Markdown
    assert _code(make_pdf(["Hello"]), "sneaky.md") == "unsupported_document_type"


# --- DOCX ------------------------------------------------------------------------------------------


def _manual(document) -> None:
    document.add_heading("Returns", level=1)
    document.add_paragraph("Keep the receipt.")
    document.add_paragraph("Unused items", style="List Bullet")
    document.add_paragraph("Within 30 days", style="List Bullet")
    document.add_heading("Fees", level=2)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Item", "Fee"
    table.cell(1, 0).text, table.cell(1, 1).text = "Shoes", "5 | EUR"
    document.add_paragraph("First step", style="List Number")


def test_docx_headings_lists_and_tables_become_markdown():
    parsed = parse_document(make_docx(_manual), "manual.docx")
    assert parsed.content_type == "markdown"
    assert parsed.title == "Returns"  # no core title: the first heading
    assert parsed.text == (
        "# Returns\n\nKeep the receipt.\n\n- Unused items\n- Within 30 days\n\n## Fees\n\n"
        "| Item | Fee |\n| --- | --- |\n| Shoes | 5 \\| EUR |\n\n1. First step"
    )


def test_docx_core_title_wins():
    parsed = parse_document(make_docx(_manual, title="Returns manual 2024"), "m.docx")
    assert parsed.title == "Returns manual 2024"


def test_docx_zip_without_word_part_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("content.xml", "<x/>")
    assert _code(buffer.getvalue(), "odt-in-disguise.docx") == "unsupported_document_type"


def test_password_protected_docx_is_unreadable_and_ole_elsewhere_unsupported():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 512
    assert _code(ole, "protected.docx") == "document_unreadable"
    assert _code(ole, "legacy.txt") == "unsupported_document_type"


def test_damaged_docx_is_unreadable():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", "<w:document><unclosed>")
        archive.writestr("[Content_Types].xml", "not xml")
    assert _code(buffer.getvalue(), "broken.docx") == "document_unreadable"


def test_error_messages_never_echo_the_file():
    secret = b"TOP-SECRET-CONTENT"
    for data, name in ((secret + b"\xff", "a.txt"), (b"%PDF-" + secret, "b.pdf"), (secret, "c.exe")):
        with pytest.raises(DocumentParseError) as info:
            parse_document(data, name)
        assert "TOP-SECRET" not in str(info.value)
