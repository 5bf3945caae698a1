"""The governed call path: ``POST /tool-invocations`` and ``…/resume`` (``bailing.agent-tool-invocation.v1``).

Checks, in order (docs/protocol.md "Invocation checks"): the bearer (the view), the envelope and
argument budgets (the view), the route gate and ``tools.agent_direct``, the per-invocation lock, the
idempotency binding of ``invocation_id``; for a new invocation the capability revision (409
``capability_changed``), the tool in the current authorized set (404 ``tool_not_found``) and the run
(404 ``run_not_found``); the client's rate limit; the subject gate, the arguments against the tool's
schema, the frozen-run rule and the approval gate; then, just before dispatch, the tool's and the
provider's rate limits and the run's tool-call budget.

Concurrency: one request at a time works on an invocation. The lock is a PostgreSQL session advisory
lock keyed by (session, invocation id), held for the whole call including the business request, so a
concurrent duplicate answers ``in_progress`` at once and a dead worker's lock vanishes with its
database connection. The unique (session, invocation id) constraint backs it up.

Never a duplicate write: the journal row is committed before the request leaves; an attempt whose
outcome is unknown, or an invocation found ``dispatching`` with nobody holding its lock (a worker that
died mid-call), becomes ``reconciliation_required`` and is never sent again by the hub, whatever the
tool. Only an operator's resolution (``approvals``) changes that answer.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone
from jsonschema import Draft202012Validator

from agent_runtime import errors
from agent_runtime.identity import AgentIdentity
from agent_runtime.invocation_results import (
    INVOCATION_SCHEMA,
    RESULT_TEXT_MAX_CHARS,
    TEXT_UNKNOWN,
    invocation_result,
)
from agent_runtime.models import AgentRun, ProviderTool, ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.secrets_box import SealedSecretError, open_sealed, seal
from agent_runtime.selectors.catalog import Catalog, CatalogTool
from agent_runtime.selectors.invocations import invocation_surface
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.selectors.runs import run_get_for_session, run_id_parse
from agent_runtime.services import http_dispatch
from agent_runtime.services.approval_requests import approval_request_create
from agent_runtime.services.providers import provider_secret_open
from agent_runtime.services.rate_limits import RateLimitHit, client_rate_check, dispatch_rate_check
from agent_runtime.tools.acc import ApprovalConditionError
from agent_runtime.tools.approval import (
    POLICY_CONFIRM_REQUIRED,
    REASON_CONFIRM_REQUIRED,
    ApprovalPolicyOutcome,
    approval_policy_for,
)
from agent_runtime.tools.compiler import CompiledTool
from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.api.jsjson import js_canonical, js_normalized
from bailing.api.timefmt import utc_iso
from bailing.audit.ledger import AuditEntry, audit_record_many

EXECUTION_SCHEMA = "bailing.agent-tool-execution.v1"
ARGUMENTS_MAX_BYTES = 1_048_576
ENVELOPE_MAX_BYTES = 2_097_152
RESUME_BODY_MAX_BYTES = 1024
ARGUMENTS_PURPOSE = "tool_invocation.arguments"
# Two-int4 advisory lock namespace of invocations ("bhIV"), apart from every other hub lock.
_LOCK_NAMESPACE = 0x62684956

STABLE = frozenset(
    {
        ToolInvocation.Status.EXECUTED,
        ToolInvocation.Status.BUSINESS_REJECTED,
        ToolInvocation.Status.DENIED,
        ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
        ToolInvocation.Status.RECONCILIATION_REQUIRED,
    }
)

# Result texts an agent reads. Fixed text (plus coordinates the hub chose); never argument values.
TEXT_IN_PROGRESS = "The same governed invocation is already in progress; resume it later with the same id."
TEXT_RATE_LIMITED = (
    "Rate limit reached ({level}); nothing was sent. Retry the same invocation after {seconds} s."
)
TEXT_AWAITING = (
    "Awaiting approval #{approval_id}: {summary} Nothing was sent. After the approver decides, resume "
    "this invocation (POST /agent-api/v1/tool-invocations/{invocation_id}/resume); do not send a new call."
)
TEXT_DENIED = "The approver denied this call (approval #{approval_id}); nothing was sent."
TEXT_EXPIRED = "Approval #{approval_id} expired undecided; nothing was sent."
TEXT_REJECTED = {
    "subject_required": "This tool acts on behalf of a signed-in business user, and this session has none.",
    "arguments_invalid": "The arguments do not match the tool's input schema at {field}; nothing was sent.",
    "header_value_invalid": "Argument {field} cannot be sent as an HTTP header (printable ASCII only).",
    "path_invalid": "The request path cannot be built from these arguments (printable ASCII only).",
    "run_frozen": (
        "Another call in this run has an unknown outcome; write calls are refused until an operator "
        "resolves it."
    ),
    "tool_call_budget_exhausted": "This run used its {limit} tool calls; nothing was sent.",
    "business_unreachable": "The business system could not be reached; nothing was sent.",
    "target_forbidden": "The tool provider's address is not allowed as an outbound target; nothing was sent.",
    "secret_unavailable": "The tool provider has no usable secret; nothing was sent.",
    "frozen_arguments_unavailable": "The exact frozen arguments are unavailable; nothing was sent.",
    "approval_args_mismatch": "The approved arguments do not match this invocation; nothing was sent.",
    "approval_already_consumed": "The approval was already used; nothing was sent.",
}
TEXT_APPROVAL_CONDITION = "An approval rule could not be evaluated ({code}: {field}); nothing was sent."
TEXT_RECONCILED_EXECUTED = "An operator confirmed in the business system that this call executed."
TEXT_RECONCILED_NOT_EXECUTED = "An operator confirmed in the business system that this call did not execute."


@dataclass(frozen=True)
class InvocationRequest:
    """The validated body of ``POST /tool-invocations``."""

    invocation_id: str
    route: str
    tool: str
    arguments: dict[str, Any]
    capability_revision: str
    agent_run_id: str | None = None


# --- results --------------------------------------------------------------------------------------------
def _result_for(invocation: ToolInvocation, state: str, text: str, **kwargs: Any) -> dict[str, Any]:
    return invocation_result(
        invocation_id=invocation.invocation_id,
        route=invocation.route_key,
        tool=invocation.tool,
        state=state,
        text=text,
        **kwargs,
    )


def _rate_limited(request_coords: tuple[str, str, str], hit: RateLimitHit) -> dict[str, Any]:
    invocation_id, route, tool = request_coords
    return invocation_result(
        invocation_id=invocation_id,
        route=route,
        tool=tool,
        state="rejected_before_dispatch",
        text=TEXT_RATE_LIMITED.format(level=hit.level, seconds=max(1, round(hit.retry_after_ms / 1000))),
        auto_retry_allowed=True,
        retry_after_ms=hit.retry_after_ms,
        rate_limit=hit.as_dict(),
    )


# --- identifiers ------------------------------------------------------------------------------------------
def invocation_request_id(session_id: uuid.UUID, invocation_id: str) -> str:
    """The synthetic job's business request id: ``agent-tool:`` + SHA-256 of the session and id."""
    digest = sha256_hex(f"bailing.agent-tool.v1\0{session_id}\0{invocation_id}")
    return f"agent-tool:{digest}"


