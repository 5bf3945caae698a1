"""Knowledge base console pages: the permission matrix on real objects, CSRF, adding documents by
paste and by upload (every format), validation by error code with nothing stored, deletes, enable /
disable, escaping, and the hit test's lane ranks (real PostgreSQL, real indexing)."""

from __future__ import annotations

import logging
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client as HttpClient
from django.urls import reverse

from bailing.audit.models import AuditEvent
from knowledge import parsing
from knowledge.models import Chunk, Document, KnowledgeBase
from knowledge.services.indexing import documents_index
from knowledge.vectors import vector_storage_ready
from tests.factories import ClientFactory, KnowledgeBaseFactory, RouteFactory, UserFactory, knowledge_document
from tests.knowledge.test_parsing import make_docx, make_pdf
from tests.support.console import signed_in

pytestmark = pytest.mark.django_db

ROLES = {"nobody": [], "approver": ["approver"], "auditor": ["auditor"], "administrator": ["administrator"]}
VIEWERS = {"approver", "auditor", "administrator"}
ADMINS = {"administrator"}

REFUNDS = "# Refunds\n\nRefunds are paid within 14 days of the return.\n\nRequests above 500 need approval."
SHIPPING = "# Shipping\n\nParcels ship within two working days by tracked courier."


def lexical_kb(**kwargs) -> KnowledgeBase:
    return KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0, **kwargs)


def form_codes(response, form: str = "paste_form") -> dict[str, list[str]]:
    """field → error codes of the re-rendered form (codes, never message text)."""
    bound = response.context[form]
    return {field: [error.code for error in errors] for field, errors in bound.errors.as_data().items()}


@pytest.fixture
def world(console_roles):
    kb = lexical_kb(kb_id="policies", name="Policies")
    doc = knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    return {"kb": kb, "doc": doc}


def pages(world) -> dict[str, str]:
    kb, doc = world["kb"], world["doc"]
    return {
        "list": reverse("console:knowledge_list"),
        "detail": reverse("console:knowledge_detail", args=[kb.kb_id]),
        "document": reverse("console:knowledge_document_detail", args=[kb.kb_id, doc.pk]),
        "hit_test": reverse("console:knowledge_hit_test", args=[kb.kb_id]) + "?q=refund",
        "add": reverse("console:knowledge_document_add", args=[kb.kb_id]),
        "upload": reverse("console:knowledge_document_upload", args=[kb.kb_id]),
    }


PAGE_ROLES = {
    "list": VIEWERS,
    "detail": VIEWERS,
    "document": VIEWERS,
    "hit_test": VIEWERS,
    "add": ADMINS,
    "upload": ADMINS,
}


def post_actions(world):
    """name → (url, data, roles allowed, did-it-happen check). Every success is a 302 (PRG)."""
    kb, doc = world["kb"], world["doc"]
    return {
        "disable": (
            reverse("console:knowledge_set_enabled", args=[kb.kb_id]),
            {"enabled": "false", "confirm": "yes"},
            lambda: not KnowledgeBase.objects.get(pk=kb.pk).enabled,
        ),
        "delete_kb": (
            reverse("console:knowledge_delete", args=[kb.kb_id]),
            {"confirm": kb.kb_id},
            lambda: not KnowledgeBase.objects.filter(pk=kb.pk).exists(),
        ),
        "add": (
            reverse("console:knowledge_document_add", args=[kb.kb_id]),
            {"title": "Shipping", "source_key": "shipping", "content_type": "markdown", "content": SHIPPING},
            lambda: Document.objects.filter(kb=kb, source_key="shipping").exists(),
        ),
        "upload": (
            reverse("console:knowledge_document_upload", args=[kb.kb_id]),
            {"file": lambda: SimpleUploadedFile("faq.txt", b"Opening hours are nine to five.")},
            lambda: Document.objects.filter(kb=kb, title="faq").exists(),
        ),
        "delete_document": (
            reverse("console:knowledge_document_delete", args=[kb.kb_id, doc.pk]),
            {"confirm": "yes"},
            lambda: not Document.objects.filter(pk=doc.pk).exists(),
        ),
    }


