"""Releasing answers to an agent under the workspace's data policy (issue 23, docs/data-policy.md).

:func:`tool_result_release` is the one function every agent-facing tool result passes — the REST
invoke, resume and receipt results and the MCP ``call_tool`` / ``resume_invocation`` /
``get_invocation_receipt`` output (text and ``structuredContent`` are built from the released
result). :func:`data_policy_count` feeds the Prometheus counter
``bailing_data_policy_findings_total{route, detector, action}``; knowledge calls it for what it
releases too.

What is filtered is the result's ``text`` (the business answer, or a fixed hub text that never holds
a finding). Text that parses as a JSON object or array is walked value by value and written back
as compact JSON only when something was replaced, so a redacted answer stays valid JSON; any other
text (or JSON cut at the result's 8,192-character bound) is read as one string. The result keeps its
state, ``ok`` and ``business_status`` whatever the action — a blocked executed write stays
``executed``: it happened — and a touched result carries ``data_policy: {"action", "findings"}``
(counts only).

Under a policy for tool results the stored result (``ToolInvocation.result``) is the *released* form,
its ``data_policy`` field included, and the raw answer is sealed on the journal
(``agent_runtime.services.invocations.answers``). Every later release — replay, resume, receipt —
applies the policy in force *then* to that stored form, so an answer is never less filtered than
the current policy asks: a detector switched on later (or an action changed from ``flag`` to
``redact`` or ``block``) takes effect on the next read. Re-applying is idempotent for what was
filtered already — a ``[REDACTED:<detector>#<n>]`` placeholder and the withheld notice are no
finding of any built-in detector — and a released result then says both: its ``findings`` are, per
detector, the larger of the stored and the new count (a value flagged before and redacted now is
one finding, not two), its ``action`` the stronger. Removing a policy does not un-filter a stored
answer; only an administrator's audited reveal shows the raw one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import Counter

from agent_runtime.data_policy import BLOCK, TOOL_RESULTS, PolicyOutcome, data_policy_apply
from agent_runtime.data_policy.policy import ACTION_STRENGTH
from agent_runtime.invocation_results import result_text
from agent_runtime.models import Route, ToolProvider
from agent_runtime.selectors.routes import route_data_policy

DATA_POLICY_FINDINGS = Counter(
    "bailing_data_policy_findings",
    "Findings of the data policy in answers released to agents, by route, detector and the action "
    "taken on the answer",
    ["route", "detector", "action"],
)


def data_policy_count(*, route_key: str, outcome: PolicyOutcome) -> None:
    """Count one released answer's findings (nothing for an untouched answer)."""
    _count(route_key, outcome.action, outcome.findings)


def data_policy_count_released(*, route_key: str, result: Mapping[str, Any] | None) -> None:
    """Count the findings of a result released with ``count=False``, from its ``data_policy`` field
    (for a caller that counts only once what it released is recorded)."""
    summary = result.get("data_policy") if result else None
    if summary:
        _count(route_key, summary["action"], summary["findings"])


def _count(route_key: str, action: str | None, findings: Mapping[str, int]) -> None:
    for detector, count in findings.items():
        DATA_POLICY_FINDINGS.labels(route=route_key, detector=detector, action=action).inc(count)


def provider_own_hosts(*, base_url: str) -> tuple[str, ...]:
    """The host of a tool provider's ``base_url``: links back to it are not ``external_media``."""
    host = urlsplit(base_url).hostname
    return (host,) if host else ()


def _hosts_of_provider(name: str) -> tuple[str, ...]:
    base_url = ToolProvider.objects.filter(name=name).values_list("base_url", flat=True).first()
    return provider_own_hosts(base_url=base_url) if base_url else ()


def _json_container(text: str) -> Any:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def tool_result_release(
    *,
    route: Route,
    result: dict[str, Any] | None,
    provider: str,
    own_hosts: Iterable[str] | None = None,
    count: bool = True,
) -> dict[str, Any] | None:
    """``result`` as the agent may see it under ``route``'s data policy (``result`` itself when the
    policy is absent, does not apply to tool results, or finds nothing).

    ``provider`` names the tool provider that answered; its ``base_url`` host is the answer's own host
    (read from the database only when a policy applies, unless ``own_hosts`` is given). Counts the
    findings (:func:`data_policy_count`) unless ``count`` is false — then the caller counts them
    with :func:`data_policy_count_released` once it has recorded the result; the caller records them
    in its audit event from the released result's ``data_policy`` field.
    """
    if result is None or not isinstance(result.get("text"), str):
        return result
    policy = route_data_policy(route)
    if policy is None or not policy.applies_to(TOOL_RESULTS):
        return result
    hosts = tuple(own_hosts) if own_hosts is not None else _hosts_of_provider(provider)
    text = result["text"]
    container = _json_container(text)
    original = container if container is not None else text
    outcome = data_policy_apply(policy=policy, value=original, surface=TOOL_RESULTS, own_hosts=hosts)
    prior = result.get("data_policy")  # a stored result released before (module docstring)
    if not outcome.touched and not prior:
        return result
    summary = _merged(prior, outcome.summary) if prior else outcome.summary
    # A detector the stored answer has findings of and which the policy now blocks withholds it too
    # (its values are placeholders by now, so applying the policy again cannot see them).
    blocked = outcome.blocked or any(
        detector in policy.names and policy.action_for(detector) == BLOCK
        for detector in (prior["findings"] if prior else ())
    )
    if blocked:
        summary = {"action": BLOCK, "findings": summary["findings"]}
    if count:
        _count(route.route_key, summary["action"], summary["findings"])
    if summary == prior and outcome.value is original and not (blocked and prior["action"] != BLOCK):
        return result
    released = dict(result)
    if blocked:
        if prior is None or prior["action"] != BLOCK:
            released["text"] = PolicyOutcome(value=None, action=BLOCK, findings=summary["findings"]).notice
    elif outcome.value is not original:
        value = outcome.value
        released["text"] = result_text(
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        )
    released.pop("data_policy", None)
    released["data_policy"] = summary
    return released


def _merged(prior: Mapping[str, Any], new: Mapping[str, Any] | None) -> dict[str, Any]:
    """The counts of a stored, already released result and of the policy applied to it now (None:
    nothing new): per detector the larger count, the stronger action."""
    if new is None:
        return dict(prior)
    findings = dict(prior["findings"])
    for detector, count in new["findings"].items():
        findings[detector] = max(findings.get(detector, 0), count)
    action = max((prior["action"], new["action"]), key=lambda name: ACTION_STRENGTH.get(name, 0))
    return {"action": action, "findings": findings}


def data_policy_audit(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """The audit data of a released result: ``{"data_policy": {...}}`` when touched, else nothing."""
    summary = result.get("data_policy") if result else None
    return {"data_policy": summary} if summary else {}
