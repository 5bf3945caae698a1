"""The agent's receipt of an invocation (``bailing.agent-invocation-receipt.v1``) as released to it.

The read itself is :func:`agent_runtime.selectors.invocations.invocation_receipt_read`; the REST view
and the MCP tool both call :func:`invocation_receipt_release`, which passes the receipt's ``result``
through the workspace's data policy (:func:`agent_runtime.services.data_policy.tool_result_release`),
as every other agent-facing tool result. Nothing here writes.
"""

from __future__ import annotations

from typing import Any

from agent_runtime.identity import AgentIdentity
from agent_runtime.selectors.invocations import invocation_receipt_read
from agent_runtime.services.data_policy import tool_result_release


def invocation_receipt_release(
    *, identity: AgentIdentity, invocation_id: str, holder_alive: bool
) -> dict[str, Any]:
    """The caller's receipt, its ``result`` released under the route's data policy (the errors of
    :func:`~agent_runtime.selectors.invocations.invocation_receipt_read`)."""
    receipt, invocation, access = invocation_receipt_read(
        identity=identity, invocation_id=invocation_id, holder_alive=holder_alive
    )
    result = receipt["result"]
    released = tool_result_release(route=access.route, result=result, provider=invocation.provider)
    if released is result:
        return receipt
    return {**receipt, "result": released}
