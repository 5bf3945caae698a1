"""OpenAPI 3.0/3.1 + ACC (``x-agent-capability``) → typed, governed tools.

:func:`compile_spec` never raises on a bad spec: everything wrong becomes a :class:`CompileWarning`
and the affected operation is left out, so one broken operation never takes the provider's other
tools down. A document that is not OpenAPI 3.0/3.1 at all yields one ``fatal`` warning and no tools;
the caller then keeps its last good spec (``CompileResult.fatal``).

Which operations become tools
    Only operations carrying an ``x-agent-capability`` declaration with ``enabled: true`` (ACC
    OpenAPI binding: a parser must never expose an undeclared operation as an ungoverned tool). An
    operation without one is silently ignored, whatever its method; ``enabled: false`` likewise.
    Methods: GET, PUT, POST, DELETE, OPTIONS, HEAD, PATCH (``trace`` is never a tool).

Tool name
    The ``operationId``, which must match ``^[A-Za-z_][A-Za-z0-9_]{0,63}$`` and be unique in the
    document. A duplicated id disables *every* operation using it: which endpoint an agent would
    reach must never depend on document order.

``input_schema`` and ``param_locations`` (how a dispatcher rebuilds the HTTP request)
    One flat JSON Schema object. Path, query and header parameters (path-item and operation level,
    the operation's definition of the same ``(name, in)`` winning) are properties named after the
    parameter. The properties of the JSON request body are merged **at the top level** beside them.
    ``param_locations`` maps every property to ``"path"``, ``"query"``, ``"header"`` or ``"body"``;
    the dispatcher substitutes path values into the template, sends query and header values as
    such (serialised per ``param_styles``, which lists only explicitly declared ``style``/
    ``explode``; OpenAPI defaults otherwise) and sends the ``body`` keys as one JSON object with
    ``request_body.media_type``. ``additionalProperties`` at the top level is ``false`` unless the
    body schema explicitly allows extra keys; then, and only then, undeclared argument keys belong
    to the body. A body is sent when the arguments contain a body key or ``request_body.required``.
    Path parameters are always required; a body's ``required`` list joins the top-level one.
    A name used in two locations is ambiguous and disables the tool (``parameter_conflict``), as
    the ACC binding requires. Header parameters ``Accept``, ``Content-Type`` and ``Authorization``
    are ignored (OpenAPI says so); ``X-Bailing-*`` and connection-level headers are reserved for the
    hub and disable the tool. Only an object body (``type: object`` or untyped, with ``properties``
    and no top-level composition) can be merged; any other body disables the tool.

Schemas
    Local ``$ref`` (``#/...``, JSON pointer) are resolved everywhere (parameters, request bodies,
    path items, schemas), including chains and refs inside refs. External refs, missing targets and
    cycles (recursive schemas included) disable the tool. Output schemas are plain JSON Schema
    2020-12 with no ``$ref``: OpenAPI 3.0 ``nullable: true`` becomes a ``"null"`` type (and a
    ``null`` enum member) when ``type`` is present, 3.0 boolean ``exclusiveMinimum``/
    ``exclusiveMaximum`` become numeric, 3.1 type arrays are kept, and only validation keywords and
    ``title``/``description`` survive (no ``x-`` extensions, examples, discriminators or XML).
    Depth counts schema nesting below the top-level object (a parameter or body property is depth 1;
    ``items``, ``properties``, ``additionalProperties``, ``prefixItems``, ``not`` and every
    ``anyOf``/``oneOf``/``allOf`` branch add one; a ``$ref`` adds nothing): more than 16 levels, or
    more than 20 ``anyOf``/``oneOf`` branches in one list, disables the tool (docs/protocol.md "Tool
    compilation"). The result must also pass the draft 2020-12 metaschema and fit 65,536 bytes of
    compact JSON (the agent SDK refuses larger schemas).

Warning codes (stable; ``severity``: ``fatal`` = spec refused, ``error`` = operation not compiled,
``warning`` = tool compiled with a caveat)

=================================  ========  ==================================================
``spec_invalid``                   fatal     not a JSON object / not OpenAPI 3.0.x or 3.1.x /
                                             ``paths`` not an object / non-JSON values / NUL
                                             or unpaired surrogates (PostgreSQL cannot store
                                             them) / over 1,000,000 nodes or 256 levels
``path_item_invalid``              error     path key not ``/...`` or path item not an object
``operation_invalid``              error     operation or its ``parameters`` is not well formed
``acc_invalid``                    error     declaration fails the ACC JSON Schema
``acc_unsupported_version``        error     ACC ``version`` other than 1
``operation_deprecated``           error     ``deprecated: true``: not exposed
``operation_id_missing``           error     ACC-declared operation without ``operationId``
``operation_id_invalid``           error     ``operationId`` not a valid tool name
``operation_id_duplicate``         error     ``operationId`` used by more than one operation
``ref_unresolved``                 error     external, malformed or dangling ``$ref``
``ref_cycle``                      error     ``$ref`` cycle (recursive schema included)
``schema_invalid``                 error     a schema is not a schema / fails the metaschema
``schema_too_deep``                error     input_schema depth > 16 (or ref nesting > 64)
``schema_too_many_alternatives``   error     more than 20 ``anyOf``/``oneOf`` branches
``schema_too_large``               error     input_schema over 65,536 bytes or 20,000 nodes
``parameter_invalid``              error     parameter without name / valid ``in`` / bad style
``parameter_conflict``             error     one name in two locations (body included)
``parameter_reserved``             error     header reserved for the hub or the connection
``parameter_unsupported``          error     required cookie / ``content``-only parameter
``parameter_ignored``              warning   optional cookie / ``content``-only parameter dropped
``param_missing_description``      warning   an input property (path/query/header parameter or
                                             top-level body property) has no description:
                                             one warning per property
``path_parameter_mismatch``        error     path template and path parameters disagree
``unsupported_request_body``       error     body not JSON or not a mergeable object schema
``write_without_input``            error     non-GET operation with no parameter and no body
``approval_when_invalid``          error     an ``approval.when`` rule cannot apply to the schema
``tool_description_missing``       warning   no summary/description: ``scope`` used instead
``tool_description_truncated``     warning   short description cut at 500 code points
``tool_usage_guidance_truncated``  warning   guidance cut at 32,768 code points / 65,536 bytes
=================================  ========  ==================================================

Warning ``detail`` texts name locations and rules, never values from the spec beyond a ``$ref``
pointer (cut at 200 characters).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any
from urllib.parse import unquote

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agent_runtime.tools import acc as acc_rules
from agent_runtime.tools.guidance import (
    UsageGuidance,
    bound_guidance,
    clean_text,
    compose_guidance,
    short_description,
)
from bailing.api.limits import compact_json_utf8_bytes
from bailing.api.text import has_lone_surrogate

TOOL_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
ACC_KEY = "x-agent-capability"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch")

MAX_SCHEMA_DEPTH = 16
MAX_ALTERNATIVES = 20
MAX_INPUT_SCHEMA_BYTES = 65_536
MAX_SCHEMA_NODES = 20_000
MAX_REF_NESTING = 64
MAX_SPEC_NODES = 1_000_000
MAX_SPEC_DEPTH = 256

_OPENAPI_VERSION = re.compile(r"3\.([01])\.\d+(?:-[0-9A-Za-z.-]+)?")
_PATH_TEMPLATE = re.compile(r"\{([^{}]*)\}")
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
# fmt: off
# Connection-level headers, plus X-Bailing-*/Proxy-* (checked by prefix): never settable by an agent.
_RESERVED_HEADERS = frozenset({
    "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "cookie",
    "trailer", "expect",
})
# Validation keywords copied verbatim; everything else not handled explicitly is dropped.
_PASSTHROUGH = frozenset({
    "type", "enum", "const", "format", "pattern", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems",
    "minProperties", "maxProperties", "required", "default", "deprecated",
})
# fmt: on
_SCHEMA_MAPS = ("properties", "patternProperties")
_SCHEMA_SINGLE = ("items", "additionalProperties", "not")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_ALTERNATIVES = ("anyOf", "oneOf")
_COMPOSITION = ("anyOf", "oneOf", "allOf", "not")


# --- result types ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompileWarning:
    """One finding of a compile run; ``path`` is a JSON pointer into the spec (``#/paths/~1x/get``)."""

    code: str
    tool: str | None
    path: str
    detail: str
    severity: str = "error"

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "tool": self.tool,
            "path": self.path,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class ApprovalPolicy:
    """The ACC approval declaration kept verbatim for evaluation (see :mod:`.acc`)."""

    required: bool
    when: tuple[dict[str, Any], ...]
    prompt: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"required": self.required, "when": copy.deepcopy(list(self.when)), "prompt": self.prompt}