def invocation_execution_fingerprint(
    *, route_key: str, provider_name: str, base_url: str, tool_fp: str
) -> str:
    """What a dispatched call *means*, frozen on the invocation: the route, the provider and its
    base URL, and the tool's execution contract (no guidance, no secret, no other tool)."""
    return canonical_sha256(
        {
            "schema": EXECUTION_SCHEMA,
            "route": route_key,
            "provider": {"name": provider_name, "base": sha256_hex(base_url)},
            "tool": tool_fp,
        }
    )


def arguments_hash(arguments: Any) -> str:
    """``args_hash``: SHA-256 of BailingHub's canonical JSON of the (normalized) arguments — what an
    approval is bound to and a business system may recompute (docs/protocol.md "Approvals")."""
    return sha256_hex(js_canonical(arguments))


def idempotency_key(*, job_id: uuid.UUID, tool: str, args_hash: str, on_behalf_of: str) -> str:
    """``X-Bailing-Idempotency-Key``: stable for the job, tool, canonical arguments and subject."""
    return canonical_sha256(
        {"job_id": str(job_id), "tool": tool, "args_hash": args_hash, "on_behalf_of": on_behalf_of}
    )


def _request_hash(request: InvocationRequest, args_hash: str) -> str:
    return canonical_sha256(
        {
            "schema": INVOCATION_SCHEMA,
            "route": request.route,
            "tool": request.tool,
            "args_hash": args_hash,
            "capability_revision": request.capability_revision,
            "agent_run_id": request.agent_run_id,
        }
    )


