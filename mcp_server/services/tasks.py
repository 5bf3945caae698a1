"""Approvals as MCP tasks (the ``io.modelcontextprotocol/tasks`` extension, docs/mcp.md "Approvals as tasks").

A governed call that waits for a human approval is a task when the client declared the extension on
that ``tools/call``: the answer is a ``CreateTaskResult`` instead of the waiting text, and the client
polls ``tasks/get`` instead of calling ``resume_invocation``. The task *is* the invocation — nothing
else is stored:

* its id is the invocation's ``job_id`` (a random UUID the hub drew, never shown to the agent
  otherwise), looked up only among the invocations of the calling session in the endpoint's
  workspace, so it survives a restart and another session's (or workspace's) id is "not found";
* ``tasks/get`` reads the approval while it is pending (``working``, nothing written); once it was
  decided, expired or withdrawn it runs the same service as ``resume_invocation``
  (:func:`~agent_runtime.services.invocations.invocation_resume`): the approved call is sent once,
  and every outcome — executed, business-rejected, denied, expired, unknown
  (``reconciliation_required``, never sent again), refused — is ``completed`` with the
  ``CallToolResult`` ``resume_invocation`` would give (``isError`` as there);
* ``tasks/cancel`` withdraws the call (:func:`~agent_runtime.services.invocations.invocation_withdraw`)
  while nothing was sent; the task is then ``cancelled``. After dispatch it is acknowledged and
  changes nothing (cancellation is cooperative in the extension): the task ends as the call did;
* ``tasks/update`` has nothing to answer: these tasks never ask the client for input, so every
  ``inputResponses`` key is one the server never issued and is ignored, as the extension says.

``failed`` is never reported: after the task exists, nothing the hub does ends in a JSON-RPC error
(hub refusals are tool errors, ``isError: true``).
"""

from __future__ import annotations

import uuid
from typing import Any

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import ToolApproval, ToolInvocation
from agent_runtime.services.invocations import invocation_resume, invocation_withdraw
from bailing.api.errors import ApiError
from bailing.api.timefmt import utc_iso
from mcp_server.errors import UnknownTask

# How often a client is asked to poll: an approval is a person's decision, seconds do not matter.
TASK_POLL_INTERVAL_MS = 5000
# Tasks are kept as long as their invocation (the hub does not purge invocations): no TTL.
TASK_TTL_MS = None

WORKING = "working"
COMPLETED = "completed"
CANCELLED = "cancelled"


def task_id_of(invocation: ToolInvocation) -> str:
    return str(invocation.job_id)


def _invocation(identity: AgentIdentity, route_key: str, task_id: str) -> ToolInvocation:
    try:
        job_id = uuid.UUID(task_id)
    except (ValueError, AttributeError, TypeError):
        raise UnknownTask() from None
    if str(job_id) != task_id:
        raise UnknownTask()  # only the canonical spelling the hub handed out
    invocation = (
        ToolInvocation.objects.select_related("approval")
        .filter(
            session_id=identity.session.pk,
            client_id=identity.client.pk,
            route_key=route_key,
            job_id=job_id,
            approval__isnull=False,  # only a call that waited for approval became a task
        )
        .first()
    )
    if invocation is None:
        raise UnknownTask()
    return invocation


def _last_updated(invocation: ToolInvocation, approval: ToolApproval) -> str:
    moments = [invocation.updated_at, approval.decided_at, approval.withdrawn_at, approval.consumed_at]
    return utc_iso(max(moment for moment in moments if moment is not None))


def _task(
    invocation: ToolInvocation,
    approval: ToolApproval,
    status: str,
    message: str,
    *,
    poll_ms: int | None = TASK_POLL_INTERVAL_MS,
    **payload: Any,
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "taskId": task_id_of(invocation),
        "status": status,
        "statusMessage": message,
        "createdAt": utc_iso(invocation.created_at),
        "lastUpdatedAt": _last_updated(invocation, approval),
        "ttlMs": TASK_TTL_MS,
    }
    if poll_ms is not None:
        task["pollIntervalMs"] = poll_ms
    task.update(payload)
    return task


