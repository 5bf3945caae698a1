"""Tool providers: list, detail with the compiled tools and compile findings, one tool's page, and
the administrator's Refresh button.

These pages show what the hub compiled and what agents get, never what it keeps to itself: the
provider's HMAC secret (and anything derived from it) appears only as "set on <time>" / "no
secret", and the raw spec is never rendered (operators read the compiled result instead). The
provider selectors (:mod:`agent_runtime.selectors.providers`) defer ``secret_encrypted``,
``spec_json`` and ``spec_inline`` so neither the sealed secret nor a multi-megabyte spec is even
loaded for a page.

Per-workspace exposure comes from the catalog service itself (``route_catalog`` with no session,
the route-level view), so this page can never disagree with what an agent of that workspace sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, ListView

from agent_runtime.models import ProviderTool, ToolProvider
from agent_runtime.selectors.catalog import CatalogTool
from agent_runtime.selectors.providers import (
    provider_detail,
    provider_get,
    provider_list,
    provider_route_catalogs,
    provider_tool_get,
    provider_tools,
)
from agent_runtime.services.providers import RefreshOutcome, provider_refresh
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, or_404

# Badge tones for this area's status words (the shared table only knows the generic ones).
REFRESH_TONES = {"ok": "ok", "failed": "bad", "never": "off"}
PROBE_TONES = {"protected": "ok", "public": "warn", "inconclusive": "bad", "skipped": "off"}
# A suspect business serves a subject it never heard of; inconclusive only fails to show either way.
AUTHZ_PROBE_TONES = {"pass": "ok", "suspect": "bad", "inconclusive": "warn", "skipped": "off"}
RISK_TONES = {"low": "ok", "medium": "warn", "high": "bad"}
SEVERITY_TONES = {"fatal": "bad", "error": "bad", "warning": "warn"}
EXPOSURE_TONES = {
    "read": "neutral",
    "read + forced approval": "neutral",
    "write": "warn",
    "write + forced approval": "warn",
}
NOT_EXPOSED = "—"


def _badge(word: str, tones: dict[str, str], *, sub: str = "") -> tables.Cell:
    return tables.Cell(word, kind="badge", tone=tones.get(word, "neutral"), sub=sub)


def _count(value: int) -> tables.Cell:
    return tables.Cell(str(value), kind="mono")


def base_origin(url: str) -> str:
    """``scheme://host[:port]`` of a base URL; the list shows only where a provider lives."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not parts.scheme or not host:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def spec_summary(provider: ToolProvider) -> str:
    if provider.spec_source == ToolProvider.SpecSource.INLINE:
        return "inline"
    return f"url · {provider.spec_access_policy}"


def refresh_error_code(provider: ToolProvider) -> str:
    """The stable code of the last failed refresh (``last_refresh_error`` is ``"<code>: <text>"``)."""
    if provider.last_refresh_status != "failed" or not provider.last_refresh_error:
        return ""
    return provider.last_refresh_error.split(":", 1)[0].strip()


def refresh_error_text(provider: ToolProvider) -> str:
    if provider.last_refresh_status != "failed" or ":" not in provider.last_refresh_error:
        return ""
    return provider.last_refresh_error.split(":", 1)[1].strip()


def probe_tone(provider: ToolProvider, status: str) -> str:
    # A public spec is what public_allowed asks for, but a failure under signed_required.
    if status == "public" and provider.spec_access_policy == ToolProvider.AccessPolicy.SIGNED_REQUIRED:
        return "bad"
    return PROBE_TONES.get(status, "neutral")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _json_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def approval_rule_text(rule: dict[str, Any]) -> str:
    """One ACC ``approval.when`` rule as an operator reads it: ``amount > 500``, ``note exists``."""
    param, op = rule.get("param", "?"), rule.get("op", "?")
    if op == "exists":
        return f"{param} exists"
    return f"{param} {op} {_json_value(rule.get('value'))}"


def approval_summary(*, risk: str, approval: dict[str, Any]) -> str:
    """When a call of this tool needs a human approval, before any route tightening.

    High risk and ``required`` mean every call; otherwise the ``when`` rules apply with ANY
    semantics (``agent_runtime.tools.acc``), so they are joined with "or".
    """
    if risk == "high":
        return "always (high risk)"
    if approval.get("required"):
        return "always (declared)"
    rules = approval.get("when") or []
    if rules:
        return "when " + " or ".join(approval_rule_text(rule) for rule in rules)
    return "never"


