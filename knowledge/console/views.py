"""Knowledge bases: list, detail with documents, one document's page, add (paste or upload), delete,
enable/disable, and the hit test.

Reading is ``knowledge.view_knowledgebase`` (every role); every write is
``knowledge.manage_knowledgebase`` (administrators) and goes through the same services as the push
API and ``knowledge_ingest`` (``document_put``, ``document_delete``, ``knowledge_base_set_enabled``,
``knowledge_base_delete``), which also write the audit events. A put only *queues* the document:
``knowledge_worker`` indexes it, and the detail page shows its status.

Document bodies can be 500,000 characters: list queries defer ``content`` and ``metadata``, and only
the document page loads one body (rendered escaped, inside a scrolling box).

The hit test is a GET form over ``knowledge_search_bases`` with no score threshold, so an operator
sees every lane's rank and score, including hits a workspace's ``min_score`` would drop. Its query
text is never logged or audited by these views.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.generic import DetailView, ListView

from agent_runtime.config import FUSION_DEFAULTS
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.forms import EnabledForm
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404
from knowledge import parsing
from knowledge.console.forms import (
    DocumentFilterForm,
    DocumentPasteForm,
    DocumentUploadForm,
    HitTestForm,
    KnowledgeBaseDeleteForm,
    UploadSizeCap,
    coded_error,
    error_text,
    max_upload_mib,
)
from knowledge.models import Document, KnowledgeBase
from knowledge.selectors.bases import (
    knowledge_base_detail,
    knowledge_base_get,
    knowledge_base_list,
    knowledge_base_routes,
)
from knowledge.selectors.documents import document_chunks, document_get, document_list, document_status_counts
from knowledge.selectors.search import SearchResult
from knowledge.services.bases import knowledge_base_delete, knowledge_base_set_enabled
from knowledge.services.documents import document_delete, document_put
from knowledge.services.retrieval import knowledge_search_bases
from knowledge.vectors import vector_storage_ready

VIEW_PERMISSION = "knowledge.view_knowledgebase"
MANAGE_PERMISSION = "knowledge.manage_knowledgebase"

GENERATED_KEY_PREFIX = "console:"
EXCERPT_CHARS = 280
CHUNKS_PER_PAGE = 50

DOCUMENT_TONES = {"ready": "ok", "embedding": "warn", "error": "bad"}
MODE_TONES = {"hybrid": "ok", "lexical": "warn", "vector": "warn", "none": "bad"}
SEARCH_STATUS_TONES = {"ok": "ok", "partial": "warn", "unavailable": "bad", "disabled": "off"}
LANE_CHOICES = {
    "hybrid": ("lexical", "vector"),
    "lexical": ("lexical",),
    "vector": ("vector",),
}


def kb_or_404(kb_id: str) -> KnowledgeBase:
    """The knowledge base a URL names, or 404 (a segment that cannot be a ``kb_id`` never reaches
    the database: :func:`knowledge.selectors.bases.knowledge_base_get`)."""
    return or_404(knowledge_base_get(kb_id=kb_id))


def generated_source_key() -> str:
    """``console:<12 hex>`` — a key for a document the operator did not name (48 random bits)."""
    return GENERATED_KEY_PREFIX + secrets.token_hex(6)


def document_error_code(document: Document) -> str:
    """The stable code of a failed indexing (``error`` is ``"<code>"`` or ``"<code>: <text>"``)."""
    if not document.error:
        return ""
    return document.error.split(":", 1)[0].strip()


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters on one line, cut at a word boundary where one is near."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit]
    space = cut.rfind(" ")
    if space > limit * 3 // 4:
        cut = cut[:space]
    return cut + " …"


def vector_lane_text(kb: KnowledgeBase, *, storage_ready: bool) -> str:
    """Why a KB's hit test is hybrid or lexical only, before running it."""
    if not kb.has_embeddings:
        return "lexical only (no embedding provider)"
    if not storage_ready:
        return "lexical only (pgvector is not available)"
    return "hybrid (lexical + vector)"


def _count(value: int | None) -> tables.Cell:
    return tables.Cell(f"{value or 0:,}", kind="mono")


def _badge(word: str, tones: dict[str, str], *, sub: str = "", title: str = "") -> tables.Cell:
    return tables.Cell(word, kind="badge", tone=tones.get(word, "neutral"), sub=sub, title=title)


def embedding_cell(kb: KnowledgeBase) -> tables.Cell:
    if not kb.has_embeddings:
        return tables.Cell("none", kind="mono", sub="lexical only")
    return tables.Cell(kb.embedding_provider, kind="mono", sub=f"{kb.embedding_model} · {kb.embedding_dim}")