# --- the per-invocation lock ------------------------------------------------------------------------------
def _lock_key(session_id: uuid.UUID, invocation_id: str) -> int:
    digest = hashlib.sha256(f"{session_id}\0{invocation_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


@contextmanager
def invocation_lock(session_id: uuid.UUID, invocation_id: str) -> Iterator[bool]:
    """Try to take the invocation's advisory lock on this request's database connection; yields
    whether it was taken, and releases it at the end. Released by PostgreSQL too if the process dies
    (its connection closes), which is how a dead worker's ``dispatching`` call is recognised."""
    key = _lock_key(session_id, invocation_id)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_NAMESPACE, key])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_NAMESPACE, key])


def invocation_lock_free(session_id: uuid.UUID, invocation_id: str) -> bool:
    """Is nobody working on the invocation right now (read-only probe, for receipts)?"""
    with invocation_lock(session_id, invocation_id) as held:
        return held


# --- loading ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _ToolContext:
    """One authorized tool as stored (the row the catalog was built from) and its provider."""

    route_key: str
    catalog_tool: CatalogTool
    compiled: CompiledTool
    provider_base_url: str
    provider_timeout_ms: int
    provider_rate_limit: int
    provider: Any
    fingerprint: str


# What dispatch needs of the stored tool and its provider; never the provider's stored spec.
_TOOL_CONTEXT_FIELDS = (
    "compiled",
    "execution_fingerprint",
    "provider__name",
    "provider__base_url",
    "provider__timeout_ms",
    "provider__rate_limit_per_min",
    "provider__secret_encrypted",
)


def _tool_context(access: WorkspaceAccess, tool: CatalogTool) -> _ToolContext | None:
    """The stored tool the catalog was built from (pinned by its material digest) and its provider."""
    row = (
        ProviderTool.objects.select_related("provider")
        .only(*_TOOL_CONTEXT_FIELDS)
        .filter(pk=tool.tool_id, material_digest=tool.material_digest)
        .first()
    )
    if row is None:
        return None
    provider = row.provider
    return _ToolContext(
        route_key=access.route_key,
        catalog_tool=tool,
        compiled=CompiledTool.from_dict(row.compiled),
        provider_base_url=provider.base_url,
        provider_timeout_ms=provider.timeout_ms,
        provider_rate_limit=provider.rate_limit_per_min,
        provider=provider,
        fingerprint=invocation_execution_fingerprint(
            route_key=access.route_key,
            provider_name=provider.name,
            base_url=provider.base_url,
            tool_fp=row.execution_fingerprint,
        ),
    )


