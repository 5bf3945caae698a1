"""Console forms of knowledge: paste and upload documents, filters, the hit test, the upload size cap.

Errors carry stable codes (``coded_error``); the page shows the operator-facing text for the code.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest

from bailing.api.limits import utf16_length
from knowledge import parsing
from knowledge.chunking import sanitize_content
from knowledge.models import SOURCE_KEY_RE, TITLE_MAX_CHARS, Document

HIT_TEST_MAX_QUERY_CHARS = 1000
HIT_TEST_MAX_LIMIT = 20

# Operator-facing text per stable error code; a form error carries the code, the page shows this.
ERROR_TEXT = {
    "unsupported_document_type": "This file type is not supported: upload .txt, .md, .html, .pdf or .docx "
    "(the file's contents must match its extension).",
    "document_unreadable": "The file could not be read: it is damaged or encrypted.",
    "document_encoding_invalid": "The text file is not valid UTF-8; save it as UTF-8 and upload it again.",
    "document_too_large": "The document is too large: at most {max_chars} characters of text and "
    "{max_mib} MiB per file.",
    "document_empty": "The document has no text (markup, scripts and embedded images are removed).",
    "source_key_invalid": "Use 1–128 letters, digits and the characters _ . : - (no spaces).",
    "delete_not_confirmed": "Type the knowledge base ID exactly to confirm.",
}


def error_text(code: str) -> str:
    """The message shown for an error ``code`` (the code itself when this page has no text for it)."""
    template = ERROR_TEXT.get(code)
    if template is None:
        return f"The document was refused ({code})."
    return template.format(max_chars=f"{parsing.MAX_TEXT_CHARS:,}", max_mib=max_upload_mib())


def max_upload_mib() -> int:
    return parsing.MAX_FILE_BYTES // (1024 * 1024)


def coded_error(code: str) -> ValidationError:
    return ValidationError(error_text(code), code=code)


# --- forms ----------------------------------------------------------------------------------------------
class SourceKeyField(forms.CharField):
    """An optional document key; empty means "generate one"."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            required=False,
            max_length=128,
            label="Source key",
            help_text="Stable ID of the document in this knowledge base; an existing key is replaced. "
            "Empty: a new key console:<12 hex> is generated.",
            widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
            **kwargs,
        )

    def validate(self, value: str) -> None:
        super().validate(value)
        if value and SOURCE_KEY_RE.fullmatch(value) is None:
            raise coded_error("source_key_invalid")


class DocumentPasteForm(forms.Form):
    title = forms.CharField(max_length=TITLE_MAX_CHARS)
    source_key = SourceKeyField()
    content_type = forms.ChoiceField(
        choices=Document.ContentType.choices,
        initial=Document.ContentType.MARKDOWN,
        label="Format",
        help_text="HTML is converted to Markdown; scripts, styles and embedded images are removed.",
    )
    # Not stripped here: the service's sanitizer decides what whitespace means for each format.
    content = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}))

    def clean_content(self) -> str:
        # A textarea submits CRLF line ends; keep the text the operator sees.
        return self.cleaned_data["content"].replace("\r\n", "\n")

    def clean(self) -> dict[str, Any]:
        """Measure what ``document_put`` will store (the same sanitizer and HTML flag, as
        ``knowledge.parsing`` does for files): too long is refused, never truncated; nothing left
        after cleaning (only markup, scripts or images) is refused too."""
        data = super().clean()
        content, content_type = data.get("content"), data.get("content_type")
        if content is None or not content_type:
            return data
        stored = sanitize_content(content, html={"html": True, "text": False}.get(content_type))
        if utf16_length(stored) > parsing.MAX_TEXT_CHARS:
            self.add_error("content", coded_error("document_too_large"))
        elif not stored:
            self.add_error("content", coded_error("document_empty"))
        return data


class DocumentUploadForm(forms.Form):
    file = forms.FileField(
        label="File",
        allow_empty_file=True,
        help_text=".txt, .md, .html, .pdf or .docx.",
        widget=forms.ClearableFileInput(attrs={"accept": ".txt,.md,.markdown,.html,.htm,.pdf,.docx"}),
    )
    title = forms.CharField(
        required=False,
        max_length=TITLE_MAX_CHARS,
        help_text="Empty: the file's own title (first heading, PDF or DOCX title, or the file name).",
    )
    source_key = SourceKeyField()


class KnowledgeBaseDeleteForm(forms.Form):
    confirm = forms.CharField(max_length=64, label="Knowledge base ID")


class DocumentFilterForm(forms.Form):
    q = forms.CharField(
        required=False,
        max_length=200,
        label="Title or key",
        help_text="part of a document's title or source key",
        widget=forms.TextInput(attrs={"type": "search", "spellcheck": "false"}),
    )
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Document.Status.choices])


class HitTestForm(forms.Form):
    """The hit test's query. ``limit`` and ``lanes`` may be left out of a URL (defaults apply)."""

    DEFAULT_LIMIT = 10
    DEFAULT_LANES = "hybrid"

    q = forms.CharField(
        max_length=HIT_TEST_MAX_QUERY_CHARS,
        label="Query",
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "a question an agent might ask"}),
    )
    limit = forms.IntegerField(
        required=False, min_value=1, max_value=HIT_TEST_MAX_LIMIT, initial=DEFAULT_LIMIT, label="Hits"
    )
    lanes = forms.ChoiceField(
        required=False,
        choices=[
            ("hybrid", "lexical + vector"),
            ("lexical", "lexical only"),
            ("vector", "vector only"),
        ],
        initial=DEFAULT_LANES,
        label="Lanes",
    )

    def clean_limit(self) -> int:
        return self.cleaned_data["limit"] or self.DEFAULT_LIMIT

    def clean_lanes(self) -> str:
        return self.cleaned_data["lanes"] or self.DEFAULT_LANES


# --- upload size cap -------------------------------------------------------------------------------------
class UploadSizeCap(FileUploadHandler):
    """Stops receiving a file as soon as it exceeds ``parsing.MAX_FILE_BYTES``.

    Without it Django would spool any size to a temporary file before the form could refuse it. The
    rest of the request body is read and discarded (``connection_reset=False``) so the browser gets
    the form back with the error instead of a reset connection.
    """

    def __init__(self, request: HttpRequest, max_bytes: int) -> None:
        super().__init__(request)
        self.max_bytes = max_bytes
        self.received = 0

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.max_bytes:
            self.request.upload_too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
