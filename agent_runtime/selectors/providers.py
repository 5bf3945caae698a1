"""Reads of tool providers and their compiled tools for the console: the health overview, the
provider pages, one tool's page, the tool list and which workspaces expose a provider's tools.

Provider pages never load what the hub keeps to itself or what they do not show: the sealed secret
and the (up to 5 MB) specs are deferred, and a tool table reads the approval declaration out of the
compiled tool in SQL instead of loading input schemas of up to 64 KiB each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import (
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from agent_runtime.models import ProviderTool, Route, ToolProvider
from agent_runtime.selectors.catalog import Catalog, route_level_catalogs, tool_name_sort_key
from agent_runtime.selectors.workspace_overview import Capped, capped
from bailing.db.queries import filter_by

HEALTH_LIMIT = 12
# Columns the health overview never needs: the sealed secret, the specs and the compile findings.
_HEAVY = ("secret_encrypted", "spec_json", "spec_inline", "compile_warnings")
# Columns a provider page never needs: the sealed secret, and the (up to 5 MB) specs.
HIDDEN_PROVIDER_FIELDS = ("secret_encrypted", "spec_json", "spec_inline")


def providers_health(*, limit: int = HEALTH_LIMIT) -> Capped:
    """Providers with their last refresh and probes, those that need a look first (a failed refresh,
    a suspect or inconclusive authorization probe, a public spec that should be protected), then by
    name; at most ``limit``, with the total. One query (two when there are more than ``limit``)."""
    authz = KeyTextTransform("status", "authz_probe")
    access = KeyTextTransform("status", "access_probe")
    attention = Case(
        When(Q(enabled=True, last_refresh_status="failed"), then=Value(0)),
        When(Q(enabled=True) & Q(authz_probe__status__in=["suspect", "inconclusive"]), then=Value(1)),
        When(
            Q(enabled=True, spec_access_policy=ToolProvider.AccessPolicy.SIGNED_REQUIRED)
            & Q(access_probe__status__in=["public", "inconclusive"]),
            then=Value(1),
        ),
        When(Q(enabled=True, last_refresh_status="never"), then=Value(2)),
        When(enabled=True, then=Value(3)),
        default=Value(4),
        output_field=IntegerField(),
    )
    queryset = (
        ToolProvider.objects.defer(*_HEAVY)
        .annotate(attention=attention, authz_status=authz, access_status=access)
        .order_by("attention", "name")
    )
    return capped(queryset, limit, counted=ToolProvider.objects.all())


# --- provider pages -------------------------------------------------------------------------------------
def _provider_pages() -> QuerySet[ToolProvider]:
    """Providers without their hidden columns, and whether each has a secret (``has_secret``)."""
    return ToolProvider.objects.defer(*HIDDEN_PROVIDER_FIELDS).annotate(
        has_secret=ExpressionWrapper(~Q(secret_encrypted=""), output_field=BooleanField()),
    )


def provider_list() -> QuerySet[ToolProvider]:
    """Every provider by name, with ``tool_count`` and ``warning_count`` (compile findings) and
    without the compile findings themselves."""
    return (
        _provider_pages()
        .defer("compile_warnings")
        .annotate(
            tool_count=Count("tools"),
            warning_count=Func(
                F("compile_warnings"), function="jsonb_array_length", output_field=IntegerField()
            ),
        )
        .order_by("name")
    )


def provider_detail(*, name: str) -> ToolProvider | None:
    """The provider as its page shows it (hidden columns deferred, ``has_secret`` annotated)."""
    return _provider_pages().filter(name=name).first()


def provider_get(*, name: str) -> ToolProvider | None:
    """The whole provider row, secret and specs included: what a refresh needs."""
    return ToolProvider.objects.filter(name=name).first()


def provider_names() -> list[str]:
    """Every provider's name, in order (the tool list's provider filter choices)."""
    return list(ToolProvider.objects.order_by("name").values_list("name", flat=True))


def provider_tools(*, provider: ToolProvider) -> list[ProviderTool]:
    """The provider's compiled tools for its page, in catalog order (:func:`tool_name_sort_key`),
    each with ``approval_declared`` (the compiled approval declaration) read out in SQL."""
    tools = list(
        ProviderTool.objects.filter(provider=provider)
        .only("name", "method", "path", "scope", "risk", "readonly", "idempotent", "warnings")
        .annotate(approval_declared=KeyTransform("approval", "compiled"))
    )
    tools.sort(key=lambda tool: tool_name_sort_key(tool.name))
    return tools


def provider_tool_get(*, provider_name: str, tool_name: str) -> ProviderTool | None:
    """One compiled tool of the provider ``provider_name``, its ``provider`` loaded with only its id,
    name and enabled flag; None when either does not exist."""
    provider = ToolProvider.objects.only("id", "name", "enabled").filter(name=provider_name).first()
    if provider is None:
        return None
    tool = ProviderTool.objects.filter(provider=provider, name=tool_name).first()
    if tool is not None:
        tool.provider = provider
    return tool


def provider_tools_by_id(*, tool_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Tool id → its request line (``method``, ``path``) and ``approval_declared``, for exactly these
    tools: one query, however many."""
    return {
        row["id"]: row
        for row in ProviderTool.objects.filter(id__in=list(tool_ids))
        .annotate(approval_declared=KeyTransform("approval", "compiled"))
        .values("id", "method", "path", "approval_declared")
    }