def _seal_arguments(job_id: uuid.UUID, arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return seal(text, purpose=ARGUMENTS_PURPOSE, context=str(job_id))


def _open_arguments(invocation: ToolInvocation) -> dict[str, Any] | None:
    """The frozen arguments, only if they still hash to the invocation's ``args_hash``."""
    try:
        text = open_sealed(
            invocation.arguments_sealed, purpose=ARGUMENTS_PURPOSE, context=str(invocation.job_id)
        )
    except SealedSecretError:
        return None
    arguments = json.loads(text)
    return arguments if arguments_hash(arguments) == invocation.args_hash else None


# --- audit ------------------------------------------------------------------------------------------------
def _audit_entry(invocation: ToolInvocation, identity: AgentIdentity, action: str, **data: Any) -> AuditEntry:
    """An invocation milestone: coordinates, tool and argument *key names* — never values or bodies."""
    return AuditEntry(
        actor=identity.actor,
        action=f"agent_runtime.invocation.{action}",
        route_key=invocation.route_key,
        target_type="tool_invocation",
        target_id=str(invocation.job_id),
        data={
            "invocation_id": invocation.invocation_id,
            "tool": invocation.tool,
            "provider": invocation.provider,
            **data,
        },
    )


def _audit(invocation: ToolInvocation, identity: AgentIdentity, action: str, **data: Any) -> None:
    audit_record_many([_audit_entry(invocation, identity, action, **data)])


def _created_entry(invocation: ToolInvocation, identity: AgentIdentity) -> AuditEntry:
    return _audit_entry(
        invocation, identity, "created", argument_keys=invocation.argument_keys, run_id=_run_id(invocation)
    )


# --- pre-dispatch rules -----------------------------------------------------------------------------------
def _schema_problem(compiled: CompiledTool, arguments: dict[str, Any]) -> str | None:
    """The path of the first argument the tool's input schema refuses, or None."""
    errors_found = sorted(
        Draft202012Validator(compiled.input_schema).iter_errors(arguments),
        key=lambda e: list(e.absolute_path),
    )
    if not errors_found:
        return None
    path = ".".join(str(part) for part in errors_found[0].absolute_path)
    return path or "$"


def _run_frozen(
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


def _budget_exhausted(*, run_id: uuid.UUID | None, limit: int, exclude_pk: int | None) -> bool:
    """``tools.max_calls`` per run: calls that were sent or wait for approval count."""
    if run_id is None:
        return False
    used = ToolInvocation.objects.filter(run_id=run_id).exclude(
        status=ToolInvocation.Status.REJECTED_BEFORE_DISPATCH
    )
    if exclude_pk is not None:
        used = used.exclude(pk=exclude_pk)
    return used.count() >= limit


def _approval_outcome(ctx: _ToolContext, arguments: dict[str, Any]) -> ApprovalPolicyOutcome:
    outcome = approval_policy_for(ctx.compiled, arguments)
    if not outcome.required and ctx.catalog_tool.forced_approval:
        return ApprovalPolicyOutcome(True, POLICY_CONFIRM_REQUIRED, REASON_CONFIRM_REQUIRED)
    return outcome


# --- entry points -----------------------------------------------------------------------------------------
def invocation_create(*, identity: AgentIdentity, request: InvocationRequest) -> dict[str, Any]:
    """Create (or replay) the invocation ``request`` and carry it as far as the rules allow.

    Raises the route gate's errors, 403 ``agent_direct_disabled``, 409 ``invocation_conflict`` /
    ``capability_changed``, 404 ``tool_not_found`` / ``run_not_found``; every other outcome is a result
    state (``in_progress``, ``awaiting_approval``, ``rejected_before_dispatch``, ``executed`` …).
    """
    # What a JavaScript peer holds after JSON.parse: the snapshot, the hash and the request sent all
    # use this one value (1.0 is 1, an integer beyond 2^53 the nearest double).
    request = replace(request, arguments=js_normalized(request.arguments))
    access, catalog = invocation_surface(identity=identity, route_key=request.route)
    args_hash = arguments_hash(request.arguments)
    request_hash = _request_hash(request, args_hash)
    coords = (request.invocation_id, request.route, request.tool)
    with invocation_lock(identity.session.pk, request.invocation_id) as held:
        if not held:
            return invocation_result(
                invocation_id=request.invocation_id,
                route=request.route,
                tool=request.tool,
                state="in_progress",
                text=TEXT_IN_PROGRESS,
                auto_retry_allowed=True,
            )
        existing = _invocation_for_update(identity, request.invocation_id)
        if existing is not None:
            if existing.request_hash != request_hash:
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
        ctx = _tool_context(access, tool)
        if ctx is None:
            raise errors.CapabilityChanged()
        hit = client_rate_check(client=identity.client)
        if hit is not None:
            return _rate_limited(coords, hit)
        return _create_new(
            identity=identity,
            access=access,
            ctx=ctx,
            request=request,
            args_hash=args_hash,
            request_hash=request_hash,
            run=run,
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
            return _result_for(known, "in_progress", TEXT_IN_PROGRESS, auto_retry_allowed=True)
        invocation = _invocation_for_update(identity, invocation_id)
        with transaction.atomic():
            _audit(invocation, identity, "resumed", status=invocation.status)
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
def _create_new(
    *,
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: _ToolContext,
    request: InvocationRequest,
    args_hash: str,
    request_hash: str,
    run: AgentRun | None,
) -> dict[str, Any]:
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
        request_hash=request_hash,
        args_hash=args_hash,
        argument_keys=sorted(request.arguments),
        capability_revision=request.capability_revision,
        execution_fingerprint=ctx.fingerprint,
        on_behalf_of=identity.session.on_behalf_of or "",
    )
    invocation.arguments_sealed = _seal_arguments(invocation.job_id, request.arguments)

    rejection = _rule_rejection(
        identity=identity, ctx=ctx, arguments=request.arguments, run=run, exclude_pk=None
    )
    if rejection is not None:
        code, text = rejection
        return _store_rejected(identity, invocation, code, text)
    try:
        approval = _approval_outcome(ctx, request.arguments)
    except ApprovalConditionError as exc:
        text = TEXT_APPROVAL_CONDITION.format(code=exc.code, field=exc.param or "$")
        return _store_rejected(identity, invocation, exc.code, text)
    if approval.required:
        return _store_awaiting(identity, access, ctx, invocation, request.arguments, approval)
    hit = _dispatch_limits(ctx)
    if hit is not None:
        return _rate_limited((invocation.invocation_id, invocation.route_key, invocation.tool), hit)
    if _budget_exhausted(
        run_id=run.pk if run else None, limit=access.effective["tools"]["max_calls"], exclude_pk=None
    ):
        text = TEXT_REJECTED["tool_call_budget_exhausted"].format(
            limit=access.effective["tools"]["max_calls"]
        )
        return _store_rejected(identity, invocation, "tool_call_budget_exhausted", text)
    return _dispatch(identity=identity, ctx=ctx, invocation=invocation, arguments=request.arguments, new=True)


def _rule_rejection(
    *,
    identity: AgentIdentity,
    ctx: _ToolContext,
    arguments: dict[str, Any],
    run: AgentRun | None,
    exclude_pk: int | None,
) -> tuple[str, str] | None:
    compiled = ctx.compiled
    if compiled.requires_subject and not identity.session.on_behalf_of:
        return "subject_required", TEXT_REJECTED["subject_required"]
    problem = _schema_problem(compiled, arguments)
    if problem is not None:
        return "arguments_invalid", TEXT_REJECTED["arguments_invalid"].format(field=problem)
    if not compiled.readonly and _run_frozen(
        identity=identity, route_key=ctx.route_key, run_id=run.pk if run else None, exclude_pk=exclude_pk
    ):
        return "run_frozen", TEXT_REJECTED["run_frozen"]
    return None


def _dispatch_limits(ctx: _ToolContext) -> RateLimitHit | None:
    return dispatch_rate_check(
        provider=ctx.provider.name,
        tool=ctx.compiled.name,
        tool_limit=ctx.compiled.rate_limit,
        provider_per_min=ctx.provider_rate_limit,
    )


def _insert(invocation: ToolInvocation) -> None:
    """Insert a new invocation, first thing in the caller's transaction; the unique (session,
    invocation id) backs up the advisory lock. No savepoint: a violation rolls the whole transaction
    back, and nothing was done in it before."""
    try:
        with transaction.atomic(savepoint=False):
            invocation.save(force_insert=True)
    except IntegrityError:
        raise errors.InvocationConflict() from None


def _store_rejected(
    identity: AgentIdentity, invocation: ToolInvocation, code: str, text: str
) -> dict[str, Any]:
    invocation.status = ToolInvocation.Status.REJECTED_BEFORE_DISPATCH
    invocation.reason_code = code
    invocation.result = _result_for(invocation, "rejected_before_dispatch", text)
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        _insert(invocation)
        audit_record_many(
            [
                _created_entry(invocation, identity),
                _audit_entry(invocation, identity, "outcome", state="rejected_before_dispatch", reason=code),
            ]
        )
    return invocation.result


def _run_id(invocation: ToolInvocation) -> str | None:
    return str(invocation.run_id) if invocation.run_id else None


def _store_awaiting(
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: _ToolContext,
    invocation: ToolInvocation,
    arguments: dict[str, Any],
    outcome: ApprovalPolicyOutcome,
) -> dict[str, Any]:
    invocation.status = ToolInvocation.Status.AWAITING_APPROVAL
    with transaction.atomic():
        _insert(invocation)
        audit_record_many([_created_entry(invocation, identity)])
        approval = approval_request_create(
            invocation=invocation, access=access, compiled=ctx.compiled, arguments=arguments, outcome=outcome
        )
        # The saved result says what the agent was told; the approval's own state moves on separately.
        invocation.result = _awaiting_result(invocation, approval)
        invocation.save(update_fields=["result", "updated_at"])
        _audit(invocation, identity, "approval_requested", approval_id=approval.pk, policy=approval.policy)
    return invocation.result


def _awaiting_result(invocation: ToolInvocation, approval: ToolApproval) -> dict[str, Any]:
    summary = (approval.summary or f"{invocation.tool} ({approval.reason})").rstrip()
    if not summary.endswith((".", "?", "!")):
        summary += "."  # a summary rendered from the tool's template may end mid-sentence
    text = TEXT_AWAITING.format(
        approval_id=approval.pk, summary=summary, invocation_id=invocation.invocation_id
    )
    return _result_for(invocation, "awaiting_approval", text, approval_id=approval.pk)


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
        _mark_uncertain(identity, invocation, "worker_lost")
        return _reconciled_or_unknown(identity, invocation)
    if status == ToolInvocation.Status.RECONCILIATION_REQUIRED:
        return _reconciled_or_unknown(identity, invocation)
    if status in STABLE:
        return invocation.result
    # Awaiting approval: the execution contract must be the one the approver saw.
    ctx = _tool_context(access, tool)
    if ctx is None or ctx.fingerprint != invocation.execution_fingerprint:
        raise errors.CapabilityChanged()
    approval = ToolApproval.objects.get(invocation=invocation)
    approval = _expire_if_due(approval)
    if approval.status == ToolApproval.Status.PENDING:
        return _awaiting_result(invocation, approval)
    if approval.status in (ToolApproval.Status.DENIED, ToolApproval.Status.EXPIRED):
        template = TEXT_DENIED if approval.status == ToolApproval.Status.DENIED else TEXT_EXPIRED
        return _finish_without_dispatch(
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


def _expire_if_due(approval: ToolApproval) -> ToolApproval:
    if approval.is_due():
        ToolApproval.objects.filter(pk=approval.pk, status=ToolApproval.Status.PENDING).update(
            status=ToolApproval.Status.EXPIRED
        )
        approval.refresh_from_db()
    return approval


def _finish_without_dispatch(
    identity: AgentIdentity, invocation: ToolInvocation, status: str, reason: str, text: str, **kwargs: Any
) -> dict[str, Any]:
    state = "denied" if status == ToolInvocation.Status.DENIED else "rejected_before_dispatch"
    invocation.status = status
    invocation.reason_code = reason
    invocation.result = _result_for(invocation, state, text, **kwargs)
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        invocation.save(update_fields=["status", "reason_code", "result", "completed_at", "updated_at"])
        _audit(invocation, identity, "outcome", state=state, reason=reason)
    return invocation.result


def _dispatch_approved(
    *,
    identity: AgentIdentity,
    access: WorkspaceAccess,
    ctx: _ToolContext,
    invocation: ToolInvocation,
    approval: ToolApproval,
) -> dict[str, Any]:
    arguments = _open_arguments(invocation)
    if arguments is None:
        return _finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "frozen_arguments_unavailable",
            TEXT_REJECTED["frozen_arguments_unavailable"],
        )
    if approval.args_hash != invocation.args_hash or arguments_hash(approval.args) != invocation.args_hash:
        return _finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "approval_args_mismatch",
            TEXT_REJECTED["approval_args_mismatch"],
        )
    hit = client_rate_check(client=identity.client)
    if hit is None:
        hit = _dispatch_limits(ctx)
    if hit is not None:
        # The approval is not consumed: the same invocation may be resumed after the window.
        return _rate_limited((invocation.invocation_id, invocation.route_key, invocation.tool), hit)
    if _budget_exhausted(
        run_id=invocation.run_id, limit=access.effective["tools"]["max_calls"], exclude_pk=invocation.pk
    ):
        text = TEXT_REJECTED["tool_call_budget_exhausted"].format(
            limit=access.effective["tools"]["max_calls"]
        )
        return _finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "tool_call_budget_exhausted",
            text,
        )
    if not ctx.compiled.readonly and _run_frozen(
        identity=identity, route_key=invocation.route_key, run_id=invocation.run_id, exclude_pk=invocation.pk
    ):
        return _finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "run_frozen",
            TEXT_REJECTED["run_frozen"],
        )
    return _dispatch(
        identity=identity, ctx=ctx, invocation=invocation, arguments=arguments, new=False, approval=approval
    )


