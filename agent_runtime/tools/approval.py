"""Does this call of a tool need a human's approval, and why (ACC ``risk``, ``approval.required``,
``approval.when``; docs/protocol.md "Approval policy").

A call needs approval when the risk is ``high`` (policy ``risk_high``), when ``approval.required`` is
true (``confirm_required``), or when an ``approval.when`` rule matches (``confirm_when``: the first
matching rule is the one reported). Every rule is evaluated first, so arguments a rule cannot
evaluate reject the call (:class:`~agent_runtime.tools.acc.ApprovalConditionError`) even when an
earlier reason already requires approval. Route-level tightening (``force_approval_tools``) is
applied by the caller on top of this answer; it can only add approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_runtime.tools.acc import approval_rules_match, rule_actual
from agent_runtime.tools.compiler import CompiledTool
from bailing.api.jsjson import js_string

POLICY_RISK_HIGH = "risk_high"
POLICY_CONFIRM_REQUIRED = "confirm_required"
POLICY_CONFIRM_WHEN = "confirm_when"
# The approval's ``reason`` as BailingHub writes it (into the snapshot, the webhook and the ledger).
REASON_RISK_HIGH = "risk=high"
REASON_CONFIRM_REQUIRED = "confirm-required"


def rule_description(rule: dict[str, Any]) -> str:
    """An unlabelled ``approval.when`` rule as BailingHub names it: ``confirm_when: amount > 500``."""
    value = f" {js_string(rule['value'])}" if "value" in rule else ""
    return f"confirm_when: {rule['param']} {rule['op']}{value}"


@dataclass(frozen=True)
class ApprovalPolicyOutcome:
    """The answer for one call: ``policy`` and ``reason`` are set when approval is required.

    ``confirm_when`` describes the matching rule (``param``, ``op``, ``value``, ``actual``, ``reason``)
    for the approval snapshot; ``actual`` is an argument value, so it is never written to the audit
    ledger.
    """

    required: bool
    policy: str | None = None
    reason: str = ""
    confirm_when: dict[str, Any] | None = None


def approval_policy_for(tool: CompiledTool, arguments: Any) -> ApprovalPolicyOutcome:
    """The approval outcome of calling ``tool`` with ``arguments`` (see the module docstring)."""
    matches = approval_rules_match(tool.approval.when, arguments, tool.input_schema)
    if tool.risk == "high":
        return ApprovalPolicyOutcome(True, POLICY_RISK_HIGH, REASON_RISK_HIGH)
    if tool.approval.required:
        return ApprovalPolicyOutcome(True, POLICY_CONFIRM_REQUIRED, REASON_CONFIRM_REQUIRED)
    for rule, matched in zip(tool.approval.when, matches, strict=True):
        if matched:
            label = rule.get("label") or rule_description(rule)
            detail = {
                "param": rule["param"],
                "op": rule["op"],
                "value": rule.get("value"),
                "actual": rule_actual(rule, arguments),
                "reason": label,
            }
            return ApprovalPolicyOutcome(True, POLICY_CONFIRM_WHEN, label, detail)
    return ApprovalPolicyOutcome(False)


def approval_required_for(tool: CompiledTool, arguments: Any) -> bool:
    """Whether this call of ``tool`` with ``arguments`` must be approved before dispatch.

    Raises :class:`~agent_runtime.tools.acc.ApprovalConditionError` when the arguments cannot be
    evaluated (the caller rejects the call; it must never be read as "no approval needed").
    """
    return approval_policy_for(tool, arguments).required