# --- list and detail --------------------------------------------------------------------------------------
class KnowledgeBaseListView(ConsoleView, ListView):
    permission_required = VIEW_PERMISSION
    template_name = "knowledge/knowledgebase_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        return knowledge_base_list()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        routes = knowledge_base_routes()
        table = tables.Table(
            [
                "Knowledge base",
                "Status",
                "Embedding model",
                "Ready",
                "Embedding",
                "Error",
                "Chunks",
                "Writers",
                "Workspaces",
            ],
            empty="No knowledge bases yet. They are configured in config files (bailing_apply).",
        )
        for kb in context["object_list"]:
            stats = getattr(kb, "stats", None)
            table.rows.append(
                [
                    tables.Cell(
                        kb.kb_id,
                        href=reverse("console:knowledge_detail", args=[kb.kb_id]),
                        kind="mono",
                        sub=kb.name,
                    ),
                    tables.badge("enabled" if kb.enabled else "disabled"),
                    embedding_cell(kb),
                    _count(kb.docs_ready),
                    _count(kb.docs_embedding),
                    _count(kb.docs_error),
                    _count(stats.chunks if stats else 0),
                    tables.words(sorted(client.app_id for client in kb.writer_clients), empty="none"),
                    tables.words(routes.get(kb.kb_id, []), empty="none"),
                ]
            )
        context["table"] = table
        context["vector_ready"] = vector_storage_ready()
        return context


def document_table(documents, *, kb: KnowledgeBase) -> list[dict[str, Any]]:
    """Rows of the documents table (rendered by the detail template, which adds a delete form)."""
    rows = []
    for document in documents:
        code = document_error_code(document)
        rows.append(
            {
                "document": document,
                "href": reverse("console:knowledge_document_detail", args=[kb.kb_id, document.pk]),
                "tone": DOCUMENT_TONES.get(document.status, "neutral"),
                "error_code": code,
                "revision": tables.short_hash(document.revision),
            }
        )
    return rows


