"""Read-only lookups of agent conversations for the console: each conversation with its activity.

The annotations (turn count, last turn time, last run status, last activity) are computed in the
query that lists the conversations, so a page costs the same whatever the number of turns.
"""

from __future__ import annotations

from django.db.models import Count, Max, OuterRef, QuerySet, Subquery
from django.db.models.functions import Greatest

from agent_runtime.models import AgentConversation, AgentRun


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


def conversation_list() -> QuerySet[AgentConversation]:
    """Every conversation with its client and workspace and its activity, newest activity first."""
    return conversations_with_activity(AgentConversation.objects.select_related("client", "route"))
