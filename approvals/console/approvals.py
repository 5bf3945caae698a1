"""The approvals inbox: pending approvals first, a detail page with the full snapshot, and decisions.

Approving records a decision and nothing more: the agent continues by resuming its original
invocation. Only users with ``agent_runtime.decide_toolapproval`` (the approver role) decide, and
never on a call made on their own behalf. A repeated submit of the same decision is harmless (the
decision id is derived from the approval and the decision, so the second is a replay).
"""

from __future__ import annotations

from dataclasses import replace

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, ListView

from agent_runtime.models import ApprovalNotification, ToolApproval
from agent_runtime.services.approval_requests import approval_notification_resend
from approvals.budgets import DECISION_COMMENT_MAX_CHARS, INLINE_ARGS_MAX_BYTES
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
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404
from bailing.ui.visible import json_escape_hidden

VIEW_PERMISSION = "agent_runtime.view_toolapproval"
DECIDE_PERMISSION = "agent_runtime.decide_toolapproval"
RESEND_PERMISSION = "agent_runtime.change_toolapproval"
# The inbox shows the start of each summary; the detail page shows all of it.
SUMMARY_PREVIEW_CHARS = 140


class ApprovalFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *ToolApproval.Status.choices])
    route = forms.CharField(required=False, max_length=128, label="Workspace")
    tool = forms.CharField(required=False, max_length=64)


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approved", "approve"), ("denied", "deny")])
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))

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


def summary_preview(summary: str) -> str:
    """The first ``SUMMARY_PREVIEW_CHARS`` characters of an approval summary (the tool's prompt with
    the argument values), so an approver sees in the inbox what each call would do."""
    if len(summary) <= SUMMARY_PREVIEW_CHARS:
        return summary
    return summary[: SUMMARY_PREVIEW_CHARS - 1] + "…"


def approval_table(approvals) -> tables.Table:
    """The inbox rows. What the call would do (its summary) gets the free width; the workspace,
    client and policy ride as second lines, so the table fits a 1024 px screen without scrolling."""
    table = tables.Table(
        [
            "Approval",
            "Tool · workspace",
            "Summary",
            "Subject · client",
            "Requested",
            "Status · policy",
            "Decided",
        ],
        empty="No approvals.",
    )
    for approval in approvals:
        table.rows.append(
            [
                tables.mono(f"#{approval.pk}", href=reverse("console:approval_detail", args=[approval.pk])),
                tables.Cell(approval.tool, kind="mono", sub=approval.route_key),
                tables.text(summary_preview(approval.summary)),
                tables.Cell(
                    approval.subject or "—",
                    kind="mono" if approval.subject else "muted",
                    sub=approval.invocation.client.app_id,
                ),
                tables.time(approval.created_at),
                replace(tables.badge(approval.status), sub=approval.policy),
                tables.text(approval.decided_by or None),
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
        context["counts"] = approval_status_counts()
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
        context["args_inline"] = approval.args_bytes <= INLINE_ARGS_MAX_BYTES
        context["intent_view"] = {k: v for k, v in approval.intent.items() if k != "args"}
        context["notifications"] = approval_notifications(approval=approval)
        context["can_resend"] = user.has_perm(RESEND_PERMISSION)
        context["own_call"] = own_call(approval, user)
        context["can_decide"] = (
            user.has_perm(DECIDE_PERMISSION)
            and approval.status == ToolApproval.Status.PENDING
            and not context["own_call"]
        )
        context["decision_form"] = DecisionForm()
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


class ApprovalDecideView(ConsoleView, View):
    permission_required = DECIDE_PERMISSION
    http_method_names = ["post"]

    def post(self, request, pk: int):
        approval = or_404(approval_get(approval_id=pk))
        if own_call(approval, request.user):
            return error_page(
                request,
                status=403,
                title="Not your decision",
                detail="This call was made on your own behalf; another approver must decide it.",
                code="own_call",
            )
        form = DecisionForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose approve or deny (a comment is at most 1,000 characters).")
            return redirect("console:approval_detail", pk=pk)
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
            verb = "approved" if decision == "approved" else "denied"
            messages.success(request, f"Approval #{pk} {verb}. The agent continues when it resumes the call.")
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