def offered_tool_approval(tool: CatalogTool, *, approval_declared: dict[str, Any] | None) -> str:
    """When a call of a tool a workspace offers (a catalog entry) needs a human approval: the
    tool's own rule (:func:`approval_summary`), unless the workspace forces approval on it."""
    if tool.forced_approval:
        return "always (forced by this workspace)"
    return approval_summary(risk=str(tool.projection.get("risk") or ""), approval=approval_declared or {})


def tool_kind(readonly: bool, idempotent: bool) -> tables.Cell:
    return tables.Cell(
        "read-only" if readonly else "write", kind="flag", sub="idempotent" if idempotent else ""
    )


# --- exposure per workspace -----------------------------------------------------------------------------
@dataclass
class RouteExposure:
    """How one workspace that names the provider exposes each of its tools (by tool name)."""

    route_key: str
    enabled: bool
    agent_direct: bool
    permission: str
    by_tool: dict[str, str] = field(default_factory=dict)

    @property
    def heading(self) -> str:
        if not self.enabled:
            return f"{self.route_key} (disabled)"
        return self.route_key

    def of(self, tool_name: str) -> str:
        return self.by_tool.get(tool_name, NOT_EXPOSED)


def _exposure_word(readonly: bool, forced: bool) -> str:
    word = "read" if readonly else "write"
    return f"{word} + forced approval" if forced else word


def provider_exposure(provider_name: str) -> list[RouteExposure]:
    """Every workspace whose ``tools.sources`` names ``provider_name``, with what its authorized
    catalog exposes of this provider (read / write, and whether the route forces approval).

    The catalog service decides (allow lists, ``agent_direct``, ``write_tools`` with the route
    permission, ``force_approval_tools``, name clashes between sources, provider enabled); this only
    reads its answer (:func:`agent_runtime.selectors.providers.provider_route_catalogs`, two queries).
    """
    return [
        RouteExposure(
            route_key=item.route.route_key,
            enabled=item.route.enabled,
            agent_direct=item.catalog.agent_direct,
            permission=item.effective["permission"],
            by_tool={
                tool.name: _exposure_word(tool.readonly, tool.forced_approval)
                for tool in item.catalog.tools
                if tool.provider == provider_name
            },
        )
        for item in provider_route_catalogs(provider_name=provider_name)
    ]


def exposure_cell(value: str) -> tables.Cell:
    if value == NOT_EXPOSED:
        return tables.Cell(NOT_EXPOSED, kind="muted", title="not exposed on this workspace")
    return _badge(value, EXPOSURE_TONES)


# --- tables -----------------------------------------------------------------------------------------------
def warnings_table(warnings: list[dict[str, Any]], *, show_tool: bool = True, empty: str) -> tables.Table:
    """Compile findings (``CompileWarning.as_dict()``): operations left out (severity error/fatal)
    and tools compiled with a caveat (warning)."""
    columns = ["Code", "Severity", "Tool", "Spec location", "Detail"]
    if not show_tool:
        columns.remove("Tool")
    table = tables.Table(columns, empty=empty)
    for warning in warnings:
        severity = str(warning.get("severity") or "")
        row = [
            tables.Cell(
                str(warning.get("code") or "—"), kind="badge", tone=SEVERITY_TONES.get(severity, "neutral")
            ),
            tables.text(severity),
            tables.mono(warning.get("tool")),
            tables.Cell(str(warning.get("path") or "—"), kind="pointer"),
            tables.text(warning.get("detail")),
        ]
        if not show_tool:
            del row[2]
        table.rows.append(row)
    return table


def probe_table(provider: ToolProvider) -> tables.Table:
    table = tables.Table(
        ["Status", "Signed request", "Unsigned request", "Invalid signature", "Reason", "Observed"],
        empty="No access probe yet: the spec has not been fetched.",
    )
    probe = provider.access_probe or {}
    if probe:
        status = str(probe.get("status") or "—")
        at = _parse_time(probe.get("at"))
        table.rows.append(
            [
                tables.Cell(status, kind="badge", tone=probe_tone(provider, status)),
                tables.mono(_http(probe.get("signed_http"))),
                tables.mono(_http(probe.get("unsigned_http"))),
                tables.mono(_http(probe.get("invalid_http"))),
                tables.mono(probe.get("reason")),
                tables.time(at) if at is not None else tables.mono(probe.get("at")),
            ]
        )
    return table


