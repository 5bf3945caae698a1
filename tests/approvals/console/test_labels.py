"""The one mapping of tool-call, journal, approval and notification states to badges, and of approval
policies to words (approvals/console/labels.py): every state has its badge, the states that mean
different things for an operator look different, a business failure never reads as success."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from agent_runtime.models import ApprovalNotification, ToolApproval, ToolCallJournal, ToolInvocation
from agent_runtime.tools import approval as policies
from agent_runtime.tools.approval import rule_description
from approvals.console import labels
from approvals.console.labels import (
    APPROVAL_BADGES,
    INVOCATION_BADGES,
    NOTIFICATION_BADGES,
    invocation_badge,
    journal_badge,
    policy_code,
    policy_label,
)
from bailing.ui.badges import TONES, Badge

CSS = (Path(settings.BASE_DIR) / "static" / "console" / "console.css").read_text()


@pytest.mark.parametrize(
    ("badges", "states"),
    [
        (INVOCATION_BADGES, ToolInvocation.Status),
        (APPROVAL_BADGES, ToolApproval.Status),
        (NOTIFICATION_BADGES, ApprovalNotification.Status),
    ],
    ids=["invocation", "approval", "notification"],
)
def test_every_state_has_a_badge_with_its_code_and_meaning(badges, states):
    assert set(badges) == set(states.values)
    for state, badge in badges.items():
        assert badge.code == state
        assert badge.label and badge.meaning
        assert badge.title.startswith(state + " — ")


def test_every_journal_state_has_a_badge_that_is_not_its_bare_code():
    for state in ToolCallJournal.State.values:
        badge = journal_badge(ToolCallJournal(state=state, http_status=200, ok=True))
        assert badge.code.startswith(state) and badge.meaning
        assert badge.label != "completed"  # a completed journal says what the business answered


def test_the_states_that_need_different_people_look_different():
    needs_operator = INVOCATION_BADGES["reconciliation_required"]
    denied = INVOCATION_BADGES["denied"]
    refused = INVOCATION_BADGES["business_rejected"]
    assert (needs_operator.tone, denied.tone, refused.tone) == ("alarm", "dark", "refused")
    tones = [badge.tone for badge in INVOCATION_BADGES.values()]
    assert len(set(tones)) == len(tones), tones
    assert len({badge.label for badge in INVOCATION_BADGES.values()}) == len(INVOCATION_BADGES)


def test_every_tone_has_its_colour_class():
    for tone in TONES:
        assert re.search(rf"\.badge-{tone}\s*\{{", CSS), tone
        assert re.search(rf"\.trace-{tone}\s*\{{", CSS) or tone in {"neutral"}, tone
    with pytest.raises(ValueError):
        Badge("x", "green")


@pytest.mark.parametrize(
    ("http_status", "ok", "label", "tone"),
    [
        (200, True, "answered 200", "ok"),
        (201, True, "answered 201", "ok"),
        (500, False, "answered 500", "bad"),
        (503, False, "answered 503", "bad"),
        (409, False, "answered 409", "refused"),
        (None, None, "not sent", "off"),
    ],
)
def test_a_completed_journal_says_what_the_business_answered(http_status, ok, label, tone):
    journal = ToolCallJournal(state=ToolCallJournal.State.COMPLETED, http_status=http_status, ok=ok)
    badge = journal_badge(journal)
    assert (badge.label, badge.tone) == (label, tone)
    assert badge.code.startswith("completed")


def test_unknown_outcomes_in_the_journal_are_alarms_until_resolved():
    for state in (ToolCallJournal.State.UNCERTAIN, ToolCallJournal.State.EVIDENCE_DEGRADED):
        assert journal_badge(ToolCallJournal(state=state)).tone == "alarm"
    assert journal_badge(ToolCallJournal(state=ToolCallJournal.State.DISPATCHING)).tone == "progress"
    resolved = ToolCallJournal(state=ToolCallJournal.State.UNCERTAIN, resolution="not_executed")
    assert (journal_badge(resolved).label, journal_badge(resolved).tone) == ("resolved: not executed", "off")


def _waiting(approval_status: str) -> ToolInvocation:
    invocation = ToolInvocation(status=ToolInvocation.Status.AWAITING_APPROVAL)
    invocation.approval = ToolApproval(status=approval_status)
    return invocation


def test_a_decided_call_the_agent_has_not_resumed_says_so():
    assert invocation_badge(_waiting("pending")) == INVOCATION_BADGES["awaiting_approval"]
    approved = invocation_badge(_waiting("approved"))
    assert (approved.label, approved.tone, approved.code) == ("approved", "progress", "awaiting_approval")
    assert "not sent yet" in approved.note
    for status in ("denied", "expired"):
        badge = invocation_badge(_waiting(status))
        assert (badge.label, badge.tone) == (status, "dark")
        assert "Nothing is sent" in badge.meaning


def test_a_resolved_unknown_outcome_is_no_longer_an_alarm():
    unknown = ToolInvocation(status=ToolInvocation.Status.RECONCILIATION_REQUIRED)
    unknown.journal = ToolCallJournal(state=ToolCallJournal.State.UNCERTAIN)
    assert invocation_badge(unknown).tone == "alarm"
    unknown.journal = ToolCallJournal(state=ToolCallJournal.State.UNCERTAIN, resolution="executed")
    resolved = invocation_badge(unknown)
    assert (resolved.label, resolved.tone) == ("resolved", "progress")
    assert resolved.code == "reconciliation_required"


@pytest.mark.parametrize(
    ("policy", "reason", "label"),
    [
        ("risk_high", policies.REASON_RISK_HIGH, "High-risk tool"),
        ("confirm_required", policies.REASON_CONFIRM_REQUIRED, "Always confirmed"),
        ("confirm_when", "Refunds above 500 need approval", "Condition met: Refunds above 500 need approval"),
        (
            "confirm_when",
            rule_description({"param": "amount", "op": ">", "value": 500}),
            "Condition met: amount > 500",
        ),
        ("confirm_when", "", "Condition met"),
        ("some_future_policy", "", "some_future_policy"),
    ],
)
def test_policies_read_as_words_and_keep_their_code(policy, reason, label):
    assert policy_label(policy, reason) == label
    assert policy_code(policy, reason).startswith(policy)
    if reason:
        assert reason in policy_code(policy, reason)


def test_the_policy_names_are_those_the_policy_code_reports():
    assert (labels.POLICY_RISK_HIGH, labels.POLICY_CONFIRM_REQUIRED, labels.POLICY_CONFIRM_WHEN) == (
        policies.POLICY_RISK_HIGH,
        policies.POLICY_CONFIRM_REQUIRED,
        policies.POLICY_CONFIRM_WHEN,
    )