# --- dispatch and outcome ---------------------------------------------------------------------------------
class _ApprovalAlreadyConsumed(Exception):
    """Raised inside the dispatch transaction to roll it back: another request consumed the approval."""


def _dispatch(
    *,
    identity: AgentIdentity,
    ctx: _ToolContext,
    invocation: ToolInvocation,
    arguments: dict[str, Any],
    new: bool,
    approval: ToolApproval | None = None,
) -> dict[str, Any]:
    """Commit the journal (and consume the approval), then send, then record the outcome.

    Nothing is sent unless the journal row committed first; a request that cannot be built is
    refused before anything is written as dispatching.
    """
    compiled = ctx.compiled
    key = idempotency_key(
        job_id=invocation.job_id,
        tool=invocation.tool,
        args_hash=invocation.args_hash,
        on_behalf_of=invocation.on_behalf_of,
    )
    try:
        secret = provider_secret_open(provider=ctx.provider)
    except SealedSecretError:
        secret = None
    refusal: tuple[str, str] | None = None
    request = None
    if not secret:
        refusal = ("secret_unavailable", "")
    else:
        try:
            request = http_dispatch.dispatch_request_build(
                tool=compiled,
                arguments=arguments,
                base_url=ctx.provider_base_url,
                secret=secret,
                job_id=str(invocation.job_id),
                client_app_id=identity.client.app_id,
                on_behalf_of=invocation.on_behalf_of,
                idempotency_key=None if compiled.readonly else key,
            )
        except http_dispatch.DispatchBuildError as exc:
            refusal = (exc.code, exc.field)
    if refusal is not None:
        code, field = refusal
        text = TEXT_REJECTED[code].format(field=field)
        if new:
            return _store_rejected(identity, invocation, code, text)
        return _finish_without_dispatch(
            identity, invocation, ToolInvocation.Status.REJECTED_BEFORE_DISPATCH, code, text
        )

    now = timezone.now()
    invocation.status = ToolInvocation.Status.DISPATCHING
    invocation.dispatched_at = now
    try:
        with transaction.atomic():
            events = []
            if new:
                _insert(invocation)
                events.append(_created_entry(invocation, identity))
            else:
                if approval is not None:
                    consumed = ToolApproval.objects.filter(
                        pk=approval.pk, status=ToolApproval.Status.APPROVED, consumed_at__isnull=True
                    ).update(consumed_at=now)
                    if consumed != 1:
                        raise _ApprovalAlreadyConsumed()
                invocation.save(update_fields=["status", "dispatched_at", "updated_at"])
            journal = ToolCallJournal.objects.create(
                invocation=invocation, idempotency_key=key, started_at=now
            )
            events.append(
                _audit_entry(
                    invocation,
                    identity,
                    "dispatched",
                    idempotency_key=None if compiled.readonly else key,
                    approval_id=approval.pk if approval is not None else None,
                )
            )
            audit_record_many(events)
    except _ApprovalAlreadyConsumed:
        invocation.refresh_from_db()
        return _finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "approval_already_consumed",
            TEXT_REJECTED["approval_already_consumed"],
        )

    timeout_ms = compiled.timeout_ms or ctx.provider_timeout_ms
    outcome = http_dispatch.dispatch_send(request, timeout_ms=timeout_ms)
    return _record_outcome(identity, invocation, journal, outcome)


