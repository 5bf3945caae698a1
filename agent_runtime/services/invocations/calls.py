"""The entry points: create (or replay) an invocation and carry it as far as the rules allow, and
resume one (after approval, or to learn its outcome)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agent_runtime import errors
from agent_runtime.identity import AgentIdentity
from agent_runtime.models import AgentRun, ToolApproval, ToolInvocation
from agent_runtime.selectors.catalog import Catalog
from agent_runtime.selectors.invocations import invocation_surface
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.selectors.runs import run_get_for_session, run_id_parse
from agent_runtime.services.data_policy import tool_result_release
from agent_runtime.services.invocations.arguments import (
    ToolArguments,
    arguments_hash,
    arguments_open,
    arguments_seal,
)
from agent_runtime.services.invocations.context import ToolContext, tool_context
from agent_runtime.services.invocations.dispatch import invocation_dispatch
from agent_runtime.services.invocations.gates import (
    approval_expire_if_due,
    approval_outcome,
    budget_exhausted,
    dispatch_limits,
    rule_rejection,
    run_frozen,
)
from agent_runtime.services.invocations.identifiers import invocation_request_id, request_hash
from agent_runtime.services.invocations.locks import invocation_lock, provider_slot
from agent_runtime.services.invocations.records import (
    audit,
    finish_without_dispatch,
    mark_uncertain,
    reconciled_or_unknown,
    store_awaiting,
    store_rejected,
)
from agent_runtime.services.invocations.results import (
    STABLE,
    TEXT_APPROVAL_CONDITION,
    TEXT_DENIED,
    TEXT_EXPIRED,
    TEXT_REJECTED,
    awaiting_result,
    coordinates,
    in_progress,
    provider_busy,
    rate_limited,
)
from agent_runtime.services.invocations.withdrawals import invocation_withdraw_finish
from agent_runtime.services.rate_limits import client_rate_check
from agent_runtime.tools.acc import ApprovalConditionError


@dataclass(frozen=True)
class InvocationRequest:
    """The validated body of ``POST /tool-invocations``; ``arguments`` already normalized."""

    invocation_id: str
    route: str
    tool: str
    arguments: ToolArguments
    capability_revision: str
    agent_run_id: str | None = None


def invocation_create(*, identity: AgentIdentity, request: InvocationRequest) -> dict[str, Any]:
    """Create (or replay) the invocation ``request`` and carry it as far as the rules allow.

    Raises the route gate's errors, 403 ``agent_direct_disabled``, 409 ``invocation_conflict`` /
    ``capability_changed``, 404 ``tool_not_found`` / ``run_not_found``; every other outcome is a result
    state (``in_progress``, ``awaiting_approval``, ``rejected_before_dispatch``, ``executed`` …).
    """
    access, catalog = invocation_surface(identity=identity, route_key=request.route)
    fingerprint = request_hash(
        route=request.route,
        tool=request.tool,
        args_hash=request.arguments.args_hash,
        capability_revision=request.capability_revision,
        agent_run_id=request.agent_run_id,
    )
    coords = (request.invocation_id, request.route, request.tool)
    with invocation_lock(identity.session.pk, request.invocation_id) as held:
        if not held:
            return in_progress(coords)
        existing = _invocation_for_update(identity, request.invocation_id)
        if existing is not None:
            if existing.request_hash != fingerprint:
                raise errors.InvocationConflict()
            return _continue(identity=identity, access=access, catalog=catalog, invocation=existing)

        if request.capability_revision != catalog.revision:
            raise errors.CapabilityChanged()
        tool = catalog.tool(request.tool)
        if tool is None:
            raise errors.ToolNotFound()
        run = None
        if request.agent_run_id is not None:
            run = run_get_for_session(
                identity=identity,
                run_id=run_id_parse(request.agent_run_id, field="agent_run_id"),
                route_key=access.route_key,
            )
            if run is None or run.status != AgentRun.Status.CONTEXT_READY:
                raise errors.RunNotFound()
        ctx = tool_context(access, tool)
        if ctx is None:
            raise errors.CapabilityChanged()
        hit = client_rate_check(client=identity.client)
        if hit is not None:
            return rate_limited(coords, hit)
        invocation = _new_invocation(identity, access, ctx, request, fingerprint, run)
        return _create_new(
            identity=identity, access=access, ctx=ctx, invocation=invocation, request=request, run=run
        )


def invocation_resume(*, identity: AgentIdentity, invocation_id: str) -> dict[str, Any]:
    """Continue the caller's invocation ``invocation_id`` (after approval, or to learn its outcome).

    404 ``invocation_not_found`` for an unknown id or another session's; identity, route and tool
    authorization are revalidated; a changed execution contract is 409 ``capability_changed``.
    """
    known = ToolInvocation.objects.filter(session_id=identity.session.pk, invocation_id=invocation_id).first()
    if known is None:
        raise errors.InvocationNotFound()
    access, catalog = invocation_surface(identity=identity, route_key=known.route_key)
    with invocation_lock(identity.session.pk, invocation_id) as held:
        if not held:
            return in_progress(coordinates(known))
        invocation = _invocation_for_update(identity, invocation_id)
        with transaction.atomic():
            audit(invocation, identity, "resumed", status=invocation.status)
        return _continue(identity=identity, access=access, catalog=catalog, invocation=invocation)


def _invocation_for_update(identity: AgentIdentity, invocation_id: str) -> ToolInvocation | None:
    """The caller's invocation, read under the invocation lock (its journal and approval are read
    only on the paths that need them)."""
    return (
        ToolInvocation.objects.filter(session_id=identity.session.pk, invocation_id=invocation_id)
        .order_by()
        .first()
    )


# --- new invocations --------------------------------------------------------------------------------------
def _new_invocation(
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: ToolContext,
    request: InvocationRequest,
    fingerprint: str,
    run: AgentRun | None,
) -> ToolInvocation:
    """The unsaved row of a new invocation, its arguments sealed (frozen for an approved dispatch)."""
    compiled = ctx.compiled
    invocation = ToolInvocation(
        request_id=invocation_request_id(identity.session.pk, request.invocation_id),
        session_id=identity.session.pk,
        client_id=identity.client.pk,
        route=access.route,
        route_key=access.route_key,
        run=run,
        invocation_id=request.invocation_id,
        tool=compiled.name,
        provider=ctx.provider.name,
        scope=compiled.scope,
        risk=compiled.risk,
        readonly=compiled.readonly,
        idempotent=compiled.idempotent,
        method=compiled.method,
        path=compiled.path,
        request_hash=fingerprint,
        args_hash=request.arguments.args_hash,
        argument_keys=request.arguments.keys,
        capability_revision=request.capability_revision,
        execution_fingerprint=ctx.fingerprint,
        on_behalf_of=identity.session.on_behalf_of or "",
    )
    invocation.arguments_sealed = arguments_seal(invocation.job_id, request.arguments)
    return invocation


def _create_new(
    *,
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: ToolContext,
    invocation: ToolInvocation,
    request: InvocationRequest,
    run: AgentRun | None,
) -> dict[str, Any]:
    arguments = request.arguments.value
    rejection = rule_rejection(identity=identity, ctx=ctx, arguments=arguments, run=run, exclude_pk=None)
    if rejection is not None:
        code, text = rejection
        return store_rejected(identity, invocation, code, text)
    try:
        approval = approval_outcome(ctx, arguments)
    except ApprovalConditionError as exc:
        text = TEXT_APPROVAL_CONDITION.format(code=exc.code, field=exc.param or "$")
        return store_rejected(identity, invocation, exc.code, text)
    if approval.required:
        return store_awaiting(identity, access, ctx, invocation, request.arguments, approval)
    limit = ctx.provider_max_concurrent_calls
    with provider_slot(ctx.provider.name, limit) as slot:
        if not slot:
            return provider_busy(coordinates(invocation), limit)
        hit = dispatch_limits(ctx)
        if hit is not None:
            return rate_limited(coordinates(invocation), hit)
        max_calls = access.effective["tools"]["max_calls"]
        if budget_exhausted(run_id=run.pk if run else None, limit=max_calls, exclude_pk=None):
            text = TEXT_REJECTED["tool_call_budget_exhausted"].format(limit=max_calls)
            return store_rejected(identity, invocation, "tool_call_budget_exhausted", text)
        return invocation_dispatch(
            identity=identity, ctx=ctx, invocation=invocation, arguments=arguments, new=True, slot=slot
        )


# --- existing invocations ---------------------------------------------------------------------------------
def _continue(
    *, identity: AgentIdentity, access: WorkspaceAccess, catalog: Catalog, invocation: ToolInvocation
) -> dict[str, Any]:
    """Replay, reconcile or continue an invocation this request holds the lock of."""
    tool = catalog.tool(invocation.tool)
    # A stable result is replayed only while the tool is still authorized for this session.
    if tool is None:
        raise errors.CapabilityChanged()
    status = invocation.status
    if status == ToolInvocation.Status.DISPATCHING:
        # This request holds the lock: whoever set dispatching is gone (a worker killed mid-call).
        mark_uncertain(identity, invocation, "worker_lost")
        return reconciled_or_unknown(identity, invocation)
    if status == ToolInvocation.Status.RECONCILIATION_REQUIRED:
        return reconciled_or_unknown(identity, invocation)
    if status in STABLE:
        # A replay is released under the policy in force now (a change applies to the next answer).
        return tool_result_release(route=access.route, result=invocation.result, provider=invocation.provider)
    # Awaiting approval: the execution contract must be the one the approver saw.
    ctx = tool_context(access, tool)
    if ctx is None or ctx.fingerprint != invocation.execution_fingerprint:
        raise errors.CapabilityChanged()
    approval = approval_expire_if_due(ToolApproval.objects.get(invocation=invocation))
    if approval.status == ToolApproval.Status.PENDING:
        return awaiting_result(invocation, approval)
    if approval.status == ToolApproval.Status.WITHDRAWN:
        # Withdrawn while another request held the lock: this one records the end.
        return invocation_withdraw_finish(identity, invocation, approval.pk)
    if approval.status in (ToolApproval.Status.DENIED, ToolApproval.Status.EXPIRED):
        template = TEXT_DENIED if approval.status == ToolApproval.Status.DENIED else TEXT_EXPIRED
        return finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.DENIED,
            approval.status,
            template.format(approval_id=approval.pk),
            approval_id=approval.pk,
        )
    return _dispatch_approved(
        identity=identity, access=access, ctx=ctx, invocation=invocation, approval=approval
    )


def _refuse(identity: AgentIdentity, invocation: ToolInvocation, code: str, text: str) -> dict[str, Any]:
    return finish_without_dispatch(
        identity, invocation, ToolInvocation.Status.REJECTED_BEFORE_DISPATCH, code, text
    )


def _dispatch_approved(
    *,
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: ToolContext,
    invocation: ToolInvocation,
    approval: ToolApproval,
) -> dict[str, Any]:
    arguments = arguments_open(invocation)
    if arguments is None:
        return _refuse(
            identity,
            invocation,
            "frozen_arguments_unavailable",
            TEXT_REJECTED["frozen_arguments_unavailable"],
        )
    if approval.args_hash != invocation.args_hash or arguments_hash(approval.args) != invocation.args_hash:
        return _refuse(
            identity, invocation, "approval_args_mismatch", TEXT_REJECTED["approval_args_mismatch"]
        )
    limit = ctx.provider_max_concurrent_calls
    with provider_slot(ctx.provider.name, limit) as slot:
        if not slot:
            # The approval is not consumed: the same invocation may be resumed in a moment.
            return provider_busy(coordinates(invocation), limit)
        hit = client_rate_check(client=identity.client) or dispatch_limits(ctx)
        if hit is not None:
            # The approval is not consumed: the same invocation may be resumed after the window.
            return rate_limited(coordinates(invocation), hit)
        max_calls = access.effective["tools"]["max_calls"]
        if budget_exhausted(run_id=invocation.run_id, limit=max_calls, exclude_pk=invocation.pk):
            text = TEXT_REJECTED["tool_call_budget_exhausted"].format(limit=max_calls)
            return _refuse(identity, invocation, "tool_call_budget_exhausted", text)
        if not ctx.compiled.readonly and run_frozen(
            identity=identity,
            route_key=invocation.route_key,
            run_id=invocation.run_id,
            exclude_pk=invocation.pk,
        ):
            return _refuse(identity, invocation, "run_frozen", TEXT_REJECTED["run_frozen"])
        return invocation_dispatch(
            identity=identity,
            ctx=ctx,
            invocation=invocation,
            arguments=arguments,
            new=False,
            approval=approval,
            slot=slot,
        )