def authz_probe_table(provider: ToolProvider) -> tables.Table:
    """The authorization probe after the latest successful refresh (one row, or the empty text)."""
    table = tables.Table(
        ["Status", "Mode", "Target", "Answer", "Subject required", "Reason", "Observed"],
        empty="No authorization probe yet: it runs after a successful refresh.",
    )
    probe = provider.authz_probe or {}
    if probe:
        status = str(probe.get("status") or "—")
        at = _parse_time(probe.get("at"))
        requires = probe.get("requires_subject")
        table.rows.append(
            [
                _badge(status, AUTHZ_PROBE_TONES),
                tables.text(probe.get("mode")),
                tables.mono(probe.get("tool")),
                tables.mono(_http(probe.get("http"))),
                tables.text("" if requires is None else ("yes" if requires else "no")),
                tables.mono(probe.get("reason")),
                tables.time(at) if at is not None else tables.mono(probe.get("at")),
            ]
        )
    return table


def _http(status: Any) -> str:
    return f"HTTP {status}" if isinstance(status, int) else ""


def tools_table(
    provider: ToolProvider, tools: list[ProviderTool], routes: list[RouteExposure]
) -> tables.Table:
    """One row per compiled tool; the request (method and path) is the second line of the name cell,
    so a provider used by several workspaces still fits a laptop screen."""
    table = tables.Table(
        ["Tool", "Scope", "Risk", "Approval", "Kind", *(route.heading for route in routes), "Warnings"],
        empty="No compiled tools: the provider has no good spec yet, or it declares no enabled operation.",
    )
    for tool in tools:
        href = reverse("console:provider_tool_detail", args=[provider.name, tool.name])
        table.rows.append(
            [
                tables.Cell(tool.name, href=href, kind="mono", sub=f"{tool.method} {tool.path}"),
                tables.mono(tool.scope),
                _badge(tool.risk, RISK_TONES),
                tables.Cell(
                    approval_summary(risk=tool.risk, approval=tool.approval_declared or {}), kind="rule"
                ),
                tool_kind(tool.readonly, tool.idempotent),
                *(exposure_cell(route.of(tool.name)) for route in routes),
                _count(len(tool.warnings or [])),
            ]
        )
    return table


def routes_note(routes: list[RouteExposure]) -> list[str]:
    """One line per workspace column, saying why a column may be all "—"."""
    notes = []
    for route in routes:
        facts = [f"permission {route.permission}"]
        if not route.agent_direct:
            facts.append("agent direct tools off")
        if not route.enabled:
            facts.append("workspace disabled")
        notes.append(f"{route.route_key}: " + ", ".join(facts))
    return notes


# --- views ------------------------------------------------------------------------------------------------
class ProviderListView(ConsoleView, ListView):
    permission_required = "agent_runtime.view_toolprovider"
    template_name = "agent_runtime/provider_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        return provider_list()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(
            [
                "Name",
                "Status",
                "Base URL and spec",
                "Last refresh",
                "Result",
                "Access probe",
                "Tools",
                "Warnings",
            ],
            empty="No tool providers yet.",
        )
        for provider in context["object_list"]:
            status = provider.last_refresh_status
            probe_status = str((provider.access_probe or {}).get("status") or "")
            table.rows.append(
                [
                    tables.mono(provider.name, href=reverse("console:provider_detail", args=[provider.name])),
                    tables.badge("enabled" if provider.enabled else "disabled"),
                    # Origin only; the second line says where the spec comes from and how it is
                    # protected, so the list stays one screen wide.
                    tables.Cell(
                        base_origin(provider.base_url) or "—", kind="mono", sub=spec_summary(provider)
                    ),
                    tables.time(provider.last_refresh_at),
                    _badge(status, REFRESH_TONES, sub=refresh_error_code(provider)),
                    tables.Cell(probe_status, kind="badge", tone=probe_tone(provider, probe_status))
                    if probe_status
                    else tables.text(""),
                    _count(provider.tool_count),
                    _count(provider.warning_count or 0),
                ]
            )
        context["table"] = table
        return context


