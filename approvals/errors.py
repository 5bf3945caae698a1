"""Error codes of the operators' app: business decisions on approvals (docs/protocol.md "Decisions")."""

from __future__ import annotations

from bailing.api.errors import ApiError


class ApprovalConflict(ApiError):
    """The approval was already decided differently, or the ``decision_id`` belongs to another
    approval, or a concurrent decision won."""

    code = "approval_conflict"
    http_status = 409
    default_message = "The approval was already decided, or the decision_id is used elsewhere."


class ReconciliationNotNeeded(ApiError):
    """Only an invocation whose outcome is unknown can be resolved by an operator, once."""

    code = "reconciliation_not_needed"
    http_status = 409
    default_message = "This invocation has no unresolved unknown outcome."
