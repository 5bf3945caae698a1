"""The agent runtime's entries in the console navigation and its dashboard cards."""

from __future__ import annotations

from django.urls import reverse

from agent_runtime.console.providers import (
    AUTHZ_PROBE_TONES,
    REFRESH_TONES,
    probe_tone,
    refresh_error_code,
)
from agent_runtime.models import ToolProvider
from agent_runtime.selectors.agent_sessions import session_counts
from agent_runtime.selectors.clients import client_counts
from agent_runtime.selectors.providers import providers_health
from agent_runtime.selectors.workspace_overview import route_counts
from bailing.ui import tables
from bailing.ui.nav import Card, NavItem
from bailing.ui.sections import Panel

NAV = [
    NavItem(10, "Workspaces", "console:workspace_list", "agent_runtime.view_route"),
    NavItem(20, "Tool providers", "console:provider_list", "agent_runtime.view_toolprovider"),
    NavItem(25, "Tools", "console:tool_list", "agent_runtime.view_providertool"),
    NavItem(40, "Clients", "console:client_list", "agent_runtime.view_client"),
    NavItem(50, "Agent sessions", "console:session_list", "agent_runtime.view_agentsession"),
    NavItem(60, "Conversations", "console:conversation_list", "agent_runtime.view_agentrun"),
]


def dashboard_cards(user) -> list[Card]:
    """Counts of clients, active sessions and workspaces, each for users who may open its page."""
    cards = []
    if user.has_perm("agent_runtime.view_client"):
        clients = client_counts()
        cards.append(
            Card(
                10,
                "Clients",
                clients["total"],
                f"{clients['enabled']} enabled",
                reverse("console:client_list"),
            )
        )
    if user.has_perm("agent_runtime.view_agentsession"):
        sessions = session_counts()
        cards.append(
            Card(
                20,
                "Active agent sessions",
                sessions["active"],
                f"{sessions['total']} in total",
                reverse("console:session_list") + "?state=active",
            )
        )
    if user.has_perm("agent_runtime.view_route"):
        routes = route_counts()
        cards.append(
            Card(
                30,
                "Workspaces",
                routes["total"],
                f"{routes['open_to_agents']} open to agents",
                reverse("console:workspace_list"),
            )
        )
    return cards


def _probe_cell(status: str, tone: str) -> tables.Cell:
    if not status:
        return tables.Cell("none yet", kind="muted")
    return tables.Cell(status, kind="badge", tone=tone)


def provider_health_panel(user) -> Panel | None:
    """Each tool provider's last refresh (time, result, error code) and its access and authorization
    probes, the ones that need a look first."""
    if not user.has_perm("agent_runtime.view_toolprovider"):
        return None
    health = providers_health()
    table = tables.Table(
        ["Provider", "Status", "Last refresh", "Result", "Access probe", "Authorization probe"],
        empty="No tool providers yet: add one to a config file and run bailing_apply.",
    )
    for provider in health.rows:
        access = provider.access_status or ""
        authz = provider.authz_status or ""
        table.rows.append(
            [
                tables.mono(provider.name, href=reverse("console:provider_detail", args=[provider.name])),
                tables.badge("enabled" if provider.enabled else "disabled"),
                tables.time(provider.last_refresh_at),
                tables.Cell(
                    provider.last_refresh_status,
                    kind="badge",
                    tone=REFRESH_TONES.get(provider.last_refresh_status, "neutral"),
                    sub=refresh_error_code(provider),
                ),
                tables.Cell("not used (inline spec)", kind="muted")
                if provider.spec_source == ToolProvider.SpecSource.INLINE
                else _probe_cell(access, probe_tone(provider, access)),
                _probe_cell(authz, AUTHZ_PROBE_TONES.get(authz, "neutral")),
            ]
        )
    failing = sum(1 for p in health.rows if p.enabled and p.last_refresh_status == "failed")
    note = (f"{failing} failing" if failing else "none failing") if health.rows else ""
    if health.more:
        note += f" · {len(health.rows)} of {health.total} shown"
    return Panel(
        order=20,
        title="Tool provider health",
        note=note,
        table=table,
        more_url=reverse("console:provider_list"),
        more_label="All tool providers",
        wide=True,
    )


def dashboard_panels(user) -> list[Panel]:
    panel = provider_health_panel(user)
    return [panel] if panel is not None else []