class ProviderDetailView(ConsoleView, DetailView):
    permission_required = "agent_runtime.view_toolprovider"
    template_name = "agent_runtime/provider_detail.html"
    context_object_name = "provider"

    def get_object(self, queryset=None):
        return or_404(provider_detail(name=self.kwargs["name"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        provider = self.object
        tools = provider_tools(provider=provider)
        routes = provider_exposure(provider.name)
        warnings = list(provider.compile_warnings or [])
        context.update(
            {
                "tools_table": tools_table(provider, tools, routes),
                "tool_count": len(tools),
                "routes_note": routes_note(routes),
                "probe_table": probe_table(provider),
                "authz_probe_table": authz_probe_table(provider),
                "warnings_table": warnings_table(
                    warnings, empty="The last good spec compiled without findings."
                ),
                "warning_count": len(warnings),
                "disabled_count": sum(1 for w in warnings if w.get("severity") in ("error", "fatal")),
                "spec_sha_short": tables.short_hash(provider.spec_sha256),
                "refresh_error_code": refresh_error_code(provider),
                "refresh_error_text": refresh_error_text(provider),
                "refresh_tone": REFRESH_TONES.get(provider.last_refresh_status, "neutral"),
                "can_refresh": self.request.user.has_perm("agent_runtime.change_toolprovider"),
                "audit_url": reverse("console:audit_list")
                + "?"
                + urlencode({"action": "agent_runtime.provider"}),
            }
        )
        return context


class ProviderToolDetailView(ConsoleView, DetailView):
    permission_required = ("agent_runtime.view_toolprovider", "agent_runtime.view_providertool")
    template_name = "agent_runtime/tool_detail.html"
    context_object_name = "tool"

    def get_object(self, queryset=None):
        return or_404(provider_tool_get(provider_name=self.kwargs["name"], tool_name=self.kwargs["tool"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        tool = self.object
        compiled = tool.compiled or {}
        schema = compiled.get("input_schema") or {}
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        styles = compiled.get("param_styles") or {}
        params = tables.Table(["Parameter", "Location", "Required", "Type", "Style"], empty="No parameters.")
        for name, location in (compiled.get("param_locations") or {}).items():
            prop = properties.get(name) if isinstance(properties.get(name), dict) else {}
            kind = prop.get("type")
            style = styles.get(name) or {}
            params.rows.append(
                [
                    tables.mono(name),
                    tables.text(location),
                    tables.text("yes" if name in required else "no"),
                    tables.mono(", ".join(kind) if isinstance(kind, list) else kind),
                    tables.mono(
                        ", ".join(f"{key}={_json_value(value)}" for key, value in sorted(style.items()))
                    ),
                ]
            )
        approval = compiled.get("approval") or {}
        rules = tables.Table(["Parameter", "Operator", "Value"], empty="No conditional rules.")
        for rule in approval.get("when") or []:
            rules.rows.append(
                [
                    tables.mono(rule.get("param")),
                    tables.mono(rule.get("op")),
                    tables.mono("" if rule.get("op") == "exists" else _json_value(rule.get("value"))),
                ]
            )
        routes = provider_exposure(tool.provider.name)
        exposure = tables.Table(
            ["Workspace", "Permission", "Exposure"],
            empty="No workspace names this provider in its tool sources.",
        )
        for route in routes:
            exposure.rows.append(
                [
                    tables.mono(
                        route.heading, href=reverse("console:workspace_detail", args=[route.route_key])
                    ),
                    tables.text(route.permission),
                    exposure_cell(route.of(tool.name)),
                ]
            )
        context.update(
            {
                "provider": tool.provider,
                "compiled": compiled,
                "guidance": tool.usage_guidance or {},
                "approval": approval,
                "approval_summary": approval_summary(risk=tool.risk, approval=approval),
                "params_table": params,
                "rules_table": rules,
                "exposure_table": exposure,
                "warnings_table": warnings_table(
                    list(tool.warnings or []), show_tool=False, empty="This tool compiled without findings."
                ),
                "rate_limit": _json_value(compiled["rate_limit"]) if compiled.get("rate_limit") else "",
            }
        )
        return context


class ProviderRefreshView(ConsoleView, View):
    """Runs the same refresh as ``bailing_provider_refresh`` and reports its outcome as a message.

    The outcome's error code and message are fixed texts chosen by the service (no bodies, URLs or
    secrets), so they can be shown as they are.
    """

    permission_required = "agent_runtime.change_toolprovider"
    http_method_names = ["post"]

    def post(self, request, name):
        provider = or_404(provider_get(name=name))
        outcome = provider_refresh(provider=provider, actor=Actor.user(request.user))
        if outcome.ok:
            messages.success(request, f"Refreshed {provider.name}: {refresh_summary(outcome)}.")
        else:
            messages.error(
                request,
                f"Refresh of {provider.name} failed: {outcome.error} — {outcome.message}. "
                "The last good spec and its tools were kept.",
            )
        return redirect("console:provider_detail", name=provider.name)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def refresh_summary(outcome: RefreshOutcome) -> str:
    """``6 tools (2 added, 0 removed, 1 changed), 3 warnings``."""
    return (
        f"{_plural(outcome.tools, 'tool')} ({len(outcome.added)} added, {len(outcome.removed)} removed, "
        f"{len(outcome.changed)} changed), {_plural(outcome.warnings, 'compile warning')}"
    )
