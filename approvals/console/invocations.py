"""Tool-call traces: every governed invocation, filterable by state, workspace, session and run, and
one call's trace — requested → approval pending → decided → dispatched → outcome — with its journal,
timings, the business answer as the journal keeps it, and ledger milestones. An operator resolves
an unknown outcome here, after checking the business system; an administrator reveals a raw answer
sealed by the data policy here, behind a confirmation (audited)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, ListView

from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from approvals.console.labels import approval_badge, invocation_badge, journal_badge, policy_label
from approvals.errors import AnswerNotSealed, AnswerUnavailable, ReconciliationNotNeeded
from approvals.selectors import invocation_get, invocation_trace_events, invocations_list
from approvals.services.answers import invocation_answer_reveal
from approvals.services.reconciliation import EVIDENCE_MAX_CHARS, journal_resolve
from bailing.api.errors import InvalidRequest
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404

VIEW_PERMISSION = "agent_runtime.view_toolinvocation"
RESOLVE_PERMISSION = "agent_runtime.resolve_toolcalljournal"
REVEAL_PERMISSION = "agent_runtime.reveal_toolcalljournal"
STATE_CHOICES = [("", "any state"), *ToolInvocation.Status.choices]


class InvocationFilterForm(forms.Form):
    state = forms.ChoiceField(required=False, choices=STATE_CHOICES)
    route = forms.CharField(required=False, max_length=128, label="Workspace")
    tool = forms.CharField(required=False, max_length=64)
    session = forms.UUIDField(required=False, label="Session ID")
    run = forms.UUIDField(required=False, label="Run ID")


class ResolveForm(forms.Form):
    resolution = forms.ChoiceField(
        choices=[
            (ToolCallJournal.Resolution.EXECUTED, "it executed"),
            (ToolCallJournal.Resolution.NOT_EXECUTED, "it did not execute"),
        ]
    )
    evidence = forms.CharField(
        required=False,
        max_length=EVIDENCE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the business system shows (a record number, a log line). Required for 'executed'.",
    )
    checked = forms.BooleanField(label="I looked this call up in the business system")


# Shown for the invocation id: enough to tell calls apart (the full id is in the title).
CALL_ID_CHARS = 12


def invocation_table(invocations) -> tables.Table:
    """The tool-call rows, in four columns that fit a 1024 px screen: the state comes third, so it
    is never what gets cut off; the workspace and client, and the request time, ride as second
    lines."""
    table = tables.Table(
        ["Call · requested", "Tool · workspace · client", "State", "Business answer"],
        empty="No tool calls.",
    )
    for invocation in invocations:
        journal = getattr(invocation, "journal", None)
        call = tables.mono(
            invocation.invocation_id[:CALL_ID_CHARS] + "…",
            href=reverse("console:invocation_detail", args=[invocation.job_id]),
            title=invocation.invocation_id,
        )
        table.rows.append(
            [
                replace(call, sub=tables.utc_iso(invocation.created_at)),
                tables.Cell(
                    invocation.tool,
                    kind="mono",
                    sub=f"{invocation.route_key} · {invocation.client.app_id}",
                ),
                invocation_badge(invocation).cell(),
                journal_badge(journal).cell()
                if journal is not None
                else tables.Cell("nothing sent", kind="muted"),
            ]
        )
    return table


class InvocationListView(ConsoleView, ListView):
    permission_required = VIEW_PERMISSION
    template_name = "approvals/invocation_list.html"
    paginate_by = PAGE_SIZE
    http_method_names = READ_ONLY

    def get_queryset(self):
        self.filter_form = InvocationFilterForm(self.request.GET or None)
        return invocations_list(filters=form_filters(self.filter_form))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter_form"] = self.filter_form
        context["table"] = invocation_table(context["object_list"])
        return context


@dataclass(frozen=True)
class Step:
    """One stage of a call's trace; ``at`` None = not reached."""

    label: str
    at: datetime | None
    detail: str = ""
    tone: str = "neutral"


