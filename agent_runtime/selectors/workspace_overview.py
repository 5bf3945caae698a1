"""What the console's workspace pages show: the workspaces (routes) themselves and, besides the
configuration, who may use one (clients), who does (active agent sessions) and what they did lately
(conversations).

Each read is one query whatever the number of rows (clients and sessions are found by JSONB
containment on their ``allowed_routes``); lists are capped and come with their full count, so the
page costs the same for a workspace used by thousands of sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Greatest
from django.utils import timezone

from agent_runtime.models import AgentConversation, AgentSession, Client, Route
from agent_runtime.selectors.conversations import conversations_with_activity

RECENT_LIMIT = 10


@dataclass(frozen=True)
class Capped:
    """The first ``len(rows)`` of ``total`` rows."""

    rows: list[Any]
    total: int

    @property
    def more(self) -> int:
        return self.total - len(self.rows)


def capped(queryset: QuerySet, limit: int, *, counted: QuerySet | None = None) -> Capped:
    """The first ``limit`` rows of ``queryset`` with its total: one query, and a count only when
    there are more. ``counted`` is the same rows without what only the shown ones need (annotations,
    joins), when counting those is cheaper."""
    rows = list(queryset[: limit + 1])
    if len(rows) <= limit:
        return Capped(rows, len(rows))
    return Capped(rows[:limit], (queryset if counted is None else counted).count())


def route_list() -> QuerySet[Route]:
    """Every workspace, by route key."""
    return Route.objects.order_by("route_key")


def route_keys() -> list[str]:
    """Every workspace's route key, in order (the console's workspace filter choices)."""
    return list(Route.objects.order_by("route_key").values_list("route_key", flat=True))


def route_get(*, route_key: str) -> Route | None:
    return Route.objects.filter(route_key=route_key).first()


def route_counts() -> dict[str, int]:
    """``total`` workspaces and how many are ``open_to_agents`` (``agent_client.enabled``), in one
    query."""
    return Route.objects.aggregate(
        total=Count("id"), open_to_agents=Count("id", filter=Q(agent_client__enabled=True))
    )


def route_clients(route_key: str) -> list[Client]:
    """Clients whose ``allowed_routes`` name the route, or ``*`` (every route), by App ID."""
    return list(
        Client.objects.filter(Q(allowed_routes__contains=[route_key]) | Q(allowed_routes__contains=["*"]))
        .only(
            "app_id", "name", "enabled", "allowed_routes", "hub_consent", "agent_authorize_url", "mcp_sign_in"
        )
        .order_by("app_id")
    )


def route_sessions_active(route_key: str, *, limit: int = RECENT_LIMIT) -> Capped:
    """Agent sessions signed in to the route that are neither revoked nor expired, last seen first."""
    queryset = (
        AgentSession.objects.filter(
            allowed_routes__contains=[route_key],
            revoked_at__isnull=True,
            refresh_expires_at__gt=timezone.now(),
        )
        .select_related("client")
        .order_by(Greatest("last_seen_at", "created_at").desc(), "-id")
    )
    return capped(queryset, limit)


def route_conversations_recent(route: Route, *, limit: int = RECENT_LIMIT) -> Capped:
    """The route's conversations with turn count, last turn and last status, newest activity first
    (the console's conversation list annotations, in one query)."""
    conversations = AgentConversation.objects.filter(route=route)
    return capped(
        conversations_with_activity(conversations.select_related("client")), limit, counted=conversations
    )
