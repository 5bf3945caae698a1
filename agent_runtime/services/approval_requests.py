"""Approval requests of governed invocations, and their notification to the business approver.

A call that needs approval gets one :class:`ToolApproval` bound to the ``args_hash`` of its complete
arguments, with the ``bailing.approval-intent.v1`` snapshot the approver decides on
(docs/protocol.md "Approvals"). When the route names an approval channel (``tools.approval``), a
notification is recorded in the same transaction and delivered *after* commit, on a thread of its own:
a signed ``POST`` (the callback scheme, keyed by the owning client's Client Token, which the business
system holds), retried on a network error, a timeout, a 5xx or a 429 after 0, 2 and 10 s
(``BAILING_APPROVAL_NOTIFY_DELAYS``). Each attempt is bounded in time and in bytes: one deadline of
``BAILING_APPROVAL_NOTIFY_TIMEOUT`` (10 s) for connecting, sending, the answer's headers and what is
read of its body, and reading stops after :data:`NOTIFY_ANSWER_MAX_BYTES` of that body — the hub needs only
the status, so a huge, endless or dripping answer costs neither memory nor more than the deadline.
The URL obeys the outbound target rules (docs/protocol.md "Outbound targets"), checked again at
delivery: a refused one is ``target_forbidden`` and is not retried. Delivery never blocks or fails the
agent's call; its outcome is on the notification row, shown in the console (and a failed one can be
sent again from there).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agent_runtime import budgets
from agent_runtime.config.fields import ConfigError, read_webhook_url
from agent_runtime.models import ApprovalNotification, Client, ToolApproval, ToolInvocation
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.services.clients import client_token_plaintext
from agent_runtime.tools.approval import ApprovalPolicyOutcome
from agent_runtime.tools.compiler import CompiledTool
from bailing.api.jsjson import js_string, js_stringify
from bailing.api.limits import compact_json_utf8_bytes, truncate_utf8
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.outbound import TargetForbidden, outbound_client
from bailing.signing import sign_callback

logger = logging.getLogger("bailing.approvals")

INTENT_SCHEMA = "bailing.approval-intent.v1"
DECISION_SCHEMA = "bailing.approval-decision.v1"
WEBHOOK_TYPES = frozenset({"business_webhook", "approval_webhook"})
PLAIN_WEBHOOK_TYPE = "webhook"
# Reading a webhook answer's body stops once this much of it has arrived: only its status matters,
# nothing of the body is kept, and a business system could answer megabytes or never stop. The
# socket is read 64 KiB at a time, so an attempt takes in less than twice this.
NOTIFY_ANSWER_MAX_BYTES = 64 * 1024
NOTIFY_TARGET_FORBIDDEN = "target_forbidden"
# A notification body is at most this (spec: notifications are bounded): the complete arguments when
# they fit, else left out (``args_omitted``) and read on demand in the console.
WEBHOOK_BODY_MAX_BYTES = budgets.WEBHOOK_BODY_MAX_BYTES
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}|\{(\w+)\}")


def approval_summary(prompt: str | None, arguments: dict[str, Any]) -> str:
    """The ACC ``approval.prompt`` with ``{name}`` and ``{{name}}`` replaced by the argument's value
    (JavaScript ``String(value)``); a placeholder without an argument stays as written."""
    if not prompt:
        return ""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        value = arguments.get(name)
        return match.group(0) if value is None else js_string(value)

    return _PLACEHOLDER.sub(replace, prompt)


def _intent(
    *,
    approval_id: int,
    invocation: ToolInvocation,
    access: WorkspaceAccess,
    compiled: CompiledTool,
    arguments: dict[str, Any],
    outcome: ApprovalPolicyOutcome,
    summary: str,
    client_app_id: str,
) -> dict[str, Any]:
    intent: dict[str, Any] = {
        "approval_id": approval_id,
        "kind": "tool_approval_intent",
        "schema_version": INTENT_SCHEMA,
        "job_id": str(invocation.job_id),
        "request_id": invocation.request_id,
        "route_key": access.route_key,
        "route_name": access.effective["name"],
        "source": f"agent:{client_app_id}",
    }
    if invocation.on_behalf_of:
        intent["subject"] = invocation.on_behalf_of
    if compiled.subject_field:
        intent["subject_field"] = compiled.subject_field
    intent |= {
        "provider": invocation.provider,
        "tool": invocation.tool,
        "scope": compiled.scope,
        "risk": compiled.risk,
        "policy": outcome.policy,
        "reason": outcome.reason,
        "method": compiled.method,
        "path": compiled.path,
        "args": arguments,
        "args_hash": invocation.args_hash,
    }
    if summary:
        intent["summary"] = summary
    if outcome.confirm_when is not None:
        intent["confirm_when"] = outcome.confirm_when
    intent["metadata"] = {
        "invocation_id": invocation.invocation_id,
        "agent_run_id": str(invocation.run_id) if invocation.run_id else None,
        "client_app_id": client_app_id,
    }
    return intent


def approval_request_create(
    *,
    invocation: ToolInvocation,
    access: WorkspaceAccess,
    compiled: CompiledTool,
    arguments: dict[str, Any],
    args_bytes: int,
    outcome: ApprovalPolicyOutcome,
) -> ToolApproval:
    """Create the pending approval of ``invocation`` (inside the caller's transaction) and, when the
    route has an approval channel, its notification, delivered after commit. ``arguments`` are the
    normalized arguments and ``args_bytes`` their measured size (``ToolArguments``)."""
    client_app_id = Client.objects.filter(pk=invocation.client_id).values_list("app_id", flat=True).get()
    summary = approval_summary(compiled.approval.prompt, arguments)
    ttl = settings.BAILING_APPROVAL_TTL_SECONDS
    approval = ToolApproval.objects.create(
        invocation=invocation,
        job_id=invocation.job_id,
        request_id=invocation.request_id,
        route_key=access.route_key,
        provider=invocation.provider,
        tool=invocation.tool,
        scope=compiled.scope,
        risk=compiled.risk,
        policy=outcome.policy,
        reason=outcome.reason[:500],
        method=compiled.method,
        path=compiled.path,
        summary=summary,
        subject=invocation.on_behalf_of,
        args=arguments,
        args_hash=invocation.args_hash,
        args_bytes=args_bytes,
        intent={},
        expires_at=timezone.now() + timedelta(seconds=ttl) if ttl > 0 else None,
    )
    approval.intent = _intent(
        approval_id=approval.pk,
        invocation=invocation,
        access=access,
        compiled=compiled,
        arguments=arguments,
        outcome=outcome,
        summary=summary,
        client_app_id=client_app_id,
    )
    approval.save(update_fields=["intent"])
    channel = access.effective["tools"]["approval"]
    if channel is not None:
        kind = channel.get("type", "")
        deliverable = kind in WEBHOOK_TYPES or kind == PLAIN_WEBHOOK_TYPE
        notification = ApprovalNotification.objects.create(
            approval=approval,
            channel=kind,
            url=channel.get("url", "") if deliverable else "",
            status=ApprovalNotification.Status.PENDING
            if deliverable
            else ApprovalNotification.Status.SKIPPED,
            last_error="" if deliverable else "channel_unsupported",
        )
        if deliverable:
            approval_notification_schedule(notification.pk)
    return approval


# --- delivery ---------------------------------------------------------------------------------------------
def approval_notification_body(approval: ToolApproval, channel: str) -> dict[str, Any]:
    """The webhook body, key for key in the order BailingHub business systems read it, within the
    webhook budget (``approval.webhook_body``, 64 KiB of compact JSON — what a business system's
    approval endpoint takes, the Demo Shop's included): the complete arguments when the whole body
    fits, else without them (``args_omitted: true``, ``args_bytes``; the approver reads them in the
    console), and if even that is too large, with the summary cut to fit (``summary_truncated``)."""
    body = _notification_body(approval, channel, args_fit=True)
    if compact_json_utf8_bytes(body) <= WEBHOOK_BODY_MAX_BYTES:
        return body
    body = _notification_body(approval, channel, args_fit=False)
    over = compact_json_utf8_bytes(body) - WEBHOOK_BODY_MAX_BYTES
    summary = approval.summary
    while over > 0 and summary:
        # The summary appears in the body and in its intent, JSON-escaped (an escape can take six
        # bytes for one): take half of what is over from each copy, scaled from escaped bytes back
        # to raw ones, and measure again.
        raw = len(summary.encode("utf-8"))
        escaped = compact_json_utf8_bytes(summary) - 2
        cut = max(1, -(-((over + 1) // 2) * raw // escaped))
        summary = truncate_utf8(summary, max(0, raw - cut)).rstrip()
        body = _notification_body(approval, channel, args_fit=False, summary=summary + "…")
        over = compact_json_utf8_bytes(body) - WEBHOOK_BODY_MAX_BYTES
    return body


def _notification_body(
    approval: ToolApproval, channel: str, *, args_fit: bool, summary: str | None = None
) -> dict[str, Any]:
    intent = dict(approval.intent)
    if not args_fit:
        intent.pop("args", None)
        intent["args_omitted"] = True
    truncated = summary is not None
    summary = approval.summary if summary is None else summary
    if truncated:
        intent["summary"] = summary
        intent["summary_truncated"] = True
    if channel == PLAIN_WEBHOOK_TYPE:
        return {
            "kind": "tool_approval",
            "approval_id": approval.pk,
            "job_id": str(approval.job_id),
            "request_id": approval.request_id,
            "tool": approval.tool,
            "scope": approval.scope,
            "risk": approval.risk,
            "policy": approval.policy,
            "reason": approval.reason,
            "args": js_stringify(approval.args) if args_fit else "",
            "intent": intent,
            "message": summary or f"Approve {approval.tool}?",
        }
    body: dict[str, Any] = {
        "kind": "tool_approval_request",
        "approval_id": approval.pk,
        "job_id": str(approval.job_id),
        "request_id": approval.request_id,
        "route": approval.intent.get("route_name", approval.route_key),
    }
    if approval.subject:
        body["subject"] = approval.subject
    body |= {
        "provider": approval.provider,
        "tool": approval.tool,
        "scope": approval.scope,
        "risk": approval.risk,
        "policy": approval.policy,
        "reason": approval.reason,
        "method": approval.method,
        "path": approval.path,
    }
    if args_fit:
        body["args"] = approval.args
    else:
        body["args_omitted"] = True
        body["args_bytes"] = approval.args_bytes
    body["args_hash"] = approval.args_hash
    if summary:
        body["summary"] = summary
        if truncated:
            body["summary_truncated"] = True
    body |= {
        "intent": intent,
        "decision_path": f"/approvals/{approval.pk}/decision",
        "decision_contract": {
            "kind": "tool_approval_decision",
            "schema_version": DECISION_SCHEMA,
            "required_fields": [
                "approval_id",
                "job_id",
                "request_id",
                "args_hash",
                "decision_id",
                "decision",
                "approver",
            ],
            "decision_values": ["approved", "denied"],
            "idempotency": "decision_id",
            "match": {
                "approval_id": approval.pk,
                "job_id": str(approval.job_id),
                "request_id": approval.request_id,
                "args_hash": approval.args_hash,
            },
            "example": {
                "kind": "tool_approval_decision",
                "schema_version": DECISION_SCHEMA,
                "approval_id": approval.pk,
                "job_id": str(approval.job_id),
                "request_id": approval.request_id,
                "args_hash": approval.args_hash,
                "decision": "approved",
                "decision_id": f"example-{approval.pk}-approved",
                "approver": "manager-1",
                "comment": "",
            },
        },
        "metadata": approval.intent.get("metadata", {}),
    }
    return body


def _retryable(status: int | None, error: str) -> bool:
    if error == NOTIFY_TARGET_FORBIDDEN:
        return False  # the policy will refuse the same address again
    return status is None or status >= 500 or status == 429


def _notify_attempt(url: str, raw: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """One POST: its status (None without one) and the error code ("" with a status)."""
    try:
        with (
            outbound_client(
                timeout=settings.BAILING_APPROVAL_NOTIFY_TIMEOUT,
                # Uncompressed: the byte cap then bounds what the business system sends, not a
                # decompressed expansion of it.
                headers={"Accept-Encoding": "identity"},
            ) as client,
            client.stream("POST", url, content=raw, headers=headers) as response,
        ):
            status = response.status_code
            read = 0
            try:
                for chunk in response.iter_raw():
                    read += len(chunk)
                    if read >= NOTIFY_ANSWER_MAX_BYTES:
                        break
            except httpx.HTTPError:
                # The status has arrived and is the answer; a body cut short or past the attempt's
                # deadline changes nothing.
                pass
        return status, ""
    except TargetForbidden:
        return None, NOTIFY_TARGET_FORBIDDEN
    except httpx.TimeoutException:
        return None, "timeout"
    except httpx.HTTPError:
        return None, "unreachable"


def approval_notification_deliver(notification_id: int) -> ApprovalNotification:
    """Deliver one notification now, with its retries (runs outside any transaction)."""
    notification = ApprovalNotification.objects.select_related("approval__invocation__client").get(
        pk=notification_id
    )
    approval = notification.approval
    token = client_token_plaintext(approval.invocation.client)
    if token is None:
        return _notification_record(
            notification, delivered=False, status=None, error="client_token_unavailable"
        )
    try:
        # Routes applied before the outbound rules existed may still name such a URL.
        read_webhook_url(notification.url, "url")
    except ConfigError:
        return _notification_record(notification, delivered=False, status=None, error=NOTIFY_TARGET_FORBIDDEN)
    raw = js_stringify(approval_notification_body(approval, notification.channel)).encode("utf-8")
    delays = settings.BAILING_APPROVAL_NOTIFY_DELAYS
    status: int | None = None
    error = ""
    for attempt, delay in enumerate(delays):
        if delay:
            time.sleep(delay)
        headers = {"Content-Type": "application/json", **sign_callback(secret=token, body=raw)}
        status, error = _notify_attempt(notification.url, raw, headers)
        ApprovalNotification.objects.filter(pk=notification.pk).update(
            attempts=attempt + 1, last_http_status=status, last_error=error, last_attempt_at=timezone.now()
        )
        if status is not None and 200 <= status < 300:
            return _notification_record(notification, delivered=True, status=status, error="")
        if not _retryable(status, error):
            break
    return _notification_record(
        notification,
        delivered=False,
        status=status,
        error=error or (f"http_{status}" if status else "unreachable"),
    )


def _notification_record(
    notification: ApprovalNotification, *, delivered: bool, status: int | None, error: str
) -> ApprovalNotification:
    now = timezone.now()
    with transaction.atomic():
        ApprovalNotification.objects.filter(pk=notification.pk).update(
            status=ApprovalNotification.Status.DELIVERED if delivered else ApprovalNotification.Status.FAILED,
            last_http_status=status,
            last_error=error,
            delivered_at=now if delivered else None,
        )
        audit_record(
            actor=Actor.system("approval-notifier"),
            action="agent_runtime.approval.notified" if delivered else "agent_runtime.approval.notify_failed",
            route_key=notification.approval.route_key,
            target_type="tool_approval",
            target_id=str(notification.approval_id),
            data={"channel": notification.channel, "http_status": status, "error": error or None},
        )
    notification.refresh_from_db()
    return notification


def _deliver_in_thread(notification_id: int) -> None:
    try:
        approval_notification_deliver(notification_id)
    except Exception as exc:  # a notification must never take anything else down
        logger.warning("approval notification %s failed (%s)", notification_id, type(exc).__name__)
    finally:
        connection.close()


def approval_notification_schedule(notification_id: int) -> None:
    """Deliver after the surrounding transaction commits, on a daemon thread with its own connection."""

    def start() -> None:
        threading.Thread(
            target=_deliver_in_thread,
            args=(notification_id,),
            name=f"approval-notify-{notification_id}",
            daemon=True,
        ).start()

    transaction.on_commit(start)


def approval_notification_resend(*, notification: ApprovalNotification, actor: Actor) -> ApprovalNotification:
    """Send a failed (or pending) notification again, from the console."""
    with transaction.atomic():
        ApprovalNotification.objects.filter(pk=notification.pk).update(
            status=ApprovalNotification.Status.PENDING
        )
        audit_record(
            actor=actor,
            action="agent_runtime.approval.notify_resent",
            route_key=notification.approval.route_key,
            target_type="tool_approval",
            target_id=str(notification.approval_id),
            data={"channel": notification.channel},
        )
        approval_notification_schedule(notification.pk)
    notification.refresh_from_db()
    return notification