def trace_steps(invocation: ToolInvocation) -> list[Step]:
    """The stages a call went through, each in the tone of what it means: the request and its
    dispatch are neutral history, a pending approval waits (amber), a decision and the outcome take
    the tone of their badges."""
    approval: ToolApproval | None = getattr(invocation, "approval", None)
    journal: ToolCallJournal | None = getattr(invocation, "journal", None)
    steps = [Step("Requested", invocation.created_at, f"{len(invocation.argument_keys)} argument keys")]
    if approval is not None:
        waiting = approval.status == ToolApproval.Status.PENDING
        steps.append(
            Step(
                "Approval pending",
                approval.created_at,
                f"#{approval.pk} · {policy_label(approval.policy, approval.reason)}",
                "warn" if waiting else "neutral",
            )
        )
        if approval.decided_at is not None:
            steps.append(
                Step(
                    "Decided",
                    approval.decided_at,
                    f"{approval.status} by {approval.decided_by} ({approval.decision_source})",
                    approval_badge(approval).tone,
                )
            )
    if journal is not None:
        # In flight while the journal says so; afterwards it is history, coloured by the outcome.
        answer = journal_badge(journal)
        in_flight = journal.state == ToolCallJournal.State.DISPATCHING
        steps.append(
            Step(
                "Dispatched",
                journal.started_at,
                f"journal: {answer.label}",
                "progress" if in_flight else "neutral",
            )
        )
    if (
        invocation.completed_at is not None
        or invocation.status == ToolInvocation.Status.RECONCILIATION_REQUIRED
    ):
        detail = invocation.status
        if invocation.business_status:
            detail += f" · HTTP {invocation.business_status}"
        if journal is not None and journal.duration_ms is not None:
            detail += f" · {journal.duration_ms} ms"
        steps.append(
            Step(
                "Outcome",
                invocation.completed_at or invocation.updated_at,
                detail,
                invocation_badge(invocation).tone,
            )
        )
    return steps


