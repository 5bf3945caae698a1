"""What an agent learns about a workspace: the workspace list and the runtime profile (bootstrap).

Both read the route's effective configuration and the authorized catalog
(:mod:`agent_runtime.selectors.catalog`); the route gate itself is :mod:`agent_runtime.selectors.routes`.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.config import route_effective
from agent_runtime.identity import AgentIdentity, route_dependencies
from agent_runtime.models import Route
from agent_runtime.selectors.catalog import Catalog, ProviderMap, load_providers, route_catalog
from agent_runtime.selectors.routes import routes_for_identity
from bailing.api.hashing import canonical_sha256

PROFILE_SCHEMA = "bailing.agent-runtime-profile.v1"
WORKSPACES_SCHEMA = "bailing.agent-workspaces.v1"

GOVERNANCE_FIXED = {
    "planner": "local_agent",
    "execution": "bailinghub_governed",
    "authorization": "server_revalidated",
    "knowledge_trust": "reference_only",
    "tool_results_trust": "untrusted_data",
    "hidden_reasoning_sync": False,
}


def _instructions(effective: dict[str, Any]) -> str:
    """Only ``target_config.system_prompt`` and ``agent_client.instructions`` — nothing else of the
    route's config ever reaches an agent (spec "Bootstrap")."""
    parts = []
    if effective["system_prompt"]:
        parts.append(effective["system_prompt"])
    if effective["agent_client"]["instructions"]:
        parts.append(effective["agent_client"]["instructions"])
    return "\n\n".join(parts)


def _knowledge_block(knowledge_cfg: dict[str, Any]) -> dict[str, Any]:
    """The profile's ``knowledge`` block: always the six fields of the spec's shape, so clients read
    one schema whether or not the workspace has knowledge (``enabled: false, sources: 0`` and the
    route's effective settings otherwise)."""
    return {
        "enabled": bool(knowledge_cfg["kb_ids"]),
        "sources": len(knowledge_cfg["kb_ids"]),
        "mode": knowledge_cfg["inject"],
        "top_k": knowledge_cfg["top_k"],
        "max_docs": knowledge_cfg["max_docs"],
        "page_boost": knowledge_cfg["page_boost"],
    }


def workspace_profile(
    route: Route,
    *,
    identity: AgentIdentity | None = None,
    effective: dict[str, Any] | None = None,
    providers: ProviderMap | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """The ``bailing.agent-runtime-profile.v1`` body for ``route`` as ``identity`` sees it.

    The capabilities block depends on the session (subject-required tools are hidden without a
    trusted subject); ``identity=None`` gives the route-level view the console shows. ``effective``
    and ``providers`` may be passed when the caller already has them, and so may the ``catalog`` of
    this route and identity (a turn builds it once for the profile and its active tools).

    The profile revision is the SHA-256 of the canonical JSON of the schema id, the workspace block
    and the profile body, so any change an agent could observe in its profile changes the revision.
    The capabilities block is empty (with a revision that still binds the route's governance) when
    the route exposes no business tools, so a knowledge-only workspace bootstraps.
    """
    effective = effective if effective is not None else route_effective(route)
    workspace = {"route": route.route_key, "name": effective["name"], "description": effective["description"]}
    memory_cfg = effective["memory"]
    body = {
        "instructions": _instructions(effective),
        "memory": {
            "recent_messages": memory_cfg["recent_messages"],
            "recent_budget_chars": memory_cfg["recent_budget_chars"],
            "per_message_chars": memory_cfg["per_message_chars"],
            "summary_enabled": memory_cfg["summary_enabled"],
            "summary_max_chars": memory_cfg["summary_max_chars"],
        },
        "knowledge": _knowledge_block(effective["knowledge"]),
        "governance": {
            **GOVERNANCE_FIXED,
            "max_tool_calls": effective["tools"]["max_calls"],
            "permission": effective["permission"],
        },
    }
    revision = canonical_sha256({"schema": PROFILE_SCHEMA, "workspace": workspace, "profile": body})
    if catalog is None:
        catalog = route_catalog(route=route, identity=identity, effective=effective, providers=providers)
    return {
        "schema_version": PROFILE_SCHEMA,
        "workspace": workspace,
        "profile": {"revision": revision, **body},
        "capabilities": catalog.capabilities(),
    }


def workspaces_for_identity(identity: AgentIdentity) -> dict[str, Any]:
    """``bailing.agent-workspaces.v1``: every workspace the gate admits, in route_key order.

    The routes and their provider versions come with the identity (one statement); catalogs are
    reused from the per-process cache while those versions hold. Without them, the tool providers
    of every listed workspace are read in one query, so the list costs a fixed number of queries
    however many workspaces a session has.
    """
    admitted = routes_for_identity(identity)
    if all(route_dependencies(access.route) is not None for access in admitted):
        # The bearer statement read every route's provider versions: each catalog comes from the
        # cache, or loads its own providers when it changed.
        providers = None
    else:
        providers = load_providers(
            source["provider"]
            for access in admitted
            if access.effective["tools"]["agent_direct"]["enabled"]
            for source in access.effective["tools"]["sources"]
        )
    items = []
    for access in admitted:
        route, effective = access.route, access.effective
        profile = workspace_profile(route, identity=identity, effective=effective, providers=providers)
        items.append(
            {
                "route": route.route_key,
                "name": effective["name"],
                "description": effective["description"],
                "profile": (route.run_config or {}).get("profile", ""),
                "permission": effective["permission"],
                "profile_revision": profile["profile"]["revision"],
                "capability_revision": profile["capabilities"]["revision"],
                "authorized_tool_count": profile["capabilities"]["authorized_total"],
                "active_tool_limit": profile["capabilities"]["active_limit"],
            }
        )
    return {"schema_version": WORKSPACES_SCHEMA, "workspaces": items}