INVOCATION_OUTCOME_FIELDS = (
    "status",
    "result",
    "business_status",
    "reason_code",
    "completed_at",
    "updated_at",
)
JOURNAL_OUTCOME_FIELDS = (
    "state",
    "http_status",
    "ok",
    "text",
    "error",
    "duration_ms",
    "response_at",
    "completed_at",
)


def _record_outcome(
    identity: AgentIdentity,
    invocation: ToolInvocation,
    journal: ToolCallJournal,
    outcome: http_dispatch.DispatchOutcome,
) -> dict[str, Any]:
    now = timezone.now()
    if outcome.kind == http_dispatch.OUTCOME_UNKNOWN:
        return _mark_uncertain(
            identity, invocation, outcome.error, journal=journal, duration_ms=outcome.duration_ms
        )
    if outcome.kind == http_dispatch.OUTCOME_NOT_SENT:
        status, state, business_status = (
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "rejected_before_dispatch",
            None,
        )
        # Not sent: unreachable, or refused by the outbound target policy (its own text).
        text = TEXT_REJECTED.get(outcome.error, TEXT_REJECTED["business_unreachable"])
        result = _result_for(invocation, state, text)
        invocation.reason_code = outcome.error
    else:
        business_status = outcome.status
        if outcome.ok:
            status, state = ToolInvocation.Status.EXECUTED, "executed"
        else:
            status, state = ToolInvocation.Status.BUSINESS_REJECTED, "business_rejected"
        result = _result_for(invocation, state, outcome.text, ok=outcome.ok, business_status=business_status)
    invocation.status = status
    invocation.result = result
    invocation.business_status = business_status
    invocation.completed_at = now
    journal.state = ToolCallJournal.State.COMPLETED
    journal.http_status = business_status
    journal.ok = outcome.ok
    journal.text = result["text"]
    journal.error = outcome.error
    journal.duration_ms = outcome.duration_ms
    journal.response_at = now if outcome.kind == http_dispatch.OUTCOME_ANSWERED else None
    journal.completed_at = now
    try:
        with transaction.atomic():
            journal.save(update_fields=JOURNAL_OUTCOME_FIELDS)
            invocation.save(update_fields=INVOCATION_OUTCOME_FIELDS)
            _audit(
                invocation,
                identity,
                "outcome",
                state=state,
                business_status=business_status,
                duration_ms=outcome.duration_ms,
                reason=outcome.error or None,
            )
    except DatabaseError:
        # The business system answered but the outcome could not be recorded (e.g. the ledger
        # failed): keep what it said, as degraded evidence, and never send the call again.
        return _evidence_degraded(identity, invocation, journal, outcome)
    return result


