"""Agent conversations: what the hub told a local agent on each turn and what the agent answered.

Read-only pages over ``AgentConversation`` / ``AgentRun``, written only by ``turn_prepare`` and
``run_complete``. A turn is shown from two sources and nothing else: the frozen context the agent
received (``context_body``, the exact response text) and the completion columns the agent sent back.
Each turn is projected into a :class:`TurnView` here, so templates never hold a run row and cannot
reach what the hub keeps to itself (request and completion hashes, page context, instructions).
All user and agent text is rendered through Django's autoescaping, never marked safe.

The list reads :func:`agent_runtime.selectors.conversations.conversation_list`, which annotates
counts, last turn time and last status in its one query, so it costs the same with 50
conversations of a thousand turns each as with one; the detail page shows turns 50 at a time
because each frozen context may be tens of kilobytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.urls import reverse
from django.views.generic import DetailView, ListView

from agent_runtime.console.forms import ClientRouteFilterForm
from agent_runtime.models import AgentConversation, AgentRun
from agent_runtime.selectors.conversations import (
    conversation_get,
    conversation_list,
    conversation_turns,
    runs_tool_call_counts,
)
from bailing.ui import tables
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE, or_404

PERMISSIONS = ("agent_runtime.view_agentconversation", "agent_runtime.view_agentrun")

RUN_TONES = {
    AgentRun.Status.PREPARING: "neutral",
    # Context handed out, no completion yet: the agent may still be working, or gave up silently.
    AgentRun.Status.CONTEXT_READY: "warn",
    AgentRun.Status.COMPLETED: "ok",
    AgentRun.Status.FAILED: "bad",
    AgentRun.Status.CANCELLED: "off",
}
# ``preparing`` rows exist only inside turn_prepare's transaction, so nobody can filter for one.
STATUS_CHOICES = [("", "any status")] + [
    (status.value, status.value) for status in AgentRun.Status if status != AgentRun.Status.PREPARING
]
# Public usage keys in the spec's order; anything else a later version stores follows, sorted.
USAGE_ORDER = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "total_tokens",
    "tool_calls",
    "cost_usd",
)
# Texts may be 64,000 characters: longer ones are collapsed behind a preview in <details>.
LONG_TEXT_CHARS = 1_000
LONG_TEXT_LINES = 16
PREVIEW_CHARS = 280
PREVIEW_LINES = 4


def run_tone(status: str) -> str:
    return RUN_TONES.get(status, "neutral")


def status_badge(status: str | None) -> tables.Cell:
    if not status:
        return tables.Cell("no turns", kind="muted")
    return tables.Cell(status, kind="badge", tone=run_tone(status))


# --- list -----------------------------------------------------------------------------------------------


class ConversationFilterForm(ClientRouteFilterForm):
    session = forms.UUIDField(required=False, label="Session ID")
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES, label="Has a run that is")

    field_order = ["client", "session", "route", "status"]


def conversation_cells(conversation: AgentConversation) -> list[tables.Cell]:
    """The conversation (short id linking to its page, the client's own id below) and its client."""
    full_id = str(conversation.id)
    return [
        tables.Cell(
            tables.shorten_ids(full_id),
            href=reverse("console:conversation_detail", args=[conversation.id]),
            kind="mono",
            title=full_id,
            sub=conversation.client_conversation_id,
        ),
        tables.mono(
            conversation.client.app_id,
            href=reverse("console:client_detail", args=[conversation.client.app_id]),
        ),
    ]


def activity_cells(conversation) -> list[tables.Cell]:
    """Turn count, last turn time and last status of a conversation annotated by
    :func:`agent_runtime.selectors.conversations.conversations_with_activity`."""
    return [
        tables.Cell(str(conversation.turns), kind="mono"),
        tables.time(conversation.last_turn_at),
        status_badge(conversation.last_status),
    ]


def conversation_table(conversations) -> tables.Table:
    table = tables.Table(
        ["Conversation", "Client", "Session", "Workspace", "Turns", "Last turn", "Last status"],
        empty="No conversations match.",
    )
    for conversation in conversations:
        table.rows.append(
            [
                *conversation_cells(conversation),
                tables.ident(
                    conversation.session_id,
                    href=reverse("console:session_detail", args=[conversation.session_id]),
                ),
                tables.mono(
                    conversation.route.route_key,
                    href=reverse("console:workspace_detail", args=[conversation.route.route_key]),
                ),
                *activity_cells(conversation),
            ]
        )
    return table


class ConversationListView(ConsoleView, ListView):
    permission_required = PERMISSIONS
    http_method_names = READ_ONLY
    template_name = "agent_runtime/conversation_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        self.filter_form = ConversationFilterForm(self.request.GET or None)
        return conversation_list(filters=form_filters(self.filter_form))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter_form"] = self.filter_form
        context["table"] = conversation_table(context["object_list"])
        # No conversation at all (not merely none matching the filters): the page says how one
        # appears instead of an empty table.
        context["none_yet"] = not self.filter_form.is_bound and not context["table"].rows
        return context


# --- detail ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LongText:
    """A user input or an answer; ``preview`` is set when the page collapses it."""

    text: str
    chars: int
    lines: int
    preview: str = ""

    @classmethod
    def of(cls, text: str | None) -> LongText:
        text = text or ""
        lines = text.count("\n") + 1 if text else 0
        if len(text) <= LONG_TEXT_CHARS and lines <= LONG_TEXT_LINES:
            return cls(text, len(text), lines)
        preview = "\n".join(text[:PREVIEW_CHARS].split("\n")[:PREVIEW_LINES]).rstrip() + "…"
        return cls(text, len(text), lines, preview)

    @property
    def collapsed(self) -> bool:
        return bool(self.preview)


@dataclass(frozen=True)
class Revision:
    full: str

    @property
    def short(self) -> str:
        return tables.short_hash(self.full)


@dataclass(frozen=True)
class ContextSummary:
    """What the agent was handed, read back from the frozen response text."""

    run_id: str
    profile_revision: Revision
    capability_revision: Revision
    memory_messages: int
    memory_cut: int
    active_tools: list[str]
    knowledge_delivery: str
    knowledge_status: str

    @classmethod
    def of(cls, body: str) -> ContextSummary | None:
        try:
            frozen = json.loads(body) if body else None
        except ValueError:
            return None
        if not isinstance(frozen, dict):
            return None
        context = frozen.get("context") or {}
        recent = (context.get("memory") or {}).get("recent") or []
        # Absent ``knowledge_delivery`` is the legacy inline mode (docs/protocol.md "Knowledge in turns").
        delivery = context.get("knowledge_delivery") or {}
        return cls(
            run_id=str(frozen.get("run_id", "")),
            profile_revision=Revision(str(frozen.get("profile_revision", ""))),
            capability_revision=Revision(str(frozen.get("capability_revision", ""))),
            memory_messages=len(recent),
            memory_cut=sum(1 for entry in recent if isinstance(entry, dict) and entry.get("truncated")),
            active_tools=[
                str(tool.get("name", ""))
                for tool in frozen.get("active_tools") or []
                if isinstance(tool, dict)
            ],
            knowledge_delivery=str(delivery.get("mode", "inline")),
            knowledge_status=str(delivery.get("status", "")),
        )


@dataclass(frozen=True)
class CompletionView:
    """The agent's completion exactly as recorded (immutable once written)."""

    status: str
    tone: str
    assistant_message_id: str
    content: LongText
    model: str
    runtime: str
    usage: list[tuple[str, Any]]


def usage_items(usage: dict[str, Any] | None) -> list[tuple[str, Any]]:
    usage = usage or {}
    known = [key for key in USAGE_ORDER if key in usage]
    return [(key, usage[key]) for key in known + sorted(set(usage) - set(known))]


@dataclass(frozen=True)
class TurnView:
    number: int
    status: str
    tone: str
    client_turn_id: str
    user_message_id: str
    user_input: LongText
    created_at: datetime
    context_ready_at: datetime | None
    completed_at: datetime | None
    context: ContextSummary | None
    completion: CompletionView | None
    run_id: str = ""
    tool_calls: int = 0

    @classmethod
    def of(cls, run: AgentRun, *, number: int, tool_calls: int = 0) -> TurnView:
        completion = None
        if run.assistant_message_id:
            completion = CompletionView(
                status=run.status,
                tone=run_tone(run.status),
                assistant_message_id=run.assistant_message_id,
                content=LongText.of(run.final_content),
                model=run.model or "",
                runtime=run.runtime or "",
                usage=usage_items(run.usage),
            )
        return cls(
            number=number,
            status=run.status,
            tone=run_tone(run.status),
            client_turn_id=run.client_turn_id,
            user_message_id=run.user_message_id,
            user_input=LongText.of(run.user_input),
            created_at=run.created_at,
            context_ready_at=run.context_ready_at,
            completed_at=run.completed_at,
            context=ContextSummary.of(run.context_body),
            completion=completion,
            run_id=str(run.run_id),
            tool_calls=tool_calls,
        )


class ConversationDetailView(ConsoleView, DetailView):
    permission_required = PERMISSIONS
    http_method_names = READ_ONLY
    template_name = "agent_runtime/conversation_detail.html"
    context_object_name = "conversation"

    def get_object(self, queryset=None):
        return or_404(conversation_get(conversation_id=self.kwargs["conversation_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        conversation = self.object
        paginator = Paginator(conversation_turns(conversation=conversation), PAGE_SIZE)
        page = paginator.get_page(self.request.GET.get("page"))
        first = page.start_index()
        calls = runs_tool_call_counts(run_ids=[run.run_id for run in page])
        context["turns"] = [
            TurnView.of(run, number=first + offset, tool_calls=calls.get(run.run_id, 0))
            for offset, run in enumerate(page)
        ]
        context["can_view_calls"] = self.request.user.has_perm("agent_runtime.view_toolinvocation")
        context["paginator"] = paginator
        context["page_obj"] = page
        context["agent_session"] = conversation.session
        context["audit_url"] = (
            reverse("console:audit_list") + "?" + urlencode({"session": conversation.session_id})
        )
        return context