class KnowledgeBaseDetailView(ConsoleView, DetailView):
    permission_required = VIEW_PERMISSION
    template_name = "knowledge/knowledgebase_detail.html"
    context_object_name = "kb"

    def get_object(self, queryset=None):
        return or_404(knowledge_base_detail(kb_id=self.kwargs["kb_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        kb = self.object
        filter_form = DocumentFilterForm(self.request.GET or None)
        # Filters apply only when the whole form is valid (a too long text filters nothing).
        filters = filter_form.cleaned_data if filter_form.is_bound and filter_form.is_valid() else {}
        paginator = Paginator(document_list(kb=kb, filters=filters), PAGE_SIZE)
        page_obj = paginator.get_page(self.request.GET.get("page"))
        counts = document_status_counts(kb=kb)
        storage_ready = vector_storage_ready()
        context.update(
            {
                "filter_form": filter_form,
                "paginator": paginator,
                "page_obj": page_obj,
                "documents": document_table(page_obj.object_list, kb=kb),
                "counts": {status: counts.get(status, 0) for status in Document.Status.values},
                "total_documents": sum(counts.values()),
                "stats": getattr(kb, "stats", None),
                "writers": sorted(client.app_id for client in kb.writer_clients),
                "routes": knowledge_base_routes().get(kb.kb_id, []),
                "vector_lane": vector_lane_text(kb, storage_ready=storage_ready),
                "embedding_base_url": (kb.embedding_config or {}).get("base_url", ""),
                "can_manage": self.request.user.has_perm(MANAGE_PERMISSION),
                "delete_form": KnowledgeBaseDeleteForm(),
            }
        )
        return context


class DocumentDetailView(ConsoleView, DetailView):
    """One document: its facts, its stored (sanitized) text and its chunks, paginated."""

    permission_required = VIEW_PERMISSION
    template_name = "knowledge/document_detail.html"
    context_object_name = "document"

    def get_object(self, queryset=None):
        kb = kb_or_404(self.kwargs["kb_id"])
        return or_404(document_get(kb=kb, doc_id=self.kwargs["doc_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        document = self.object
        paginator = Paginator(document_chunks(document=document), CHUNKS_PER_PAGE)
        page_obj = paginator.get_page(self.request.GET.get("page"))
        table = tables.Table(
            ["#", "Characters", "Lexemes", "Revision", "Text"],
            empty="No chunks: the document has not been indexed yet."
            if document.status != "ready"
            else "No chunks.",
        )
        for chunk in page_obj.object_list:
            stale = chunk.revision != document.revision
            table.rows.append(
                [
                    tables.mono(chunk.seq),
                    tables.mono(f"{chunk.char_start:,}–{chunk.char_end:,}"),
                    _count(chunk.length),
                    tables.Cell(
                        tables.short_hash(chunk.revision),
                        kind="mono",
                        title=chunk.revision,
                        sub="stale" if stale else "",
                    ),
                    tables.Cell(chunk.content),
                ]
            )
        context.update(
            {
                "kb": document.kb,
                "chunks_table": table,
                "paginator": paginator,
                "page_obj": page_obj,
                "tone": DOCUMENT_TONES.get(document.status, "neutral"),
                "error_code": document_error_code(document),
                "can_manage": self.request.user.has_perm(MANAGE_PERMISSION),
            }
        )
        return context


# --- writes -----------------------------------------------------------------------------------------------
class KnowledgeBaseSetEnabledView(ConsoleView, View):
    """Enabling is one POST; disabling (the base drops out of every workspace's retrieval) goes
    through a confirmation page (GET) first, and its POST is refused without the confirmation field,
    as disabling a client is."""

    permission_required = MANAGE_PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, kb_id):
        kb = kb_or_404(kb_id)
        detail_url = reverse("console:knowledge_detail", args=[kb.kb_id])
        if not kb.enabled:
            messages.info(request, f"Knowledge base {kb.kb_id} is already disabled; nothing to do.")
            return redirect(detail_url)
        routes = knowledge_base_routes().get(kb.kb_id, [])
        if routes:
            reach = (
                f"Agents of the workspace{pluralize(len(routes))} {', '.join(routes)} no longer find its "
                "documents: searches, turns and the MCP knowledge tools leave it out from the next request."
            )
        else:
            reach = "No workspace names it today, so no agent loses anything it searches now."
        return confirm_page(
            request,
            Confirmation(
                title=f"Disable knowledge base {kb.kb_id}?",
                action_url=reverse("console:knowledge_set_enabled", args=[kb.kb_id]),
                cancel_url=detail_url,
                button="Disable knowledge base",
                consequences=[
                    reach,
                    "References to its documents that agents already hold stop working (the "
                    "workspace's knowledge scope changes), and the push API refuses new documents for "
                    "it (403) while it is disabled.",
                    "Its documents, chunks and vectors are kept: enabling it again restores it at once. "
                    "A config file that lists it as enabled enables it again on the next bailing_apply.",
                    "The change is audited.",
                ],
                facts=[
                    ("Knowledge base", kb.kb_id),
                    ("Name", kb.name),
                    ("Workspaces", ", ".join(routes) or "none"),
                ],
                hidden={"enabled": "false"},
                crumbs=[
                    ("Knowledge bases", reverse("console:knowledge_list")),
                    (kb.kb_id, detail_url),
                ],
            ),
        )

    def post(self, request, kb_id):
        kb = kb_or_404(kb_id)
        form = EnabledForm(request.POST)
        if not form.is_valid():
            return error_page(
                request, status=400, title="Invalid request", detail="Choose enable or disable."
            )
        enabled = form.cleaned_data["enabled"]
        if not enabled and not is_confirmed(request):
            return not_confirmed(request)
        changed = knowledge_base_set_enabled(kb=kb, enabled=enabled, actor=Actor.user(request.user))
        word = "enabled" if enabled else "disabled"
        if changed:
            messages.success(request, f"Knowledge base {kb.kb_id} {word}.")
        else:
            messages.info(request, f"Knowledge base {kb.kb_id} was already {word}; nothing changed.")
        return redirect("console:knowledge_detail", kb_id=kb.kb_id)


class KnowledgeBaseDeleteView(ConsoleView, View):
    """Deletes a KB with everything in it, after the operator typed its ID (a mistaken click on a
    page of documents must not remove them all)."""

    permission_required = MANAGE_PERMISSION
    http_method_names = ["post"]

    def post(self, request, kb_id):
        kb = kb_or_404(kb_id)
        form = KnowledgeBaseDeleteForm(request.POST)
        if not form.is_valid() or form.cleaned_data["confirm"] != kb.kb_id:
            messages.error(request, error_text("delete_not_confirmed") + " Nothing was deleted.")
            return redirect("console:knowledge_detail", kb_id=kb.kb_id)
        knowledge_base_delete(kb=kb, actor=Actor.user(request.user))
        messages.success(request, f"Knowledge base {kb_id} deleted with its documents, chunks and vectors.")
        return redirect("console:knowledge_list")


class DocumentDeleteView(ConsoleView, View):
    """GET: the confirmation page; POST (with the confirmation field): delete."""

    permission_required = MANAGE_PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, kb_id, doc_id):
        kb = kb_or_404(kb_id)
        document = or_404(document_get(kb=kb, doc_id=doc_id, summary=True))
        detail_url = reverse("console:knowledge_document_detail", args=[kb.kb_id, document.pk])
        return confirm_page(
            request,
            Confirmation(
                title=f"Delete document {document.source_key}?",
                action_url=reverse("console:knowledge_document_delete", args=[kb.kb_id, document.pk]),
                cancel_url=detail_url,
                button="Delete document",
                consequences=[
                    f"The document and its {document.chunk_count} chunk{pluralize(document.chunk_count)} "
                    "with their vectors are removed at once.",
                    f"Agents searching the knowledge base {kb.kb_id} no longer find it.",
                    "This cannot be undone from the console; putting the document again (paste, upload, "
                    "the API or knowledge_ingest) indexes it afresh. The deletion is audited.",
                ],
                facts=[
                    ("Knowledge base", kb.kb_id),
                    ("Source key", document.source_key),
                    ("Title", document.title),
                ],
                crumbs=[
                    ("Knowledge bases", reverse("console:knowledge_list")),
                    (kb.kb_id, reverse("console:knowledge_detail", args=[kb.kb_id])),
                    (document.source_key, detail_url),
                ],
            ),
        )

    def post(self, request, kb_id, doc_id):
        kb = kb_or_404(kb_id)
        document = or_404(document_get(kb=kb, doc_id=doc_id, summary=True))
        if not is_confirmed(request):
            return not_confirmed(request)
        deleted = document_delete(kb=kb, source_key=document.source_key, actor=Actor.user(request.user))
        if deleted:
            messages.success(request, f"Document {document.source_key} deleted with its chunks and vectors.")
        else:
            messages.info(request, f"Document {document.source_key} was already deleted.")
        return redirect("console:knowledge_detail", kb_id=kb.kb_id)


@dataclass(frozen=True)
class _NewDocument:
    source_key: str
    title: str
    content: str
    content_type: str


class _DocumentAddBase(ConsoleView, View):
    """Shared by the paste and upload views: both render one page with both forms, and put the
    document through ``document_put`` once their own form is valid."""

    permission_required = MANAGE_PERMISSION
    template_name = "knowledge/document_add.html"

    def setup(self, request, *args, **kwargs):
        super().setup(request, *args, **kwargs)
        self.kb: KnowledgeBase | None = None

    def _kb(self) -> KnowledgeBase:
        if self.kb is None:
            self.kb = kb_or_404(self.kwargs["kb_id"])
        return self.kb

    def page(self, *, paste: forms.Form | None = None, upload: forms.Form | None = None, status: int = 200):
        kb = self._kb()
        return render(
            self.request,
            self.template_name,
            {
                "kb": kb,
                "paste_form": paste or DocumentPasteForm(),
                "upload_form": upload or DocumentUploadForm(),
                "max_chars": parsing.MAX_TEXT_CHARS,
                "max_mib": max_upload_mib(),
            },
            status=status,
        )

    def get(self, request, kb_id, **kwargs):
        return self.page()

    def put_document(self, new: _NewDocument):
        kb = self._kb()
        result = document_put(
            kb=kb,
            source_key=new.source_key,
            title=new.title,
            content=new.content,
            content_type=new.content_type,
            actor=Actor.user(self.request.user),
        )
        key = new.source_key
        if not result.queued:
            messages.info(
                self.request, f"Document {key} is unchanged (same title and text); nothing was queued."
            )
        elif result.created:
            messages.success(
                self.request,
                f"Document {key} added and queued: the knowledge worker will index it; "
                "its status is shown below.",
            )
        else:
            messages.success(
                self.request,
                f"Document {key} replaced and queued: the knowledge worker will index the new text; "
                "its status is shown below.",
            )
        return redirect("console:knowledge_detail", kb_id=kb.kb_id)


class DocumentAddView(_DocumentAddBase):
    """Paste a document (title, optional key, format, text)."""

    def post(self, request, kb_id):
        self._kb()
        form = DocumentPasteForm(request.POST)
        if not form.is_valid():
            return self.page(paste=form, status=400)
        data = form.cleaned_data
        return self.put_document(
            _NewDocument(
                source_key=data["source_key"] or generated_source_key(),
                title=data["title"],
                content=data["content"],
                content_type=data["content_type"],
            )
        )


@method_decorator(csrf_exempt, name="dispatch")
class DocumentUploadView(_DocumentAddBase):
    """Upload a file, parsed by :func:`knowledge.parsing.parse_document` (txt, md, html, pdf, docx).

    The size cap must be installed before anything reads the body, and the CSRF middleware reads it
    for every POST; so this view is exempt from the middleware and runs the very same check itself
    (``csrf_protect``) right after installing the cap — CSRF is still enforced on every POST.
    """

    def dispatch(self, request, *args, **kwargs):
        request.upload_too_large = False
        request.upload_handlers.insert(0, UploadSizeCap(request, parsing.MAX_FILE_BYTES))
        return csrf_protect(super().dispatch)(request, *args, **kwargs)

    def post(self, request, kb_id):
        self._kb()
        form = DocumentUploadForm(request.POST, request.FILES)
        if request.upload_too_large:
            form.is_valid()
            form.errors.pop("file", None)
            form.add_error("file", coded_error("document_too_large"))
            return self.page(upload=form, status=400)
        if not form.is_valid():
            return self.page(upload=form, status=400)
        upload = form.cleaned_data["file"]
        try:
            # Size, type, readability, length and emptiness are all decided by the parser.
            parsed = parsing.parse_document(upload.read(), upload.name or "")
        except parsing.DocumentParseError as exc:
            form.add_error("file", coded_error(exc.code))
            return self.page(upload=form, status=400)
        data = form.cleaned_data
        return self.put_document(
            _NewDocument(
                source_key=data["source_key"] or generated_source_key(),
                title=data["title"] or parsed.title,
                content=parsed.text,
                content_type=parsed.content_type,
            )
        )


# --- hit test ---------------------------------------------------------------------------------------------
def hit_table(result: SearchResult, *, kb: KnowledgeBase) -> tables.Table:
    """One row per hit, best first: fused score, each lane's rank and raw score, the document."""
    table = tables.Table(
        ["#", "Fused score", "Lexical · BM25", "Vector · cosine", "Lanes", "Document", "Excerpt"],
        empty="No hits.",
    )
    for rank, hit in enumerate(result.hits, start=1):
        table.rows.append(
            [
                tables.mono(rank),
                tables.Cell(f"{hit.score:.6f}", kind="mono"),
                _lane_cell(hit.lexical_rank, hit.lexical_score, digits=3),
                _lane_cell(hit.vector_rank, hit.vector_score, digits=4),
                tables.words(hit.retrievers),
                tables.Cell(
                    hit.title,
                    href=reverse("console:knowledge_document_detail", args=[kb.kb_id, hit.document_id]),
                    sub=f"{hit.source_key} · chunk {hit.seq}",
                ),
                tables.Cell(excerpt(hit.content)),
            ]
        )
    return table


def _lane_cell(rank: int | None, score: float | None, *, digits: int) -> tables.Cell:
    """A lane's rank with its raw score (BM25 or cosine, named by the column) underneath."""
    if rank is None:
        return tables.Cell("—", kind="muted", title="not found by this lane")
    sub = f"{score:.{digits}f}" if score is not None else ""
    return tables.Cell(f"#{rank}", kind="mono", sub=sub)


class KnowledgeHitTestView(ConsoleView, View):
    """Runs a query over this KB with no score threshold and shows how each lane ranked each hit.

    A GET form: it changes nothing, so it needs no CSRF token and can be bookmarked. The query text
    is neither logged nor audited here.
    """

    permission_required = VIEW_PERMISSION
    http_method_names = ["get"]
    template_name = "knowledge/hit_test.html"

    def get(self, request, kb_id):
        kb = kb_or_404(kb_id)
        form = HitTestForm(request.GET if "q" in request.GET else None)
        result = None
        # Retrieval serves only enabled KBs (its freshness check drops the hits of a disabled one),
        # so a hit test of a disabled KB would show an empty list that means nothing.
        if kb.enabled and form.is_bound and form.is_valid():
            data = form.cleaned_data
            result = knowledge_search_bases(
                bases=[kb],
                query=data["q"],
                limit=data["limit"],
                min_score=None,
                fusion=dict(FUSION_DEFAULTS),
                lanes=LANE_CHOICES[data["lanes"]],
            )
        context = {
            "kb": kb,
            "form": form,
            "result": result,
            "hits_table": hit_table(result, kb=kb) if result is not None else None,
            "mode_tone": MODE_TONES.get(result.mode, "neutral") if result else "",
            "status_tone": SEARCH_STATUS_TONES.get(result.status, "neutral") if result else "",
            "vector_lane": vector_lane_text(kb, storage_ready=vector_storage_ready()),
            "fusion": FUSION_DEFAULTS,
        }
        return render(
            request, self.template_name, context, status=200 if form.is_valid() or not form.is_bound else 400
        )
