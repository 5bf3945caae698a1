"""The approvals inbox: pending approvals first, a detail page with the full snapshot, and decisions.

Every page leads with the sentence the call's tool declares for approvers ("Refund 650 on order
SO-1002?", its approval prompt with the argument values). Approving records a decision and nothing
more: the agent continues by resuming its original invocation. Only users with
``agent_runtime.decide_toolapproval`` (the approver role) decide, and never on a call made on their
own behalf. A decision is never one click: Approve and Deny open a confirmation page that restates
the sentence, the tool and the arguments hash, and the decision POST is refused without its
confirmation; the hash confirmed is checked against the approval's by the decision service. A
repeated submit of the same decision is harmless (the decision id is derived from the approval and
the decision, so the second is a replay).
"""

from __future__ import annotations

from dataclasses import replace

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import DetailView, ListView

from agent_runtime.models import ApprovalNotification, ToolApproval
from agent_runtime.services.approval_requests import approval_notification_resend
from approvals.budgets import DECISION_COMMENT_MAX_CHARS, INLINE_ARGS_MAX_BYTES
from approvals.console.labels import (
    APPROVAL_BADGES,
    POLICY_EXPLANATIONS,
    approval_badge,
    notification_badge,
    policy_code,
    policy_label,
)
from approvals.errors import ApprovalConflict
from approvals.selectors import (
    approval_get,
    approval_notification_get,
    approval_notifications,
    approval_status_counts,
    approvals_inbox,
)
from approvals.services.decisions import approval_decide
from bailing.api.errors import ApiError
from bailing.api.jsjson import js_stringify
from bailing.api.limits import utf16_length
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404
from bailing.ui.visible import json_escape_hidden

VIEW_PERMISSION = "agent_runtime.view_toolapproval"
DECIDE_PERMISSION = "agent_runtime.decide_toolapproval"
RESEND_PERMISSION = "agent_runtime.change_toolapproval"
# The inbox shows the start of each summary, the dashboard a shorter start; the detail page and the
# confirmation page show all of it.
SUMMARY_PREVIEW_CHARS = 140


class ApprovalFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *ToolApproval.Status.choices])
    route = forms.CharField(required=False, max_length=128, label="Workspace")
    tool = forms.CharField(required=False, max_length=64)


DECISIONS = [("approved", "approve"), ("denied", "deny")]


class DecisionForm(forms.Form):
    """The confirmation page's form: the decision and the arguments hash it restates travel as
    hidden fields, the comment is typed there."""

    decision = forms.ChoiceField(choices=DECISIONS, widget=forms.HiddenInput)
    args_hash = forms.CharField(max_length=64, widget=forms.HiddenInput)
    comment = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": DECISION_COMMENT_MAX_CHARS}),
        help_text="Kept with the decision and shown on this approval's page.",
    )

    def clean_comment(self) -> str:
        # Characters as the decision API counts them (UTF-16 units): one budget for both doors.
        comment = self.cleaned_data["comment"]
        if utf16_length(comment) > DECISION_COMMENT_MAX_CHARS:
            raise forms.ValidationError(
                f"At most {DECISION_COMMENT_MAX_CHARS} characters.", code="comment_too_long"
            )
        return comment


def own_call(approval: ToolApproval, user) -> bool:
    """Is the call made on ``user``'s own behalf (their hub sign-in is the session's principal or
    subject)? Nobody approves their own call."""
    username = user.get_username()
    session = approval.invocation.session
    return username in {(session.principal or {}).get("id"), session.on_behalf_of}


def approval_sentence(approval: ToolApproval) -> str:
    """What the call would do, in the tool's words: its approval prompt with the argument values
    (the approval's ``summary``). A tool that declares no prompt gets the plain request instead."""
    return approval.summary or f"Call {approval.tool} ({approval.method} {approval.path})?"


