"""What the operators' pages grant each console role (``bailing.roles``).

Every role reads tool invocations and their approvals. Separation of duties: approvers decide on
tool calls (``agent_runtime.decide_toolapproval``; never for a call made on their own behalf);
administrators reconcile unknown outcomes, reveal a raw business answer sealed by the data policy
(audited, behind a confirmation) and resend approval notifications, and decide only if they also
hold the approver role. Administrators and auditors read and verify the audit history.
"""

from __future__ import annotations

from bailing.roles import ADMINISTRATOR, APPROVER, AUDITOR

_READ = ("agent_runtime.view_toolinvocation", "agent_runtime.view_toolapproval")
_AUDIT = ("bailing.view_auditevent", "bailing.verify_auditevent")

ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    ADMINISTRATOR: (
        *_READ,
        *_AUDIT,
        "agent_runtime.resolve_toolcalljournal",
        "agent_runtime.reveal_toolcalljournal",
        "agent_runtime.change_toolapproval",
    ),
    APPROVER: (*_READ, "agent_runtime.decide_toolapproval"),
    AUDITOR: (*_READ, *_AUDIT),
}