def _evidence_degraded(
    identity: AgentIdentity,
    invocation: ToolInvocation,
    journal: ToolCallJournal,
    outcome: http_dispatch.DispatchOutcome,
) -> dict[str, Any]:
    """``reconciliation_required`` with the answer kept on the journal (state ``evidence_degraded``).
    If even this cannot be written, the error propagates: the invocation stays ``dispatching``, and
    whoever takes its lock next finds it abandoned (``worker_lost``) — still never resent."""
    invocation.refresh_from_db()
    result = _result_for(
        invocation,
        "reconciliation_required",
        TEXT_UNKNOWN.format(reason="evidence_degraded", key=journal.idempotency_key or "n/a"),
    )
    with transaction.atomic():
        ToolCallJournal.objects.filter(pk=journal.pk).update(
            state=ToolCallJournal.State.EVIDENCE_DEGRADED,
            http_status=outcome.status,
            ok=outcome.ok,
            text=outcome.text[:RESULT_TEXT_MAX_CHARS],
            error="outcome_not_recorded",
            duration_ms=outcome.duration_ms,
            response_at=timezone.now(),
        )
        invocation.status = ToolInvocation.Status.RECONCILIATION_REQUIRED
        invocation.reason_code = "evidence_degraded"
        invocation.result = result
        invocation.save(update_fields=["status", "reason_code", "result", "updated_at"])
        _audit(invocation, identity, "reconciliation_required", reason="evidence_degraded")
    return result


