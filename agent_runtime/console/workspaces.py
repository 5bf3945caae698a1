"""Workspaces (routes): list and a read-only detail page that says what the workspace *is*.

The detail shows the workspace's MCP URL (what a user pastes into an MCP client), the tools it
offers (the catalog service's route-level answer, so it cannot disagree with what an agent sees),
the clients allowed to use it, its active agent sessions and recent conversations, its memory and
knowledge settings and, collapsed, the raw effective configuration.
Apps above the runtime add their own sections through :func:`agent_runtime.ports.workspace_sections`
(the knowledge app: the knowledge bases the route names), so this module never imports them. Each
section is shown only to users who may open the pages it summarises.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse
from django.views.generic import DetailView, ListView

from agent_runtime.config import route_effective
from agent_runtime.console.conversations import activity_cells, conversation_cells
from agent_runtime.console.providers import RISK_TONES, offered_tool_approval
from agent_runtime.console.sessions import session_table
from agent_runtime.models import Route
from agent_runtime.ports import workspace_sections
from agent_runtime.selectors.catalog import Catalog, route_catalog
from agent_runtime.selectors.providers import provider_tools_by_id
from agent_runtime.selectors.workspace_overview import (
    Capped,
    route_clients,
    route_conversations_recent,
    route_get,
    route_list,
    route_sessions_active,
)
from agent_runtime.selectors.workspaces import workspace_profile
from agent_runtime.services.agent_auth.oauth import mcp_resource_url
from bailing.api.errors import ApiError
from bailing.ui import tables
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, or_404

# The only part of a route's brain configuration that is ever shown (agents see it too); every
# other key may hold model credentials or endpoints and is listed by name only.
VISIBLE_TARGET_KEYS = frozenset({"system_prompt"})


def agent_direct_enabled(route: Route) -> bool:
    return bool(((route.tools or {}).get("agent_direct") or {}).get("enabled"))


def hidden_target_keys(route: Route) -> list[str]:
    """Names of the target settings whose values the console never shows."""
    return sorted(key for key in (route.target_config or {}) if key not in VISIBLE_TARGET_KEYS)


class WorkspaceListView(ConsoleView, ListView):
    permission_required = "agent_runtime.view_route"
    template_name = "agent_runtime/workspace_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        return route_list()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(
            ["Route key", "Name", "Status", "Agent client", "Permission", "Agent direct tools"],
            empty="No workspaces yet.",
        )
        for route in context["object_list"]:
            table.rows.append(
                [
                    tables.mono(
                        route.route_key, href=reverse("console:workspace_detail", args=[route.route_key])
                    ),
                    tables.text(route.name),
                    tables.badge("enabled" if route.enabled else "disabled"),
                    tables.badge("on" if (route.agent_client or {}).get("enabled") else "off"),
                    tables.text(route.permission or "full (default)"),
                    tables.badge("on" if agent_direct_enabled(route) else "off"),
                ]
            )
        context["table"] = table
        return context


TOOLS_PERMISSIONS = ("agent_runtime.view_toolprovider", "agent_runtime.view_providertool")
CONVERSATION_PERMISSIONS = ("agent_runtime.view_agentconversation", "agent_runtime.view_agentrun")


def _more(capped: Capped, noun: str) -> str:
    return f"{len(capped.rows)} of {capped.total} {noun}" if capped.more else ""


def offered_tools_table(catalog: Catalog, effective: dict) -> tables.Table:
    """The tools the workspace offers agents (route level: a session without a trusted subject sees
    fewer), with read/write, risk and when a call needs approval."""
    if not catalog.agent_direct:
        empty = "Agent direct tools are off: agents of this workspace get no business tools."
    elif not effective["tools"]["sources"]:
        empty = "This workspace names no tool provider in tools.sources."
    else:
        empty = (
            "No tool is offered: check the providers below, the allow lists, write_tools and the "
            "workspace permission."
        )
    table = tables.Table(["Tool", "Provider", "Kind", "Risk", "Approval"], empty=empty)
    # The request line and approval rules of exactly the offered rows: one query, however many.
    stored = provider_tools_by_id(tool_ids=[tool.tool_id for tool in catalog.tools])
    for tool in catalog.tools:
        row = stored.get(tool.tool_id, {})
        risk = str(tool.projection.get("risk") or "")
        approval = offered_tool_approval(tool, approval_declared=row.get("approval_declared"))
        table.rows.append(
            [
                tables.Cell(
                    tool.name,
                    href=reverse("console:provider_tool_detail", args=[tool.provider, tool.name]),
                    kind="mono",
                    sub=f"{row.get('method', '')} {row.get('path', '')}".strip(),
                ),
                tables.mono(tool.provider, href=reverse("console:provider_detail", args=[tool.provider])),
                tables.Cell(
                    "read" if tool.readonly else "write",
                    kind="badge",
                    tone="neutral" if tool.readonly else "warn",
                ),
                tables.Cell(risk or "—", kind="badge", tone=RISK_TONES.get(risk, "neutral")),
                tables.Cell(approval, kind="rule"),
            ]
        )
    return table


def tool_sources_table(catalog: Catalog) -> tables.Table:
    table = tables.Table(["Provider", "State", "Allow", "Offered tools"], empty="No tool sources configured.")
    offered: dict[str, int] = {}
    for tool in catalog.tools:
        offered[tool.provider] = offered.get(tool.provider, 0) + 1
    for source in catalog.sources:
        if not catalog.agent_direct:
            state = tables.Cell("not consulted", kind="muted")
        elif not source.present:
            state = tables.badge("missing")
        else:
            state = tables.badge("enabled" if source.enabled else "disabled")
        table.rows.append(
            [
                tables.mono(
                    source.provider,
                    href=reverse("console:provider_detail", args=[source.provider])
                    if source.present
                    else None,
                ),
                state,
                tables.words(source.allow),
                tables.Cell(str(offered.get(source.provider, 0)), kind="mono"),
            ]
        )
    return table


def clients_table(route_key: str) -> tables.Table:
    table = tables.Table(
        ["Client", "Name", "Status", "Sign-in", "Allowed workspaces"],
        empty="No client lists this workspace in its allowed workspaces: no agent can sign in to it.",
    )
    for client in route_clients(route_key):
        if client.hub_consent:
            sign_in = "hub consent"
        elif client.agent_authorize_url:
            sign_in = "business consent"
        else:
            sign_in = "API only"
        if client.mcp_sign_in:
            sign_in += " + MCP"
        table.rows.append(
            [
                tables.mono(client.app_id, href=reverse("console:client_detail", args=[client.app_id])),
                tables.text(client.name),
                tables.badge("enabled" if client.enabled else "disabled"),
                tables.text(sign_in),
                tables.words(client.allowed_routes),
            ]
        )
    return table


def conversations_table(capped: Capped) -> tables.Table:
    table = tables.Table(
        ["Conversation", "Client", "Turns", "Last turn", "Last status"],
        empty="No conversations in this workspace yet.",
    )
    for conversation in capped.rows:
        table.rows.append([*conversation_cells(conversation), *activity_cells(conversation)])
    return table


def _on_off(value) -> str:
    return "on" if value else "off"


def memory_facts(memory: dict) -> list[tuple[str, str]]:
    facts = [
        (
            "Recent messages",
            f"{memory['recent_messages']}, at most {memory['recent_budget_chars']} characters",
        ),
        ("Per message", f"at most {memory['per_message_chars']} characters"),
        ("Summary", _on_off(memory["summary_enabled"])),
    ]
    if memory["summary_enabled"]:
        facts.append(
            (
                "Summary rules",
                f"after {memory['summary_trigger_chars']} characters, keeps {memory['summary_keep_recent']} "
                f"recent messages, at most {memory['summary_max_chars']} characters",
            )
        )
    return facts


def knowledge_facts(knowledge: dict) -> list[tuple[str, str]]:
    fusion = knowledge["fusion"]
    if fusion["method"] == "rrf":
        fusion_text = f"reciprocal rank fusion, k = {fusion['rrf_k']}"
    else:
        fusion_text = str(fusion["method"])
    fusion_text += f"; weights lexical {fusion['lexical_weight']}, vector {fusion['vector_weight']}"
    return [
        ("Knowledge bases", ", ".join(knowledge["kb_ids"]) or "none"),
        ("Top k", str(knowledge["top_k"])),
        ("Minimum score", str(knowledge["min_score"])),
        ("Inject", f"{knowledge['inject']}, at most {knowledge['max_docs']} documents"),
        ("Page boost", _on_off(knowledge["page_boost"])),
        ("Fusion", fusion_text),
    ]


class WorkspaceDetailView(ConsoleView, DetailView):
    permission_required = "agent_runtime.view_route"
    template_name = "agent_runtime/workspace_detail.html"
    context_object_name = "route"

    def get_object(self, queryset=None):
        return or_404(route_get(route_key=self.kwargs["route_key"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        route = self.object
        user = self.request.user
        # route_effective already carries only target_config.system_prompt (as ``system_prompt``).
        effective = route_effective(route)
        context["effective"] = effective
        context["hidden_target_keys"] = hidden_target_keys(route)
        context["agent_client_enabled"] = bool((route.agent_client or {}).get("enabled"))
        context["agent_direct_enabled"] = agent_direct_enabled(route)
        try:
            profile = workspace_profile(route)
        except ApiError as exc:
            # A route that agents cannot use (disabled, runtime off) has no profile to compute.
            context["profile_error"] = exc.code
        else:
            context["profile_revision"] = (profile.get("profile") or {}).get("revision")
            context["capability_revision"] = (profile.get("capabilities") or {}).get("revision")
        if user.has_perms(TOOLS_PERMISSIONS):
            catalog = route_catalog(route=route, identity=None, effective=effective)
            context["tools_table"] = offered_tools_table(catalog, effective)
            context["sources_table"] = tool_sources_table(catalog)
            context["tool_counts"] = {
                "read": sum(1 for tool in catalog.tools if tool.readonly),
                "write": sum(1 for tool in catalog.tools if not tool.readonly),
                "approval": sum(1 for tool in catalog.tools if tool.approval_required),
            }
            context["tool_list_url"] = (
                reverse("console:tool_list") + "?" + urlencode({"route": route.route_key})
            )
        if user.has_perm("agent_runtime.view_client"):
            context["clients_table"] = clients_table(route.route_key)
        if user.has_perm("agent_runtime.view_agentsession"):
            sessions = route_sessions_active(route.route_key)
            table = session_table(sessions.rows)
            table.empty = "No active agent session is signed in to this workspace."
            context["sessions_table"] = table
            context["sessions_more"] = _more(sessions, "active sessions")
            context["sessions_url"] = (
                reverse("console:session_list")
                + "?"
                + urlencode({"route": route.route_key, "state": "active"})
            )
        if user.has_perms(CONVERSATION_PERMISSIONS):
            conversations = route_conversations_recent(route)
            context["conversations_table"] = conversations_table(conversations)
            context["conversations_more"] = _more(conversations, "conversations")
            context["conversations_url"] = (
                reverse("console:conversation_list") + "?" + urlencode({"route": route.route_key})
            )
        # What a user pastes into an MCP client (README "Connecting an MCP client"), and whether one
        # can sign in here at all: through an enabled client marked for MCP sign-in that this
        # workspace allows.
        context["mcp_url"] = mcp_resource_url(route.route_key)
        context["mcp_clients"] = [
            client.app_id
            for client in route_clients(route.route_key)
            if client.mcp_sign_in and client.enabled
        ]
        context["memory_facts"] = memory_facts(effective["memory"])
        context["knowledge_facts"] = knowledge_facts(effective["knowledge"])
        context["sections"] = workspace_sections(route=route, effective=effective, user=user)
        context["audit_url"] = reverse("console:audit_list") + "?" + urlencode({"route": route.route_key})
        return context
