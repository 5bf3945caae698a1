"""Extension ports: what the agent runtime asks of the apps above it, without importing them.

A turn carries knowledge, but knowledge is an app above the runtime. The runtime declares what it
needs here (:class:`TurnKnowledgeProvider`) and the knowledge app registers an implementation in
its ``ready()``; the dependency points one way, upward apps → ``agent_runtime``. The config
document's sections are another port (:mod:`agent_runtime.config.document`), and the console's
workspace page takes sections from the apps above (:func:`workspace_section_register`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent_runtime.identity import AgentIdentity
    from agent_runtime.selectors.routes import WorkspaceAccess


@dataclass(frozen=True)
class TurnKnowledgeContext:
    """What a turn's frozen context says about knowledge.

    Legacy (inline) turns fill ``knowledge`` and ``knowledge_refs``; an ``on_demand`` turn leaves
    both empty and carries ``delivery`` (``context.knowledge_delivery``). ``audit`` is the summary for
    the turn's audit event: statuses and counts, never text.
    """

    knowledge: list[dict[str, Any]] = field(default_factory=list)
    knowledge_refs: list[dict[str, Any]] = field(default_factory=list)
    delivery: dict[str, Any] | None = None
    audit: dict[str, Any] = field(default_factory=dict)


class PreparedTurnKnowledge(Protocol):
    """Knowledge retrieved for a turn, before its run exists."""

    def render(self, *, identity: AgentIdentity, run_id: uuid.UUID) -> TurnKnowledgeContext:
        """The context block, once the run id is known (on-demand hints are bound to the run)."""


class TurnKnowledgeProvider(Protocol):
    """Retrieves a turn's knowledge. ``prepare`` runs before the turn's transaction opens (embedding a
    query may call the network, and no row lock may be held meanwhile); retrieval failure is a status
    in the result, never a failed turn."""

    def prepare(self, *, access: WorkspaceAccess, query: str, delivery: str | None) -> PreparedTurnKnowledge:
        """Retrieve for ``query`` in the workspace; ``delivery`` is ``"on_demand"`` or None (inline)."""


_turn_knowledge: TurnKnowledgeProvider | None = None


def turn_knowledge_register(provider: TurnKnowledgeProvider) -> None:
    """Install the turn knowledge provider (the knowledge app does, in its ``ready()``)."""
    global _turn_knowledge
    _turn_knowledge = provider


def turn_knowledge() -> TurnKnowledgeProvider:
    """The installed provider. The knowledge app is part of every installation; a hub without it is
    misconfigured, which is said at the first turn rather than hidden as "no knowledge"."""
    if _turn_knowledge is None:
        raise RuntimeError("no turn knowledge provider is registered (is the knowledge app installed?)")
    return _turn_knowledge


# --- console: sections of the workspace page ------------------------------------------------------------
# ``builder(route=Route, effective=dict, user=User) -> bailing.ui.sections.Section | None``: what an
# app above adds to the console's workspace page (the knowledge app: the route's knowledge bases).
# None leaves the section out (e.g. the user may not read what it shows).
WorkspaceSectionBuilder = Callable[..., Any]
_workspace_sections: dict[str, WorkspaceSectionBuilder] = {}


def workspace_section_register(name: str, builder: WorkspaceSectionBuilder) -> None:
    """Add a section to the console's workspace page (names are unique; twice is a bug)."""
    if name in _workspace_sections:
        raise ValueError(f"workspace section {name!r} is registered already")
    _workspace_sections[name] = builder


def workspace_sections(*, route: Any, effective: dict[str, Any], user: Any) -> list[Any]:
    """Every registered section for ``route`` that ``user`` may see, in their declared order."""
    sections = [
        builder(route=route, effective=effective, user=user) for builder in _workspace_sections.values()
    ]
    return sorted((section for section in sections if section is not None), key=lambda section: section.order)