def approval_waiting_text(approval: ToolApproval) -> str:
    """What the approver sees, in one sentence (the approval's sentence and rule)."""
    summary = (approval.summary or approval.tool).strip()
    sees = f"The approver sees: {summary}"
    if approval.reason:
        sees += f" (rule: {approval.reason})"
    return sees + ", with these exact arguments."


def _working_text(approval: ToolApproval) -> str:
    return (
        f"Awaiting approval #{approval.pk}. Nothing was sent to the business system yet. "
        f"{approval_waiting_text(approval)} Poll tasks/get for the outcome; tasks/cancel withdraws the call."
    )


def task_created(*, identity: AgentIdentity, invocation_id: str) -> dict[str, Any]:
    """The ``CreateTaskResult`` of the caller's invocation that waits for approval (it is committed:
    a ``tasks/get`` of the id resolves at once)."""
    invocation = ToolInvocation.objects.select_related("approval").get(
        session_id=identity.session.pk, invocation_id=invocation_id
    )
    approval = invocation.approval
    return {"resultType": "task", **_task(invocation, approval, WORKING, _working_text(approval))}


def _still_waiting(result: dict[str, Any]) -> bool:
    """A resume that changed nothing for good: still pending, another request working on it, or a
    limit that lets the same call go later (rate limit, busy provider; the approval is kept)."""
    state = result.get("state")
    if state in ("awaiting_approval", "in_progress"):
        return True
    return state == "rejected_before_dispatch" and bool(result.get("auto_retry_allowed"))


def task_get(*, identity: AgentIdentity, route_key: str, task_id: str, call_result) -> dict[str, Any]:
    """``tasks/get``: the task as it stands, performing the resume once the approval was decided.
    ``call_result`` turns an invocation result (or a hub refusal) into the ``CallToolResult`` the
    agent reads over MCP."""
    invocation = _invocation(identity, route_key, task_id)
    approval = invocation.approval
    if (
        invocation.status == ToolInvocation.Status.AWAITING_APPROVAL
        and approval.status == ToolApproval.Status.PENDING
        and not approval.is_due()
    ):
        return _task(invocation, approval, WORKING, _working_text(approval))
    try:
        result = invocation_resume(identity=identity, invocation_id=invocation.invocation_id)
    except ApiError as exc:
        # A refusal of the resume (the tool is no longer authorized, its contract changed …): what
        # resume_invocation answers, a tool error.
        invocation.refresh_from_db()
        approval.refresh_from_db()
        return _task(invocation, approval, COMPLETED, f"Tool failed: {exc.code}", result=call_result(exc))
    invocation.refresh_from_db()
    approval.refresh_from_db()
    if _still_waiting(result):
        if approval.status == ToolApproval.Status.PENDING:
            return _task(invocation, approval, WORKING, _working_text(approval))
        retry = result.get("retry_after_ms")
        poll = max(1, int(retry)) if isinstance(retry, int) else TASK_POLL_INTERVAL_MS
        return _task(invocation, approval, WORKING, result["text"], poll_ms=poll)
    if approval.status == ToolApproval.Status.WITHDRAWN and approval.consumed_at is None:
        return _task(invocation, approval, CANCELLED, result["text"])
    return _task(invocation, approval, COMPLETED, result["text"], result=call_result(result))


def task_cancel(*, identity: AgentIdentity, route_key: str, task_id: str) -> None:
    """``tasks/cancel``: withdraw the call while nothing was sent (else acknowledged, no effect)."""
    invocation = _invocation(identity, route_key, task_id)
    invocation_withdraw(identity=identity, invocation_id=invocation.invocation_id)


def task_update(*, identity: AgentIdentity, route_key: str, task_id: str) -> None:
    """``tasks/update``: the task must exist; its ``inputResponses`` answer nothing outstanding."""
    _invocation(identity, route_key, task_id)