def summary_preview(summary: str, limit: int = SUMMARY_PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of an approval's sentence, so an approver sees in the inbox
    and on the dashboard what each call would do."""
    if len(summary) <= limit:
        return summary
    return summary[: limit - 1] + "…"


def sentence_cell(approval: ToolApproval, *, limit: int = SUMMARY_PREVIEW_CHARS) -> tables.Cell:
    """The sentence, linked to the approval, with the tool and workspace under it."""
    return tables.Cell(
        summary_preview(approval_sentence(approval), limit),
        href=reverse("console:approval_detail", args=[approval.pk]),
        sub=f"{approval.tool} · {approval.route_key}",
    )


def decided_cell(approval: ToolApproval, now) -> tables.Cell:
    """Who decided and how long ago; the exact time and the channel in the title."""
    if approval.decided_at is None:
        return tables.text(None)
    who = approval.decided_by or approval.decision_source or "—"
    return tables.Cell(
        who,
        sub=tables.duration((now - approval.decided_at).total_seconds()) + " ago",
        title=f"decided {tables.utc_iso(approval.decided_at)}"
        + (f" ({approval.decision_source})" if approval.decision_source else ""),
    )


def status_cell(approval: ToolApproval) -> tables.Cell:
    """The approval's status badge, with why it was needed (for people) under it; the raw policy
    code stays in the title for operators who grep."""
    badge = approval_badge(approval)
    cell = badge.cell(sub=policy_label(approval.policy, approval.reason))
    return replace(cell, title=f"{badge.title} · policy {policy_code(approval.policy, approval.reason)}")


def approval_table(approvals) -> tables.Table:
    """The inbox rows. What the call would do (its sentence) gets the free width, with the tool and
    workspace under it; the client, the policy and the decision time ride as second lines, so the
    table fits a 1024 px screen without scrolling."""
    table = tables.Table(
        ["Approval", "What it would do", "Subject · client", "Requested", "Status · why", "Decided"],
        empty="No approvals.",
    )
    now = timezone.now()
    for approval in approvals:
        table.rows.append(
            [
                tables.mono(f"#{approval.pk}", href=reverse("console:approval_detail", args=[approval.pk])),
                sentence_cell(approval),
                tables.Cell(
                    approval.subject or "—",
                    kind="mono" if approval.subject else "muted",
                    sub=approval.invocation.client.app_id,
                ),
                tables.time(approval.created_at),
                status_cell(approval),
                decided_cell(approval, now),
            ]
        )
    return table


class ApprovalListView(ConsoleView, ListView):
    permission_required = VIEW_PERMISSION
    template_name = "approvals/approval_list.html"
    paginate_by = PAGE_SIZE
    http_method_names = READ_ONLY

    def get_queryset(self):
        self.filter_form = ApprovalFilterForm(self.request.GET or None)
        return approvals_inbox(filters=form_filters(self.filter_form))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter_form"] = self.filter_form
        context["table"] = approval_table(context["object_list"])
        counts = approval_status_counts()
        context["counts"] = counts
        context["count_badges"] = [
            (
                status,
                replace(APPROVAL_BADGES[status], label=f"{counts[status]} {APPROVAL_BADGES[status].label}"),
            )
            for status in ToolApproval.Status.values
        ]
        return context


class ApprovalDetailView(ConsoleView, DetailView):
    permission_required = VIEW_PERMISSION
    template_name = "approvals/approval_detail.html"
    context_object_name = "approval"
    http_method_names = READ_ONLY

    def get_object(self, queryset=None):
        return or_404(approval_get(approval_id=self.kwargs["pk"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        approval = self.object
        user = self.request.user
        context["sentence"] = approval_sentence(approval)
        # All of it is the heading (it is what is approved); a long one in a smaller size.
        context["sentence_long"] = len(context["sentence"]) > SUMMARY_PREVIEW_CHARS
        context["status_badge"] = approval_badge(approval)
        context["policy_label"] = policy_label(approval.policy, approval.reason)
        context["policy_explanation"] = POLICY_EXPLANATIONS.get(approval.policy, "")
        context["args_inline"] = approval.args_bytes <= INLINE_ARGS_MAX_BYTES
        context["intent_view"] = {k: v for k, v in approval.intent.items() if k != "args"}
        notifications = approval_notifications(approval=approval)
        context["notifications"] = [(note, notification_badge(note)) for note in notifications]
        context["can_resend"] = user.has_perm(RESEND_PERMISSION)
        context["own_call"] = own_call(approval, user)
        context["can_decide"] = (
            user.has_perm(DECIDE_PERMISSION)
            and approval.status == ToolApproval.Status.PENDING
            and not context["own_call"]
        )
        decide_url = reverse("console:approval_decide", args=[approval.pk])
        context["approve_url"] = f"{decide_url}?decision=approved"
        context["deny_url"] = f"{decide_url}?decision=denied"
        context["trace_url"] = reverse("console:invocation_detail", args=[approval.invocation.job_id])
        return context


class ApprovalArgsView(ConsoleView, View):
    """The complete argument snapshot as JSON, for snapshots too large to inline."""

    permission_required = VIEW_PERMISSION
    http_method_names = READ_ONLY

    def get(self, request, pk: int):
        approval = or_404(approval_get(approval_id=pk))
        # The same JSON value, with hidden characters as \u escapes: a browser shows this document
        # as text, and a right-to-left override in it must not reorder what the approver reads.
        body = json_escape_hidden(js_stringify(approval.args))
        response = HttpResponse(body.encode("utf-8"), content_type="application/json")
        response["Content-Disposition"] = f'inline; filename="approval-{approval.pk}-args.json"'
        return response


def _own_call_page(request):
    return error_page(
        request,
        status=403,
        title="Not your decision",
        detail="This call was made on your own behalf; another approver must decide it.",
        code="own_call",
    )


# What the banner says after a decision: what is true now, and what happens next.
DECIDED_MESSAGES = {
    "approved": (
        "Approval #{pk} approved. The agent's next resume of this call executes it, once, with exactly "
        "these arguments; nothing is sent before that."
    ),
    "denied": (
        "Approval #{pk} denied. Nothing is sent to the business system; the agent's next resume of this "
        "call gets the denial."
    ),
}


def decision_confirmation(approval: ToolApproval, form: DecisionForm, user) -> Confirmation:
    """The confirmation page of approving or denying ``approval``: the sentence, the tool and the
    arguments hash, and what the decision sets in motion."""
    decision = form["decision"].value()
    approving = decision == "approved"
    detail_url = reverse("console:approval_detail", args=[approval.pk])
    if approving:
        consequences = [
            f"The agent's next resume of this call sends {approval.tool} to the business system, once, "
            f"with exactly the arguments of hash {tables.short_hash(approval.args_hash)}…; nothing is "
            "sent before the agent resumes.",
        ]
    else:
        consequences = [
            "Nothing is sent to the business system. The agent's next resume of this call gets the "
            "denial (state denied).",
        ]
    consequences.append(
        f"The decision is recorded as yours ({user.get_username()}), audited, and cannot be changed "
        "afterwards."
    )
    return Confirmation(
        title=f"{'Approve' if approving else 'Deny'} this call (approval #{approval.pk})?",
        lead=approval_sentence(approval),
        action_url=reverse("console:approval_decide", args=[approval.pk]),
        cancel_url=detail_url,
        button="Approve the call" if approving else "Deny the call",
        button_class="btn-primary" if approving else "btn-danger",
        consequences=consequences,
        facts=[
            ("Tool", f"{approval.tool} of {approval.provider}"),
            ("Request", f"{approval.method} {approval.path}"),
            ("Workspace", approval.route_key),
            ("On behalf of", approval.subject),
            ("Why approval", policy_label(approval.policy, approval.reason)),
            ("Arguments hash", approval.args_hash),
        ],
        form=form,
        crumbs=[("Approvals", reverse("console:approval_list")), (f"#{approval.pk}", detail_url)],
    )


class ApprovalDecideView(ConsoleView, View):
    """GET ``?decision=approved|denied``: the confirmation page (with the comment field). POST, with
    the confirmation: the decision, through the same service as the business decision endpoint."""

    permission_required = DECIDE_PERMISSION
    http_method_names = ["get", "post"]

    def get(self, request, pk: int):
        approval = or_404(approval_get(approval_id=pk))
        if own_call(approval, request.user):
            return _own_call_page(request)
        decision = request.GET.get("decision")
        if decision not in dict(DECISIONS):
            return error_page(
                request,
                status=400,
                title="Invalid request",
                detail="Choose approve or deny.",
                field="decision",
            )
        if approval.status != ToolApproval.Status.PENDING:
            messages.info(request, f"Approval #{pk} is already {approval.status}; nothing to decide.")
            return redirect("console:approval_detail", pk=pk)
        form = DecisionForm(initial={"decision": decision, "args_hash": approval.args_hash})
        return confirm_page(request, decision_confirmation(approval, form, request.user))

    def post(self, request, pk: int):
        approval = or_404(approval_get(approval_id=pk))
        if own_call(approval, request.user):
            return _own_call_page(request)
        if not is_confirmed(request):
            return not_confirmed(request)
        form = DecisionForm(request.POST)
        if not form.is_valid():
            if "decision" in form.errors or "args_hash" in form.errors:
                return error_page(
                    request, status=400, title="Invalid request", detail="Choose approve or deny."
                )
            # The comment is too long: the same confirmation, with the error on the comment.
            return confirm_page(request, decision_confirmation(approval, form, request.user), status=400)
        decision = form.cleaned_data["decision"]
        try:
            outcome = approval_decide(
                approval_id=pk,
                decision=decision,
                decision_id=f"console:{pk}:{decision}",
                approver=request.user.get_username(),
                comment=form.cleaned_data["comment"],
                source="console",
                actor=Actor.user(request.user),
                # What the approver confirmed is what is decided: the hash on the confirmation page.
                match={"args_hash": form.cleaned_data["args_hash"]},
                user=request.user,
            )
        except ApprovalConflict:
            messages.error(request, "This approval was already decided otherwise; nothing changed.")
            return redirect("console:approval_detail", pk=pk)
        except ApiError:
            messages.error(request, "The decision could not be recorded.")
            return redirect("console:approval_detail", pk=pk)
        if outcome.idempotent:
            messages.info(request, "This decision was already recorded.")
        else:
            messages.success(request, DECIDED_MESSAGES[decision].format(pk=pk))
        return redirect("console:approval_detail", pk=pk)


class NotificationResendView(ConsoleView, View):
    permission_required = RESEND_PERMISSION
    http_method_names = ["post"]

    def post(self, request, pk: int, notification_id: int):
        notification = or_404(approval_notification_get(approval_id=pk, notification_id=notification_id))
        if notification.status == ApprovalNotification.Status.SKIPPED:
            messages.error(request, "This channel is not delivered by the hub; nothing to resend.")
        else:
            approval_notification_resend(notification=notification, actor=Actor.user(request.user))
            messages.success(request, "The notification is being sent again.")
        return redirect("console:approval_detail", pk=pk)
