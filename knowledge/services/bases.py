"""Knowledge base configuration: create/update from config, enable/disable, delete.

``config_apply`` (``bailing_apply``) calls :func:`knowledge_base_upsert` inside its transaction.
The embedding provider, model, dimension and endpoint are locked once a knowledge base exists: every
stored vector belongs to one model, so changing them is refused with a ``ConfigError`` (the whole
apply rolls back); create a new knowledge base instead. Creating a knowledge base also creates its
lexical statistics row and, where pgvector is present and the KB embeds, its HNSW index.
"""

from __future__ import annotations

from django.db import transaction

from agent_runtime.config import ConfigError
from agent_runtime.models import Client
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from knowledge.models import KnowledgeBase, KnowledgeBaseStats
from knowledge.vectors import vector_index_drop, vector_index_ensure, vector_storage_ready

KB_CONFIG_FIELDS = ("name", "description", "enabled")
KB_LOCKED_FIELDS = ("embedding_provider", "embedding_model", "embedding_dim", "embedding_config")


def _writers(app_ids: list[str], *, path: str) -> list[Client]:
    clients = {client.app_id: client for client in Client.objects.filter(app_id__in=app_ids)}
    missing = [app_id for app_id in app_ids if app_id not in clients]
    if missing:
        raise ConfigError(path, "names clients that do not exist: " + ", ".join(missing))
    return [clients[app_id] for app_id in app_ids]


def knowledge_base_diff(instance: KnowledgeBase | None, data: dict) -> list[str]:
    """Changed field names (``writers`` included) between a stored KB and validated config."""
    fields = [*KB_CONFIG_FIELDS, *KB_LOCKED_FIELDS]
    if instance is None:
        return [*fields, "writers"]
    changed = [name for name in fields if getattr(instance, name) != data[name]]
    current = sorted(instance.writers.values_list("app_id", flat=True))
    if current != sorted(data["writers"]):
        changed.append("writers")
    return changed


def knowledge_base_check_locked(changed: list[str], *, path: str) -> None:
    """Refuse a change of the locked embedding fields (also in a dry run)."""
    if any(name in changed for name in KB_LOCKED_FIELDS):
        raise ConfigError(
            f"{path}.embedding",
            "the embedding provider, model, dimension and endpoint are locked after creation; "
            "create a new knowledge base",
        )


def knowledge_base_upsert(
    *, data: dict, actor: Actor, path: str = "knowledge_bases"
) -> tuple[KnowledgeBase, str, list[str]]:
    """Create or update the knowledge base ``data["kb_id"]`` (``validate_knowledge_base_config``).

    Returns ``(kb, "created" | "updated" | "unchanged", changed field names)``. Raises ``ConfigError``
    when a locked embedding field would change or a writer is not a known client.
    """
    writers = _writers(data["writers"], path=f"{path}.writers")
    with transaction.atomic():
        kb = KnowledgeBase.objects.select_for_update().filter(kb_id=data["kb_id"]).first()
        if kb is None:
            kb = KnowledgeBase.objects.create(
                kb_id=data["kb_id"], **{name: data[name] for name in (*KB_CONFIG_FIELDS, *KB_LOCKED_FIELDS)}
            )
            kb.writers.set(writers)
            KnowledgeBaseStats.objects.create(kb=kb)
            if kb.has_embeddings and vector_storage_ready():
                vector_index_ensure(kb_pk=kb.pk, dim=kb.embedding_dim)
            changed = knowledge_base_diff(None, data)
            _audit("created", kb, changed, actor)
            return kb, "created", changed
        changed = knowledge_base_diff(kb, data)
        knowledge_base_check_locked(changed, path=path)
        if not changed:
            return kb, "unchanged", []
        for name in KB_CONFIG_FIELDS:
            setattr(kb, name, data[name])
        kb.save(update_fields=[*KB_CONFIG_FIELDS, "updated_at"])
        if "writers" in changed:
            kb.writers.set(writers)
        _audit("updated", kb, changed, actor)
        return kb, "updated", changed


def knowledge_base_set_enabled(*, kb: KnowledgeBase, enabled: bool, actor: Actor) -> bool:
    """Enable or disable a knowledge base (console). Returns whether anything changed."""
    with transaction.atomic():
        kb = KnowledgeBase.objects.select_for_update().get(pk=kb.pk)
        if kb.enabled == enabled:
            return False
        kb.enabled = enabled
        kb.save(update_fields=["enabled", "updated_at"])
        _audit("enabled" if enabled else "disabled", kb, ["enabled"], actor)
        return True


def knowledge_base_delete(*, kb: KnowledgeBase, actor: Actor) -> None:
    """Delete a knowledge base with its documents, chunks, postings, vectors and index."""
    with transaction.atomic():
        kb = KnowledgeBase.objects.select_for_update().get(pk=kb.pk)
        kb_pk, kb_id = kb.pk, kb.kb_id
        kb.delete()
        if vector_storage_ready():
            vector_index_drop(kb_pk=kb_pk)
        audit_record(
            action="knowledge.base.deleted",
            actor=actor,
            target_type="knowledge_base",
            target_id=kb_id,
            data={},
        )


def _audit(verb: str, kb: KnowledgeBase, changed: list[str], actor: Actor) -> None:
    audit_record(
        action=f"knowledge.base.{verb}",
        actor=actor,
        target_type="knowledge_base",
        target_id=kb.kb_id,
        data={"fields": changed},
    )
