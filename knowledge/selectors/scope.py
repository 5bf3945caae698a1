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

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.config import route_effective
from agent_runtime.identity import route_dependencies
from agent_runtime.selectors.routes import route_data_policy
from bailing.api.hashing import canonical_sha256
from bailing.versioned import VersionedCache, config_digest
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
    # The route's data policy (agent_runtime.data_policy), attached per read and never cached with
    # the scope nor part of its revision: a policy change applies to the next text, and leaves the
    # references already issued valid.
    data_policy: Any = None

    @property
    def configured(self) -> bool:
        """The route names at least one knowledge base."""
        return bool(self.config["kb_ids"])

    @property
    def searchable(self) -> bool:
        return bool(self.bases) or bool(self.missing)


# Built scopes by (route key, digest of the effective knowledge block, (kb_id, id, version) of every
# named base that exists). ``scope_cache.builds`` counts the builds.
scope_cache: VersionedCache[KnowledgeScope] = VersionedCache("knowledge_scope", max_entries=256)

# What the bearer statement reads with every prefetched route (agent_runtime.identity): the bases
# the route may name, with their versions (a superset when both kb_ids and kb_id are stored).
KNOWLEDGE_DEPENDENCY_SQL = """(SELECT coalesce(json_agg(json_build_array(kb.kb_id, kb.id, kb.version)
                                ORDER BY kb.kb_id), '[]'::json)
       FROM knowledge_knowledgebase kb
      WHERE kb.kb_id IN (SELECT jsonb_array_elements_text(
                CASE WHEN jsonb_typeof(r.knowledge -> 'kb_ids') = 'array' THEN r.knowledge -> 'kb_ids'
                     ELSE '[]'::jsonb END)
            UNION ALL SELECT r.knowledge ->> 'kb_id'))"""


def knowledge_scope(*, route: Any, effective: dict[str, Any] | None = None) -> KnowledgeScope:
    """The knowledge scope of ``route`` (a ``Route``): from the per-process cache while the route's
    effective knowledge block and the versions of its bases are unchanged (the bearer statement
    read them), else read with one query; with the route's data policy, if it has one.

    The result may be shared with other requests: treat it (and its ``bases``) as read-only.
    """
    scope = _knowledge_scope_cached(route=route, effective=effective)
    policy = route_data_policy(route)
    return scope if policy is None else dataclasses.replace(scope, data_policy=policy)


def _knowledge_scope_cached(*, route: Any, effective: dict[str, Any] | None) -> KnowledgeScope:
    effective = effective or route_effective(route)
    config = effective["knowledge"]
    kb_ids = list(config["kb_ids"])
    names = set(kb_ids)
    base_key = (effective["route_key"], config_digest(config))
    known = (route_dependencies(route) or {}).get("knowledge")
    if known is not None:
        cached = scope_cache.get((*base_key, tuple(sorted(d for d in known if d[0] in names))))
        if cached is not None:
            return cached
    found = {kb.kb_id: kb for kb in KnowledgeBase.objects.filter(kb_id__in=kb_ids)} if kb_ids else {}
    key = (*base_key, tuple(sorted((kb.kb_id, kb.pk, kb.version) for kb in found.values())))
    return scope_cache.get_or_build(key, lambda: _scope_build(effective, config, kb_ids, found))


def _scope_build(
    effective: dict[str, Any], config: dict[str, Any], kb_ids: list[str], found: dict[str, KnowledgeBase]
) -> KnowledgeScope:
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
