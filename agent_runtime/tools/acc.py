"""The Agent Capability Contract (ACC v1, OpenAPI ``x-agent-capability``): validation and approval rules.

:data:`ACC_SCHEMA` (``schemas/agent-capability-contract.v1.json``) is this project's own JSON Schema
(draft 2020-12) for one declaration, written
from the contract's facts (field names, types, limits): ``version`` (1), ``enabled`` and ``scope``
are required; ``risk.level``, ``subject.required``, ``approval.{required,prompt,when}``,
``execution.{readonly,idempotent,timeout_ms,rate_limit}``, ``audit.sensitive``,
``outcome.{result,side_effect}`` and ``guidance.{when_to_use,returns,examples,context}`` are typed
and bounded. Unknown fields on the declaration and its sections are ignored, as ACC requires, so a
newer declaration still compiles; the two closed shapes (an ``approval.when`` rule and
``execution.rate_limit``) reject unknown keys, because a misspelt rule key would silently change an
approval outcome. ``subject.field`` is an optional hint naming the on-behalf-of field; the route's
source configuration stays authoritative.

Defaults (ACC core + OpenAPI binding): ``readonly`` is the declared ``execution.readonly``, else
true only for ``GET``; ``idempotent`` is the declared value, else true only for ``GET``; ``risk`` is
the declared level, else ``low`` for a read-only operation and ``medium`` for anything else.

Approval (:func:`approval_required_for`): a call needs approval when the risk is ``high``, when
``approval.required`` is true, or when any ``approval.when`` rule matches (ANY semantics; a rule
can never lift an unconditional requirement). Rules compare JSON values strictly:

* ``param`` is a dot path into the arguments and must resolve to a typed node of the tool's
  ``input_schema``; an argument whose JSON type the node does not allow rejects the call;
* ``>``, ``>=``, ``<``, ``<=`` need JSON numbers on both sides (``true`` is not a number, ``null``
  is not a number);
* ``==``, ``!=``, ``in`` use type-aware equality: ``1 == 1.0`` but ``1 != "1"`` and ``0 != false``;
  ``in`` needs an array and a candidate of the argument's JSON type;
* ``contains``: element equality on an array argument, substring on a string argument;
* ``exists``: present and not ``null``;
* an absent argument never matches ``>``, ``>=``, ``<``, ``<=``, ``==``, ``in``, ``contains`` or
  ``exists`` and always matches ``!=`` (as in BailingHub).

Every rule is checked before the answer is returned, so a type error in a later rule is never
hidden by an earlier match. Errors raise :class:`ApprovalConditionError` with a stable code; the
caller rejects the call before dispatch.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ACC_VERSION = 1
RISK_LEVELS = ("low", "medium", "high")
NUMERIC_OPS = frozenset({">", ">=", "<", "<="})
CONDITION_OPS = (">", ">=", "<", "<=", "==", "!=", "in", "contains", "exists")

# The schema is a data file of its own, so the compiler and the Demo Shop's contract test validate
# against one declaration. Its token pattern (no whitespace or control character anywhere) is a
# look-ahead rather than ``$``, which also matches before a trailing newline in Python and JavaScript.
ACC_SCHEMA_FILE = Path(__file__).with_name("schemas") / "agent-capability-contract.v1.json"
ACC_SCHEMA: dict[str, Any] = json.loads(ACC_SCHEMA_FILE.read_text(encoding="utf-8"))

_VALIDATOR = Draft202012Validator(ACC_SCHEMA)


@dataclass(frozen=True)
class AccProblem:
    """Why a declaration was refused; ``pointer`` is relative to the declaration (``/risk/level``)."""

    code: str
    pointer: str
    detail: str


@dataclass(frozen=True)
class AccDeclaration:
    """A validated declaration, fields flattened; defaults needing the HTTP method are applied later."""

    enabled: bool
    scope: str
    risk_level: str | None
    subject_required: bool
    subject_field: str | None
    approval_required: bool
    approval_prompt: str | None
    approval_when: tuple[dict[str, Any], ...]
    readonly: bool | None
    idempotent: bool | None
    timeout_ms: int | None
    rate_limit: dict[str, Any] | None
    sensitive: bool
    outcome: dict[str, Any] | None
    when_to_use: str
    returns: str
    examples: tuple[Any, ...]
    context: tuple[str, ...]


def _pointer(parts: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def parse_acc(raw: Any) -> tuple[AccDeclaration | None, AccProblem | None]:
    """Validate one ``x-agent-capability`` value against :data:`ACC_SCHEMA` and flatten it.

    Problems name the failing location and JSON Schema keyword only, never the offending value.
    """
    if not isinstance(raw, dict):
        return None, AccProblem("acc_invalid", "", "x-agent-capability must be an object")
    version = raw.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version != ACC_VERSION:
        return None, AccProblem("acc_unsupported_version", "/version", "only ACC version 1 is supported")
    errors = sorted(
        _VALIDATOR.iter_errors(raw),
        key=lambda error: ([str(p) for p in error.absolute_path], error.validator),
    )
    if errors:
        error = errors[0]
        pointer = _pointer(error.absolute_path)
        return None, AccProblem("acc_invalid", pointer, f"{pointer or '/'} violates '{error.validator}'")

    def section(name: str) -> dict[str, Any]:
        return raw.get(name) or {}

    execution, guidance, subject = section("execution"), section("guidance"), section("subject")
    approval = section("approval")
    rate_limit = execution.get("rate_limit")
    outcome = section("outcome")
    declaration = AccDeclaration(
        enabled=raw["enabled"],
        scope=raw["scope"],
        risk_level=section("risk").get("level"),
        subject_required=subject.get("required") is True,
        subject_field=subject.get("field"),
        approval_required=approval.get("required") is True,
        approval_prompt=approval.get("prompt"),
        approval_when=tuple(copy.deepcopy(rule) for rule in approval.get("when") or ()),
        readonly=execution.get("readonly"),
        idempotent=execution.get("idempotent"),
        timeout_ms=execution.get("timeout_ms"),
        rate_limit={"count": rate_limit["count"], "window": rate_limit["window"]} if rate_limit else None,
        sensitive=section("audit").get("sensitive") is True,
        outcome={k: outcome[k] for k in ("result", "side_effect") if k in outcome} or None,
        when_to_use=guidance.get("when_to_use", ""),
        returns=guidance.get("returns", ""),
        examples=tuple(copy.deepcopy(guidance.get("examples") or ())),
        context=tuple(guidance.get("context") or ()),
    )
    return declaration, None


# --- JSON value model --------------------------------------------------------------------------------
_ABSENT = object()


def json_type(value: Any) -> str:
    """The JSON Schema type of a decoded JSON value; an integral float counts as ``integer``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "unknown"


