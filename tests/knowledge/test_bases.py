"""Knowledge bases as code (`knowledge_bases` in bailing_apply), locking, scope revisions, deletion."""

from __future__ import annotations

import pytest
from django.db import connection

from agent_runtime.config import ConfigError
from agent_runtime.models import Route
from agent_runtime.services.config_apply import config_apply
from bailing.audit.actor import Actor
from knowledge.config import validate_knowledge_base_config
from knowledge.models import Chunk, Document, KnowledgeBase, KnowledgeBaseStats, Posting
from knowledge.selectors.scope import knowledge_scope
from knowledge.services.bases import knowledge_base_delete, knowledge_base_set_enabled
from knowledge.vectors import VECTOR_TABLE
from tests.factories import ClientFactory, KnowledgeBaseFactory, RouteFactory, knowledge_document

ACTOR = Actor.system("test")


def _kb(**overrides):
    return {"kb_id": "handbook", "name": "Handbook", **overrides}


def _path_of(exc: pytest.ExceptionInfo) -> str:
    return exc.value.path


# --- validation ---------------------------------------------------------------------------------------
def test_local_provider_is_the_default_with_its_fixed_model():
    data = validate_knowledge_base_config(_kb(), path="knowledge_bases[0]")
    assert (data["embedding_provider"], data["embedding_model"], data["embedding_dim"]) == (
        "local",
        "all-MiniLM-L6-v2-onnx-int8",
        384,
    )
    assert data["writers"] == [] and data["enabled"] is True


@pytest.mark.parametrize(
    ("embedding", "path"),
    [
        ({"provider": "openai", "model": "m", "dim": 8}, "knowledge_bases[0].embedding.base_url"),
        (
            {"provider": "openai", "base_url": "https://e.example", "dim": 8},
            "knowledge_bases[0].embedding.model",
        ),
        (
            {"provider": "openai", "base_url": "http://e.example", "model": "m", "dim": 8},
            "knowledge_bases[0].embedding.base_url",
        ),
        (
            {"provider": "openai", "base_url": "https://e.example", "model": "m", "dim": 0},
            "knowledge_bases[0].embedding.dim",
        ),
        ({"provider": "openai", "api_key": "sk-x"}, "knowledge_bases[0].embedding.api_key"),
        ({"provider": "local", "dim": 768}, "knowledge_bases[0].embedding.dim"),
        ({"provider": "local", "base_url": "https://e.example"}, "knowledge_bases[0].embedding.base_url"),
        ({"provider": "none", "model": "m"}, "knowledge_bases[0].embedding.model"),
        ({"provider": "bm25"}, "knowledge_bases[0].embedding.provider"),
        ({"provider": "local", "colour": "blue"}, "knowledge_bases[0].embedding.colour"),
    ],
)
def test_embedding_settings_are_validated(embedding, path):
    with pytest.raises(ConfigError) as exc:
        validate_knowledge_base_config(_kb(embedding=embedding), path="knowledge_bases[0]")
    assert _path_of(exc) == path
    assert "sk-x" not in str(exc.value)


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"kb_id": "Hand Book", "name": "x"}, "knowledge_bases[0].kb_id"),
        ({"kb_id": "handbook"}, "knowledge_bases[0].name"),
        (_kb(writers=["Not Valid"]), "knowledge_bases[0].writers[0]"),
        (_kb(writers="shop"), "knowledge_bases[0].writers"),
        (_kb(enabled="yes"), "knowledge_bases[0].enabled"),
        (_kb(extra=1), "knowledge_bases[0].extra"),
    ],
)
def test_knowledge_base_fields_are_validated(item, path):
    with pytest.raises(ConfigError) as exc:
        validate_knowledge_base_config(item, path="knowledge_bases[0]")
    assert _path_of(exc) == path


@pytest.mark.parametrize("field", ["name", "description"])
@pytest.mark.parametrize("char", ["\u202a", "\u202e", "\u2066", "\u2069"], ids=repr)
def test_knowledge_base_names_refuse_bidi_controls(field, char):
    """Both are shown in the console; an override would reorder them (refused like control characters)."""
    with pytest.raises(ConfigError) as exc:
        validate_knowledge_base_config(_kb(**{field: f"Hand{char}book"}), path="knowledge_bases[0]")
    assert (_path_of(exc), exc.value.reason) == (f"knowledge_bases[0].{field}", "contains control characters")


@pytest.mark.parametrize(
    ("fusion", "path"),
    [
        ({"method": "max"}, "routes[0].knowledge.fusion.method"),
        ({"rrf_k": 0}, "routes[0].knowledge.fusion.rrf_k"),
        ({"lexical_weight": -1}, "routes[0].knowledge.fusion.lexical_weight"),
        ({"lexical_weight": 0, "vector_weight": 0}, "routes[0].knowledge.fusion"),
        ({"boost": 1}, "routes[0].knowledge.fusion.boost"),
    ],
)
def test_route_fusion_settings_are_validated(fusion, path):
    document = {
        "routes": [{"route_key": "r1", "name": "R", "knowledge": {"kb_id": "handbook", "fusion": fusion}}]
    }
    with pytest.raises(ConfigError) as exc:
        config_apply(document=document, dry_run=True, actor=ACTOR)
    assert _path_of(exc) == path