@dataclass(frozen=True)
class CompiledTool:
    """One governed tool compiled from one OpenAPI operation.

    Holds everything the hub needs after compilation (the original spec is not consulted again):
    the dispatch shape (method, path template, ``param_locations``, ``param_styles``,
    ``request_body``), the governance (scope, risk, approval, subject, readonly/idempotent,
    sensitivity, limits) and the model-facing texts. ``extensions`` keeps the operation's
    ``x-bailing-*``/``x-business-*`` bag for operators; it is never projected to agents.
    """

    name: str
    provider: str
    method: str
    path: str
    scope: str
    description: str
    description_truncated: bool
    usage_guidance: UsageGuidance
    risk: str
    readonly: bool
    idempotent: bool
    approval: ApprovalPolicy
    requires_subject: bool
    subject_field: str | None
    sensitive: bool
    timeout_ms: int | None
    rate_limit: dict[str, Any] | None
    outcome: dict[str, Any] | None
    context: tuple[str, ...]
    input_schema: dict[str, Any]
    param_locations: dict[str, str]
    param_styles: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_body: dict[str, Any] | None = None
    extensions: dict[str, Any] = field(default_factory=dict)

    @property
    def approval_required(self) -> bool:
        """Catalog flag: some call may need approval (high risk, ``required`` or any ``when`` rule)."""
        return self.risk == "high" or self.approval.required or bool(self.approval.when)

    @property
    def usage_guidance_available(self) -> bool:
        """True when the guidance says more than the short description shown in catalogs."""
        return self.usage_guidance.text != self.description

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready storage form; :meth:`from_dict` restores an equal tool."""
        return {
            "name": self.name,
            "provider": self.provider,
            "method": self.method,
            "path": self.path,
            "scope": self.scope,
            "description": self.description,
            "description_truncated": self.description_truncated,
            "usage_guidance": self.usage_guidance.as_dict(),
            "risk": self.risk,
            "readonly": self.readonly,
            "idempotent": self.idempotent,
            "approval": self.approval.as_dict(),
            "requires_subject": self.requires_subject,
            "subject_field": self.subject_field,
            "sensitive": self.sensitive,
            "timeout_ms": self.timeout_ms,
            "rate_limit": copy.deepcopy(self.rate_limit),
            "outcome": copy.deepcopy(self.outcome),
            "context": list(self.context),
            "input_schema": copy.deepcopy(self.input_schema),
            "param_locations": dict(self.param_locations),
            "param_styles": copy.deepcopy(self.param_styles),
            "request_body": copy.deepcopy(self.request_body),
            "extensions": copy.deepcopy(self.extensions),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompiledTool:
        data = copy.deepcopy(data)
        approval = data.pop("approval")
        return cls(
            **{
                **data,
                "usage_guidance": UsageGuidance.from_dict(data["usage_guidance"]),
                "approval": ApprovalPolicy(
                    required=approval["required"], when=tuple(approval["when"]), prompt=approval["prompt"]
                ),
                "context": tuple(data["context"]),
            }
        )


@dataclass
class CompileResult:
    """Tools that compiled, plus every warning (including those of operations left out)."""

    tools: list[CompiledTool] = field(default_factory=list)
    warnings: list[CompileWarning] = field(default_factory=list)

    @property
    def fatal(self) -> bool:
        """The document was refused as a whole: keep the previous spec."""
        return any(warning.severity == "fatal" for warning in self.warnings)

    def tool(self, name: str) -> CompiledTool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def warning_codes(self, tool: str | None = None) -> list[str]:
        return [warning.code for warning in self.warnings if tool is None or warning.tool == tool]


# --- spec-level checks -------------------------------------------------------------------------------
def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _bounded(text: str, limit: int = 200) -> str:
    text = clean_text(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _json_problem(spec: Any) -> str | None:
    """Why ``spec`` is not plain, storable JSON (iterative, bounded), or None."""
    stack: list[tuple[Any, int]] = [(spec, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_SPEC_NODES:
            return "the document is too large"
        if depth > MAX_SPEC_DEPTH:
            return "the document is nested too deeply"
        if isinstance(node, str):
            if "\x00" in node or has_lone_surrogate(node):
                return "the document contains NUL or unpaired surrogate characters"
        elif isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    return "object keys must be strings"
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, float):
            if not math.isfinite(node):
                return "numbers must be finite"
        elif node is not None and not isinstance(node, (bool, int)):
            return "the document contains a value that is not JSON"
    return None


def _spec_version(spec: Any) -> tuple[str | None, str | None]:
    """``(version, problem)`` with version ``"3.0"`` or ``"3.1"``."""
    if not isinstance(spec, dict):
        return None, "the document must be a JSON object"
    problem = _json_problem(spec)
    if problem:
        return None, problem
    declared = spec.get("openapi")
    match = _OPENAPI_VERSION.fullmatch(declared) if isinstance(declared, str) else None
    if match is None:
        return None, "'openapi' must be a 3.0.x or 3.1.x version string"
    if not isinstance(spec.get("paths", {}), dict):
        return None, "'paths' must be an object"
    return f"3.{match.group(1)}", None


# --- reference resolution and schema normalisation ---------------------------------------------------
class _Problem(Exception):
    """An operation-level compile failure, carried up to become one warning."""

    def __init__(self, code: str, path: str, detail: str, severity: str = "error"):
        super().__init__(code)
        self.code = code
        self.path = path
        self.detail = detail
        self.severity = severity


class _Resolver:
    """Resolves local refs and normalises schemas for one operation.

    ``active`` is the stack of refs being expanded: meeting one again is a cycle. The node budget
    guards against exponential expansion of shared refs.
    """

    def __init__(self, spec: dict[str, Any], version: str):
        self.spec = spec
        self.version = version
        self.active: list[str] = []
        self.nodes = 0

    def lookup(self, ref: Any, at: str) -> Any:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            shown = _bounded(ref) if isinstance(ref, str) else "a non-string $ref"
            raise _Problem("ref_unresolved", at, f"only local references (#/...) are supported: {shown}")
        node: Any = self.spec
        for raw in ref[2:].split("/") if ref != "#" else ():
            token = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(node):
                node = node[int(token)]
            else:
                raise _Problem("ref_unresolved", at, f"reference target not found: {_bounded(ref)}")
        return node

    def enter(self, ref: str, at: str) -> None:
        if ref in self.active:
            raise _Problem("ref_cycle", at, f"reference cycle through {_bounded(ref)}")
        if len(self.active) >= MAX_REF_NESTING:
            raise _Problem("schema_too_deep", at, f"references nest more than {MAX_REF_NESTING} deep")
        self.active.append(ref)

    def leave(self) -> None:
        self.active.pop()

    def deref_object(self, node: Any, at: str) -> tuple[Any, str]:
        """Follow a ``$ref`` chain of a non-schema object; returns the target and its pointer.

        A ``description`` beside a ``$ref`` overrides the target's (OpenAPI 3.1 Reference Object).
        """
        description = None
        seen: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if isinstance(node.get("description"), str) and description is None:
                description = node["description"]
            if ref in seen or ref in self.active:
                raise _Problem("ref_cycle", at, f"reference cycle through {_bounded(ref)}")
            if len(seen) >= MAX_REF_NESTING:
                raise _Problem("schema_too_deep", at, f"references nest more than {MAX_REF_NESTING} deep")
            seen.append(ref)
            node = self.lookup(ref, at)
            at = ref
        if description is not None and isinstance(node, dict):
            node = {**node, "description": description}
        return node, at

    def schema(self, node: Any, level: int, at: str) -> Any:
        """A normalised copy of the schema ``node`` found at nesting ``level``."""
        if level > MAX_SCHEMA_DEPTH:
            raise _Problem("schema_too_deep", at, f"input_schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_SCHEMA_NODES:
            raise _Problem(
                "schema_too_large", at, f"input_schema expands to more than {MAX_SCHEMA_NODES} nodes"
            )
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise _Problem("schema_invalid", at, "a schema must be an object or a boolean")
        if "$ref" in node:
            return self._schema_ref(node, level, at)

        out: dict[str, Any] = {}
        for key, value in node.items():
            where = f"{at}/{_escape(key)}"
            if key in _SCHEMA_MAPS:
                if not isinstance(value, dict):
                    raise _Problem("schema_invalid", where, f"'{key}' must be an object")
                out[key] = {
                    name: self.schema(sub, level + 1, f"{where}/{_escape(name)}")
                    for name, sub in value.items()
                }
            elif key in _SCHEMA_SINGLE:
                out[key] = self.schema(value, level + 1, where)
            elif key in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    raise _Problem("schema_invalid", where, f"'{key}' must be a non-empty array")
                if key in _ALTERNATIVES and len(value) > MAX_ALTERNATIVES:
                    raise _Problem(
                        "schema_too_many_alternatives",
                        where,
                        f"'{key}' lists more than {MAX_ALTERNATIVES} schemas",
                    )
                out[key] = [self.schema(sub, level + 1, f"{where}/{i}") for i, sub in enumerate(value)]
            elif key in ("title", "description"):
                if isinstance(value, str):
                    text = clean_text(value)
                    if text:
                        out[key] = text
                else:
                    out[key] = value  # left for the metaschema check to refuse
            elif key in _PASSTHROUGH:
                out[key] = copy.deepcopy(value)
        if self.version == "3.0":
            self._apply_openapi_30(node, out)
        return out

    def _schema_ref(self, node: dict[str, Any], level: int, at: str) -> Any:
        ref = node["$ref"]
        # 3.0 ignores every sibling of $ref; 3.1 keeps them (annotations override, keywords also apply).
        siblings = {k: v for k, v in node.items() if k != "$ref"} if self.version == "3.1" else {}
        annotations = {k: siblings.pop(k) for k in ("title", "description") if k in siblings}
        siblings = {
            k: v
            for k, v in siblings.items()
            if k in _PASSTHROUGH or k in _SCHEMA_MAPS or k in _SCHEMA_SINGLE or k in _SCHEMA_LISTS
        }
        target = self.lookup(ref, at)
        self.enter(ref, at)
        try:
            resolved = self.schema(target, level + 1 if siblings else level, ref)
        finally:
            self.leave()
        if siblings:
            extra = self.schema(siblings, level, at)
            resolved = {**extra, "allOf": [resolved, *extra.get("allOf", [])]}
        if annotations and resolved is not False:
            resolved = dict(resolved) if isinstance(resolved, dict) else {}
            for key, value in annotations.items():
                text = clean_text(value) if isinstance(value, str) else ""
                if text:
                    resolved[key] = text
        return resolved

    @staticmethod
    def _apply_openapi_30(node: dict[str, Any], out: dict[str, Any]) -> None:
        # nullable only widens an explicit type in the same schema (OpenAPI 3.0.3).
        if node.get("nullable") is True and "type" in out:
            declared = out["type"]
            if isinstance(declared, str) and declared != "null":
                out["type"] = [declared, "null"]
            elif isinstance(declared, list) and "null" not in declared:
                out["type"] = [*declared, "null"]
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            flag = out.get(exclusive)
            if isinstance(flag, bool):
                del out[exclusive]
                if flag and bound in out:
                    out[exclusive] = out.pop(bound)


# --- operations --------------------------------------------------------------------------------------
@dataclass
class _Operation:
    path: str
    method: str
    op: dict[str, Any]
    pointer: str
    path_parameters: Any


@dataclass
class _Inputs:
    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    locations: dict[str, str] = field(default_factory=dict)
    styles: dict[str, dict[str, Any]] = field(default_factory=dict)
    request_body: dict[str, Any] | None = None
    additional: Any = False


def _operations(
    spec: dict[str, Any], resolver: _Resolver, warnings: list[CompileWarning]
) -> list[_Operation]:
    found: list[_Operation] = []
    for path, item in spec.get("paths", {}).items():
        at = f"#/paths/{_escape(path)}"
        if not path.startswith("/") or "?" in path or "#" in path:
            warnings.append(
                CompileWarning("path_item_invalid", None, at, "path keys must be '/...' templates")
            )
            continue
        try:
            item, _ = resolver.deref_object(item, at)
        except _Problem as problem:
            warnings.append(CompileWarning(problem.code, None, problem.path, problem.detail))
            continue
        if not isinstance(item, dict):
            warnings.append(CompileWarning("path_item_invalid", None, at, "a path item must be an object"))
            continue
        for method, op in item.items():
            if method not in METHODS:
                continue
            pointer = f"{at}/{method}"
            if not isinstance(op, dict):
                warnings.append(
                    CompileWarning("operation_invalid", None, pointer, "an operation must be an object")
                )
                continue
            found.append(_Operation(path, method.upper(), op, pointer, item.get("parameters", [])))
    return found


def _media_type(content: dict[str, Any]) -> str | None:
    for media_type in content:
        base = media_type.split(";", 1)[0].strip().lower()
        if base == "application/json" or (base.startswith("application/") and base.endswith("+json")):
            return media_type
    return None


def _build_inputs(resolver: _Resolver, operation: _Operation) -> tuple[_Inputs, list[CompileWarning]]:
    """Merge parameters and the JSON body into one flat input description (module docstring)."""
    notes: list[CompileWarning] = []
    inputs = _Inputs()
    merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for source, raw_list, base in (
        ("path item", operation.path_parameters, operation.pointer.rsplit("/", 1)[0] + "/parameters"),
        ("operation", operation.op.get("parameters", []), operation.pointer + "/parameters"),
    ):
        if not isinstance(raw_list, list):
            raise _Problem("operation_invalid", base, f"{source} 'parameters' must be an array")
        for index, raw in enumerate(raw_list):
            param, at = resolver.deref_object(raw, f"{base}/{index}")
            if not isinstance(param, dict):
                raise _Problem("parameter_invalid", at, "a parameter must be an object")
            name, location = param.get("name"), param.get("in")
            if not isinstance(name, str) or not name or location not in ("path", "query", "header", "cookie"):
                raise _Problem(
                    "parameter_invalid", at, "a parameter needs a name and in: path|query|header|cookie"
                )
            merged[(name, location)] = (param, at)  # operation level, read second, wins

    for (name, location), (param, at) in merged.items():
        lowered = name.lower()
        if location == "header" and lowered in _IGNORED_HEADERS:
            continue
        if location == "header" and (
            lowered.startswith("x-bailing-") or lowered in _RESERVED_HEADERS or lowered.startswith("proxy-")
        ):
            raise _Problem(
                "parameter_reserved", at, "header parameters may not set hub or connection headers"
            )
        required = location == "path" or param.get("required") is True
        if location == "cookie" or "schema" not in param:
            if required:
                raise _Problem(
                    "parameter_unsupported", at, "cookie or content-only parameters cannot be sent"
                )
            notes.append(
                CompileWarning(
                    "parameter_ignored",
                    None,
                    at,
                    "optional cookie or content-only parameter ignored",
                    "warning",
                )
            )
            continue
        if name in inputs.locations:
            raise _Problem("parameter_conflict", at, "the same name is used in two locations")
        schema = resolver.schema(param["schema"], 1, f"{at}/schema")
        description = param.get("description")
        if isinstance(description, str) and clean_text(description) and schema is not False:
            schema = {**(schema if isinstance(schema, dict) else {}), "description": clean_text(description)}
        style = {key: param[key] for key in ("style", "explode") if key in param}
        if ("style" in style and not isinstance(style["style"], str)) or (
            "explode" in style and not isinstance(style["explode"], bool)
        ):
            raise _Problem("parameter_invalid", at, "'style' must be a string and 'explode' a boolean")
        if style:
            inputs.styles[name] = style
        inputs.properties[name] = schema
        inputs.locations[name] = location
        if required:
            inputs.required.append(name)
        if not _described(schema):
            notes.append(_missing_description(at, f"{location} parameter"))

    template = set(_PATH_TEMPLATE.findall(operation.path))
    declared = {name for name, location in inputs.locations.items() if location == "path"}
    if template != declared:
        raise _Problem(
            "path_parameter_mismatch", operation.pointer, "path template variables and path parameters differ"
        )

    if "requestBody" in operation.op:
        notes.extend(_merge_body(resolver, operation, inputs))
    return inputs, notes


def _described(schema: Any) -> bool:
    """Whether a normalised input property carries a description: the parameter's own description is
    already merged into its schema, a ``$ref`` target's is resolved, and blank text was dropped (a
    non-string description fails the metaschema check anyway)."""
    return isinstance(schema, dict) and bool(schema.get("description"))


def _missing_description(at: str, what: str) -> CompileWarning:
    # A model fills undescribed arguments from their name alone; the tool still compiles.
    return CompileWarning("param_missing_description", None, at, f"{what} without a description", "warning")


def _merge_body(resolver: _Resolver, operation: _Operation, inputs: _Inputs) -> list[CompileWarning]:
    body, at = resolver.deref_object(operation.op["requestBody"], operation.pointer + "/requestBody")
    content = body.get("content") if isinstance(body, dict) else None
    media_type = _media_type(content) if isinstance(content, dict) else None
    if media_type is None:
        raise _Problem("unsupported_request_body", at, "the request body has no JSON media type")
    media = content[media_type]
    where = f"{at}/content/{_escape(media_type)}/schema"
    if not isinstance(media, dict) or "schema" not in media:
        raise _Problem("unsupported_request_body", where, "the JSON request body has no schema")
    schema = resolver.schema(media["schema"], 0, where)
    declared = schema.get("type") if isinstance(schema, dict) else None
    if (
        not isinstance(schema, dict)
        or any(key in schema for key in _COMPOSITION)
        or not (
            declared is None or declared == "object" or (isinstance(declared, list) and "object" in declared)
        )
        or not isinstance(schema.get("properties", {}), dict)
    ):
        raise _Problem(
            "unsupported_request_body",
            where,
            "only an object body with plain properties can become arguments",
        )
    notes = []
    for name, sub in schema.get("properties", {}).items():
        if name in inputs.locations:
            raise _Problem("parameter_conflict", where, "a body property has the name of a parameter")
        inputs.properties[name] = sub
        inputs.locations[name] = "body"
        if not _described(sub):
            notes.append(_missing_description(f"{where}/properties/{_escape(name)}", "body property"))
    required = schema.get("required", [])
    if isinstance(required, list):
        inputs.required.extend(name for name in required if isinstance(name, str))
    inputs.additional = schema.get("additionalProperties", False)
    inputs.request_body = {"media_type": media_type, "required": body.get("required") is True}
    return notes


@functools.lru_cache(maxsize=4096)
def _metaschema_error(canonical_schema: str) -> str | None:
    """Where ``canonical_schema`` (sorted-key compact JSON) fails the 2020-12 metaschema, or None.

    The metaschema check costs about 4 ms a schema; a refresh of an unchanged spec (and every
    compile of the same spec) asks about the same schemas again, so the verdicts are kept."""
    try:
        Draft202012Validator.check_schema(json.loads(canonical_schema))
    except SchemaError as error:
        return error.json_path
    return None


def _metaschema_check(schema: dict[str, Any]) -> str | None:
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):  # not plain JSON: checked as it is, not kept
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            return error.json_path
        return None
    return _metaschema_error(canonical)


def _input_schema(inputs: _Inputs, pointer: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": inputs.properties}
    if inputs.required:
        schema["required"] = list(dict.fromkeys(inputs.required))
    schema["additionalProperties"] = inputs.additional
    metaschema_error = _metaschema_check(schema)
    if metaschema_error is not None:
        raise _Problem(
            "schema_invalid", pointer, f"input_schema fails the JSON Schema metaschema at {metaschema_error}"
        )
    if compact_json_utf8_bytes(schema) > MAX_INPUT_SCHEMA_BYTES:
        raise _Problem("schema_too_large", pointer, f"input_schema exceeds {MAX_INPUT_SCHEMA_BYTES} bytes")
    return schema


def _extensions(op: dict[str, Any]) -> dict[str, Any]:
    return {
        key: copy.deepcopy(value)
        for key, value in op.items()
        if key.startswith(("x-bailing-", "x-business-"))
    }


def _text(op: dict[str, Any], key: str) -> str:
    value = op.get(key)
    return clean_text(value) if isinstance(value, str) else ""


def _refusals(
    operation: _Operation, name: str | None, acc_problem: acc_rules.AccProblem | None, duplicate_ids: set[str]
) -> list[CompileWarning]:
    """Declaration-level reasons not to compile an ACC-declared operation (all of them, not the first)."""
    op, pointer = operation.op, operation.pointer
    refused = []
    if acc_problem is not None:
        at = f"{pointer}/{ACC_KEY}{acc_problem.pointer}"
        refused.append(CompileWarning(acc_problem.code, name, at, acc_problem.detail))
    raw_id = op.get("operationId")
    if raw_id is None:
        refused.append(CompileWarning("operation_id_missing", None, pointer, "an operationId is required"))
    elif name is None:
        detail = "operationId must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$"
        refused.append(CompileWarning("operation_id_invalid", None, f"{pointer}/operationId", detail))
    elif name in duplicate_ids:
        detail = "operationId is used by more than one operation"
        refused.append(CompileWarning("operation_id_duplicate", name, f"{pointer}/operationId", detail))
    if op.get("deprecated") is True:
        detail = "deprecated operations are not exposed"
        refused.append(CompileWarning("operation_deprecated", name, pointer, detail))
    return refused


def _compile_operation(
    resolver: _Resolver, operation: _Operation, provider: str, duplicate_ids: set[str]
) -> tuple[CompiledTool | None, list[CompileWarning]]:
    op, pointer, method = operation.op, operation.pointer, operation.method
    if ACC_KEY not in op:
        return None, []
    declaration, acc_problem = acc_rules.parse_acc(op[ACC_KEY])
    if declaration is not None and not declaration.enabled:
        return None, []
    raw_id = op.get("operationId")
    name = raw_id if isinstance(raw_id, str) and TOOL_NAME_RE.fullmatch(raw_id) else None
    refused = _refusals(operation, name, acc_problem, duplicate_ids)
    if refused or declaration is None or name is None:
        return None, refused

    resolver.nodes = 0
    try:
        inputs, notes = _build_inputs(resolver, operation)
        input_schema = _input_schema(inputs, pointer)
        if method != "GET" and not inputs.properties and inputs.request_body is None:
            raise _Problem(
                "write_without_input", pointer, "a non-GET operation needs parameters or a JSON body"
            )
        when_problem = acc_rules.approval_when_problem(declaration.approval_when, input_schema)
        if when_problem:
            raise _Problem("approval_when_invalid", f"{pointer}/{ACC_KEY}/approval/when", when_problem)
    except _Problem as problem:
        return None, [CompileWarning(problem.code, name, problem.path, problem.detail, problem.severity)]
    notes = [CompileWarning(note.code, name, note.path, note.detail, note.severity) for note in notes]

    def caveat(code: str, detail: str) -> None:
        notes.append(CompileWarning(code, name, pointer, detail, "warning"))

    summary, description = _text(op, "summary"), _text(op, "description")
    short, truncated, used_fallback = short_description(summary, description, declaration.scope)
    guidance = bound_guidance(
        compose_guidance(
            summary=summary,
            description=description,
            when_to_use=clean_text(declaration.when_to_use),
            returns=clean_text(declaration.returns),
            examples=list(declaration.examples),
        )
        or short
    )
    if used_fallback:
        caveat("tool_description_missing", "no summary or description: the scope is used")
    if truncated:
        caveat("tool_description_truncated", "description cut at 500 code points")
    if guidance.truncated:
        caveat("tool_usage_guidance_truncated", "usage guidance cut at 32768 code points or 65536 bytes")

    readonly = declaration.readonly if declaration.readonly is not None else method == "GET"
    idempotent = declaration.idempotent if declaration.idempotent is not None else method == "GET"
    tool = CompiledTool(
        name=name,
        provider=provider,
        method=method,
        path=operation.path,
        scope=declaration.scope,
        description=short,
        description_truncated=truncated,
        usage_guidance=guidance,
        risk=declaration.risk_level or ("low" if readonly else "medium"),
        readonly=readonly,
        idempotent=idempotent,
        approval=ApprovalPolicy(
            required=declaration.approval_required,
            when=declaration.approval_when,
            prompt=declaration.approval_prompt,
        ),
        requires_subject=declaration.subject_required,
        subject_field=declaration.subject_field,
        sensitive=declaration.sensitive,
        timeout_ms=declaration.timeout_ms,
        rate_limit=declaration.rate_limit,
        outcome=declaration.outcome,
        context=declaration.context,
        input_schema=input_schema,
        param_locations=inputs.locations,
        param_styles=inputs.styles,
        request_body=inputs.request_body,
        extensions=_extensions(op),
    )
    return tool, notes


def compile_spec(spec: Any, *, provider: str) -> CompileResult:
    """Compile an OpenAPI 3.0/3.1 document (already parsed to JSON values) into governed tools.

    Never raises on a bad document; see the module docstring for rules and warning codes.
    """
    version, problem = _spec_version(spec)
    if problem is not None or version is None:
        return CompileResult(warnings=[CompileWarning("spec_invalid", None, "#", problem or "", "fatal")])

    result = CompileResult()
    resolver = _Resolver(spec, version)
    operations = _operations(spec, resolver, result.warnings)
    counts = Counter(
        op.op.get("operationId") for op in operations if isinstance(op.op.get("operationId"), str)
    )
    duplicates = {name for name, count in counts.items() if count > 1}
    for operation in operations:
        resolver.active.clear()
        tool, notes = _compile_operation(resolver, operation, provider, duplicates)
        result.warnings.extend(notes)
        if tool is not None:
            result.tools.append(tool)
    return result


# --- text entry point --------------------------------------------------------------------------------
class SpecParseError(ValueError):
    """The text is neither JSON nor YAML describing one object."""


def spec_json_key(key: Any) -> str | None:
    """A YAML mapping key as the JSON key it stands for: unquoted status codes (``200:``) and booleans
    become strings; any other non-string key is None (not JSON). Inline specs in config files follow
    the same rule, so a spec means the same whether it is inline or fetched as YAML."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    return key if isinstance(key, str) else None


