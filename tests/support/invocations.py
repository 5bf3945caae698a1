"""Set-ups for governed-invocation tests: a workspace whose tools come from a live business system
(the Demo Shop process, or the chaos business server), a signed-in agent session, and helpers that
call the real endpoints."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from agent_runtime.config import validate_route_config
from agent_runtime.models import ToolProvider
from agent_runtime.selectors.catalog import route_catalog
from agent_runtime.services.clients import client_token_rotate
from agent_runtime.services.config_apply import route_upsert
from agent_runtime.services.providers import provider_refresh, provider_set_secret
from bailing.audit.actor import Actor
from tests.factories import AgentSessionFactory, ClientFactory

INVOKE_URL = "/agent-api/v1/tool-invocations"


def new_invocation_id() -> str:
    return secrets.token_hex(32)


def resume_url(invocation_id: str) -> str:
    return f"{INVOKE_URL}/{invocation_id}/resume"


def receipt_url(invocation_id: str) -> str:
    return f"{INVOKE_URL}/{invocation_id}/receipt"


def provider_for(
    *, name: str, base_url: str, secret: str, timeout_ms: int = 5000, rate_limit: int = 0
) -> ToolProvider:
    """A URL provider on ``base_url`` with ``secret``, refreshed now (signed spec fetch)."""
    provider, _ = ToolProvider.objects.update_or_create(
        name=name,
        defaults={
            "base_url": base_url,
            "spec_source": ToolProvider.SpecSource.URL,
            "timeout_ms": timeout_ms,
            "rate_limit_per_min": rate_limit,
        },
    )
    provider_set_secret(provider=provider, secret=secret, actor=Actor.system("tests"))
    outcome = provider_refresh(provider=provider, actor=Actor.system("tests"))
    assert outcome.status == "ok", outcome
    provider.refresh_from_db()
    return provider


def workspace(
    *,
    route_key: str,
    provider: str,
    write_tools: list[str],
    force_approval: list[str] | None = None,
    approval: dict[str, Any] | None = None,
    max_calls: int = 5,
    permission: str = "readwrite",
):
    """A workspace exposing ``provider``'s tools to agents, with these writes."""
    direct: dict[str, Any] = {"enabled": True, "write_tools": write_tools}
    if force_approval:
        direct["force_approval_tools"] = force_approval
    tools: dict[str, Any] = {
        "sources": [{"provider": provider, "allow": ["*"]}],
        "max_calls": max_calls,
        "agent_direct": direct,
    }
    if approval:
        tools["approval"] = approval
    data = validate_route_config(
        {
            "route_key": route_key,
            "name": f"Workspace {route_key}",
            "permission": permission,
            "tools": tools,
            "agent_client": {"enabled": True},
        },
        path="route",
    )
    route, _ = route_upsert(data=data, actor=Actor.system("tests"))
    return route


def agent(*, route_key: str, on_behalf_of: str = "alice", app_id: str | None = None, rate_limit: int = 0):
    """A hub-consent agent client with a Client Token, and a live session in ``route_key``."""
    client = ClientFactory(
        app_id=app_id or f"agent-{uuid.uuid4().hex[:8]}",
        hub_consent=True,
        allowed_routes=[route_key],
        rate_limit_per_min=rate_limit,
    )
    token = client_token_rotate(client=client, actor=Actor.system("tests"))
    session = AgentSessionFactory(
        client=client, allowed_routes=[route_key], on_behalf_of=on_behalf_of, principal={"id": on_behalf_of}
    )
    session._client_token = token
    return session


def revision(session, route_key: str) -> str:
    from agent_runtime.identity import AgentIdentity
    from agent_runtime.models import Route

    identity = AgentIdentity(session=session, client=session.client)
    return route_catalog(route=Route.objects.get(route_key=route_key), identity=identity).revision


def invoke_body(
    session, route_key: str, tool: str, arguments: dict[str, Any], **overrides: Any
) -> dict[str, Any]:
    body = {
        "invocation_id": new_invocation_id(),
        "route": route_key,
        "tool": tool,
        "arguments": arguments,
        "capability_revision": revision(session, route_key),
    }
    body.update(overrides)
    return body


def post(api_client, session, url: str, body: Any, **extra):
    return api_client.post(url, body, format="json", HTTP_AUTHORIZATION=f"Bearer {session._access}", **extra)


def get(api_client, session, url: str):
    return api_client.get(url, HTTP_AUTHORIZATION=f"Bearer {session._access}")


def sized_arguments(size: int, *, note: str = "bulk", **extra: Any) -> dict[str, Any]:
    """``{"note", "payload", **extra}`` for the chaos business's ``chaos_bulk_ok`` whose
    ``JSON.stringify`` is exactly ``size`` UTF-8 bytes, with two-byte characters and escapes in the
    payload (so bytes, not characters, are counted)."""
    from bailing.api.jsjson import js_stringify

    head = {"note": note, "payload": 'é"\n', **extra}
    padding = size - len(js_stringify(head).encode())
    assert padding >= 0
    payload = head["payload"] + "é" * (padding // 2) + "x" * (padding % 2)
    arguments = {"note": note, "payload": payload, **extra}
    assert len(js_stringify(arguments).encode()) == size
    return arguments


def call_awaiting_approval(
    api_client,
    shop,
    *,
    tool: str,
    arguments: dict[str, Any],
    route_key: str = "shop",
    on_behalf_of: str = "alice",
    write_tools: tuple[str, ...] = ("cancel_order", "request_refund"),
):
    """A Demo Shop write of ``on_behalf_of`` waiting for approval in workspace ``route_key``: returns
    the agent session, the invocation body and its ``ToolApproval``."""
    from agent_runtime.models import ToolApproval

    provider_for(name="demo-shop", base_url=shop.base_url, secret=shop.secret)
    workspace(route_key=route_key, provider="demo-shop", write_tools=list(write_tools))
    session = agent(route_key=route_key, on_behalf_of=on_behalf_of)
    body = invoke_body(session, route_key, tool, arguments)
    result = post(api_client, session, INVOKE_URL, body).json()
    assert result["state"] == "awaiting_approval", result
    return session, body, ToolApproval.objects.get(pk=result["approval_id"])


def approve(approval_id: int, *, decision_id: str | None = None) -> None:
    """Approve ``approval_id`` through the decision service, as an approver would."""
    from approvals.services.decisions import approval_decide

    approval_decide(
        approval_id=approval_id,
        decision="approved",
        decision_id=decision_id or f"tests-{approval_id}",
        approver="manager-1",
        comment="",
        source="console",
        actor=Actor.system("tests"),
    )


def console_decision(approval, decision: str, *, comment: str = "") -> dict[str, str]:
    """The POST body of the console's decision confirmation page (``console:approval_decide``): the
    confirmation field, the decision and the arguments hash it restates, and the comment."""
    from bailing.ui.confirm import CONFIRM_FIELD, CONFIRM_VALUE

    return {
        CONFIRM_FIELD: CONFIRM_VALUE,
        "decision": decision,
        "args_hash": approval.args_hash,
        "comment": comment,
    }