def _kind(value: Any) -> str:
    kind = json_type(value)
    return "number" if kind == "integer" else kind


def _type_allowed(value: Any, types: frozenset[str]) -> bool:
    kind = json_type(value)
    return kind in types or (kind == "integer" and "number" in types)


def _is_number(value: Any) -> bool:
    return _kind(value) == "number"


def strict_equal(a: Any, b: Any) -> bool:
    """JSON equality without coercion: ``1 == 1.0`` but ``1 != "1"`` and ``0 != false``."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "array":
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if kind == "object":
        return a.keys() == b.keys() and all(strict_equal(a[key], b[key]) for key in a)
    return a == b


def schema_at_path(schema: Any, path: str) -> dict[str, Any] | None:
    """The sub-schema a dot path names, following ``properties`` (and ``allOf`` members), or None."""
    node = schema
    for part in path.split("."):
        if not part:
            return None
        node = _property_schema(node, part)
        if node is None:
            return None
    return node if isinstance(node, dict) else None


def _property_schema(node: Any, name: str) -> Any:
    if not isinstance(node, dict):
        return None
    properties = node.get("properties")
    if isinstance(properties, dict) and name in properties:
        return properties[name]
    for member in node.get("allOf") or ():
        found = _property_schema(member, name)
        if found is not None:
            return found
    return None


def schema_types(schema: dict[str, Any]) -> frozenset[str]:
    """JSON types a schema node admits: its ``type``, else its ``const``/``enum`` values' types,
    else the union over ``anyOf``/``oneOf`` when every branch is typed. Empty means untyped."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(t for t in declared if isinstance(t, str))
    if "const" in schema:
        return frozenset({json_type(schema["const"])})
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return frozenset(json_type(value) for value in schema["enum"])
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            union: set[str] = set()
            for branch in branches:
                types = schema_types(branch) if isinstance(branch, dict) else frozenset()
                if not types:
                    return frozenset()
                union |= types
            return frozenset(union)
    return frozenset()


def _value_at_path(arguments: dict[str, Any], path: str) -> Any:
    node: Any = arguments
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


