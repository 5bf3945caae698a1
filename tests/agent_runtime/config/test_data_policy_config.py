"""A route's ``data_policy`` block as configuration: validation (every refusal names its field and
never echoes a pattern), and ``bailing_apply`` storing it on the route, where ``route_data_policy``
reads it back."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from agent_runtime.config import ConfigError, validate_route_config
from agent_runtime.data_policy import BUILTIN_DETECTORS, DataPolicy
from agent_runtime.models import Route
from agent_runtime.selectors.routes import route_data_policy
from bailing.audit.models import AuditEvent

ROUTE = {"route_key": "demo", "name": "Demo"}
# The issue's example, key for key.
POLICY = {
    "detectors": list(BUILTIN_DETECTORS),
    "action": "redact",
    "actions": {"secrets": "block", "injection": "flag"},
    "custom": [{"name": "employee_id", "pattern": "EMP-[0-9]{6}"}],
    "apply_to": ["tool_results", "knowledge"],
}


def _route_error(policy) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_route_config({**ROUTE, "data_policy": policy}, path="routes[0]")
    return info.value


def _with(**changes) -> dict:
    policy = copy.deepcopy(POLICY)
    for key, value in changes.items():
        if value is None:
            policy.pop(key)
        else:
            policy[key] = value
    return policy


# --- validation -------------------------------------------------------------------------------------
def test_the_issue_example_is_stored_as_written():
    result = validate_route_config({**ROUTE, "data_policy": copy.deepcopy(POLICY)}, path="routes[0]")
    assert result["data_policy"] == POLICY


@pytest.mark.parametrize("policy", [None, {"detectors": ["email"]}, {"custom": POLICY["custom"]}])
def test_minimal_blocks_and_null(policy):
    result = validate_route_config({**ROUTE, "data_policy": policy}, path="routes[0]")
    assert result["data_policy"] == (policy or {})


@pytest.mark.parametrize(
    ("policy", "path"),
    [
        ("redact", "routes[0].data_policy"),
        ({}, "routes[0].data_policy"),
        (_with(mode="strict"), "routes[0].data_policy.mode"),
        (_with(detectors="email"), "routes[0].data_policy.detectors"),
        (_with(detectors=["passport"]), "routes[0].data_policy.detectors[0]"),
        (_with(detectors=["email", "email"]), "routes[0].data_policy.detectors[1]"),
        (_with(detectors=[], custom=None, actions=None), "routes[0].data_policy.detectors"),
        (_with(action="hide"), "routes[0].data_policy.action"),
        (_with(actions=["secrets"]), "routes[0].data_policy.actions"),
        (_with(actions={"passport": "block"}), "routes[0].data_policy.actions.passport"),
        (_with(detectors=["email"], actions={"secrets": "block"}), "routes[0].data_policy.actions.secrets"),
        (_with(actions={"email": "hide"}), "routes[0].data_policy.actions.email"),
        (_with(custom={"name": "x"}), "routes[0].data_policy.custom"),
        (_with(custom=[{"name": "employee_id"}]), "routes[0].data_policy.custom[0].pattern"),
        (_with(custom=[{"pattern": "EMP"}]), "routes[0].data_policy.custom[0].name"),
        (
            _with(custom=[{"name": "employee_id", "pattern": "EMP", "flags": "i"}]),
            "routes[0].data_policy.custom[0].flags",
        ),
        (_with(custom=[{"name": "Employee", "pattern": "EMP"}]), "routes[0].data_policy.custom[0].name"),
        (_with(custom=[{"name": "email", "pattern": "EMP"}]), "routes[0].data_policy.custom[0].name"),
        (
            _with(custom=[{"name": "a", "pattern": "A1"}, {"name": "a", "pattern": "A2"}]),
            "routes[0].data_policy.custom[1].name",
        ),
        (_with(custom=[{"name": "a", "pattern": "EMP-[0-9"}]), "routes[0].data_policy.custom[0].pattern"),
        (_with(custom=[{"name": "a", "pattern": "[0-9]*"}]), "routes[0].data_policy.custom[0].pattern"),
        (_with(custom=[{"name": "a", "pattern": "x" * 513}]), "routes[0].data_policy.custom[0].pattern"),
        (_with(custom=[{"name": "a", "pattern": "(?:a|aa)+b"}]), "routes[0].data_policy.custom[0].pattern"),
        (_with(custom=[{"name": "a", "pattern": 42}]), "routes[0].data_policy.custom[0].pattern"),
        (
            _with(custom=[{"name": f"c{i}", "pattern": f"C{i}"} for i in range(21)]),
            "routes[0].data_policy.custom",
        ),
        (_with(apply_to=[]), "routes[0].data_policy.apply_to"),
        (_with(apply_to=["turns"]), "routes[0].data_policy.apply_to[0]"),
        (_with(apply_to=["knowledge", "knowledge"]), "routes[0].data_policy.apply_to[1]"),
    ],
)
def test_bad_blocks_are_refused_at_the_field(policy, path):
    assert _route_error(policy).path == path


def test_a_refused_pattern_is_never_echoed():
    error = _route_error(_with(custom=[{"name": "a", "pattern": "TOPSECRET-[0-9"}]))
    assert "TOPSECRET" not in str(error)
    assert error.reason == "is not a valid regular expression"


# --- bailing_apply ----------------------------------------------------------------------------------
def _document(policy=None) -> dict:
    route = {**ROUTE, "agent_client": {"enabled": True}}
    if policy is not None:
        route["data_policy"] = policy
    return {"routes": [route]}


def _apply(tmp_path: Path, document: dict) -> list[str]:
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    out = io.StringIO()
    call_command("bailing_apply", str(path), stdout=out, stderr=io.StringIO())
    return out.getvalue().splitlines()


@pytest.mark.django_db
def test_apply_stores_the_policy_on_the_route_and_the_selector_reads_it(tmp_path):
    assert _apply(tmp_path, _document(POLICY))[0] == "route demo: created"
    route = Route.objects.get(route_key="demo")
    assert route.data_policy == POLICY
    policy = route_data_policy(route)
    assert isinstance(policy, DataPolicy)
    assert policy.detectors == BUILTIN_DETECTORS
    assert (policy.action_for("secrets"), policy.action_for("injection"), policy.action_for("email")) == (
        "block",
        "flag",
        "redact",
    )
    assert [(c.name, c.pattern) for c in policy.custom] == [("employee_id", "EMP-[0-9]{6}")]
    assert _apply(tmp_path, _document(POLICY))[0] == "route demo: unchanged"


@pytest.mark.django_db
def test_changing_and_removing_the_policy_is_an_audited_update(tmp_path):
    _apply(tmp_path, _document(POLICY))
    assert (
        _apply(tmp_path, _document({"detectors": ["email"]}))[0]
        == "route demo: updated (fields: data_policy)"
    )
    assert route_data_policy(Route.objects.get(route_key="demo")).detectors == ("email",)
    assert _apply(tmp_path, _document())[0] == "route demo: updated (fields: data_policy)"
    route = Route.objects.get(route_key="demo")
    assert (route.data_policy, route_data_policy(route)) == ({}, None)
    updates = AuditEvent.objects.filter(action="agent_runtime.route.updated", target_id="demo")
    assert [event.data["fields"] for event in updates.order_by("id")] == [["data_policy"], ["data_policy"]]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("policy", "where"),
    [
        ({"detectors": ["passport"]}, "routes[0].data_policy.detectors[0]"),
        (
            {"detectors": ["email"], "custom": [{"name": "a", "pattern": "("}]},
            "routes[0].data_policy.custom[0].pattern",
        ),
        ({"detectors": ["email"], "redact": True}, "routes[0].data_policy.redact"),
    ],
)
def test_apply_refuses_a_bad_policy_with_the_field_and_writes_nothing(tmp_path, policy, where):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(_document(policy)), encoding="utf-8")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("bailing_apply", str(path), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().startswith(f"error at {where}: ")
    assert not Route.objects.exists()
