"""Knowledge for agent turns: the knowledge app's side of the runtime's turn-knowledge port.

Legacy turns get inline ``knowledge``/``knowledge_refs`` (chunk or doc mode); an ``on_demand`` turn
gets ``context.knowledge_delivery`` with hints bound to the turn's run (docs/protocol.md "Knowledge in
turns"). Scope, retrieval and the texts are the knowledge orchestration's
(:mod:`knowledge.services.agent_knowledge`), as for every other surface. Retrieval happens in
:meth:`TurnKnowledgeService.prepare`, before the turn's transaction; :meth:`PreparedKnowledge.render`
only signs and fits, once the run id exists.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.identity import AgentIdentity
from agent_runtime.ports import TurnKnowledgeContext
from agent_runtime.selectors.routes import WorkspaceAccess
from knowledge.selectors.scope import KnowledgeScope
from knowledge.selectors.search import SearchResult
from knowledge.services import agent_knowledge


@dataclass(frozen=True)
class PreparedKnowledge:
    """What :meth:`TurnKnowledgeService.prepare` retrieved for one turn."""

    route_key: str
    scope: KnowledgeScope
    inline: agent_knowledge.InlineKnowledge | None = None
    hints: SearchResult | None = None
    # What the workspace's data policy found in the texts delivered inline (counts only), for the audit.
    policy_audit: dict[str, Any] = field(default_factory=dict)
    # On demand: the tally the hints were retrieved under; the hints kept are counted when rendered.
    tally: agent_knowledge.PolicyTally | None = None

    def render(self, *, identity: AgentIdentity, run_id: uuid.UUID) -> TurnKnowledgeContext:
        if self.inline is not None:
            return TurnKnowledgeContext(
                knowledge=self.inline.knowledge,
                knowledge_refs=self.inline.refs,
                audit={
                    "status": self.inline.status,
                    "items": len(self.inline.knowledge),
                    **self.policy_audit,
                },
            )
        # Server-side hints bound to this run, readable once it is context_ready.
        binding = agent_knowledge.caller_binding(identity=identity, route_key=self.route_key, run_id=run_id)
        delivery = agent_knowledge.knowledge_delivery_build(
            scope=self.scope, result=self.hints, binding=binding, tally=self.tally
        )
        policy_audit = self.tally.audit() if self.tally is not None else {}
        return TurnKnowledgeContext(
            delivery=delivery,
            audit={"status": self.hints.status, "hints": len(delivery["hints"]), **policy_audit},
        )


class TurnKnowledgeService:
    """Registered with ``agent_runtime.ports`` by ``knowledge.apps``."""

    def prepare(self, *, access: WorkspaceAccess, query: str, delivery: str | None) -> PreparedKnowledge:
        scope = agent_knowledge.workspace_knowledge_scope(access)
        # Every text is released (the data policy applied) here, before the context freezes.
        with agent_knowledge.knowledge_policy_tally() as tally:
            if delivery == "on_demand":
                hints = agent_knowledge.knowledge_hints_search(scope=scope, query=query)
            else:
                inline = agent_knowledge.knowledge_inline_build(scope=scope, query=query)
        if delivery == "on_demand":
            return PreparedKnowledge(route_key=access.route_key, scope=scope, hints=hints, tally=tally)
        return PreparedKnowledge(
            route_key=access.route_key, scope=scope, inline=inline, policy_audit=tally.audit()
        )
