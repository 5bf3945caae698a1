"""The rules a call must pass before it may be sent (docs/protocol.md "Invocation checks"): the
subject gate, the tool's input schema, the frozen-run rule, the approval policy, the dispatch rate
limits and the run's tool-call budget. Reads only; each answers what stands in the way, or None."""

from __future__ import annotations

import uuid
from typing import Any

from jsonschema import Draft202012Validator

from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentRun, ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.services.invocations.context import ToolContext
from agent_runtime.services.invocations.locks import invocation_lock
from agent_runtime.services.invocations.results import TEXT_REJECTED
from agent_runtime.services.rate_limits import RateLimitHit, dispatch_rate_check
from agent_runtime.tools.approval import (
    POLICY_CONFIRM_REQUIRED,
    REASON_CONFIRM_REQUIRED,
    ApprovalPolicyOutcome,
    approval_policy_for,
)
from agent_runtime.tools.compiler import CompiledTool
from bailing import tracing


def schema_problem(compiled: CompiledTool, arguments: dict[str, Any]) -> str | None:
    """The path of the first argument the tool's input schema refuses, or None."""
    errors_found = sorted(
        Draft202012Validator(compiled.input_schema).iter_errors(arguments),
        key=lambda e: list(e.absolute_path),
    )
    if not errors_found:
        return None
    path = ".".join(str(part) for part in errors_found[0].absolute_path)
    return path or "$"


def run_frozen(
    *, identity: AgentIdentity, route_key: str, run_id: uuid.UUID | None, exclude_pk: int | None
) -> bool:
    """An unresolved unknown outcome freezes write calls: of the same run, or (without a run) of the
    session's run-less calls in this workspace (docs/protocol.md "Unknown outcomes"). A call still in
    flight is not one."""
    unresolved = ToolInvocation.objects.filter(
        session_id=identity.session.pk,
        route_key=route_key,
        status__in=[ToolInvocation.Status.RECONCILIATION_REQUIRED, ToolInvocation.Status.DISPATCHING],
    ).exclude(
        journal__resolution__in=[ToolCallJournal.Resolution.EXECUTED, ToolCallJournal.Resolution.NOT_EXECUTED]
    )
    unresolved = (
        unresolved.filter(run_id=run_id) if run_id is not None else unresolved.filter(run__isnull=True)
    )
    if exclude_pk is not None:
        unresolved = unresolved.exclude(pk=exclude_pk)
    if unresolved.filter(status=ToolInvocation.Status.RECONCILIATION_REQUIRED).exists():
        return True
    # A sibling still ``dispatching`` is either in flight (its request holds its lock: not an unknown
    # outcome, yet) or was left by a dead worker (its lock is free and it is still dispatching).
    dispatching = unresolved.filter(status=ToolInvocation.Status.DISPATCHING)
    for pk, session_id, sibling_id in dispatching.values_list("pk", "session_id", "invocation_id"):
        with invocation_lock(session_id, sibling_id) as held:
            still = ToolInvocation.objects.filter(pk=pk, status=ToolInvocation.Status.DISPATCHING)
            if held and still.exists():
                return True
    return False


def budget_exhausted(*, run_id: uuid.UUID | None, limit: int, exclude_pk: int | None) -> bool:
    """``tools.max_calls`` per run: calls that were sent or wait for approval count."""
    if run_id is None:
        return False
    used = ToolInvocation.objects.filter(run_id=run_id).exclude(
        status=ToolInvocation.Status.REJECTED_BEFORE_DISPATCH
    )
    if exclude_pk is not None:
        used = used.exclude(pk=exclude_pk)
    return used.count() >= limit


@tracing.traced("approval.gate")
def approval_outcome(ctx: ToolContext, arguments: dict[str, Any]) -> ApprovalPolicyOutcome:
    outcome = approval_policy_for(ctx.compiled, arguments)
    if not outcome.required and ctx.catalog_tool.forced_approval:
        return ApprovalPolicyOutcome(True, POLICY_CONFIRM_REQUIRED, REASON_CONFIRM_REQUIRED)
    return outcome


@tracing.traced("rules")
def rule_rejection(
    *,
    identity: AgentIdentity,
    ctx: ToolContext,
    arguments: dict[str, Any],
    run: AgentRun | None,
    exclude_pk: int | None,
) -> tuple[str, str] | None:
    """The subject gate, the schema and the frozen-run rule: ``(code, text)`` of the first that
    refuses, or None."""
    compiled = ctx.compiled
    if compiled.requires_subject and not identity.session.on_behalf_of:
        return "subject_required", TEXT_REJECTED["subject_required"]
    problem = schema_problem(compiled, arguments)
    if problem is not None:
        return "arguments_invalid", TEXT_REJECTED["arguments_invalid"].format(field=problem)
    if not compiled.readonly and run_frozen(
        identity=identity, route_key=ctx.route_key, run_id=run.pk if run else None, exclude_pk=exclude_pk
    ):
        return "run_frozen", TEXT_REJECTED["run_frozen"]
    return None


def dispatch_limits(ctx: ToolContext) -> RateLimitHit | None:
    return dispatch_rate_check(
        provider=ctx.provider.name,
        tool=ctx.compiled.name,
        tool_limit=ctx.compiled.rate_limit,
        provider_per_min=ctx.provider_rate_limit,
    )


def approval_expire_if_due(approval: ToolApproval) -> ToolApproval:
    if approval.is_due():
        ToolApproval.objects.filter(pk=approval.pk, status=ToolApproval.Status.PENDING).update(
            status=ToolApproval.Status.EXPIRED
        )
        approval.refresh_from_db()
    return approval