class InvocationDetailView(ConsoleView, DetailView):
    permission_required = VIEW_PERMISSION
    template_name = "approvals/invocation_detail.html"
    context_object_name = "invocation"
    http_method_names = READ_ONLY

    def get_object(self, queryset=None):
        return or_404(invocation_get(job_id=self.kwargs["job_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        invocation = self.object
        journal = getattr(invocation, "journal", None)
        approval = getattr(invocation, "approval", None)
        context["journal"] = journal
        context["journal_badge"] = journal_badge(journal) if journal is not None else None
        context["approval"] = approval
        context["approval_badge"] = approval_badge(approval) if approval is not None else None
        context["state_badge"] = invocation_badge(invocation)
        context["sentence"] = approval.summary if approval is not None else ""
        context["steps"] = trace_steps(invocation)
        events = tables.Table(["Time", "Action", "Actor"], empty="No ledger events.")
        for event in invocation_trace_events(invocation):
            events.rows.append(
                [
                    tables.time(event.created_at),
                    tables.mono(event.action, href=reverse("console:audit_detail", args=[event.pk])),
                    # UUIDs shortened (complete in the title), as in the audit history: a full
                    # session id would push the table past a 1024 px screen.
                    tables.ident(f"{event.actor_type}:{event.actor}"),
                ]
            )
        context["events"] = events
        unresolved = (
            invocation.status
            in (ToolInvocation.Status.RECONCILIATION_REQUIRED, ToolInvocation.Status.DISPATCHING)
            and journal is not None
            and not journal.resolution
        )
        context["can_resolve"] = unresolved and self.request.user.has_perm(RESOLVE_PERMISSION)
        context["resolve_form"] = ResolveForm()
        context["answer"] = stored_answer(journal)
        context["can_reveal"] = context["answer"] is not None and (
            context["answer"].sealed and self.request.user.has_perm(REVEAL_PERMISSION)
        )
        return context


@dataclass(frozen=True)
class StoredAnswerView:
    """The business answer as the journal keeps it: ``text`` (indented when it is JSON), whether the
    raw answer behind it is sealed, and the data policy's action and counts per detector."""

    text: str
    sealed: bool
    action: str | None
    findings: list[tuple[str, int]]


def answer_display(text: str) -> str:
    """An answer for reading: JSON indented (as the argument snapshots are), any other text as it is."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return text


def stored_answer(journal: ToolCallJournal | None) -> StoredAnswerView | None:
    if journal is None or not (journal.text or journal.text_sealed):
        return None
    summary: dict[str, Any] = journal.data_policy or {}
    return StoredAnswerView(
        text=answer_display(journal.text),
        sealed=bool(journal.text_sealed),
        action=summary.get("action"),
        findings=sorted(summary.get("findings", {}).items()),
    )


class InvocationResolveView(ConsoleView, View):
    permission_required = RESOLVE_PERMISSION
    http_method_names = ["post"]

    def post(self, request, job_id):
        invocation = or_404(invocation_get(job_id=job_id))
        form = ResolveForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Say what the business system shows, and confirm you checked it.")
            return redirect("console:invocation_detail", job_id=job_id)
        try:
            journal_resolve(
                invocation=invocation,
                resolution=form.cleaned_data["resolution"],
                evidence=form.cleaned_data["evidence"],
                actor=Actor.user(request.user),
            )
        except ReconciliationNotNeeded:
            messages.info(request, "This call has no unresolved outcome; nothing changed.")
        except InvalidRequest:
            messages.error(
                request, "Say what the business system shows (evidence is required for 'executed')."
            )
        else:
            messages.success(request, "Resolution recorded. The agent receives it when it resumes the call.")
        return redirect("console:invocation_detail", job_id=job_id)


def reveal_confirmation(invocation: ToolInvocation) -> Confirmation:
    journal = invocation.journal
    detail_url = reverse("console:invocation_detail", args=[invocation.job_id])
    findings = (journal.data_policy or {}).get("findings", {})
    return Confirmation(
        title="Reveal the raw business answer?",
        lead=f"The answer of {invocation.tool} as the business system sent it, before the data policy.",
        action_url=reverse("console:invocation_answer_reveal", args=[invocation.job_id]),
        cancel_url=detail_url,
        button="Reveal the raw answer",
        consequences=[
            "The raw answer is shown to you once, on the next page, with every value the workspace's "
            "data policy redacted or withheld.",
            "The reveal is recorded in the audit history: who, which call, and the policy's counts "
            "(never the values).",
            "Nothing changes for the agent: it keeps the filtered answer.",
        ],
        facts=[
            ("Invocation ID", invocation.invocation_id),
            ("Tool", f"{invocation.tool} of {invocation.provider}"),
            ("Workspace", invocation.route_key),
            ("Findings", ", ".join(f"{name} {count}" for name, count in sorted(findings.items())) or "none"),
        ],
        crumbs=[
            ("Tool calls", reverse("console:invocation_list")),
            (invocation.invocation_id[:CALL_ID_CHARS], detail_url),
        ],
    )


class InvocationAnswerRevealView(ConsoleView, View):
    """GET: the confirmation page. POST, with the confirmation: the raw answer, shown once (the
    console's pages are never cached), after the reveal's audit event committed."""

    permission_required = REVEAL_PERMISSION
    http_method_names = ["get", "post"]

    def _sealed(self, request, job_id):
        invocation = or_404(invocation_get(job_id=job_id))
        journal = getattr(invocation, "journal", None)
        if journal is None or not journal.text_sealed:
            return invocation, error_page(
                request,
                status=404,
                title="Nothing to reveal",
                detail="This call's business answer is not sealed: no data policy applied when it arrived.",
                code=AnswerNotSealed.code,
            )
        return invocation, None

    def get(self, request, job_id):
        invocation, refused = self._sealed(request, job_id)
        return refused or confirm_page(request, reveal_confirmation(invocation))

    def post(self, request, job_id):
        invocation, refused = self._sealed(request, job_id)
        if refused:
            return refused
        if not is_confirmed(request):
            return not_confirmed(request)
        try:
            raw = invocation_answer_reveal(invocation=invocation, actor=Actor.user(request.user))
        except AnswerNotSealed:
            return error_page(request, status=404, title="Nothing to reveal", code=AnswerNotSealed.code)
        except AnswerUnavailable:
            return error_page(
                request,
                status=409,
                title="The sealed answer cannot be opened",
                detail="The hub's secret key changed since it was sealed, or the stored value was altered.",
                code=AnswerUnavailable.code,
            )
        return render(
            request,
            "approvals/invocation_answer.html",
            {
                "invocation": invocation,
                "answer": stored_answer(invocation.journal),
                "raw": answer_display(raw),
            },
        )
