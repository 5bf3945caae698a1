"""Every compiled tool of every provider on one page, filterable by provider, risk, kind (read or
write), approval and the workspace that offers it; each row links to the tool's own page.

Risk is the ACC ``risk.level`` (low / medium / high); kind is the compiled ``readonly`` flag;
approval is when a call needs a human: *always* (high risk, a declared ``required``, or the chosen
workspace forces it through ``force_approval_tools``), *conditional* (the ``approval.when`` rules) or
*never*. "Offered on" is the catalog service's route-level answer for every workspace
(:func:`agent_runtime.selectors.catalog.route_catalogs`), so it cannot disagree with what an agent
of that workspace sees. The page is a fixed number of queries: the filter choices, every route, the
providers they name with their tools (one join), and the page of tools with its count.
"""

from __future__ import annotations

from django import forms
from django.urls import reverse
from django.views.generic import ListView

from agent_runtime.console.providers import RISK_TONES, approval_summary, tool_kind
from agent_runtime.selectors.catalog import route_catalogs
from agent_runtime.selectors.providers import provider_names, provider_tool_list
from agent_runtime.selectors.workspace_overview import route_list
from bailing.ui import tables
from bailing.ui.forms import form_filters
from bailing.ui.mixins import READ_ONLY, ConsoleView
from bailing.ui.pages import PAGE_SIZE

PERMISSIONS = ("agent_runtime.view_toolprovider", "agent_runtime.view_providertool")
RISKS = ("low", "medium", "high")
APPROVALS = [("", "any"), ("always", "always"), ("conditional", "conditional"), ("never", "never")]
KINDS = [("", "any kind"), ("read", "read-only"), ("write", "write")]


class ToolFilterForm(forms.Form):
    provider = forms.ChoiceField(required=False)
    risk = forms.ChoiceField(required=False, choices=[("", "any risk")] + [(r, r) for r in RISKS])
    kind = forms.ChoiceField(required=False, choices=KINDS)
    approval = forms.ChoiceField(required=False, choices=APPROVALS)
    route = forms.ChoiceField(required=False, label="Offered on")
    name = forms.CharField(required=False, max_length=64, label="Name contains")

    def __init__(self, *args, route_keys: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["provider"].choices = [("", "any provider")] + [(name, name) for name in provider_names()]
        self.fields["route"].choices = [("", "any or none")] + [(key, key) for key in route_keys]


class ToolListView(ConsoleView, ListView):
    permission_required = PERMISSIONS
    http_method_names = READ_ONLY
    template_name = "agent_runtime/tool_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        routes = list(route_list())
        self.catalogs = route_catalogs(routes)
        # tool id → route keys offering it; and per route, the ids it forces approval on.
        self.offered: dict[int, list[str]] = {}
        for route_key, catalog in self.catalogs.items():
            for tool in catalog.tools:
                self.offered.setdefault(tool.tool_id, []).append(route_key)
        self.filter_form = ToolFilterForm(self.request.GET or None, route_keys=[r.route_key for r in routes])
        filters = form_filters(self.filter_form)
        self.route_key = filters.get("route", "")
        self.forced_ids: set[int] = set()
        offered = None
        if self.route_key:
            catalog = self.catalogs[self.route_key]
            offered = [tool.tool_id for tool in catalog.tools]
            self.forced_ids = {tool.tool_id for tool in catalog.tools if tool.forced_approval}
        return provider_tool_list(filters=filters, tool_ids=offered, forced_ids=self.forced_ids)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        if not self.filter_form.is_bound:
            empty = "No compiled tools yet: no tool provider has a good spec."
        elif self.route_key and not self.catalogs[self.route_key].tools:
            catalog = self.catalogs[self.route_key]
            why = "its agent direct tools are off" if not catalog.agent_direct else "no source offers a tool"
            empty = f"The workspace {self.route_key} offers no tools: {why}."
        else:
            empty = "No compiled tool matches these filters."
        table = tables.Table(
            ["Tool", "Provider", "Scope", "Risk", "Approval", "Kind", "Offered on"], empty=empty
        )
        for tool in context["object_list"]:
            provider = tool.provider
            approval = approval_summary(risk=tool.risk, approval=tool.approval_declared or {})
            if tool.id in self.forced_ids:
                approval = f"always (forced by {self.route_key})"
            table.rows.append(
                [
                    tables.Cell(
                        tool.name,
                        href=reverse("console:provider_tool_detail", args=[provider.name, tool.name]),
                        kind="mono",
                        sub=f"{tool.method} {tool.path}",
                    ),
                    tables.Cell(
                        provider.name,
                        href=reverse("console:provider_detail", args=[provider.name]),
                        kind="mono",
                        sub="" if provider.enabled else "disabled",
                    ),
                    tables.mono(tool.scope),
                    tables.Cell(tool.risk, kind="badge", tone=RISK_TONES.get(tool.risk, "neutral")),
                    tables.Cell(approval, kind="rule"),
                    tool_kind(tool.readonly, tool.idempotent),
                    tables.words(self.offered.get(tool.id), empty="no workspace"),
                ]
            )
        context["table"] = table
        context["filter_form"] = self.filter_form
        return context
