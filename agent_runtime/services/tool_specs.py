"""Storing a provider's compiled spec: the one place ``ProviderTool`` rows are written.

Refresh (URL or inline) compiles first and calls :func:`provider_spec_store` only with a result
that is not fatal, so a provider always serves its last good spec. Tools are replaced as a set in
one transaction under a row lock on the provider, and the change is audited with the names of the
tools added, removed and changed (never their contents).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agent_runtime.models import ProviderTool, ToolProvider
from agent_runtime.tools.compiler import CompileResult
from agent_runtime.tools.projection import (
    capability_material,
    execution_fingerprint,
    public_projection,
    usage_guidance_payload,
)
from bailing.api.hashing import canonical_sha256
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record


def _tool_row(provider: ToolProvider, tool, warnings: list[dict[str, Any]]) -> ProviderTool:
    return ProviderTool(
        provider=provider,
        name=tool.name,
        method=tool.method,
        path=tool.path,
        scope=tool.scope,
        risk=tool.risk,
        readonly=tool.readonly,
        idempotent=tool.idempotent,
        approval_required=tool.approval_required,
        requires_subject=tool.requires_subject,
        compiled=tool.as_dict(),
        projection=public_projection(tool),
        usage_guidance=usage_guidance_payload(tool),
        execution_fingerprint=execution_fingerprint(tool),
        material_digest=canonical_sha256(capability_material(tool)),
        warnings=[w for w in warnings if w.get("tool") == tool.name],
    )


def provider_spec_store(
    *, provider: ToolProvider, spec: dict[str, Any], result: CompileResult, actor: Actor
) -> dict[str, list[str]]:
    """Make ``spec`` (already compiled into ``result``) the provider's current spec.

    Returns the tool names ``added``, ``removed`` and ``changed`` (material digest differs).
    Raises ``ValueError`` for a fatal compile result: callers keep the last good spec instead.
    """
    if result.fatal:
        raise ValueError("a fatal compile result cannot become the provider's spec")
    warnings = [w.as_dict() for w in result.warnings]
    now = timezone.now()
    with transaction.atomic():
        locked = ToolProvider.objects.select_for_update().get(pk=provider.pk)
        before = dict(locked.tools.values_list("name", "material_digest"))
        rows = [_tool_row(locked, tool, warnings) for tool in result.tools]
        after = {row.name: row.material_digest for row in rows}
        locked.tools.all().delete()
        ProviderTool.objects.bulk_create(rows)
        locked.spec_json = spec
        locked.spec_sha256 = canonical_sha256(spec)
        locked.spec_refreshed_at = now
        locked.compile_warnings = warnings
        locked.last_refresh_at = now
        locked.last_refresh_status = "ok"
        locked.last_refresh_error = ""
        locked.save(
            update_fields=[
                "spec_json",
                "spec_sha256",
                "spec_refreshed_at",
                "compile_warnings",
                "last_refresh_at",
                "last_refresh_status",
                "last_refresh_error",
                "updated_at",
            ]
        )
        diff = {
            "added": sorted(set(after) - set(before)),
            "removed": sorted(set(before) - set(after)),
            "changed": sorted(name for name in set(after) & set(before) if after[name] != before[name]),
        }
        audit_record(
            action="agent_runtime.provider.spec_stored",
            actor=actor,
            target_type="tool_provider",
            target_id=locked.name,
            data={**diff, "tools": len(rows), "warnings": len(warnings), "spec_sha256": locked.spec_sha256},
        )
    provider.refresh_from_db()
    return diff