def _mark_uncertain(
    identity: AgentIdentity,
    invocation: ToolInvocation,
    reason: str,
    *,
    journal: ToolCallJournal | None = None,
    duration_ms: int | None = None,
) -> dict[str, Any]:
    journal = journal or ToolCallJournal.objects.filter(invocation=invocation).first()
    key = journal.idempotency_key if journal is not None else ""
    result = _result_for(
        invocation, "reconciliation_required", TEXT_UNKNOWN.format(reason=reason, key=key or "n/a")
    )
    with transaction.atomic():
        if journal is not None:
            ToolCallJournal.objects.filter(pk=journal.pk).exclude(
                state=ToolCallJournal.State.COMPLETED
            ).update(state=ToolCallJournal.State.UNCERTAIN, error=reason, duration_ms=duration_ms)
        invocation.status = ToolInvocation.Status.RECONCILIATION_REQUIRED
        invocation.reason_code = reason
        invocation.result = result
        invocation.save(update_fields=["status", "reason_code", "result", "updated_at"])
        _audit(invocation, identity, "reconciliation_required", reason=reason)
    return result


def _reconciled_or_unknown(identity: AgentIdentity, invocation: ToolInvocation) -> dict[str, Any]:
    """An unknown outcome stays unknown until an operator resolved it; then the resolution, once."""
    journal = ToolCallJournal.objects.filter(invocation=invocation).first()
    if journal is None or not journal.resolution:
        return invocation.result
    if journal.resolution == ToolCallJournal.Resolution.EXECUTED:
        status, state, ok = ToolInvocation.Status.EXECUTED, "executed", True
        text = TEXT_RECONCILED_EXECUTED + (
            f" Evidence: {journal.resolution_evidence}" if journal.resolution_evidence else ""
        )
    else:
        status, state, ok = ToolInvocation.Status.REJECTED_BEFORE_DISPATCH, "rejected_before_dispatch", False
        text = TEXT_RECONCILED_NOT_EXECUTED + (
            f" Evidence: {journal.resolution_evidence}" if journal.resolution_evidence else ""
        )
    result = _result_for(
        invocation,
        state,
        text,
        ok=ok,
        reconciliation={"resolution": journal.resolution, "resolved_at": utc_iso(journal.resolved_at)},
    )
    invocation.status = status
    invocation.result = result
    invocation.reason_code = f"reconciled_{journal.resolution}"
    invocation.completed_at = timezone.now()
    with transaction.atomic():
        invocation.save(update_fields=["status", "result", "reason_code", "completed_at", "updated_at"])
        _audit(invocation, identity, "outcome", state=state, reason=invocation.reason_code)
    return result


__all__ = [
    "ARGUMENTS_MAX_BYTES",
    "ENVELOPE_MAX_BYTES",
    "RESUME_BODY_MAX_BYTES",
    "InvocationRequest",
    "invocation_create",
    "invocation_resume",
]