def _data(data: dict) -> dict:
    # Uploaded files are consumed by a request: build a fresh one per request.
    return {key: value() if callable(value) else value for key, value in data.items()}


POSTS = ["disable", "delete_kb", "add", "upload", "delete_document"]


# --- permission matrix ------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", sorted(PAGE_ROLES))
def test_anonymous_get_redirects_to_login(world, page):
    response = HttpClient().get(pages(world)[page])
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("page", sorted(PAGE_ROLES))
def test_get_matrix(world, page, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(pages(world)[page])
    if role in PAGE_ROLES[page]:
        assert response.status_code == 200
        assert "no-store" in response["Cache-Control"]
    else:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]


@pytest.mark.parametrize("action", POSTS)
def test_anonymous_post_redirects_to_login_and_changes_nothing(world, action):
    url, data, happened = post_actions(world)[action]
    response = HttpClient().post(url, _data(data))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")
    assert not happened()


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("action", POSTS)
def test_post_matrix(world, action, role):
    url, data, happened = post_actions(world)[action]
    response = signed_in(UserFactory(roles=ROLES[role])).post(url, _data(data))
    if role in ADMINS:
        assert response.status_code == 302
        assert happened()
    else:
        assert response.status_code == 403
        assert not happened()


@pytest.mark.parametrize("action", POSTS)
def test_post_without_csrf_token_is_rejected(world, administrator, action):
    url, data, happened = post_actions(world)[action]
    response = signed_in(administrator, enforce_csrf_checks=True).post(url, _data(data))
    assert response.status_code == 403
    assert not happened()


