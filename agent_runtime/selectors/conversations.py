"""Read-only lookups of agent conversations for the console: each conversation with its activity,
one conversation and its turns.

The annotations (turn count, last turn time, last run status, last activity) are computed in the
query that lists the conversations, so a page costs the same whatever the number of turns.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, QuerySet, Subquery
from django.db.models.functions import Greatest

from agent_runtime.models import AgentConversation, AgentRun, ToolInvocation
from bailing.db.queries import filter_by

# Only what the console's turn view reads; the hashes never leave the database for that page.
TURN_FIELDS = (
    "run_id",
    "status",
    "client_turn_id",
    "user_message_id",
    "user_input",
    "context_body",
    "created_at",
    "context_ready_at",
    "assistant_message_id",
    "final_content",
    "model",
    "runtime",
    "usage",
    "completed_at",
)


def conversations_with_activity(conversations: QuerySet[AgentConversation]) -> QuerySet[AgentConversation]:
    """``conversations`` with ``turns``, ``last_turn_at``, ``last_status`` and ``last_activity``,
    newest activity first.

    Count and maxima share one join on runs; the last status is a correlated subquery on the index of
    the run's conversation foreign key, all in the caller's single query. Activity includes
    completions, so a conversation whose agent just answered rises to the top without a new turn.
    """
    last_run = AgentRun.objects.filter(conversation=OuterRef("pk")).order_by("-created_at", "-run_id")
    return conversations.annotate(
        turns=Count("runs"),
        last_turn_at=Max("runs__created_at"),
        last_status=Subquery(last_run.values("status")[:1]),
        # PostgreSQL's GREATEST skips NULLs: a conversation without completions still sorts.
        last_activity=Greatest("created_at", Max("runs__created_at"), Max("runs__completed_at")),
    ).order_by("-last_activity", "-created_at", "-id")


def conversation_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[AgentConversation]:
    """Conversations with their client and workspace and their activity, newest activity first.

    ``filters``: ``client`` (App ID), ``session`` (id), ``route`` (route key) and ``status`` (has a
    run in that status).
    """
    filters = filters or {}
    queryset = filter_by(
        conversations_with_activity(AgentConversation.objects.select_related("client", "route")),
        filters,
        {"client": "client__app_id", "session": "session_id", "route": "route__route_key"},
    )
    if filters.get("status"):
        # EXISTS rather than a join: a join would multiply rows and skew the turn counts.
        runs = AgentRun.objects.filter(conversation=OuterRef("pk"), status=filters["status"])
        queryset = queryset.filter(Exists(runs))
    return queryset


def conversation_get(*, conversation_id: uuid.UUID) -> AgentConversation | None:
    """One conversation with its client, workspace and agent session."""
    return (
        AgentConversation.objects.select_related("client", "route", "session")
        .filter(pk=conversation_id)
        .first()
    )


def conversation_turns(*, conversation: AgentConversation) -> QuerySet[AgentRun]:
    """The conversation's runs, oldest first, loading only :data:`TURN_FIELDS`."""
    return (
        AgentRun.objects.filter(conversation=conversation).only(*TURN_FIELDS).order_by("created_at", "run_id")
    )


def runs_tool_call_counts(*, run_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Run id → how many tool calls it made, for the runs that made any (one query)."""
    return dict(
        ToolInvocation.objects.filter(run__in=list(run_ids))
        .values("run")
        .annotate(count=Count("pk"))
        .values_list("run", "count")
    )
