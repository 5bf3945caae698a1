"""knowledge_eval on a tiny synthetic BEIR directory: metrics as trec_eval -c, output shape, cleanup."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
from django.core.management import CommandError, call_command

from knowledge.management.commands.knowledge_eval import (
    ndcg_at,
    parent_documents,
    recall_at,
    source_key_for,
)
from knowledge.models import Document, KnowledgeBase

pytestmark = pytest.mark.django_db

LAST_LINE = re.compile(r"nDCG@10 lexical=(\d\.\d{3}) vector=(\d\.\d{3}) hybrid=(\d\.\d{3})")


def _beir(tmp_path, *, split: str = "test"):
    corpus = [
        {
            "_id": "d1",
            "title": "Refund policy",
            "text": "Refunds are paid back to the card within fourteen days.",
        },
        {
            "_id": "d2",
            "title": "Shipping",
            "text": "Parcels leave the Berlin warehouse and arrive in two days.",
        },
        {"_id": "d3", "title": "Passwords", "text": "Reset a password from the account settings page."},
        {"_id": "doc/4", "title": "", "text": "Gift cards never expire and can be topped up in store."},
        {"_id": "d5", "title": "Empty", "text": "   "},
    ]
    queries = [
        {"_id": "q1", "text": "refund card"},
        {"_id": "q2", "text": "warehouse parcels"},
        {"_id": "q3", "text": "zeppelin"},
        {"_id": "q-unjudged", "text": "password"},
    ]
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(item) for item in corpus) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(item) for item in queries) + "\n")
    # q3 is judged but no document contains its word: it must still count (as 0) for the lexical lane.
    (tmp_path / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\nq3\tdoc/4\t1\n"
    )
    return tmp_path


def test_metrics_follow_trec_eval():
    judged = {"a": 1, "c": 2, "d": 2, "z": 0}
    ideal = 2 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at(["a", "b", "c"], judged, 10) == pytest.approx((1 + 2 / 2) / ideal)
    assert ndcg_at(["c", "d", "a"], judged, 10) == pytest.approx(1.0)
    assert ndcg_at([], judged, 10) == 0.0
    assert ndcg_at(["a", "c"], judged, 1) == pytest.approx(1 / 2)
    assert recall_at(["a", "b", "c"], judged, 100) == pytest.approx(2 / 3)
    assert recall_at(["b", "a"], judged, 1) == 0.0
    assert recall_at(["z"], {"z": 0}, 100) == 0.0
    assert parent_documents(["x", "y", "x", "z", "y"]) == ["x", "y", "z"]
    assert source_key_for("MED-10") == "MED-10"
    assert source_key_for("doc/4").startswith("h:") and source_key_for("doc/4") == source_key_for("doc/4")


def test_eval_prints_the_table_and_deletes_its_knowledge_base(tmp_path):
    out = io.StringIO()
    call_command("knowledge_eval", beir=str(_beir(tmp_path)), stdout=out, stderr=io.StringIO())
    lines = out.getvalue().strip().splitlines()
    assert "ingested 4 documents (1 empty skipped, 0 errors)" in lines[0]
    match = LAST_LINE.fullmatch(lines[-1])
    assert match, lines[-1]
    lexical, vector, hybrid = (float(value) for value in match.groups())
    # q1 and q2 are found first by BM25; the judged q3 finds nothing lexically and counts as 0.
    assert lexical == pytest.approx(2 / 3, abs=1e-3)
    assert 0 <= vector <= 1 and 0 <= hybrid <= 1
    assert any(line.startswith("lexical ") for line in lines)
    assert not KnowledgeBase.objects.filter(kb_id__startswith="eval-").exists()


def test_eval_keep_then_reuse_and_limit_queries(tmp_path):
    beir = _beir(tmp_path, split="dev")
    err = io.StringIO()
    call_command("knowledge_eval", beir=str(beir), split="dev", keep=True, stdout=io.StringIO(), stderr=err)
    kb = KnowledgeBase.objects.get(kb_id__startswith="eval-")
    assert Document.objects.filter(kb=kb, status="ready").count() == 4
    assert Document.objects.filter(kb=kb, source_key=source_key_for("doc/4")).exists()

    out = io.StringIO()
    call_command(
        "knowledge_eval", beir=str(beir), split="dev", kb_id=kb.kb_id, limit_queries=1, stdout=out, stderr=err
    )
    assert "1 judged queries" in out.getvalue()
    assert LAST_LINE.fullmatch(out.getvalue().strip().splitlines()[-1]).group(1) == "1.000"
    assert KnowledgeBase.objects.filter(pk=kb.pk).exists()  # a reused knowledge base is never deleted


def test_eval_refuses_an_incomplete_directory(tmp_path):
    with pytest.raises(CommandError):
        call_command("knowledge_eval", beir=str(tmp_path), stdout=io.StringIO())
    with pytest.raises(CommandError):
        call_command("knowledge_eval", beir=str(_beir(tmp_path)), kb_id="kb-none", stdout=io.StringIO())
