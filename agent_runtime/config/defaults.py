"""Defaults applied when a route is read, and the effective view every reader uses.

Validation (:mod:`agent_runtime.config.routes`) stores the JSON blocks exactly as written; the
defaults are applied here, on read, so a later change of a default reaches every route that did not
set it. Bootstrap, turns, the catalog and the console all read :func:`route_effective`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# --- Defaults applied when reading (docs/protocol.md "Workspaces") -------------------------------------
AUDIENCE_LIST_KEYS = ("keywords", "clients", "channels", "tenants", "roles", "principals", "audiences")
AUDIENCE_DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "auto": False,
    "priority": 0,
    **{key: [] for key in AUDIENCE_LIST_KEYS},
    "anonymous": False,
}
MEMORY_DEFAULTS: dict[str, Any] = {
    "recent_messages": 12,
    "recent_budget_chars": 8000,
    "per_message_chars": 2000,
    "summary_enabled": False,
    "summary_trigger_chars": 4000,
    "summary_keep_recent": 6,
    "summary_max_chars": 1200,
    "summary_model": None,
}
# Hybrid retrieval fusion (docs/protocol.md "Knowledge retrieval"): reciprocal rank fusion with k = 60
# by default, or "normalized" (min-max normalised lane scores, weighted sum). Weights apply to both
# methods.
FUSION_DEFAULTS: dict[str, Any] = {"method": "rrf", "rrf_k": 60, "lexical_weight": 1.0, "vector_weight": 1.0}
KNOWLEDGE_DEFAULTS: dict[str, Any] = {
    "top_k": 5,
    "min_score": 0.35,
    "inject": "chunk",
    "max_docs": 4,
    "page_boost": False,
    "fusion": FUSION_DEFAULTS,
}
# Semantic tool retrieval is opt-in per source: without it capability search stays lexical and
# deterministic (spec: one source lacking semantic retrieval makes the whole search lexical).
RETRIEVAL_DEFAULTS: dict[str, Any] = {"enabled": False, "min_score": 0.3, "max_tools": 15}
TOOLS_DEFAULTS: dict[str, Any] = {"max_calls": 5}
AGENT_CLIENT_DEFAULTS: dict[str, Any] = {"enabled": False, "instructions": "", "active_tool_limit": 8}


# --- Effective view -----------------------------------------------------------------------------------
def _field(route: Any, name: str, default: Any = None) -> Any:
    if isinstance(route, Mapping):
        return route.get(name, default)
    return getattr(route, name, default)


def _block(route: Any, name: str) -> Mapping:
    value = _field(route, name)
    return value if isinstance(value, Mapping) else {}


def _effective_sources(tools: Mapping) -> list[dict]:
    sources = []
    for source in tools.get("sources") or []:
        sources.append(
            {
                "provider": source["provider"],
                "allow": list(source["allow"]),
                "subject_field": source.get("subject_field"),
                "retrieval": {**RETRIEVAL_DEFAULTS, **(source.get("retrieval") or {})},
            }
        )
    return sources


def _effective_agent_direct(direct: Mapping) -> dict:
    writes = list(direct.get("write_tools") or [])
    unattended = direct.get("unattended_write_tools")
    if direct.get("force_approval_tools") is not None:
        force = list(direct["force_approval_tools"])
    elif unattended is not None:
        # Deprecated meaning: every direct write needed approval unless listed as unattended. The
        # equivalent strict list is the difference, in write_tools order (spec "Write and approval
        # semantics"; docs/protocol.md "Approval policy").
        force = [name for name in writes if name not in unattended]
    else:
        force = []
    return {
        "enabled": bool(direct.get("enabled", False)),
        "write_tools": writes,
        "force_approval_tools": force,
        "deprecated_unattended_write_tools": list(unattended or []),
    }


def route_effective(route: Any) -> dict:
    """The route with every default applied, as bootstrap, turns and the console read it.

    Accepts a ``Route`` or a dict of its columns (e.g. :func:`validate_route_config`'s result). Only
    ``target_config.system_prompt`` is taken from the target configuration: model, credential and
    other adapter settings never leave the hub.
    """
    target_config = _block(route, "target_config")
    knowledge = _block(route, "knowledge")
    tools = _block(route, "tools")
    agent_client = _block(route, "agent_client")

    if knowledge.get("kb_ids") is not None:
        kb_ids = list(knowledge["kb_ids"])
    elif knowledge.get("kb_id"):
        kb_ids = [knowledge["kb_id"]]
    else:
        kb_ids = []

    audience = {**AUDIENCE_DEFAULTS, **_block(route, "audience")}
    for key in AUDIENCE_LIST_KEYS:
        audience[key] = list(audience[key])

    system_info = agent_client.get("system_info")
    if isinstance(system_info, Mapping):
        system_info = {
            "name": system_info.get("name", ""),
            "summary": system_info.get("summary", ""),
            "domains": list(system_info.get("domains", [])),
            "boundaries": list(system_info.get("boundaries", [])),
        }
    else:
        system_info = None

    return {
        "route_key": _field(route, "route_key"),
        "name": _field(route, "name"),
        "description": _field(route, "description", "") or "",
        "enabled": bool(_field(route, "enabled", True)),
        "permission": _field(route, "permission") or "full",
        "system_prompt": target_config.get("system_prompt", ""),
        "audience": audience,
        "memory": {**MEMORY_DEFAULTS, **_block(route, "memory")},
        "knowledge": {
            "kb_ids": kb_ids,
            **{key: knowledge.get(key, value) for key, value in KNOWLEDGE_DEFAULTS.items()},
            "fusion": {**FUSION_DEFAULTS, **(knowledge.get("fusion") or {})},
        },
        "tools": {
            "sources": _effective_sources(tools),
            "max_calls": tools.get("max_calls", TOOLS_DEFAULTS["max_calls"]),
            "agent_direct": _effective_agent_direct(tools.get("agent_direct") or {}),
            # Where new approvals are announced ({type, url?, to?}); None = the hub console only.
            "approval": dict(tools["approval"]) if isinstance(tools.get("approval"), Mapping) else None,
        },
        "agent_client": {
            "enabled": bool(agent_client.get("enabled", AGENT_CLIENT_DEFAULTS["enabled"])),
            "instructions": agent_client.get("instructions", AGENT_CLIENT_DEFAULTS["instructions"]),
            "active_tool_limit": agent_client.get(
                "active_tool_limit", AGENT_CLIENT_DEFAULTS["active_tool_limit"]
            ),
            "system_info": system_info,
        },
    }