@pytest.mark.parametrize("action", POSTS)
def test_post_with_csrf_token_is_accepted(world, administrator, action):
    url, data, happened = post_actions(world)[action]
    browser = signed_in(administrator, enforce_csrf_checks=True)
    browser.get(reverse("console:knowledge_list"))
    token = browser.cookies["csrftoken"].value
    response = browser.post(url, {**_data(data), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert happened()


def test_kb_delete_has_no_get_handler(world, administrator):
    url, _, happened = post_actions(world)["delete_kb"]
    assert signed_in(administrator).get(url).status_code == 405
    assert not happened()


@pytest.mark.parametrize("action", ["delete_document", "disable"])
def test_destructive_get_is_its_confirmation_page(world, administrator, action):
    url, _, happened = post_actions(world)[action]
    response = signed_in(administrator).get(url)
    assert response.status_code == 200
    assert "console/confirm.html" in [t.name for t in response.templates]
    assert "no-store" in response["Cache-Control"]
    content = response.content.decode()
    assert f'action="{url}"' in content and 'name="confirm" value="yes"' in content
    assert not happened()


@pytest.mark.parametrize("action", ["delete_document", "disable"])
@pytest.mark.parametrize("confirm", [None, "", "no"])
def test_destructive_post_refused_without_the_confirmation(world, administrator, action, confirm):
    url, data, happened = post_actions(world)[action]
    data = {key: value for key, value in data.items() if key != "confirm"}
    if confirm is not None:
        data["confirm"] = confirm
    before = AuditEvent.objects.count()
    response = signed_in(administrator).post(url, data)
    assert response.status_code == 400
    assert response.context["code"] == "not_confirmed"
    assert not happened()
    assert AuditEvent.objects.count() == before


def test_disable_confirmation_names_the_workspaces_that_lose_it(world, admin_http):
    kb = world["kb"]
    RouteFactory(route_key="orders", knowledge={"kb_ids": [kb.kb_id]})
    response = admin_http.get(reverse("console:knowledge_set_enabled", args=[kb.kb_id]))
    confirmation = response.context["confirmation"]
    assert ("Workspaces", "orders") in confirmation.facts
    assert confirmation.hidden == {"enabled": "false"}


def test_disable_of_a_disabled_kb_asks_nothing(world, admin_http):
    kb = world["kb"]
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    url = reverse("console:knowledge_set_enabled", args=[kb.kb_id])
    response = admin_http.get(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("console:knowledge_detail", args=[kb.kb_id])


def test_hit_test_has_no_write_handler(world, administrator):
    assert signed_in(administrator).post(pages(world)["hit_test"]).status_code == 405


def test_unknown_kb_and_document_of_another_kb_are_404(world, administrator):
    other = lexical_kb(kb_id="other")
    browser = signed_in(administrator)
    assert browser.get(reverse("console:knowledge_detail", args=["missing"])).status_code == 404
    url = reverse("console:knowledge_document_detail", args=[other.kb_id, world["doc"].pk])
    assert browser.get(url).status_code == 404
    delete = reverse("console:knowledge_document_delete", args=[other.kb_id, world["doc"].pk])
    assert browser.get(delete).status_code == 404
    assert browser.post(delete, {"confirm": "yes"}).status_code == 404
    assert Document.objects.filter(pk=world["doc"].pk).exists()


@pytest.mark.parametrize(
    "path",
    ["{kb}/", "{kb}/search/?q=refund", "{kb}/add/", "{kb}/upload/", "{kb}/docs/{doc}/"],
)
@pytest.mark.parametrize("kb_id", ["%00", "a%00b", "%ED%A0%80", "Policies"])
def test_kb_id_outside_its_pattern_is_404_not_a_database_error(world, administrator, path, kb_id):
    # A NUL byte in the URL reached PostgreSQL in the lookup: DataError, a 500 page.
    url = "/console/knowledge/" + path.format(kb=kb_id, doc=world["doc"].pk)
    assert signed_in(administrator).get(url).status_code == 404


@pytest.mark.parametrize("path", ["{kb}/enabled/", "{kb}/delete/", "{kb}/add/", "{kb}/docs/{doc}/delete/"])
def test_write_to_kb_id_outside_its_pattern_is_404(world, administrator, path):
    url = "/console/knowledge/" + path.format(kb="%00", doc=world["doc"].pk)
    assert signed_in(administrator).post(url, {"enabled": "false", "confirm": "x"}).status_code == 404
    assert Document.objects.filter(pk=world["doc"].pk).exists()


def test_nav_lists_knowledge_bases_for_every_role(world, approver, auditor, no_role_user):
    for user in (approver, auditor):
        names = [item["url_name"] for item in signed_in(user).get("/console/").context["console_nav"]]
        assert "console:knowledge_list" in names
    names = [item["url_name"] for item in signed_in(no_role_user).get("/console/").context["console_nav"]]
    assert "console:knowledge_list" not in names


def test_viewers_see_no_write_controls(world, auditor):
    detail = signed_in(auditor).get(pages(world)["detail"]).content.decode()
    assert reverse("console:knowledge_document_add", args=["policies"]) not in detail
    assert reverse("console:knowledge_delete", args=["policies"]) not in detail
    assert "Delete" not in detail


# --- list and detail --------------------------------------------------------------------------------------
def test_list_shows_counts_writers_workspaces_and_vector_availability(world, admin_http):
    kb = world["kb"]
    knowledge_document(kb, "queued", "Queued", "Waiting for the worker.", index=False)
    failed = knowledge_document(kb, "broken", "Broken", "Will fail.", index=False)
    Document.objects.filter(pk=failed.pk).update(status="error", error="embedding_failed: provider down")
    kb.writers.add(ClientFactory(app_id="cms"))
    RouteFactory(route_key="orders", knowledge={"kb_ids": ["policies", "other"]})
    RouteFactory(route_key="support", knowledge={"kb_id": "policies"})
    RouteFactory(route_key="sales", knowledge={})
    local = KnowledgeBaseFactory(kb_id="manuals", name="Manuals")

    response = admin_http.get(reverse("console:knowledge_list"))
    assert response.status_code == 200
    assert response.context["vector_ready"] is vector_storage_ready()
    rows = {row[0].text: [cell.text for cell in row] for row in response.context["table"].rows}
    # kb, status, embedding, ready, embedding, error, chunks, writers, workspaces
    assert rows["policies"][1:] == [
        "enabled",
        "none",
        "1",
        "1",
        "1",
        str(Chunk.objects.filter(kb=kb).count()),
        "cms",
        "orders, support",
    ]
    subs = {row[0].text: row[2].sub for row in response.context["table"].rows}
    assert (rows["manuals"][2], subs["manuals"]) == ("local", f"{local.embedding_model} · 384")
    assert subs["policies"] == "lexical only"


def test_detail_filters_documents_by_status_and_paginates(world, admin_http, django_assert_max_num_queries):
    kb = world["kb"]
    for n in range(55):
        knowledge_document(kb, f"note-{n:02d}", f"Note {n}", f"Note number {n}.", index=False)
    url = reverse("console:knowledge_detail", args=[kb.kb_id])
    with django_assert_max_num_queries(20):
        response = admin_http.get(url)
    assert response.context["paginator"].count == 56
    assert len(response.context["documents"]) == 50
    assert response.context["counts"] == {"embedding": 55, "ready": 1, "error": 0}
    # The table never loads document bodies.
    assert all("content" in row["document"].get_deferred_fields() for row in response.context["documents"])

    ready = admin_http.get(url + "?status=ready")
    assert [row["document"].source_key for row in ready.context["documents"]] == ["refunds"]
    second = admin_http.get(url + "?status=embedding&page=2")
    assert [row["document"].source_key for row in second.context["documents"]] == [
        f"note-{n:02d}" for n in range(50, 55)
    ]


def test_detail_shows_error_code_and_short_revision(world, admin_http):
    doc = world["doc"]
    Document.objects.filter(pk=doc.pk).update(status="error", error="embedding_failed: provider down")
    response = admin_http.get(reverse("console:knowledge_detail", args=["policies"]))
    (row,) = response.context["documents"]
    assert (row["tone"], row["error_code"], row["revision"]) == ("bad", "embedding_failed", doc.revision[:12])


def test_document_page_escapes_content_and_lists_chunks(world, admin_http):
    kb = world["kb"]
    doc = knowledge_document(
        kb,
        "raw",
        "Raw <b>title</b>",
        "Plain text with <script>alert('x')</script> inside.",
        content_type="text",
    )
    response = admin_http.get(reverse("console:knowledge_document_detail", args=[kb.kb_id, doc.pk]))
    html = response.content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Raw &lt;b&gt;title&lt;/b&gt;" in html
    chunks = response.context["chunks_table"].rows
    assert len(chunks) == doc.chunk_count >= 1
    assert chunks[0][3].text == doc.revision[:12]


# --- adding documents -------------------------------------------------------------------------------------
def test_paste_generates_a_key_queues_the_document_and_audits(world, administrator):
    kb = world["kb"]
    browser = signed_in(administrator)
    response = browser.post(
        reverse("console:knowledge_document_add", args=[kb.kb_id]),
        {"title": "Shipping", "source_key": "", "content_type": "markdown", "content": SHIPPING},
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("console:knowledge_detail", args=[kb.kb_id])
    doc = Document.objects.get(kb=kb, title="Shipping")
    assert re.fullmatch(r"console:[0-9a-f]{12}", doc.source_key)
    assert (doc.status, doc.created_by) == ("embedding", f"user:{administrator.username}")
    assert doc.content == SHIPPING
    event = AuditEvent.objects.get(
        action="knowledge.document.created", target_id=f"{kb.kb_id}/{doc.source_key}"
    )
    assert (event.actor_type, event.actor) == ("user", administrator.username)
    page = browser.get(response["Location"])
    assert any("queued" in str(message) for message in page.context["messages"])


def test_paste_normalises_crlf_and_converts_html(world, admin_http):
    kb = world["kb"]
    url = reverse("console:knowledge_document_add", args=[kb.kb_id])
    admin_http.post(
        url, {"title": "Lines", "source_key": "lines", "content_type": "text", "content": "a\r\nb"}
    )
    assert Document.objects.get(kb=kb, source_key="lines").content == "a\nb"
    admin_http.post(
        url,
        {
            "title": "Page",
            "source_key": "page",
            "content_type": "html",
            "content": "<h1>Hours</h1><p>Nine</p>",
        },
    )
    assert Document.objects.get(kb=kb, source_key="page").content == "# Hours\n\nNine"


def test_paste_of_the_same_text_is_unchanged_and_new_text_replaces(world, admin_http):
    kb, doc = world["kb"], world["doc"]
    url = reverse("console:knowledge_document_add", args=[kb.kb_id])
    same = {"title": "Refund policy", "source_key": "refunds", "content_type": "markdown", "content": REFUNDS}
    admin_http.post(url, same)
    assert Document.objects.get(pk=doc.pk).status == "ready"
    admin_http.post(url, {**same, "content": REFUNDS + "\n\nNew rule."})
    replaced = Document.objects.get(pk=doc.pk)
    assert (replaced.status, replaced.revision != doc.revision) == ("embedding", True)
    assert Document.objects.filter(kb=kb).count() == 1


@pytest.mark.parametrize(
    ("data", "field", "code"),
    [
        ({"title": ""}, "title", "required"),
        ({"title": "x" * 192}, "title", "max_length"),
        ({"source_key": "has space"}, "source_key", "source_key_invalid"),
        ({"source_key": "k" * 129}, "source_key", "source_key_invalid"),
        ({"content": ""}, "content", "required"),
        ({"content": "<script>only()</script>", "content_type": "html"}, "content", "document_empty"),
        ({"content_type": "pdf"}, "content_type", "invalid_choice"),
    ],
)
def test_paste_validation_stores_nothing(world, admin_http, data, field, code):
    kb = world["kb"]
    before = (Document.objects.count(), AuditEvent.objects.count())
    valid = {"title": "T", "source_key": "k", "content_type": "markdown", "content": "Text."}
    response = admin_http.post(reverse("console:knowledge_document_add", args=[kb.kb_id]), {**valid, **data})
    assert response.status_code == 400
    assert code in form_codes(response)[field]
    assert (Document.objects.count(), AuditEvent.objects.count()) == before


def test_paste_over_the_character_limit_is_refused_not_truncated(world, admin_http, monkeypatch):
    monkeypatch.setattr(parsing, "MAX_TEXT_CHARS", 10)
    url = reverse("console:knowledge_document_add", args=[world["kb"].kb_id])
    data = {"title": "T", "source_key": "long", "content_type": "text"}
    # UTF-16 units, as BailingHub counts: 5 emoji are 10 units (accepted), 6 are 12 (refused).
    assert admin_http.post(url, {**data, "content": "😀" * 5}).status_code == 302
    response = admin_http.post(url, {**data, "source_key": "longer", "content": "😀" * 6})
    assert form_codes(response) == {"content": ["document_too_large"]}
    assert not Document.objects.filter(source_key="longer").exists()


UPLOADS = [
    ("notes.txt", b"Opening hours are nine to five.", "notes", "text", "Opening hours"),
    ("guide.md", b"# Returns guide\n\nReturn within 30 days.", "Returns guide", "markdown", "Return within"),
    (
        "page.html",
        b"<html><head><title>Warranty</title></head><body><h2>Terms</h2><p>Two years.</p></body></html>",
        "Warranty",
        "html",
        "## Terms\n\nTwo years.",
    ),
    (
        "manual.pdf",
        make_pdf(["Battery care instructions"], title="Battery manual"),
        "Battery manual",
        "text",
        "Battery care",
    ),
    (
        "handbook.docx",
        make_docx(lambda d: (d.add_heading("Holidays", level=1), d.add_paragraph("Staff get 25 days."))),
        "Holidays",
        "markdown",
        "# Holidays\n\nStaff get 25 days.",
    ),
]


@pytest.mark.parametrize(
    ("name", "data", "title", "content_type", "text"), UPLOADS, ids=[u[0] for u in UPLOADS]
)
def test_upload_of_each_format(world, admin_http, name, data, title, content_type, text):
    kb = world["kb"]
    response = admin_http.post(
        reverse("console:knowledge_document_upload", args=[kb.kb_id]),
        {"file": SimpleUploadedFile(name, data), "title": "", "source_key": ""},
    )
    assert response.status_code == 302
    doc = Document.objects.get(kb=kb, title=title)
    assert re.fullmatch(r"console:[0-9a-f]{12}", doc.source_key)
    assert (doc.content_type, doc.status) == (content_type, "embedding")
    assert text in doc.content
    assert documents_index(document_ids=[doc.pk])[doc.pk].result == "ready"


def test_upload_with_title_and_key_replaces_that_document(world, admin_http):
    kb, doc = world["kb"], world["doc"]
    response = admin_http.post(
        reverse("console:knowledge_document_upload", args=[kb.kb_id]),
        {
            "file": SimpleUploadedFile("r.md", b"# Ignored\n\nRefunds within 7 days."),
            "title": "Refunds 2",
            "source_key": "refunds",
        },
    )
    assert response.status_code == 302
    replaced = Document.objects.get(pk=doc.pk)
    assert (replaced.title, replaced.status) == ("Refunds 2", "embedding")


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("virus.exe", b"MZ\x90\x00", "unsupported_document_type"),
        ("fake.pdf", b"just text, not a PDF", "unsupported_document_type"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "document_encoding_invalid"),
        ("broken.pdf", b"%PDF-1.4\nnot really a pdf", "document_unreadable"),
        ("blank.md", b"   \n\n", "document_empty"),
    ],
)
def test_upload_errors_show_their_code_and_store_nothing(world, admin_http, name, data, code):
    before = (Document.objects.count(), AuditEvent.objects.count())
    response = admin_http.post(
        reverse("console:knowledge_document_upload", args=[world["kb"].kb_id]),
        {"file": SimpleUploadedFile(name, data)},
    )
    assert response.status_code == 400
    assert form_codes(response, "upload_form") == {"file": [code]}
    assert (Document.objects.count(), AuditEvent.objects.count()) == before


def test_upload_without_a_file_is_required(world, admin_http):
    response = admin_http.post(reverse("console:knowledge_document_upload", args=[world["kb"].kb_id]), {})
    assert form_codes(response, "upload_form") == {"file": ["required"]}


def test_upload_over_the_byte_cap_stops_receiving_and_stores_nothing(world, admin_http, monkeypatch):
    monkeypatch.setattr(parsing, "MAX_FILE_BYTES", 1024)
    # The cap stops the upload while it is received: the parser never sees the bytes.
    monkeypatch.setattr(parsing, "parse_document", lambda *args: pytest.fail("parsed an oversized upload"))
    before = Document.objects.count()
    response = admin_http.post(
        reverse("console:knowledge_document_upload", args=[world["kb"].kb_id]),
        {"file": SimpleUploadedFile("big.txt", b"word " * 1000), "title": "Big", "source_key": "big"},
    )
    assert response.status_code == 400
    assert form_codes(response, "upload_form") == {"file": ["document_too_large"]}
    assert Document.objects.count() == before


# --- deletes and enable/disable ---------------------------------------------------------------------------
def test_document_delete_removes_chunks_and_audits(world, admin_http):
    kb, doc = world["kb"], world["doc"]
    url = reverse("console:knowledge_document_delete", args=[kb.kb_id, doc.pk])
    confirm = admin_http.get(url)
    assert confirm.status_code == 200
    content = confirm.content.decode()
    assert "Delete document refunds?" in content and "Refund policy" in content
    assert f'action="{url}"' in content
    assert f'href="{reverse("console:knowledge_document_detail", args=[kb.kb_id, doc.pk])}"' in content
    assert Document.objects.filter(pk=doc.pk).exists()
    refused = admin_http.post(url)
    assert refused.status_code == 400
    assert Document.objects.filter(pk=doc.pk).exists()
    response = admin_http.post(url, {"confirm": "yes"})
    assert response["Location"] == reverse("console:knowledge_detail", args=[kb.kb_id])
    assert not Chunk.objects.filter(document_id=doc.pk).exists()
    assert AuditEvent.objects.filter(
        action="knowledge.document.deleted", target_id="policies/refunds"
    ).exists()


@pytest.mark.parametrize("confirm", ["", "Policies", "policie", "other"])
def test_kb_delete_needs_the_exact_id(world, admin_http, confirm):
    kb = world["kb"]
    response = admin_http.post(reverse("console:knowledge_delete", args=[kb.kb_id]), {"confirm": confirm})
    assert response["Location"] == reverse("console:knowledge_detail", args=[kb.kb_id])
    assert KnowledgeBase.objects.filter(pk=kb.pk).exists()
    assert Document.objects.filter(kb=kb).count() == 1


def test_kb_delete_removes_everything_and_returns_to_the_list(world, admin_http):
    kb = world["kb"]
    response = admin_http.post(reverse("console:knowledge_delete", args=[kb.kb_id]), {"confirm": "policies"})
    assert response["Location"] == reverse("console:knowledge_list")
    assert not KnowledgeBase.objects.filter(kb_id="policies").exists()
    assert not Chunk.objects.filter(kb_id=kb.pk).exists()
    assert AuditEvent.objects.filter(action="knowledge.base.deleted", target_id="policies").exists()


def test_enable_and_disable(world, admin_http):
    kb = world["kb"]
    url = reverse("console:knowledge_set_enabled", args=[kb.kb_id])
    admin_http.post(url, {"enabled": "false", "confirm": "yes"})
    assert not KnowledgeBase.objects.get(pk=kb.pk).enabled
    admin_http.post(url, {"enabled": "false", "confirm": "yes"})
    assert AuditEvent.objects.filter(action="knowledge.base.disabled").count() == 1
    # Enabling needs no confirmation (it takes nothing away).
    admin_http.post(url, {"enabled": "true"})
    assert KnowledgeBase.objects.get(pk=kb.pk).enabled
    assert admin_http.post(url, {"enabled": "maybe"}).status_code == 400


# --- hit test ---------------------------------------------------------------------------------------------
def test_hit_test_of_a_lexical_kb_shows_lexical_ranks_without_threshold(world, auditor, caplog):
    kb = world["kb"]
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    before = AuditEvent.objects.count()
    url = reverse("console:knowledge_hit_test", args=[kb.kb_id])
    with caplog.at_level(logging.DEBUG):
        response = signed_in(auditor).get(
            url, {"q": "refund approval requests", "limit": "5", "lanes": "hybrid"}
        )
    assert response.status_code == 200
    result = response.context["result"]
    assert (result.status, result.mode) == ("ok", "lexical")
    assert f"embedding_provider_none:{kb.kb_id}" in result.degraded
    top = result.hits[0]
    assert (top.source_key, top.lexical_rank, top.vector_rank, top.retrievers) == (
        "refunds",
        1,
        None,
        ("text",),
    )
    row = response.context["hits_table"].rows[0]
    assert row[2].text == "#1" and float(row[2].sub) == pytest.approx(top.lexical_score, abs=1e-3)
    assert row[3].text == "—"
    assert "refund approval requests" not in caplog.text
    assert AuditEvent.objects.count() == before


def test_hit_test_lanes_and_limit(world, admin_http):
    kb = world["kb"]
    for n in range(4):
        knowledge_document(kb, f"refund-{n}", f"Refund note {n}", f"Refund rule number {n}.")
    url = reverse("console:knowledge_hit_test", args=[kb.kb_id])
    response = admin_http.get(url, {"q": "refund", "limit": "3", "lanes": "lexical"})
    assert len(response.context["result"].hits) == 3
    vector_only = admin_http.get(url, {"q": "refund", "limit": "3", "lanes": "vector"}).context["result"]
    # A lexical-only KB has no vector lane: nothing ran, nothing is made up.
    assert (vector_only.mode, vector_only.hits) == ("none", [])


@pytest.mark.parametrize(
    ("params", "field", "code"),
    [
        ({"q": "", "limit": "5"}, "q", "required"),
        ({"q": "x", "limit": "0"}, "limit", "min_value"),
        ({"q": "x", "limit": "21"}, "limit", "max_value"),
        ({"q": "x", "limit": "5", "lanes": "psychic"}, "lanes", "invalid_choice"),
        ({"q": "x" * 1001, "limit": "5"}, "q", "max_length"),
    ],
)
def test_hit_test_validation(world, admin_http, params, field, code):
    response = admin_http.get(reverse("console:knowledge_hit_test", args=[world["kb"].kb_id]), params)
    assert response.status_code == 400
    assert response.context["result"] is None
    assert code in [error.code for error in response.context["form"].errors.as_data()[field]]


def test_hit_test_without_a_query_shows_the_form_only(world, admin_http):
    response = admin_http.get(reverse("console:knowledge_hit_test", args=[world["kb"].kb_id]))
    assert response.status_code == 200
    assert response.context["result"] is None


def test_hit_test_of_a_disabled_kb_does_not_search(world, admin_http):
    kb = world["kb"]
    KnowledgeBase.objects.filter(pk=kb.pk).update(enabled=False)
    response = admin_http.get(
        reverse("console:knowledge_hit_test", args=[kb.kb_id]), {"q": "refund", "limit": "5"}
    )
    assert response.status_code == 200
    assert response.context["result"] is None
    assert "disabled" in response.content.decode()


def test_hit_test_of_a_local_kb_shows_vector_ranks(console_roles, admin_http):
    assert vector_storage_ready()  # the embedded test database has pgvector
    kb = KnowledgeBaseFactory(kb_id="manuals", name="Manuals")
    knowledge_document(kb, "refunds", "Refund policy", REFUNDS)
    knowledge_document(kb, "shipping", "Shipping", SHIPPING)
    response = admin_http.get(
        reverse("console:knowledge_hit_test", args=[kb.kb_id]),
        {"q": "money back for returned goods", "limit": "5"},
    )
    result = response.context["result"]
    assert (result.status, result.mode, result.degraded) == ("ok", "hybrid", [])
    top = result.hits[0]
    assert top.source_key == "refunds"
    assert top.vector_rank == 1 and 0 < top.vector_score <= 1
    row = response.context["hits_table"].rows[0]
    assert row[3].text == "#1" and float(row[3].sub) == pytest.approx(top.vector_score, abs=1e-4)


# --- finding a document by title or key ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("", ["refunds", "shipping/eu", "shipping/us"]),
        ("ship", ["shipping/eu", "shipping/us"]),
        ("REFUND", ["refunds"]),
        ("europe", ["shipping/eu"]),
        ("%", []),
        ("_", []),
        ("nothing-like-it", []),
    ],
)
def test_documents_are_found_by_title_or_source_key(world, admin_http, q, expected):
    kb = world["kb"]
    knowledge_document(kb, "shipping/eu", "Shipping in Europe", SHIPPING)
    knowledge_document(kb, "shipping/us", "Shipping in the US", SHIPPING)
    response = admin_http.get(reverse("console:knowledge_detail", args=[kb.kb_id]), {"q": q})
    assert response.status_code == 200
    assert [row["document"].source_key for row in response.context["documents"]] == expected
    if not expected:
        assert "No documents match." in response.content.decode()


def test_document_search_with_a_nul_byte_is_a_form_error_not_a_database_error(world, admin_http):
    response = admin_http.get(reverse("console:knowledge_detail", args=[world["kb"].kb_id]), {"q": "a\x00b"})
    assert response.status_code == 200
    assert response.context["filter_form"].errors["q"]