def _yaml_to_json(value: Any, depth: int, budget: list[int]) -> Any:
    """Convert a YAML load to JSON values: integer/boolean keys (``200:``) and dates become strings."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_SPEC_DEPTH:
        raise SpecParseError("the document is too large or nested too deeply")
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            json_key = spec_json_key(key)
            if json_key is None:
                raise SpecParseError("object keys must be strings")
            out[json_key] = _yaml_to_json(item, depth + 1, budget)
        return out
    if isinstance(value, list):
        return [_yaml_to_json(item, depth + 1, budget) for item in value]
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    return value


def parse_spec_text(text: str) -> dict[str, Any]:
    """Parse a provider's spec text (JSON first, then YAML) to JSON values.

    Raises :class:`SpecParseError`; the message never quotes the document.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        try:
            loaded = yaml.safe_load(text)
        except (yaml.YAMLError, RecursionError):
            raise SpecParseError("the document is neither JSON nor YAML") from None
        # Aliases can make a small YAML text expand exponentially: the budget bounds the copy.
        value = _yaml_to_json(loaded, 0, [MAX_SPEC_NODES])
    if not isinstance(value, dict):
        raise SpecParseError("the document must be an object")
    return value


def compile_spec_text(text: str, *, provider: str) -> CompileResult:
    """:func:`parse_spec_text` then :func:`compile_spec`; a parse failure is a fatal warning."""
    try:
        spec = parse_spec_text(text)
    except SpecParseError as error:
        return CompileResult(warnings=[CompileWarning("spec_invalid", None, "#", str(error), "fatal")])
    return compile_spec(spec, provider=provider)
