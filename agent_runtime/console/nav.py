"""The agent runtime's entries in the console navigation and its dashboard cards."""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from agent_runtime.models import AgentSession, Client, Route
from bailing.ui.nav import Card, NavItem

NAV = [
    NavItem(10, "Workspaces", "console:workspace_list", "agent_runtime.view_route"),
    NavItem(20, "Tool providers", "console:provider_list", "agent_runtime.view_toolprovider"),
    NavItem(40, "Clients", "console:client_list", "agent_runtime.view_client"),
    NavItem(50, "Agent sessions", "console:session_list", "agent_runtime.view_agentsession"),
    NavItem(60, "Conversations", "console:conversation_list", "agent_runtime.view_agentrun"),
]


def dashboard_cards(user) -> list[Card]:
    """Counts of clients, active sessions and workspaces, each for users who may open its page."""
    cards = []
    if user.has_perm("agent_runtime.view_client"):
        enabled = Client.objects.filter(enabled=True).count()
        cards.append(
            Card(10, "Clients", Client.objects.count(), f"{enabled} enabled", reverse("console:client_list"))
        )
    if user.has_perm("agent_runtime.view_agentsession"):
        active = AgentSession.objects.filter(revoked_at__isnull=True, refresh_expires_at__gt=timezone.now())
        cards.append(
            Card(
                20,
                "Active agent sessions",
                active.count(),
                f"{AgentSession.objects.count()} in total",
                reverse("console:session_list") + "?state=active",
            )
        )
    if user.has_perm("agent_runtime.view_route"):
        open_to_agents = Route.objects.filter(agent_client__enabled=True).count()
        cards.append(
            Card(
                30,
                "Workspaces",
                Route.objects.count(),
                f"{open_to_agents} open to agents",
                reverse("console:workspace_list"),
            )
        )
    return cards