# --- compile-time check ------------------------------------------------------------------------------
def approval_when_problem(rules: tuple[dict[str, Any], ...], input_schema: dict[str, Any]) -> str | None:
    """Why the rules cannot be evaluated against ``input_schema`` (one message), or None.

    A rule that could never match, or could only fail, is a declaration error: dropping it would
    weaken approval, so the compiler disables the tool instead (``approval_when_invalid``).
    """
    for index, rule in enumerate(rules):
        where = f"approval.when[{index}]"
        node = schema_at_path(input_schema, rule["param"])
        if node is None:
            return f"{where}.param does not name a declared input"
        types = schema_types(node)
        if not types:
            return f"{where}.param names an input without a declared type"
        op, value = rule["op"], rule.get("value", _ABSENT)
        if op in NUMERIC_OPS:
            if not types & {"number", "integer"} or not types <= {"number", "integer", "null"}:
                return f"{where} compares a non-numeric input with '{op}'"
        elif op == "contains":
            if not types & {"string", "array"}:
                return f"{where} uses 'contains' on an input that is neither a string nor an array"
            if "array" not in types and not isinstance(value, str):
                return f"{where} needs a string value for 'contains' on a string input"
        elif op == "in":
            if not any(_type_allowed(candidate, types) for candidate in value):
                return f"{where} lists no value of the input's type"
        elif op in ("==", "!=") and not _type_allowed(value, types):
            return f"{where} compares with a value of a type the input never has"
    return None


# --- call-time evaluation ----------------------------------------------------------------------------
class ApprovalConditionError(Exception):
    """The arguments cannot be evaluated against an ``approval.when`` rule: reject before dispatch.

    ``code`` is one of ``arguments_not_object``, ``confirm_when_missing_schema``,
    ``confirm_when_untyped_schema``, ``confirm_when_argument_type``, ``confirm_when_invalid_in``
    (BailingHub's names); ``param`` is the rule's dot path (a schema name, never an argument value).
    """

    def __init__(self, code: str, param: str | None = None):
        self.code = code
        self.param = param
        super().__init__(code if param is None else f"{code}: {param}")


def _rule_matches(rule: dict[str, Any], arguments: dict[str, Any], input_schema: dict[str, Any]) -> bool:
    param, op = rule["param"], rule["op"]
    value = rule.get("value", _ABSENT)
    node = schema_at_path(input_schema, param)
    if node is None:
        raise ApprovalConditionError("confirm_when_missing_schema", param)
    types = schema_types(node)
    if not types:
        raise ApprovalConditionError("confirm_when_untyped_schema", param)
    actual = _value_at_path(arguments, param)
    absent = actual is _ABSENT
    if not absent and not _type_allowed(actual, types):
        raise ApprovalConditionError("confirm_when_argument_type", param)

    if op == "exists":
        return not absent and actual is not None
    if op == "!=":
        return absent or not strict_equal(actual, value)
    if op in NUMERIC_OPS:
        if absent:
            return False
        if not _is_number(actual) or not _is_number(value):
            raise ApprovalConditionError("confirm_when_argument_type", param)
        return {
            ">": actual > value,
            ">=": actual >= value,
            "<": actual < value,
            "<=": actual <= value,
        }[op]
    if op == "==":
        return not absent and strict_equal(actual, value)
    if op == "in":
        if not isinstance(value, list):
            raise ApprovalConditionError("confirm_when_invalid_in", param)
        if absent:
            return False
        if not any(_kind(candidate) == _kind(actual) for candidate in value):
            raise ApprovalConditionError("confirm_when_argument_type", param)
        return any(strict_equal(actual, candidate) for candidate in value)
    if op == "contains":
        if absent:
            return False
        if isinstance(actual, list):
            return any(strict_equal(element, value) for element in actual)
        if isinstance(actual, str) and isinstance(value, str):
            return value in actual
        raise ApprovalConditionError("confirm_when_argument_type", param)
    raise ApprovalConditionError("confirm_when_argument_type", param)


def approval_rules_match(
    rules: tuple[dict[str, Any], ...], arguments: Any, input_schema: dict[str, Any]
) -> list[bool]:
    """Whether each ``approval.when`` rule matches ``arguments``, in rule order.

    Every rule is evaluated (no short-circuit), so an argument a later rule cannot evaluate is always
    rejected with :class:`ApprovalConditionError`, never hidden by an earlier match.
    """
    if not isinstance(arguments, dict):
        raise ApprovalConditionError("arguments_not_object")
    return [_rule_matches(rule, arguments, input_schema) for rule in rules]


def rule_actual(rule: dict[str, Any], arguments: dict[str, Any]) -> Any:
    """The argument value a rule looked at (``None`` when absent), for an approval snapshot."""
    value = _value_at_path(arguments, rule["param"])
    return None if value is _ABSENT else value
