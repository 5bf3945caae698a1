"""Sending a call and recording what came of it (docs/protocol.md "Dispatch", "Unknown outcomes").

Never a duplicate write: the journal row (and the consumed approval) commit before the request
leaves; the network is never used inside a transaction or under a row lock; an attempt whose outcome
is unknown becomes ``reconciliation_required`` and is never sent again. The caller holds a slot of the
provider's bulkhead (``locks.provider_slot``) from before the dispatch limits until the business
system has answered (the ``slot`` it passes is released then; without one, until the outcome is
recorded): recording the outcome holds no thread on the provider.

The journal's transaction asks for no audit seal of its own: the outcome's (or the unknown outcome's)
transaction, right after the business call, seals the events of both, so one seal runs per call and
none before the request leaves. Should the process die in between, the journal's events stay
unsealed until the next seal anywhere (any append asks for one; verification seals too).
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from agent_runtime.identity import AgentIdentity
from agent_runtime.invocation_results import TEXT_UNKNOWN, result_text
from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.secrets_box import SealedSecretError
from agent_runtime.services import http_dispatch
from agent_runtime.services.data_policy import (
    data_policy_audit,
    data_policy_count_released,
    provider_own_hosts,
    tool_result_release,
)
from agent_runtime.services.invocations.answers import StoredAnswer, answer_stored
from agent_runtime.services.invocations.context import ToolContext
from agent_runtime.services.invocations.identifiers import idempotency_key
from agent_runtime.services.invocations.locks import ProviderSlot
from agent_runtime.services.invocations.records import (
    audit,
    audit_entry,
    created_entry,
    finish_without_dispatch,
    invocation_insert,
    mark_uncertain,
    store_rejected,
)
from agent_runtime.services.invocations.results import TEXT_REJECTED, result_for
from agent_runtime.services.invocations.withdrawals import invocation_withdraw_finish
from agent_runtime.services.providers import provider_secret_open
from bailing import tracing
from bailing.audit.ledger import audit_record_many


class _ApprovalAlreadyConsumed(Exception):
    """Raised inside the dispatch transaction to roll it back: another request consumed the approval."""


def invocation_dispatch(
    *,
    identity: AgentIdentity,
    ctx: ToolContext,
    invocation: ToolInvocation,
    arguments: dict[str, Any],
    new: bool,
    approval: ToolApproval | None = None,
    slot: ProviderSlot | None = None,
) -> dict[str, Any]:
    """Commit the journal (and consume the approval), then send, then record the outcome; the caller
    holds a slot of the provider's bulkhead. Nothing is sent unless the journal row committed first;
    a request that cannot be built is refused before anything is written as dispatching."""
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
            return store_rejected(identity, invocation, code, text)
        return finish_without_dispatch(
            identity, invocation, ToolInvocation.Status.REJECTED_BEFORE_DISPATCH, code, text
        )

    now = timezone.now()
    invocation.status = ToolInvocation.Status.DISPATCHING
    invocation.dispatched_at = now
    try:
        with tracing.span("journal.commit", new=new), transaction.atomic():
            events = []
            if new:
                invocation_insert(invocation)
                events.append(created_entry(invocation, identity))
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
                audit_entry(
                    invocation,
                    identity,
                    "dispatched",
                    idempotency_key=None if compiled.readonly else key,
                    approval_id=approval.pk if approval is not None else None,
                )
            )
            audit_record_many(events, seal=False)  # sealed with the outcome's (module docstring)
    except _ApprovalAlreadyConsumed:
        invocation.refresh_from_db()
        if ToolApproval.objects.filter(pk=approval.pk, status=ToolApproval.Status.WITHDRAWN).exists():
            # The caller withdrew the call between its approval and this dispatch: nothing is sent.
            return invocation_withdraw_finish(identity, invocation, approval.pk)
        return finish_without_dispatch(
            identity,
            invocation,
            ToolInvocation.Status.REJECTED_BEFORE_DISPATCH,
            "approval_already_consumed",
            TEXT_REJECTED["approval_already_consumed"],
        )

    timeout_ms = compiled.timeout_ms or ctx.provider_timeout_ms
    # The httpx instrumentation's client span below carries the traceparent to the business system
    # (a header outside the signature, docs/protocol.md "Dispatch").
    with tracing.span("dispatch", tool=invocation.tool, provider=invocation.provider, method=compiled.method):
        outcome = http_dispatch.dispatch_send(request, timeout_ms=timeout_ms)
        tracing.annotate(outcome=outcome.kind, business_status=outcome.status, error=outcome.error or None)
    if slot is not None:
        slot.release()  # no thread waits on the business system any more
    return _record_outcome(identity, ctx, invocation, journal, outcome)


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
    "text_sealed",
    "data_policy",
    "error",
    "duration_ms",
    "response_at",
    "completed_at",
)


def _record_outcome(
    identity: AgentIdentity,
    ctx: ToolContext,
    invocation: ToolInvocation,
    journal: ToolCallJournal,
    outcome: http_dispatch.DispatchOutcome,
) -> dict[str, Any]:
    now = timezone.now()
    if outcome.kind == http_dispatch.OUTCOME_UNKNOWN:
        return mark_uncertain(
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
        result = result_for(invocation, state, text)
        invocation.reason_code = outcome.error
    else:
        business_status = outcome.status
        if outcome.ok:
            status, state = ToolInvocation.Status.EXECUTED, "executed"
        else:
            status, state = ToolInvocation.Status.BUSINESS_REJECTED, "business_rejected"
        result = result_for(invocation, state, outcome.text, ok=outcome.ok, business_status=business_status)
    # What the agent may see of the answer.
    released = tool_result_release(
        route=ctx.route,
        result=result,
        provider=invocation.provider,
        own_hosts=provider_own_hosts(base_url=ctx.provider_base_url),
        count=False,  # counted once the outcome is recorded: a degraded outcome releases none of it
    )
    # Under a data policy for tool results the released form is stored and the raw answer sealed
    # (answers.py); without one both keep the raw answer, as before.
    stored = answer_stored(
        route=ctx.route,
        job_id=invocation.job_id,
        result=result,
        released=released,
        answered=outcome.kind == http_dispatch.OUTCOME_ANSWERED,
    )
    invocation.status = status
    invocation.result = stored.result
    invocation.business_status = business_status
    invocation.completed_at = now
    journal.state = ToolCallJournal.State.COMPLETED
    journal.http_status = business_status
    journal.ok = outcome.ok
    journal.text = stored.text
    journal.text_sealed = stored.sealed
    journal.data_policy = stored.data_policy
    journal.error = outcome.error
    journal.duration_ms = outcome.duration_ms
    journal.response_at = now if outcome.kind == http_dispatch.OUTCOME_ANSWERED else None
    journal.completed_at = now
    try:
        with tracing.span("journal.outcome", state=state), transaction.atomic():
            journal.save(update_fields=JOURNAL_OUTCOME_FIELDS)
            invocation.save(update_fields=INVOCATION_OUTCOME_FIELDS)
            audit(
                invocation,
                identity,
                "outcome",
                state=state,
                business_status=business_status,
                duration_ms=outcome.duration_ms,
                reason=outcome.error or None,
                **data_policy_audit(released),
            )
    except DatabaseError:
        # The business system answered but the outcome could not be recorded (e.g. the ledger
        # failed): keep what it said, as degraded evidence, and never send the call again.
        return _evidence_degraded(identity, invocation, journal, outcome, stored)
    data_policy_count_released(route_key=ctx.route.route_key, result=released)
    return released


def _evidence_degraded(
    identity: AgentIdentity,
    invocation: ToolInvocation,
    journal: ToolCallJournal,
    outcome: http_dispatch.DispatchOutcome,
    stored: StoredAnswer,
) -> dict[str, Any]:
    """``reconciliation_required`` with the answer kept on the journal (state ``evidence_degraded``).
    If even this cannot be written, the error propagates: the invocation stays ``dispatching``, and
    whoever takes its lock next finds it abandoned (``worker_lost``) — still never resent. Under a
    data policy the answer is kept as everywhere else: released form in clear, raw answer sealed."""
    invocation.refresh_from_db()
    result = result_for(
        invocation,
        "reconciliation_required",
        TEXT_UNKNOWN.format(reason="evidence_degraded", key=journal.idempotency_key or "n/a"),
    )
    with transaction.atomic():
        ToolCallJournal.objects.filter(pk=journal.pk).update(
            state=ToolCallJournal.State.EVIDENCE_DEGRADED,
            http_status=outcome.status,
            ok=outcome.ok,
            text=stored.text if stored.sealed else result_text(outcome.text),
            text_sealed=stored.sealed,
            data_policy=stored.data_policy,
            error="outcome_not_recorded",
            duration_ms=outcome.duration_ms,
            response_at=timezone.now(),
        )
        invocation.status = ToolInvocation.Status.RECONCILIATION_REQUIRED
        invocation.reason_code = "evidence_degraded"
        invocation.result = result
        invocation.save(update_fields=["status", "reason_code", "result", "updated_at"])
        audit(invocation, identity, "reconciliation_required", reason="evidence_degraded")
    return result