# --- apply ----------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_apply_creates_statistics_and_hnsw_index_then_is_idempotent():
    ClientFactory(app_id="shop")
    document = {"knowledge_bases": [_kb(writers=["shop"])]}
    plan = config_apply(document=document, dry_run=False, actor=ACTOR)
    assert [(i.kind, i.action) for i in plan.items] == [("knowledge_base", "created")]
    kb = KnowledgeBase.objects.get(kb_id="handbook")
    assert list(kb.writers.values_list("app_id", flat=True)) == ["shop"]
    assert KnowledgeBaseStats.objects.filter(kb=kb).exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [f"knowledge_vec_kb_{kb.pk}"])
        (indexdef,) = cursor.fetchone()
    assert "hnsw" in indexdef and "vector_cosine_ops" in indexdef and "384" in indexdef

    again = config_apply(document=document, dry_run=False, actor=ACTOR)
    assert [i.action for i in again.items] == ["unchanged"]
    renamed = config_apply(
        document={"knowledge_bases": [_kb(name="Staff handbook")]}, dry_run=False, actor=ACTOR
    )
    assert renamed.items[0].action == "updated"
    assert set(renamed.items[0].fields) == {"name", "writers"}
    assert not KnowledgeBase.objects.get(kb_id="handbook").writers.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [True, False])
def test_embedding_is_locked_after_creation_and_nothing_is_written(dry_run):
    config_apply(document={"knowledge_bases": [_kb()]}, dry_run=False, actor=ACTOR)
    document = {
        "knowledge_bases": [_kb(name="Renamed", embedding={"provider": "none"})],
        "routes": [{"route_key": "r1", "name": "R", "knowledge": {"kb_id": "handbook"}}],
    }
    with pytest.raises(ConfigError) as exc:
        config_apply(document=document, dry_run=dry_run, actor=ACTOR)
    assert _path_of(exc) == "knowledge_bases[0].embedding"
    kb = KnowledgeBase.objects.get(kb_id="handbook")
    assert (kb.name, kb.embedding_provider) == ("Handbook", "local")
    assert not Route.objects.filter(route_key="r1").exists()


@pytest.mark.django_db
def test_unknown_writer_refuses_the_whole_document():
    with pytest.raises(ConfigError) as exc:
        config_apply(document={"knowledge_bases": [_kb(writers=["ghost"])]}, dry_run=False, actor=ACTOR)
    assert _path_of(exc) == "knowledge_bases[0].writers"
    assert not KnowledgeBase.objects.exists()


@pytest.mark.django_db
def test_route_naming_a_missing_knowledge_base_gets_a_note():
    document = {"routes": [{"route_key": "r1", "name": "R", "knowledge": {"kb_ids": ["nope", "handbook"]}}]}
    document["knowledge_bases"] = [_kb()]
    plan = config_apply(document=document, dry_run=False, actor=ACTOR)
    route_item = next(item for item in plan.items if item.kind == "route")
    assert route_item.notes == ["knowledge names knowledge bases that do not exist: nope"]


# --- scope --------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_scope_revision_tracks_route_settings_and_knowledge_base_state():
    kb = KnowledgeBaseFactory(kb_id="handbook")
    route = RouteFactory(knowledge={"kb_ids": ["handbook", "missing"]})
    first = knowledge_scope(route=route)
    assert [b.kb_id for b in first.bases] == ["handbook"] and first.missing == ["missing"]
    assert knowledge_scope(route=route).revision == first.revision

    knowledge_base_set_enabled(kb=kb, enabled=False, actor=ACTOR)
    disabled = knowledge_scope(route=route)
    assert disabled.revision != first.revision and disabled.disabled == ["handbook"] and not disabled.bases
    knowledge_base_set_enabled(kb=kb, enabled=True, actor=ACTOR)
    assert knowledge_scope(route=route).revision == first.revision

    route.knowledge = {"kb_ids": ["handbook", "missing"], "top_k": 6}
    route.save()
    assert knowledge_scope(route=route).revision != first.revision


@pytest.mark.django_db
def test_delete_removes_documents_chunks_postings_vectors_and_index():
    kb = KnowledgeBaseFactory()
    knowledge_document(kb, "a", "Refunds", "Refunds are paid within 14 days.")
    other = KnowledgeBaseFactory()
    knowledge_document(other, "b", "Shipping", "Parcels ship the same day.")
    pk = kb.pk
    knowledge_base_delete(kb=kb, actor=ACTOR)
    assert not Document.objects.filter(kb_id=pk).exists()
    assert not Chunk.objects.filter(kb_id=pk).exists()
    assert not Posting.objects.filter(kb_id=pk).exists()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {VECTOR_TABLE} WHERE kb_id = %s", [pk])
        assert cursor.fetchone()[0] == 0
        cursor.execute(f"SELECT count(*) FROM {VECTOR_TABLE} WHERE kb_id = %s", [other.pk])
        assert cursor.fetchone()[0] == 1
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = %s", [f"knowledge_vec_kb_{pk}"])
        assert cursor.fetchone()[0] == 0
