"""Reads of governed invocations: the agent's read-only receipt, and the lookups the console's traces
use. Nothing here dispatches, consumes an approval, opens frozen arguments or changes a state."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent_runtime import errors
from agent_runtime.identity import AgentIdentity
from agent_runtime.invocation_results import TEXT_UNKNOWN, invocation_result
from agent_runtime.models import ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.selectors.catalog import Catalog, route_catalog
from agent_runtime.selectors.routes import WorkspaceAccess, route_for_identity
from bailing.api.timefmt import utc_iso

RECEIPT_SCHEMA = "bailing.agent-invocation-receipt.v1"
INSPECTION_SCHEMA = "bailing.agent-invocation-inspection-capabilities.v1"


def invocation_surface(*, identity: AgentIdentity, route_key: str) -> tuple[WorkspaceAccess, Catalog]:
    """The route gate, ``tools.agent_direct`` (403 ``agent_direct_disabled``) and the caller's catalog:
    what every invocation request and receipt checks first."""
    access = route_for_identity(identity=identity, route_key=route_key, runtime=False)
    if not access.effective["tools"]["agent_direct"]["enabled"]:
        raise errors.AgentDirectDisabled()
    return access, route_catalog(route=access.route, identity=identity, effective=access.effective)


def inspection_capabilities() -> dict[str, Any]:
    """``bailing.agent-invocation-inspection-capabilities.v1``: receipts are offered, read-only."""
    return {"schema_version": INSPECTION_SCHEMA, "receipt_schema": RECEIPT_SCHEMA, "read_only": True}


def invocation_get_for_session(*, identity: AgentIdentity, invocation_id: str) -> ToolInvocation:
    """The caller's invocation, or 404 ``invocation_not_found`` (unknown, or another session's)."""
    invocation = (
        ToolInvocation.objects.select_related("journal", "approval")
        .filter(session_id=identity.session.pk, client_id=identity.client.pk, invocation_id=invocation_id)
        .first()
    )
    if invocation is None:
        raise errors.InvocationNotFound()
    return invocation


def _approval_view(invocation: ToolInvocation) -> dict[str, Any]:
    approval: ToolApproval | None = getattr(invocation, "approval", None)
    if approval is None:
        return {"status": "none"}
    status = ToolApproval.Status.EXPIRED if approval.is_due() else approval.status
    # An expired approval acts as denied; the receipt's vocabulary has no fifth value.
    shown = "denied" if status == ToolApproval.Status.EXPIRED else status
    return {"status": shown, "approval_id": approval.pk}


def invocation_receipt(*, identity: AgentIdentity, invocation_id: str, holder_alive: bool) -> dict[str, Any]:
    """``bailing.agent-invocation-receipt.v1`` of the caller's invocation (read-only), its result as
    stored. Agents get it through ``agent_runtime.services.invocations.invocation_receipt_release``,
    which releases the result under the route's data policy."""
    return invocation_receipt_read(identity=identity, invocation_id=invocation_id, holder_alive=holder_alive)[
        0
    ]


def invocation_receipt_read(
    *, identity: AgentIdentity, invocation_id: str, holder_alive: bool
) -> tuple[dict[str, Any], ToolInvocation, WorkspaceAccess]:
    """The receipt of the caller's invocation, with the invocation and the route access it was read under.

    The session, route and the specific tool must still be authorized (409 ``capability_changed``
    otherwise). ``holder_alive`` says whether a request is working on the invocation right now: a
    ``dispatching`` invocation nobody holds is reported as needing reconciliation (and left as it is
    for the next resume to record).
    """
    invocation = invocation_get_for_session(identity=identity, invocation_id=invocation_id)
    access, catalog = invocation_surface(identity=identity, route_key=invocation.route_key)
    if catalog.tool(invocation.tool) is None:
        raise errors.CapabilityChanged()
    journal: ToolCallJournal | None = getattr(invocation, "journal", None)
    result = invocation.result
    source = "job" if result is not None else "none"
    if invocation.status == ToolInvocation.Status.DISPATCHING:
        result, source = None, "none"
        if not holder_alive:
            result = invocation_result(
                invocation_id=invocation.invocation_id,
                route=invocation.route_key,
                tool=invocation.tool,
                state="reconciliation_required",
                text=TEXT_UNKNOWN.format(
                    reason="worker_lost", key=journal.idempotency_key if journal else "n/a"
                ),
            )
            source = "journal"
    if journal is None or (
        journal.error == "business_unreachable" and journal.state == ToolCallJournal.State.COMPLETED
    ):
        dispatch_state = "not_dispatched"
    else:
        dispatch_state = "attempted"
    receipt = {
        "schema_version": RECEIPT_SCHEMA,
        "read_only": True,
        "business_operation_performed": False,
        "invocation_id": invocation.invocation_id,
        "agent_run_id": str(invocation.run_id) if invocation.run_id else None,
        "route": invocation.route_key,
        "tool": invocation.tool,
        "observed_at": utc_iso(timezone.now()),
        "result": result,
        "result_source": source,
        "dispatch_state": dispatch_state,
        "approval": _approval_view(invocation),
        "journal_state": journal.state if journal is not None else "absent",
    }
    return receipt, invocation, access
