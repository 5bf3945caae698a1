"""``knowledge_ingest``: files, folders and BEIR corpora, keys, unchanged reports, failures, --wait."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.management.commands.knowledge_ingest import source_key_for
from knowledge.models import SOURCE_KEY_RE, Document
from tests.factories import KnowledgeBaseFactory
from tests.knowledge.test_parsing import make_docx, make_pdf

pytestmark = pytest.mark.django_db


@pytest.fixture
def kb():
    return KnowledgeBaseFactory(embedding_provider="none", embedding_model="", embedding_dim=0)


def ingest(*args):
    out, err = StringIO(), StringIO()
    try:
        call_command("knowledge_ingest", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return exc, out.getvalue(), err.getvalue()
    return None, out.getvalue(), err.getvalue()


def _docs(kb) -> dict[str, Document]:
    return {doc.source_key: doc for doc in Document.objects.filter(kb=kb)}


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "manual"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "guide.md").write_text("# Install guide\n\nRun the installer.", encoding="utf-8")
    (root / "sub" / "notes.txt").write_text("Plain notes about refunds.", encoding="utf-8")
    (root / "sub" / "deeper" / "page.html").write_text(
        "<html><head><title>FAQ page</title></head><body><p>Answers.</p></body></html>", encoding="utf-8"
    )
    (root / "sub" / "policy.pdf").write_bytes(make_pdf(["Refunds take 14 days."], title="Policy PDF"))
    (root / "sub" / "handbook.docx").write_bytes(
        make_docx(lambda d: (d.add_heading("Handbook", 1), d.add_paragraph("Be kind.")))
    )
    (root / "image.png").write_bytes(b"\x89PNG\r\n")
    (root / ".hidden" / "secret.md").write_text("# hidden", encoding="utf-8")
    (root / ".DS_Store.md").write_text("# hidden too", encoding="utf-8")
    return root


def test_folder_is_ingested_recursively_with_relative_keys(kb, folder):
    error, out, err = ingest(kb.kb_id, str(folder))
    assert error is None, err
    docs = _docs(kb)
    assert set(docs) == {
        "guide.md",
        "sub:notes.txt",
        "sub:deeper:page.html",
        "sub:policy.pdf",
        "sub:handbook.docx",
    }
    assert docs["guide.md"].title == "Install guide"
    assert docs["sub:deeper:page.html"].title == "FAQ page"
    assert docs["sub:deeper:page.html"].content == "Answers."  # converted by document_put
    assert docs["sub:policy.pdf"].title == "Policy PDF"
    assert docs["sub:handbook.docx"].content.startswith("# Handbook")
    assert {doc.status for doc in docs.values()} == {"embedding"}
    assert "created 5, updated 0, unchanged 0, failed 0" in out
    assert "skipped 1 files of unsupported types" in out
    assert "5 documents waiting" in out

    # Again: nothing changed, nothing queued.
    error, out, _ = ingest(kb.kb_id, str(folder))
    assert error is None
    assert "created 0, updated 0, unchanged 5, failed 0" in out


def test_wait_indexes_in_process_and_reports_chunks_per_second(kb, folder):
    error, out, err = ingest(kb.kb_id, str(folder), "--wait", "--batch", "2", "--source-prefix", "m:")
    assert error is None, err
    docs = _docs(kb)
    assert all(key.startswith("m:") for key in docs)
    assert {doc.status for doc in docs.values()} == {"ready"}
    assert all(doc.chunk_count >= 1 for doc in docs.values())
    assert "chunks/s" in out
    assert "ready 5" in out

    # Changed file: updated and re-indexed; the others unchanged.
    (folder / "guide.md").write_text("# Install guide\n\nRun the new installer.", encoding="utf-8")
    error, out, _ = ingest(kb.kb_id, str(folder), "--wait", "--source-prefix", "m:")
    assert error is None
    assert "created 0, updated 1, unchanged 4, failed 0" in out
    assert Document.objects.get(kb=kb, source_key="m:guide.md").status == "ready"


def test_wait_after_a_run_without_worker_indexes_the_waiting_documents(kb, folder):
    assert ingest(kb.kb_id, str(folder))[0] is None
    error, out, _ = ingest(kb.kb_id, str(folder), "--wait")
    assert error is None
    assert "created 0, updated 0, unchanged 5, failed 0" in out
    assert "ready 5" in out
    assert {doc.status for doc in _docs(kb).values()} == {"ready"}


def test_a_failing_file_is_reported_and_the_rest_processed(kb, tmp_path):
    (tmp_path / "good.md").write_text("# Good\n\nFine.", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 SECRET")
    (tmp_path / "fake.pdf").write_bytes(b"not a pdf")
    (tmp_path / "zzz.md").write_text("# Last\n\nAlso fine.", encoding="utf-8")
    error, out, err = ingest(kb.kb_id, str(tmp_path), str(tmp_path / "missing.md"))
    assert error is not None and error.returncode == 1
    assert set(_docs(kb)) == {"good.md", "zzz.md"}
    assert f"{tmp_path / 'bad.txt'}: document_encoding_invalid" in err
    assert f"{tmp_path / 'fake.pdf'}: unsupported_document_type" in err
    assert f"{tmp_path / 'missing.md'}: not_found" in err
    assert "SECRET" not in err + out
    assert "created 2, updated 0, unchanged 0, failed 3" in out


def test_non_ascii_names_get_stable_distinct_keys_and_collisions_are_reported(kb, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    (first / "退货政策.md").write_text("# 退货\n\n七天无理由退货。", encoding="utf-8")
    (first / "换货政策.md").write_text("# 换货\n\n十五天内换货。", encoding="utf-8")
    (first / "same.md").write_text("# A\n\nfrom one", encoding="utf-8")
    (second / "same.md").write_text("# B\n\nfrom two", encoding="utf-8")
    error, _, err = ingest(kb.kb_id, str(first), str(second))
    assert error is not None and error.returncode == 1
    keys = set(_docs(kb))
    assert len(keys) == 3
    assert all(SOURCE_KEY_RE.fullmatch(key) for key in keys)
    assert source_key_for("退货政策.md") in keys and source_key_for("换货政策.md") in keys
    assert source_key_for("退货政策.md") != source_key_for("换货政策.md")
    assert _docs(kb)["same.md"].content == "# A\n\nfrom one"
    assert f"{second / 'same.md'}: source_key_collision (same source_key as {first / 'same.md'})" in err


def test_source_key_for():
    assert source_key_for("docs:a.md") == "docs:a.md"
    assert source_key_for("a.md", prefix="p:") == "p:a.md"
    long = source_key_for("x" * 300)
    assert len(long) == 128 and SOURCE_KEY_RE.fullmatch(long)
    assert source_key_for("x" * 300) != source_key_for("x" * 301)
    assert source_key_for("a b") == source_key_for("a b")  # stable across runs
    assert source_key_for("a b") != source_key_for("a_b")


def test_beir_corpus(kb, tmp_path):
    corpus = tmp_path / "scifact"
    corpus.mkdir()
    lines = [
        {"_id": "d1", "title": "Vitamin D", "text": "Vitamin D supports bones."},
        {"_id": 42, "title": "", "text": "Untitled study about sleep."},
        {"_id": "d3", "title": "Empty", "text": "   "},
        {"_id": "d1", "title": "Duplicate", "text": "Same id again."},
        {"_id": "with space", "title": "Spaced", "text": "Key is sanitized."},
    ]
    raw = "\n".join(json.dumps(line) for line in lines) + "\n{not json\n\n" + json.dumps(["array"]) + "\n"
    (corpus / "corpus.jsonl").write_text(raw, encoding="utf-8")
    error, out, err = ingest(kb.kb_id, str(corpus), "--beir", "--wait")
    assert error is not None and error.returncode == 1
    docs = _docs(kb)
    spaced = source_key_for("beir:with space")
    assert set(docs) == {"beir:d1", "beir:42", spaced}
    assert (docs["beir:d1"].title, docs["beir:d1"].content) == ("Vitamin D", "Vitamin D supports bones.")
    assert docs["beir:42"].title == "42"
    assert {doc.status for doc in docs.values()} == {"ready"}
    path = corpus / "corpus.jsonl"
    assert f"{path}:3: document_empty" in err
    assert f"{path}:4: source_key_collision" in err
    assert f"{path}:6: invalid_json" in err
    assert f"{path}:8: invalid_record" in err
    assert "created 3, updated 0, unchanged 0, failed 4" in out

    # The corpus file itself works too, and everything is unchanged now.
    (corpus / "corpus.jsonl").write_text("\n".join(json.dumps(line) for line in lines[:2]), encoding="utf-8")
    error, out, _ = ingest(kb.kb_id, str(corpus / "corpus.jsonl"), "--beir")
    assert error is None
    assert "created 0, updated 0, unchanged 2, failed 0" in out


def test_missing_beir_corpus_fails(kb, tmp_path):
    error, _, err = ingest(kb.kb_id, str(tmp_path), "--beir")
    assert error is not None and error.returncode == 1
    assert "corpus.jsonl: not_found" in err


def test_bad_arguments(kb, tmp_path):
    error, _, _ = ingest("no-such-kb", str(tmp_path))
    assert error is not None
    error, _, _ = ingest(kb.kb_id, str(tmp_path), "--source-prefix", "bad prefix")
    assert error is not None
    assert Document.objects.count() == 0
