"""Workspaces for agents: the route gate, the workspace list and the runtime profile (bootstrap).

Every agent request revalidates access from scratch (``workspace_resolve``): nothing is cached
between requests, so disabling a route or a client, narrowing an allowlist or an audience takes
effect on the very next call.

Gate order (research §C.1, as the foundation issue fixes it): route key syntax (400
``invalid_route``) → client and session allowlists (403 ``route_not_allowed``) → route exists and is
enabled (404 ``route_unavailable``) → audience policy (403 ``audience_not_allowed``) →
``agent_client.enabled`` for the runtime surfaces (403 ``agent_client_disabled``). The allowlists
come before existence so a session cannot probe which routes exist outside its grant.
"""

from __future__ import annotations

import re
from typing import Any

from agent_runtime import errors
from agent_runtime.config import route_effective
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import Route
from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS
from agent_runtime.selectors.catalog import ProviderMap, load_providers, route_catalog
from bailing.api.hashing import canonical_sha256

PROFILE_SCHEMA = "bailing.agent-runtime-profile.v1"
WORKSPACES_SCHEMA = "bailing.agent-workspaces.v1"
_AGENT_ROUTE_RE = re.compile(AGENT_ROUTE)

GOVERNANCE_FIXED = {
    "planner": "local_agent",
    "execution": "bailinghub_governed",
    "authorization": "server_revalidated",
    "knowledge_trust": "reference_only",
    "tool_results_trust": "untrusted_data",
    "hidden_reasoning_sync": False,
}


def audience_admits(audience: dict[str, Any], identity: AgentIdentity) -> bool:
    """Does the route's audience policy admit this agent session's principal?

    With the gate disabled everyone is admitted. With it enabled, every non-empty list is a
    condition that must hold (an empty list constrains nothing): ``clients`` contains the client's
    app_id; ``channels`` contains ``agent:<app_id>``; ``tenants`` contains the principal's tenant;
    ``roles`` shares a role with the principal; ``principals`` contains the principal id;
    ``audiences`` contains the principal's audience. A principal without an id is anonymous and is
    admitted only when ``anonymous`` is true.
    """
    if not audience.get("enabled"):
        return True
    principal = identity.session.principal or {}
    app_id = identity.client.app_id
    if not principal.get("id") and not audience.get("anonymous"):
        return False
    checks = [
        ("clients", lambda items: app_id in items),
        ("channels", lambda items: f"agent:{app_id}" in items),
        ("tenants", lambda items: principal.get("tenant") in items),
        ("roles", lambda items: bool(set(principal.get("roles") or []) & set(items))),
        ("principals", lambda items: principal.get("id") in items),
        ("audiences", lambda items: principal.get("audience") in items),
    ]
    return all(check(audience[key]) for key, check in checks if audience.get(key))


def workspace_resolve(*, identity: AgentIdentity, route_key: str, runtime: bool = True) -> Route:
    """Return the route ``route_key`` if this agent session may use it, else raise the gate's error.

    ``runtime=False`` skips the ``agent_client.enabled`` check, for the older tool surface that
    stays available when the Agent Client Runtime is switched off for a route.
    """
    if (
        not isinstance(route_key, str)
        or not _AGENT_ROUTE_RE.fullmatch(route_key)
        or route_key in RESERVED_ROUTE_KEYS
    ):
        raise errors.InvalidRoute()
    if not identity.client.allows_route(route_key) or route_key not in (
        identity.session.allowed_routes or []
    ):
        raise errors.RouteNotAllowed()
    route = Route.objects.filter(route_key=route_key, enabled=True).first()
    if route is None:
        raise errors.RouteUnavailable()
    effective = route_effective(route)
    if not audience_admits(effective["audience"], identity):
        raise errors.AudienceNotAllowed()
    if runtime and not effective["agent_client"]["enabled"]:
        raise errors.AgentClientDisabled()
    return route


