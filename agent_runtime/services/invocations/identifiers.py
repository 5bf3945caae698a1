"""The identifiers and hashes an invocation is known by: its business request id, what its dispatch
means (the execution fingerprint), its idempotency key, and the fingerprint of the request that
created it (an ``invocation_id`` replayed with another request is 409 ``invocation_conflict``)."""

from __future__ import annotations

import uuid

from agent_runtime.invocation_results import INVOCATION_SCHEMA
from bailing.api.hashing import canonical_sha256, sha256_hex

EXECUTION_SCHEMA = "bailing.agent-tool-execution.v1"


def invocation_request_id(session_id: uuid.UUID, invocation_id: str) -> str:
    """The synthetic job's business request id: ``agent-tool:`` + SHA-256 of the session and id."""
    digest = sha256_hex(f"bailing.agent-tool.v1\0{session_id}\0{invocation_id}")
    return f"agent-tool:{digest}"


def invocation_execution_fingerprint(
    *, route_key: str, provider_name: str, base_url: str, tool_fp: str
) -> str:
    """What a dispatched call *means*, frozen on the invocation: the route, the provider and its
    base URL, and the tool's execution contract (no guidance, no secret, no other tool)."""
    return canonical_sha256(
        {
            "schema": EXECUTION_SCHEMA,
            "route": route_key,
            "provider": {"name": provider_name, "base": sha256_hex(base_url)},
            "tool": tool_fp,
        }
    )


def idempotency_key(*, job_id: uuid.UUID, tool: str, args_hash: str, on_behalf_of: str) -> str:
    """``X-Bailing-Idempotency-Key``: stable for the job, tool, canonical arguments and subject."""
    return canonical_sha256(
        {"job_id": str(job_id), "tool": tool, "args_hash": args_hash, "on_behalf_of": on_behalf_of}
    )


def request_hash(
    *,
    route: str,
    tool: str,
    args_hash: str,
    capability_revision: str,
    agent_run_id: str | None,
) -> str:
    """The fingerprint of the create request an ``invocation_id`` is bound to."""
    return canonical_sha256(
        {
            "schema": INVOCATION_SCHEMA,
            "route": route,
            "tool": tool,
            "args_hash": args_hash,
            "capability_revision": capability_revision,
            "agent_run_id": agent_run_id,
        }
    )
