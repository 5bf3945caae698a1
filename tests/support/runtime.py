"""Helpers for the Agent Client Runtime contract tests (turns, completion, memory)."""

from __future__ import annotations

import json
from typing import Any

TURN_SCHEMA = "bailing.agent-turn-context.v1"
COMPLETION_SCHEMA = "bailing.agent-run-completion.v1"
SUMMARY_SCHEMA = "bailing.authorization-execution-summary.v1"


def turns_url(route: str) -> str:
    return f"/agent-api/v1/workspaces/{route}/turns"


def complete_url(run_id: str) -> str:
    return f"/agent-api/v1/runs/{run_id}/complete"


def turn_body(n: int | str = 1, **overrides: Any) -> dict[str, Any]:
    body = {
        "client_conversation_id": "conversation-1",
        "client_turn_id": f"turn-{n}",
        "user_message_id": f"message-{n}",
        "user_input": f"Find the employee named Ada ({n})",
    }
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not None}


def completion_body(n: int | str = 1, **overrides: Any) -> dict[str, Any]:
    body = {"assistant_message_id": f"assistant-{n}", "status": "completed", "content": f"Done ({n})."}
    body.update(overrides)
    return {key: value for key, value in body.items() if value is not None}


def post_json(api_client, url: str, token: str, body: Any):
    raw = body if isinstance(body, bytes | str) else json.dumps(body)
    return api_client.post(
        url, data=raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def post_turn(api_client, session, route: str, body: dict[str, Any]):
    return post_json(api_client, turns_url(route), session._access, body)


def post_complete(api_client, session, run_id: str, body: dict[str, Any]):
    return post_json(api_client, complete_url(run_id), session._access, body)


def summary_block(
    invocations: list[dict[str, Any]], *, total: int | None = None, omitted: int = 0, **extra
) -> str:
    """An execution-summary marker block as an agent would embed it in its completion content."""
    payload = {
        "schema_version": SUMMARY_SCHEMA,
        "invocations": invocations,
        "total_invocations": len(invocations) + omitted if total is None else total,
        "omitted_invocations": omitted,
        **extra,
    }
    return f"```{SUMMARY_SCHEMA}\n{json.dumps(payload)}\n```"


def invocation(n: int, state: str = "executed", tool: str = "order_update", **extra) -> dict[str, Any]:
    record = {"invocation_id": f"{n:064x}", "tool": tool, "state": state, **extra}
    return record
