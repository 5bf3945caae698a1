"""What the console calls the states of a governed tool call, its execution journal, its approval
and the approval's notifications, and why a call needed approval: the one mapping every page of
this app uses (the approvals inbox and page, tool-call traces, the dashboard's cards and panel).

Each state gets a :class:`~bailing.ui.badges.Badge` with a distinct tone for a distinct meaning:
an unknown outcome (``reconciliation_required``) is an alarm, because it needs an operator; a
denial is dark (a person stopped it); a business refusal (``business_rejected``) has its own tone,
apart from the hub's own refusals (``rejected_before_dispatch``, grey: nothing was sent). The raw
code stays in each badge's title, so operators can still grep and filter by it.
"""

from __future__ import annotations

from agent_runtime.models import ApprovalNotification, ToolApproval, ToolCallJournal, ToolInvocation
from bailing.ui.badges import Badge

# The approval policies as approvals store them and the webhook and ledger carry them (a wire value,
# docs/protocol.md "Approval policy"; tests/approvals/console/test_labels.py checks them against the
# policy code in agent_runtime).
POLICY_RISK_HIGH = "risk_high"
POLICY_CONFIRM_REQUIRED = "confirm_required"
POLICY_CONFIRM_WHEN = "confirm_when"

_Call = ToolInvocation.Status
_Journal = ToolCallJournal.State
_Approval = ToolApproval.Status
_Note = ApprovalNotification.Status

INVOCATION_BADGES: dict[str, Badge] = {
    _Call.AWAITING_APPROVAL: Badge(
        "awaiting approval", "warn", _Call.AWAITING_APPROVAL, "Waits for a human decision; nothing was sent."
    ),
    _Call.DISPATCHING: Badge(
        "dispatching", "progress", _Call.DISPATCHING, "The business request is under way."
    ),
    _Call.EXECUTED: Badge("executed", "ok", _Call.EXECUTED, "The business system answered with success."),
    _Call.BUSINESS_REJECTED: Badge(
        "business refused",
        "refused",
        _Call.BUSINESS_REJECTED,
        "The business system answered with an error status: the call did not do what was asked.",
    ),
    _Call.RECONCILIATION_REQUIRED: Badge(
        "needs operator",
        "alarm",
        _Call.RECONCILIATION_REQUIRED,
        "Outcome unknown: look the call up in the business system and record what happened. "
        "It is never sent again.",
    ),
    _Call.DENIED: Badge(
        "denied", "dark", _Call.DENIED, "Denied by an approver, or its approval expired; nothing was sent."
    ),
    _Call.REJECTED_BEFORE_DISPATCH: Badge(
        "not sent",
        "off",
        _Call.REJECTED_BEFORE_DISPATCH,
        "Refused by the hub before anything reached the business system.",
    ),
}

APPROVAL_BADGES: dict[str, Badge] = {
    _Approval.PENDING: Badge("pending", "warn", _Approval.PENDING, "Waits for a decision."),
    _Approval.APPROVED: Badge(
        "approved", "ok", _Approval.APPROVED, "The agent's next resume sends the call, once."
    ),
    _Approval.DENIED: Badge(
        "denied", "dark", _Approval.DENIED, "The agent's resume gets the denial; nothing is sent."
    ),
    _Approval.EXPIRED: Badge(
        "expired", "off", _Approval.EXPIRED, "Nobody decided in time; it acts as a denial."
    ),
    _Approval.WITHDRAWN: Badge(
        "withdrawn",
        "off",
        _Approval.WITHDRAWN,
        "The agent withdrew the call before it was sent; it acts as a denial and needs no decision.",
    ),
}

NOTIFICATION_BADGES: dict[str, Badge] = {
    _Note.PENDING: Badge("pending", "progress", _Note.PENDING, "Being delivered (or waiting for a retry)."),
    _Note.DELIVERED: Badge("delivered", "ok", _Note.DELIVERED, "The business system accepted the webhook."),
    _Note.FAILED: Badge("failed", "bad", _Note.FAILED, "Every attempt failed; an administrator may resend."),
    _Note.SKIPPED: Badge("skipped", "off", _Note.SKIPPED, "Not delivered by the hub."),
}

_JOURNAL_BADGES: dict[str, Badge] = {
    _Journal.DISPATCHING: Badge(
        "in flight", "progress", _Journal.DISPATCHING, "Recorded before the request left; no answer yet."
    ),
    _Journal.RESPONSE_RECORDED: Badge(
        "answer recorded", "progress", _Journal.RESPONSE_RECORDED, "The answer is stored; the result follows."
    ),
    _Journal.UNCERTAIN: Badge(
        "outcome unknown",
        "alarm",
        _Journal.UNCERTAIN,
        "The request may or may not have executed; it is never sent again.",
    ),
    _Journal.EVIDENCE_DEGRADED: Badge(
        "answer not recorded",
        "alarm",
        _Journal.EVIDENCE_DEGRADED,
        "The business system answered but the hub could not record the outcome.",
    ),
}


