"""The knowledge push API (``/kb/``): every status and error code, replays and a real race."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from bailing.audit.models import AuditEvent
from knowledge.api.push_views import PUSH_BODY_MAX_BYTES
from knowledge.models import Chunk, Document
from knowledge.services.queue import documents_claim
from tests.agent_runtime.services.test_rate_limits import wait_for_a_fresh_minute
from tests.factories import ClientFactory, KnowledgeBaseFactory, knowledge_document

BODY = {"title": "Refund policy", "content": "# Refunds\n\nRefunds are paid within 14 days."}


@pytest.fixture
def writer():
    return ClientFactory()


@pytest.fixture
def kb(writer):
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    kb.writers.add(writer)
    return kb


def auth(client) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {client._token}"}


def put(api_client, kb_id, source_key, body, client=None, **extra):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = auth(client) if client is not None else {}
    return api_client.generic(
        "PUT",
        f"/kb/{kb_id}/docs/{source_key}",
        raw,
        content_type=extra.pop("content_type", "application/json"),
        **headers,
        **extra,
    )


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == code
    assert response["Cache-Control"] == "no-store"


def ok(response, status=200) -> dict:
    assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    return response.json()


def _snapshot():
    return Document.objects.count(), AuditEvent.objects.count()


# --- PUT ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_put_creates_and_queues(api_client, kb, writer):
    body = ok(put(api_client, kb.kb_id, "policy:refunds-v1.md", {**BODY, "metadata": {"lang": "en"}}, writer))
    doc = Document.objects.get(kb=kb, source_key="policy:refunds-v1.md")
    assert body == {"ok": True, "doc_id": doc.pk, "created": True, "status": "embedding"}
    assert (doc.title, doc.content_type, doc.metadata) == ("Refund policy", "markdown", {"lang": "en"})
    assert doc.created_by == f"client:{writer.app_id}"
    assert AuditEvent.objects.filter(
        action="knowledge.document.created", client_app_id=writer.app_id
    ).exists()
    assert documents_claim(limit=5, lease_seconds=60) == [doc.pk]


@pytest.mark.django_db
def test_replayed_put_is_not_created_nor_requeued(api_client, kb, writer):
    first = ok(put(api_client, kb.kb_id, "faq", BODY, writer))
    doc = Document.objects.get(pk=first["doc_id"])
    second = ok(put(api_client, kb.kb_id, "faq", BODY, writer))
    assert second == {"ok": True, "doc_id": doc.pk, "created": False, "status": "embedding"}
    again = Document.objects.get(pk=doc.pk)
    assert (again.enqueued_at, again.revision) == (doc.enqueued_at, doc.revision)
    # Once indexed, the same content stays ready and is not queued again.
    from django.core.management import call_command

    call_command("knowledge_worker", "--once")
    third = ok(put(api_client, kb.kb_id, "faq", BODY, writer))
    assert third == {"ok": True, "doc_id": doc.pk, "created": False, "status": "ready"}
    assert documents_claim(limit=5, lease_seconds=60) == []
    # Changed content is queued again under the same doc_id.
    changed = ok(put(api_client, kb.kb_id, "faq", {**BODY, "content": "Shipping is free."}, writer))
    assert changed == {"ok": True, "doc_id": doc.pk, "created": False, "status": "embedding"}


@pytest.mark.django_db
def test_put_text_content_type_and_limits_counted_in_utf16_units(api_client, kb, writer):
    ok(put(api_client, kb.kb_id, "plain", {**BODY, "content_type": "text", "content": "a" * 300_000}, writer))
    assert Document.objects.get(source_key="plain").content_type == "text"
    # 150,000 emoji are 300,000 UTF-16 units: still fine; one more unit is not.
    ok(put(api_client, kb.kb_id, "emoji", {**BODY, "content": "😀" * 150_000}, writer))
    assert_error(
        put(api_client, kb.kb_id, "emoji2", {**BODY, "content": "😀" * 150_000 + "a"}, writer),
        400,
        "invalid_request",
    )
    ok(put(api_client, kb.kb_id, "title", {**BODY, "title": "t" * 191}, writer))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "x"}, "title"),
        ({"title": "T"}, "content"),
        ({**BODY, "title": ""}, "title"),
        ({**BODY, "title": "   "}, "title"),
        ({**BODY, "title": "t" * 192}, "title"),
        ({**BODY, "title": "line\nbreak"}, "title"),
        ({**BODY, "title": "Refund \u202epolicy"}, "title"),
        ({**BODY, "title": "Refund \u2067policy\u2069"}, "title"),
        ({**BODY, "title": 5}, "title"),
        ({**BODY, "content": ""}, "content"),
        ({**BODY, "content": "a" * 300_001}, "content"),
        ({**BODY, "content": "bell\x07"}, "content"),
        ({**BODY, "content": ["a"]}, "content"),
        ({**BODY, "content_type": "html"}, "content_type"),
        ({**BODY, "content_type": 1}, "content_type"),
        ({**BODY, "metadata": []}, "metadata"),
        ({**BODY, "metadata": {"k": "v" * 16_400}}, "metadata"),
        ({**BODY, "metadata": {"k": "nul\u0000"}}, "metadata"),
        ({**BODY, "source_key": "x"}, "source_key"),
    ],
)
@pytest.mark.django_db
def test_put_invalid_bodies_are_400_and_store_nothing(api_client, kb, writer, body, field):
    before = _snapshot()
    response = put(api_client, kb.kb_id, "doc", body, writer)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field
    assert _snapshot() == before


@pytest.mark.django_db
def test_metadata_null_is_empty_and_16_kib_fits(api_client, kb, writer):
    ok(put(api_client, kb.kb_id, "a", {**BODY, "metadata": None}, writer))
    assert Document.objects.get(source_key="a").metadata == {}
    big = {"k": "v" * (16 * 1024 - 8)}  # {"k":"…"} is exactly 16 KiB
    ok(put(api_client, kb.kb_id, "b", {**BODY, "metadata": big}, writer))


@pytest.mark.parametrize("source_key", ["a%20b", "a/b", "x" * 129, "caf%C3%A9", "a%2Fb"])
@pytest.mark.django_db
def test_bad_source_key_is_400(api_client, kb, writer, source_key):
    before = _snapshot()
    response = put(api_client, kb.kb_id, source_key, BODY, writer)
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == "source_key"
    assert _snapshot() == before


@pytest.mark.django_db
def test_invalid_json_and_media_type(api_client, kb, writer):
    before = _snapshot()
    assert_error(put(api_client, kb.kb_id, "d", b'{"title": "T",', writer), 400, "invalid_request")
    assert_error(put(api_client, kb.kb_id, "d", b'{"title":"T","title":"U"}', writer), 400, "invalid_request")
    assert_error(put(api_client, kb.kb_id, "d", b"[]", writer), 400, "invalid_request")
    assert_error(
        put(api_client, kb.kb_id, "d", b"title=T", writer, content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )
    assert _snapshot() == before


@pytest.mark.django_db
def test_body_over_budget_is_413(api_client, kb, writer):
    before = _snapshot()
    raw = json.dumps({"title": "T", "content": "a" * PUSH_BODY_MAX_BYTES}).encode()
    response = put(api_client, kb.kb_id, "huge", raw, writer)
    assert_error(response, 413, "arguments_too_large")
    assert response.json()["max_bytes"] == PUSH_BODY_MAX_BYTES
    assert _snapshot() == before


@pytest.mark.django_db
def test_escaped_maximum_content_fits_the_body_budget(api_client, kb, writer):
    # json.dumps' default escapes every non-ASCII character: 300,000 CJK characters are 1.8 MB.
    body = {"title": "长文", "content": "长" * 300_000, "metadata": {"k": "元" * 5000}}
    raw = json.dumps(body).encode()
    assert len(raw) > 1_800_000
    ok(put(api_client, kb.kb_id, "long", raw, writer))


# --- authentication and authorization ----------------------------------------------------------------


@pytest.mark.django_db
def test_missing_or_bad_token_is_401(api_client, kb, writer):
    before = _snapshot()
    response = put(api_client, kb.kb_id, "doc", BODY)
    assert_error(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert_error(
        put(api_client, kb.kb_id, "doc", BODY, HTTP_AUTHORIZATION="Bearer bhc_" + "x" * 40),
        401,
        "unauthorized",
    )
    assert_error(api_client.get(f"/kb/{kb.kb_id}/docs"), 401, "unauthorized")
    assert_error(api_client.delete(f"/kb/{kb.kb_id}/docs/doc"), 401, "unauthorized")
    writer.enabled = False
    writer.save(update_fields=["enabled"])
    assert_error(put(api_client, kb.kb_id, "doc", BODY, writer), 401, "unauthorized")
    assert _snapshot() == before


@pytest.mark.django_db
def test_unknown_kb_is_404_and_foreign_kb_is_403(api_client, kb, writer):
    before = _snapshot()
    assert_error(put(api_client, "no-such-kb", "doc", BODY, writer), 404, "not_found")
    assert_error(put(api_client, "k" * 200, "doc", BODY, writer), 404, "not_found")
    assert_error(api_client.get("/kb/no-such-kb/docs", **auth(writer)), 404, "not_found")
    outsider = ClientFactory()
    assert_error(put(api_client, kb.kb_id, "doc", BODY, outsider), 403, "forbidden")
    assert_error(api_client.get(f"/kb/{kb.kb_id}/docs", **auth(outsider)), 403, "forbidden")
    assert_error(api_client.delete(f"/kb/{kb.kb_id}/docs/doc", **auth(outsider)), 403, "forbidden")
    assert _snapshot() == before


@pytest.mark.django_db
def test_disabled_kb_is_403(api_client, kb, writer):
    knowledge_document(kb, "doc", "Doc", "Text.", index=False)
    kb.enabled = False
    kb.save(update_fields=["enabled"])
    before = _snapshot()
    assert_error(put(api_client, kb.kb_id, "new", BODY, writer), 403, "forbidden")
    assert_error(api_client.delete(f"/kb/{kb.kb_id}/docs/doc", **auth(writer)), 403, "forbidden")
    assert_error(api_client.get(f"/kb/{kb.kb_id}/docs", **auth(writer)), 403, "forbidden")
    assert _snapshot() == before


@pytest.mark.django_db
def test_rate_limit_is_429_with_retry_after(api_client, kb, writer):
    writer.rate_limit_per_min = 2
    writer.save(update_fields=["rate_limit_per_min"])
    wait_for_a_fresh_minute()
    ok(put(api_client, kb.kb_id, "one", BODY, writer))
    ok(api_client.get(f"/kb/{kb.kb_id}/docs", **auth(writer)))
    before = _snapshot()
    response = put(api_client, kb.kb_id, "two", BODY, writer)
    assert_error(response, 429, "rate_limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["retry_after_seconds"] == int(response["Retry-After"])
    assert _snapshot() == before
    # Another client has its own bucket; 0 means unlimited.
    other = ClientFactory(rate_limit_per_min=0)
    kb.writers.add(other)
    for index in range(5):
        ok(put(api_client, kb.kb_id, f"other-{index}", BODY, other))


# --- DELETE ------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("segment", ["%00", "a%00b", "%ED%A0%80", "caf%C3%A9", "UPPER", "-x"])
def test_kb_id_outside_its_pattern_is_404_not_a_database_error(api_client, kb, writer, segment):
    # A NUL byte reached PostgreSQL in the lookup: DataError, 500 ``internal_error``.
    before = _snapshot()
    assert_error(put(api_client, segment, "doc", BODY, writer), 404, "not_found")
    assert_error(api_client.delete(f"/kb/{segment}/docs/doc", **auth(writer)), 404, "not_found")
    assert_error(api_client.get(f"/kb/{segment}/docs", **auth(writer)), 404, "not_found")
    assert _snapshot() == before


@pytest.mark.django_db
def test_delete_removes_document_and_chunks_then_404(api_client, kb, writer):
    doc = knowledge_document(kb, "gone", "Gone", "Paragraph one.\n\nParagraph two.")
    assert Chunk.objects.filter(document=doc).exists()
    body = ok(api_client.delete(f"/kb/{kb.kb_id}/docs/gone", **auth(writer)))
    assert body == {"ok": True, "deleted": True}
    assert not Document.objects.filter(pk=doc.pk).exists()
    assert not Chunk.objects.filter(kb=kb).exists()
    assert AuditEvent.objects.filter(action="knowledge.document.deleted").count() == 1
    assert_error(api_client.delete(f"/kb/{kb.kb_id}/docs/gone", **auth(writer)), 404, "not_found")
    assert_error(api_client.delete(f"/kb/{kb.kb_id}/docs/bad%20key", **auth(writer)), 400, "invalid_request")


@pytest.mark.django_db
def test_other_methods_are_405(api_client, kb, writer):
    assert_error(
        api_client.post(f"/kb/{kb.kb_id}/docs/doc", BODY, format="json", **auth(writer)),
        405,
        "method_not_allowed",
    )
    assert_error(
        api_client.post(f"/kb/{kb.kb_id}/docs", BODY, format="json", **auth(writer)),
        405,
        "method_not_allowed",
    )


@pytest.mark.django_db
def test_unknown_path_under_kb_is_json_404(api_client, writer):
    assert_error(api_client.get("/kb/x/other", **auth(writer)), 404, "not_found")


# --- GET list ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_list_is_ordered_paginated_and_scoped(api_client, kb, writer):
    for key in ("c", "a", "b", "d", "e"):
        knowledge_document(kb, key, f"Title {key}", f"Text {key}.", index=key != "e")
    other = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    knowledge_document(other, "aa", "Other", "Not listed.", index=False)

    page = ok(api_client.get(f"/kb/{kb.kb_id}/docs", {"limit": "2"}, **auth(writer)))
    assert page["kb_id"] == kb.kb_id
    assert [doc["source_key"] for doc in page["docs"]] == ["a", "b"]
    first = page["docs"][0]
    doc_a = Document.objects.get(kb=kb, source_key="a")
    assert set(first) == {"source_key", "doc_id", "title", "status", "error", "chunk_count", "updated_at"}
    assert first["doc_id"] == doc_a.pk
    assert (first["title"], first["status"], first["chunk_count"], first["error"]) == (
        "Title a",
        "ready",
        1,
        "",
    )
    assert first["updated_at"].endswith("Z")
    assert page["next_cursor"] == "b"

    page = ok(api_client.get(f"/kb/{kb.kb_id}/docs", {"limit": "2", "cursor": "b"}, **auth(writer)))
    assert [doc["source_key"] for doc in page["docs"]] == ["c", "d"]
    page = ok(api_client.get(f"/kb/{kb.kb_id}/docs", {"limit": "2", "cursor": "d"}, **auth(writer)))
    assert [(doc["source_key"], doc["status"]) for doc in page["docs"]] == [("e", "embedding")]
    assert page["next_cursor"] is None
    whole = ok(api_client.get(f"/kb/{kb.kb_id}/docs", **auth(writer)))
    assert [doc["source_key"] for doc in whole["docs"]] == ["a", "b", "c", "d", "e"]
    assert whole["next_cursor"] is None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=abc", "limit"),
        ("limit=-1", "limit"),
        ("limit=1&limit=2", "limit"),
        ("cursor=a%20b", "cursor"),
        ("page=2", "page"),
    ],
)
@pytest.mark.django_db
def test_list_bad_parameters_are_400(api_client, kb, writer, query, field):
    response = api_client.get(f"/kb/{kb.kb_id}/docs?{query}", **auth(writer))
    assert_error(response, 400, "invalid_request")
    assert response.json()["field"] == field


@pytest.mark.django_db
def test_list_limit_500_is_allowed(api_client, kb, writer):
    assert ok(api_client.get(f"/kb/{kb.kb_id}/docs", {"limit": "500"}, **auth(writer)))["docs"] == []


# --- a real race -------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_ten_parallel_first_puts_create_exactly_one_document():
    writer = ClientFactory(rate_limit_per_min=0)
    kb = KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)
    kb.writers.add(writer)
    results: list[dict | None] = [None] * 10
    statuses: list[int | None] = [None] * 10
    barrier = threading.Barrier(10)

    def worker(index: int) -> None:
        try:
            client = APIClient()
            barrier.wait()
            response = put(client, kb.kb_id, "raced", BODY, writer)
            statuses[index] = response.status_code
            results[index] = response.json()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == [200] * 10
    assert Document.objects.filter(kb=kb, source_key="raced").count() == 1
    doc = Document.objects.get(kb=kb, source_key="raced")
    assert [r["created"] for r in results].count(True) == 1
    assert {r["doc_id"] for r in results} == {doc.pk}
    assert AuditEvent.objects.filter(action="knowledge.document.created").count() == 1