@dataclass(frozen=True)
class RouteCatalog:
    """A workspace with its effective configuration and its route-level catalog."""

    route: Route
    effective: dict[str, Any]
    catalog: Catalog


def provider_route_catalogs(*, provider_name: str) -> list[RouteCatalog]:
    """Every workspace whose ``tools.sources`` names ``provider_name``, by route key, with the
    route-level catalog the catalog service builds for it (so a page cannot disagree with what an
    agent of that workspace sees). Two queries: the routes (JSONB containment on ``tools.sources``)
    and every provider those of them with direct tool access name, with their tools."""
    routes = list(
        Route.objects.filter(tools__sources__contains=[{"provider": provider_name}]).order_by("route_key")
    )
    return [RouteCatalog(*entry) for entry in route_level_catalogs(routes)]


def named_route_catalogs(*, route_keys: Iterable[str]) -> list[RouteCatalog]:
    """The workspaces ``route_keys`` that exist (enabled or not), in the order given, each with its
    route-level catalog: what the consent page says an agent of those workspaces will be able to do.
    Two queries: the routes, and every provider they name with its tools."""
    keys = list(dict.fromkeys(route_keys))
    found = {route.route_key: route for route in Route.objects.filter(route_key__in=keys)}
    routes = [found[key] for key in keys if key in found]
    return [RouteCatalog(*entry) for entry in route_level_catalogs(routes)]


# --- the tool list ------------------------------------------------------------------------------------
def _approval_always() -> Q:
    return Q(risk="high") | Q(compiled__approval__required=True)


def provider_tool_list(
    *,
    filters: Mapping[str, Any] | None = None,
    tool_ids: Iterable[int] | None = None,
    forced_ids: Iterable[int] = (),
) -> QuerySet[ProviderTool]:
    """Every compiled tool of every provider, by provider and name, with its provider's name and
    enabled flag and ``approval_declared``.

    ``tool_ids`` keeps only those tools (a workspace's offered ones), ``forced_ids`` are the tools
    that workspace forces approval on. ``filters``: ``provider`` (name), ``risk``, ``kind``
    (``read`` / ``write``), ``name`` (contains, case-insensitive) and ``approval``: ``always`` (high
    risk, a declared ``required``, or forced), ``conditional`` (``approval.when`` rules only) or
    ``never``.
    """
    filters = filters or {}
    queryset = (
        ProviderTool.objects.select_related("provider")
        .only(
            "id",
            "name",
            "method",
            "path",
            "scope",
            "risk",
            "readonly",
            "idempotent",
            "approval_required",
            "provider__name",
            "provider__enabled",
        )
        .annotate(approval_declared=KeyTransform("approval", "compiled"))
        .order_by("provider__name", "name", "id")
    )
    if tool_ids is not None:
        queryset = queryset.filter(id__in=list(tool_ids))
    queryset = filter_by(queryset, filters, {"provider": "provider__name", "risk": "risk"})
    if filters.get("kind"):
        queryset = queryset.filter(readonly=filters["kind"] == "read")
    queryset = filter_by(queryset, filters, {"name": "name__icontains"})
    approval = filters.get("approval")
    forced = Q(id__in=set(forced_ids))
    if approval == "always":
        queryset = queryset.filter(_approval_always() | forced)
    elif approval == "conditional":
        queryset = queryset.filter(approval_required=True).exclude(_approval_always() | forced)
    elif approval == "never":
        queryset = queryset.filter(approval_required=False).exclude(forced)
    return queryset