def _unknown(code: str) -> Badge:
    return Badge(code.replace("_", " ") or "—", "neutral", code)


def invocation_badge(invocation: ToolInvocation) -> Badge:
    """The badge of a call's state, saying what is true while it waits for the agent: a call whose
    approval was decided, or whose unknown outcome an operator resolved, keeps its state until the
    agent resumes it, and the badge says so instead of showing it as still waiting or alarming."""
    status = invocation.status
    if status == _Call.AWAITING_APPROVAL:
        approval = getattr(invocation, "approval", None)
        decided = approval.status if approval is not None else _Approval.PENDING
        if decided == _Approval.APPROVED:
            return Badge(
                "approved",
                "progress",
                status,
                "Approved; the agent's next resume sends the call, once.",
                note="not sent yet: the agent has not resumed",
            )
        if decided == _Approval.WITHDRAWN:
            return Badge(
                "withdrawn",
                "off",
                status,
                "The agent withdrew the call before it was sent; nothing is sent.",
                note="the agent's next resume records the end",
            )
        if decided in (_Approval.DENIED, _Approval.EXPIRED):
            return Badge(
                decided,
                "dark",
                status,
                "Its approval was " + decided + "; the agent's resume gets that. Nothing is sent.",
                note="the agent has not resumed yet",
            )
    if status == _Call.RECONCILIATION_REQUIRED:
        journal = getattr(invocation, "journal", None)
        if journal is not None and journal.resolution:
            return Badge(
                "resolved",
                "progress",
                status,
                "An operator recorded the outcome; the agent's next resume receives it.",
                note="by operator: " + journal.resolution.replace("_", " "),
            )
    return INVOCATION_BADGES.get(status) or _unknown(status)


def journal_badge(journal: ToolCallJournal) -> Badge:
    """The execution journal's badge, which says what the business system answered: a completed
    journal of a call answered with 500 is ``answered 500`` in red, never a green "completed"."""
    if journal.resolution:
        executed = journal.resolution == ToolCallJournal.Resolution.EXECUTED
        return Badge(
            "resolved: executed" if executed else "resolved: not executed",
            "ok" if executed else "off",
            f"{journal.state}, resolution {journal.resolution}",
            "An operator looked the call up in the business system and recorded this.",
        )
    if journal.state != _Journal.COMPLETED:
        return _JOURNAL_BADGES.get(journal.state) or _unknown(journal.state)
    status = journal.http_status
    if status is None:
        return Badge(
            "not sent",
            "off",
            journal.state + (f", {journal.error}" if journal.error else ""),
            "The request never reached the business system.",
        )
    code = f"{journal.state}, HTTP {status}"
    if journal.ok:
        return Badge(f"answered {status}", "ok", code, "The business system answered with success.")
    if status >= 500:
        return Badge(f"answered {status}", "bad", code, "The business system failed with a server error.")
    return Badge(f"answered {status}", "refused", code, "The business system refused the request.")


def approval_badge(approval: ToolApproval) -> Badge:
    return APPROVAL_BADGES.get(approval.status) or _unknown(approval.status)


def notification_badge(notification: ApprovalNotification) -> Badge:
    return NOTIFICATION_BADGES.get(notification.status) or _unknown(notification.status)


# --- why a call needs approval ------------------------------------------------------------------------

POLICY_LABELS = {POLICY_RISK_HIGH: "High-risk tool", POLICY_CONFIRM_REQUIRED: "Always confirmed"}
POLICY_EXPLANATIONS = {
    POLICY_RISK_HIGH: "The tool is declared high risk: every call is approved by a person.",
    POLICY_CONFIRM_REQUIRED: "The tool, or this workspace, requires approval of every call.",
    POLICY_CONFIRM_WHEN: "A rule of the tool matched these arguments.",
}
# An unlabelled approval.when rule is described as "confirm_when: amount > 500"
# (agent_runtime.tools.approval.rule_description); the label shows only the condition.
_RULE_PREFIX = POLICY_CONFIRM_WHEN + ": "


def policy_label(policy: str, reason: str = "") -> str:
    """Why a call needs approval, for people: ``risk_high`` → "High-risk tool", ``confirm_required``
    → "Always confirmed", ``confirm_when`` → "Condition met: <the rule's label or condition>"."""
    if policy == POLICY_CONFIRM_WHEN:
        condition = reason.removeprefix(_RULE_PREFIX).strip()
        return f"Condition met: {condition}" if condition else "Condition met"
    return POLICY_LABELS.get(policy, policy)


def policy_code(policy: str, reason: str = "") -> str:
    """The raw policy and reason, as the snapshot, the webhook and the ledger carry them."""
    return f"{policy} ({reason})" if reason and reason != policy else policy
