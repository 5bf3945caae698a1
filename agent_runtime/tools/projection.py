"""What agents see of a compiled tool, and the hashes the catalog builds revisions from.

Public projection (the ``tool`` object of catalogs, capability search, turn ``active_tools`` and
``bailing.agent-tool-detail.v1``), an allowlist in this order::

    name, description, description_truncated, input_schema, scope, risk,
    approval_required, readonly, idempotent, usage_guidance_available

The eight fields of BailingHub's projection keep their machine meaning (``approval_required`` =
risk ``high`` or ``approval.required`` or any ``approval.when`` rule, before route tightening); the
two flags the specification adds are always present as booleans. Nothing else leaves the hub: no
method/path, provider, server URL, extension bag, approval rules or prompt, subject field, or the
original spec (docs/protocol.md "Catalog exposure").
``requires_subject`` is deliberately absent too: a subject-required tool is simply not offered to a
session without a trusted subject, as BailingHub does.

Two hashes with different jobs (spec "Read usage guidance by tool name"; docs/protocol.md
"Capability revision and execution fingerprint"):

* :func:`execution_fingerprint` freezes what a dispatched call *means*: name, provider, method,
  path, parameter locations and styles, request body, ``input_schema``, scope, risk, approval rules,
  readonly, idempotent, subject, sensitivity. Descriptions, guidance and approval prompt text are
  excluded, so a guidance-only change never blocks continuing an approved invocation. The
  invocation layer adds route key and provider base URL hash around it.
* :func:`capability_material` is a tool's share of the discovery ``capability_revision``: the
  public projection, the bounded guidance *and* the execution fingerprint, so any change an agent
  could observe or that alters execution bumps the revision (even with an unchanged raw spec).
"""

from __future__ import annotations

import copy
from typing import Any

from agent_runtime.tools.compiler import CompiledTool
from bailing.api.hashing import canonical_sha256

TOOL_EXECUTION_SCHEMA = "bailing-hub.tool-execution.v1"
TOOL_GUIDANCE_SCHEMA = "bailing-hub.tool-guidance.v1"
TOOL_PROJECTION_SCHEMA = "bailing-hub.tool-projection.v1"

# Key order of the public ``tool`` object; stored projections come back from jsonb without it.
PROJECTION_KEYS = (
    "name",
    "description",
    "description_truncated",
    "input_schema",
    "scope",
    "risk",
    "approval_required",
    "readonly",
    "idempotent",
    "usage_guidance_available",
)


def public_projection(tool: CompiledTool) -> dict[str, Any]:
    """The allowlisted ``tool`` object agents receive (a fresh copy; safe to mutate), in
    :data:`PROJECTION_KEYS` order."""
    return {
        "name": tool.name,
        "description": tool.description,
        "description_truncated": tool.description_truncated,
        "input_schema": copy.deepcopy(tool.input_schema),
        "scope": tool.scope,
        "risk": tool.risk,
        "approval_required": tool.approval_required,
        "readonly": tool.readonly,
        "idempotent": tool.idempotent,
        "usage_guidance_available": tool.usage_guidance_available,
    }


def usage_guidance_payload(tool: CompiledTool) -> dict[str, Any]:
    """The ``usage_guidance`` object of the tool-detail response."""
    return tool.usage_guidance.as_dict()


def execution_contract(tool: CompiledTool) -> dict[str, Any]:
    """The execution-relevant fields hashed by :func:`execution_fingerprint`."""
    return {
        "schema": TOOL_EXECUTION_SCHEMA,
        "name": tool.name,
        "provider": tool.provider,
        "method": tool.method,
        "path": tool.path,
        "param_locations": tool.param_locations,
        "param_styles": tool.param_styles,
        "request_body": tool.request_body,
        "input_schema": tool.input_schema,
        "scope": tool.scope,
        "risk": tool.risk,
        "approval": {"required": tool.approval.required, "when": list(tool.approval.when)},
        "readonly": tool.readonly,
        "idempotent": tool.idempotent,
        "subject": {"required": tool.requires_subject, "field": tool.subject_field},
        "sensitive": tool.sensitive,
    }


def execution_fingerprint(tool: CompiledTool) -> str:
    """Canonical SHA-256 of :func:`execution_contract`; frozen on an invocation."""
    return canonical_sha256(execution_contract(tool))


def guidance_digest(tool: CompiledTool) -> str:
    """Canonical SHA-256 of the bounded guidance exactly as the detail endpoint serves it."""
    return canonical_sha256({"schema": TOOL_GUIDANCE_SCHEMA, "usage_guidance": usage_guidance_payload(tool)})


def projection_digest(tool: CompiledTool) -> str:
    """Canonical SHA-256 of the public projection."""
    return canonical_sha256({"schema": TOOL_PROJECTION_SCHEMA, "tool": public_projection(tool)})


def capability_material(tool: CompiledTool) -> dict[str, Any]:
    """One tool's input to a capability revision; the catalog hashes a list of these together with
    the route governance (route key, permission, audience, agent_direct configuration, sources)."""
    return {
        "tool": public_projection(tool),
        "usage_guidance": usage_guidance_payload(tool),
        "execution_fingerprint": execution_fingerprint(tool),
    }
