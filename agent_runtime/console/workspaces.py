"""Workspaces (routes): list and a read-only detail with the effective config and revisions."""

from __future__ import annotations

from urllib.parse import urlencode

from django.urls import reverse
from django.views.generic import DetailView, ListView

from agent_runtime.config import route_effective
from agent_runtime.models import Route
from agent_runtime.selectors.workspaces import workspace_profile
from bailing.api.errors import ApiError
from bailing.ui import tables
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE

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
        return Route.objects.order_by("route_key")

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


class WorkspaceDetailView(ConsoleView, DetailView):
    permission_required = "agent_runtime.view_route"
    template_name = "agent_runtime/workspace_detail.html"
    slug_field = "route_key"
    slug_url_kwarg = "route_key"
    context_object_name = "route"
    queryset = Route.objects.all()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        route = self.object
        # route_effective already carries only target_config.system_prompt (as ``system_prompt``).
        context["effective"] = route_effective(route)
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
        context["audit_url"] = reverse("console:audit_list") + "?" + urlencode({"route": route.route_key})
        return context