def _instructions(effective: dict[str, Any]) -> str:
    """Only ``target_config.system_prompt`` and ``agent_client.instructions`` — nothing else of the
    route's config ever reaches an agent (spec "Bootstrap")."""
    parts = []
    if effective["system_prompt"]:
        parts.append(effective["system_prompt"])
    if effective["agent_client"]["instructions"]:
        parts.append(effective["agent_client"]["instructions"])
    return "\n\n".join(parts)


def workspace_capabilities(
    *,
    route: Route,
    effective: dict[str, Any],
    identity: AgentIdentity | None,
    providers: ProviderMap | None = None,
) -> dict[str, Any]:
    """The bootstrap ``capabilities`` block: revision and counts of the authorized catalog.

    Empty (with a revision that still binds the route's governance) when the route exposes no
    business tools, so a knowledge-only workspace bootstraps (research §H15).
    """
    catalog = route_catalog(route=route, identity=identity, effective=effective, providers=providers)
    return catalog.capabilities()


def workspace_profile(
    route: Route, *, identity: AgentIdentity | None = None, providers: ProviderMap | None = None
) -> dict[str, Any]:
    """The ``bailing.agent-runtime-profile.v1`` body for ``route`` as ``identity`` sees it.

    The capabilities block depends on the session (subject-required tools are hidden without a
    trusted subject); ``identity=None`` gives the route-level view the console shows.

    The profile revision is the SHA-256 of the canonical JSON of the schema id, the workspace block
    and the profile body, so any change an agent could observe in its profile changes the revision.
    """
    effective = route_effective(route)
    workspace = {"route": route.route_key, "name": effective["name"], "description": effective["description"]}
    knowledge_cfg = effective["knowledge"]
    if knowledge_cfg["kb_ids"]:
        knowledge = {
            "enabled": True,
            "sources": len(knowledge_cfg["kb_ids"]),
            "mode": knowledge_cfg["inject"],
            "top_k": knowledge_cfg["top_k"],
            "max_docs": knowledge_cfg["max_docs"],
            "page_boost": knowledge_cfg["page_boost"],
        }
    else:
        knowledge = {"enabled": False, "sources": 0}
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
        "knowledge": knowledge,
        "governance": {
            **GOVERNANCE_FIXED,
            "max_tool_calls": effective["tools"]["max_calls"],
            "permission": effective["permission"],
        },
    }
    revision = canonical_sha256({"schema": PROFILE_SCHEMA, "workspace": workspace, "profile": body})
    return {
        "schema_version": PROFILE_SCHEMA,
        "workspace": workspace,
        "profile": {"revision": revision, **body},
        "capabilities": workspace_capabilities(
            route=route, effective=effective, identity=identity, providers=providers
        ),
    }


def workspaces_for_identity(identity: AgentIdentity) -> dict[str, Any]:
    """``bailing.agent-workspaces.v1``: every workspace the gate admits, in route_key order.

    The tool providers of every listed workspace are read in one query, so the list costs a fixed
    number of queries however many workspaces a session has.
    """
    keys = set(identity.session.allowed_routes or [])
    routes = Route.objects.filter(route_key__in=keys, enabled=True).order_by("route_key")
    admitted = []
    for route in routes:
        if not identity.client.allows_route(route.route_key):
            continue
        effective = route_effective(route)
        if not _AGENT_ROUTE_RE.fullmatch(route.route_key) or route.route_key in RESERVED_ROUTE_KEYS:
            continue
        if not effective["agent_client"]["enabled"] or not audience_admits(effective["audience"], identity):
            continue
        admitted.append((route, effective))
    providers = load_providers(
        source["provider"]
        for _route, effective in admitted
        if effective["tools"]["agent_direct"]["enabled"]
        for source in effective["tools"]["sources"]
    )
    items = []
    for route, effective in admitted:
        profile = workspace_profile(route, identity=identity, providers=providers)
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
