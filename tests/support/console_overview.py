"""A hub with something on every overview page: the workspace page, the tools list and the dashboard's
health panels (shared by their view and browser tests).

``seed_overview()`` builds on ``seed_console_providers()`` (providers ``shop`` and ``crm``, workspaces
``ro-desk``, ``writer``, ``locked``, ``quiet``, ``other``) and adds, through the real services where
one exists:

* ``writer`` names the knowledge bases ``faq`` (lexical only: one ready, one waiting and one failed
  document) and ``gone`` (missing), and turns on memory summaries;
* clients ``desk-agent`` (allowed ``writer``), ``wild-agent`` (every workspace, disabled) and
  ``crm-agent`` (only ``other``);
* two active sessions on ``writer`` (one with two conversations of turns), a revoked and an expired
  one;
* the ``billing`` provider with a failed refresh (nothing listens on its port).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentSession, Route, ToolApproval, ToolInvocation
from agent_runtime.services.providers import provider_refresh
from agent_runtime.services.runs import run_complete, turn_prepare
from bailing.audit.actor import Actor
from knowledge.models import Document
from tests.factories import AgentSessionFactory, ClientFactory, KnowledgeBaseFactory, ToolInvocationFactory
from tests.support.providers_seed import ConsoleProviders, closed_port, seed_console_providers, url_provider
from tests.support.runtime import completion_body, turn_body


@dataclass
class Overview:
    providers: ConsoleProviders
    sessions: list[AgentSession]


def _document(kb, key: str, status: str, **fields) -> Document:
    return Document.objects.create(
        kb=kb, source_key=key, title=key.title(), content="Text.", revision="0" * 64, status=status, **fields
    )


def turn(session: AgentSession, n: int, *, route: str, conversation: str, complete: bool = True) -> str:
    identity = AgentIdentity(session, session.client)
    body = turn_body(n, client_conversation_id=conversation)
    run_id = json.loads(turn_prepare(identity=identity, route_key=route, data=body))["run_id"]
    if complete:
        run_complete(identity=identity, run_id=run_id, data=completion_body(n))
    return run_id


def seed_overview(*, failed_provider: bool = True) -> Overview:
    providers = seed_console_providers()
    Route.objects.filter(route_key="writer").update(
        name="Refund desk",
        description="Refunds and cancellations, with approvals.",
        knowledge={"kb_ids": ["faq", "gone"], "top_k": 3},
        memory={"summary_enabled": True},
    )
    faq = KnowledgeBaseFactory(
        kb_id="faq", name="Shop FAQ", embedding_provider="none", embedding_model="", embedding_dim=0
    )
    _document(faq, "refunds", Document.Status.READY)
    _document(faq, "shipping", Document.Status.EMBEDDING)
    _document(faq, "broken", Document.Status.ERROR, error="indexing_failed")

    desk = ClientFactory(app_id="desk-agent", name="Desk agent", allowed_routes=["writer"])
    ClientFactory(app_id="wild-agent", name="Anything agent", allowed_routes=["*"], enabled=False)
    ClientFactory(app_id="crm-agent", name="CRM agent", allowed_routes=["other"], hub_consent=False)
    now = timezone.now()
    first = AgentSessionFactory(client=desk, allowed_routes=["writer"], device_label="Ada's laptop")
    second = AgentSessionFactory(
        client=desk, allowed_routes=["writer", "ro-desk"], device_label="Build server", on_behalf_of="bob"
    )
    AgentSessionFactory(client=desk, allowed_routes=["writer"], revoked_at=now, device_label="Old laptop")
    AgentSessionFactory(
        client=desk,
        allowed_routes=["writer"],
        refresh_expires_at=now - timedelta(seconds=1),
        device_label="Gone",
    )
    turn(first, 1, route="writer", conversation="refund-SO-1001")
    turn(first, 2, route="writer", conversation="refund-SO-1001", complete=False)
    turn(second, 3, route="writer", conversation="cancel-SO-1002")
    if failed_provider:
        billing = url_provider("billing", f"http://127.0.0.1:{closed_port()}", "billing-secret-value")
        provider_refresh(provider=billing, actor=Actor.system("tests"))
    return Overview(providers=providers, sessions=[first, second])


def pending_approval(
    *, tool: str, route: Route, waited: timedelta, session: AgentSession | None = None
) -> ToolApproval:
    """A tool call waiting for a decision for ``waited`` (rows as the invocation service leaves them)."""
    session = session or AgentSessionFactory(allowed_routes=[route.route_key])
    invocation = ToolInvocationFactory(
        session=session,
        route=route,
        tool=tool,
        readonly=False,
        idempotent=False,
        method="POST",
        path=f"/{tool}",
        status=ToolInvocation.Status.AWAITING_APPROVAL,
        business_status=None,
    )
    created = timezone.now() - waited
    return ToolApproval.objects.create(
        invocation=invocation,
        job_id=invocation.job_id,
        request_id=invocation.request_id,
        route_key=route.route_key,
        provider="shop",
        tool=tool,
        scope="order.write",
        risk="medium",
        policy="declared",
        reason="The tool declares approval.",
        method="POST",
        path=f"/{tool}",
        args={"order_id": "SO-1001"},
        args_hash="0" * 64,
        args_bytes=24,
        intent={},
        created_at=created,
        expires_at=created + timedelta(hours=24),
    )
