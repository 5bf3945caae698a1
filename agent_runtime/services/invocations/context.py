"""The stored tool an invocation is about and its provider: what the gates and the dispatch read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from agent_runtime.models import ProviderTool
from agent_runtime.selectors.catalog import CatalogTool
from agent_runtime.selectors.routes import WorkspaceAccess
from agent_runtime.services.invocations.identifiers import invocation_execution_fingerprint
from agent_runtime.tools.compiler import CompiledTool


@dataclass(frozen=True)
class ToolContext:
    """One authorized tool as stored (the row the catalog was built from) and its provider."""

    route_key: str
    route: Any  # the Route row (its data_policy decides what the agent sees of the answer)
    catalog_tool: CatalogTool
    compiled: CompiledTool
    provider_base_url: str
    provider_timeout_ms: int
    provider_rate_limit: int
    provider_max_concurrent_calls: int
    provider: Any
    fingerprint: str


# What dispatch needs of the stored tool and its provider; never the provider's stored spec.
_TOOL_CONTEXT_FIELDS = (
    "compiled",
    "execution_fingerprint",
    "provider__name",
    "provider__base_url",
    "provider__timeout_ms",
    "provider__rate_limit_per_min",
    "provider__max_concurrent_calls",
    "provider__secret_encrypted",
)


def tool_context(access: WorkspaceAccess, tool: CatalogTool) -> ToolContext | None:
    """The stored tool the catalog was built from (pinned by its material digest) and its provider."""
    row = (
        ProviderTool.objects.select_related("provider")
        .only(*_TOOL_CONTEXT_FIELDS)
        .filter(pk=tool.tool_id, material_digest=tool.material_digest)
        .first()
    )
    if row is None:
        return None
    provider = row.provider
    return ToolContext(
        route_key=access.route_key,
        route=access.route,
        catalog_tool=tool,
        compiled=CompiledTool.from_dict(row.compiled),
        provider_base_url=provider.base_url,
        provider_timeout_ms=provider.timeout_ms,
        provider_rate_limit=provider.rate_limit_per_min,
        provider_max_concurrent_calls=(
            provider.max_concurrent_calls or settings.BAILING_PROVIDER_MAX_CONCURRENT_CALLS
        ),
        provider=provider,
        fingerprint=invocation_execution_fingerprint(
            route_key=access.route_key,
            provider_name=provider.name,
            base_url=provider.base_url,
            tool_fp=row.execution_fingerprint,
        ),
    )
