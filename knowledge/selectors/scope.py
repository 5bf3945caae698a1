"""A route's knowledge scope and its revision (docs/protocol.md "Scope and document revisions").

The scope is what a route may retrieve from: its knowledge settings (``kb_ids``, ``top_k``,
``min_score``, ``inject``, ``max_docs``, ``page_boost``, ``fusion``) and, for each named knowledge
base, whether it exists and is enabled and which embedding model and dimension it has.
``knowledge_scope_revision`` is the SHA-256 of that canonical JSON: it changes whenever any of
them changes, which makes references issued under the old scope fail with 409
``knowledge_scope_changed`` and tells hosts that cached hints are stale.

Knowledge bases that are disabled are left out of retrieval (an administrator's decision, not a
failure). A named knowledge base that does not exist is a misconfiguration and counts as a failing
source, so the search status becomes ``partial`` or ``unavailable`` rather than an empty ``ok``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_runtime.config import route_effective
from bailing.api.hashing import canonical_sha256
from knowledge.models import KnowledgeBase

KNOWLEDGE_SCOPE_SCHEMA = "bailing.agent-knowledge-scope.v1"


@dataclass(frozen=True)
class KnowledgeScope:
    route_key: str
    config: dict[str, Any]  # the route's effective ``knowledge`` block
    bases: list[KnowledgeBase] = field(default_factory=list)  # enabled, in kb_ids order
    missing: list[str] = field(default_factory=list)  # named but not found
    disabled: list[str] = field(default_factory=list)  # named but disabled
    revision: str = ""

    @property
    def configured(self) -> bool:
        """The route names at least one knowledge base."""
        return bool(self.config["kb_ids"])

    @property
    def searchable(self) -> bool:
        return bool(self.bases) or bool(self.missing)


def knowledge_scope(*, route: Any, effective: dict[str, Any] | None = None) -> KnowledgeScope:
    """The knowledge scope of ``route`` (a ``Route``), read with one query."""
    effective = effective or route_effective(route)
    config = effective["knowledge"]
    kb_ids = list(config["kb_ids"])
    found = {kb.kb_id: kb for kb in KnowledgeBase.objects.filter(kb_id__in=kb_ids)} if kb_ids else {}
    state = []
    bases, missing, disabled = [], [], []
    for kb_id in kb_ids:
        kb = found.get(kb_id)
        if kb is None:
            missing.append(kb_id)
            state.append({"kb_id": kb_id, "exists": False})
            continue
        state.append(
            {
                "kb_id": kb_id,
                "exists": True,
                "enabled": kb.enabled,
                "provider": kb.embedding_provider,
                "model": kb.embedding_model,
                "dim": kb.embedding_dim,
            }
        )
        (bases if kb.enabled else disabled).append(kb)
    revision = canonical_sha256(
        {
            "schema": KNOWLEDGE_SCOPE_SCHEMA,
            "route": effective["route_key"],
            "knowledge": config,
            "bases": state,
        }
    )
    return KnowledgeScope(
        route_key=effective["route_key"],
        config=config,
        bases=bases,
        missing=missing,
        disabled=[kb.kb_id for kb in disabled],
        revision=revision,
    )
