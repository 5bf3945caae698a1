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


class AnswerNotSealed(ApiError):
    """Only an answer stored sealed under a data policy has a raw form to reveal."""

    code = "answer_not_sealed"
    http_status = 404
    default_message = "This call has no sealed business answer."


class AnswerUnavailable(ApiError):
    """The sealed answer does not open (the hub's SECRET_KEY changed, or the value was altered)."""

    code = "answer_unavailable"
    http_status = 409
    default_message = "The sealed business answer cannot be opened."
