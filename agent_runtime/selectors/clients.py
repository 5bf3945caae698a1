"""Reads of clients for the console: the list, one client, its agent sessions and the dashboard's
counts. Nothing here writes."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from agent_runtime.models import Client
from agent_runtime.selectors.workspace_overview import Capped, capped


def client_list() -> QuerySet[Client]:
    """Every client, by App ID."""
    return Client.objects.order_by("app_id")


def client_app_ids() -> list[str]:
    """Every client's App ID, in order (the console's client filter choices)."""
    return list(Client.objects.order_by("app_id").values_list("app_id", flat=True))


def client_get(*, app_id: str) -> Client | None:
    return Client.objects.filter(app_id=app_id).first()


def client_sessions_recent(*, client: Client, limit: int) -> Capped:
    """The client's ``limit`` newest agent sessions, whatever their state, with their total."""
    return capped(client.agent_sessions.select_related("client").order_by("-created_at"), limit)


def client_sessions_not_revoked_count(*, client: Client) -> int:
    """How many agent sessions of ``client`` are not revoked (expired ones included)."""
    return client.agent_sessions.filter(revoked_at__isnull=True).count()


def client_counts() -> dict[str, int]:
    """``total`` and ``enabled`` clients, in one query."""
    return Client.objects.aggregate(total=Count("id"), enabled=Count("id", filter=Q(enabled=True)))
