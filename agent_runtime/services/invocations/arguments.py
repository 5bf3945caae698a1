"""A call's arguments, normalized once: the value every step reads, its canonical text, size and hash.

An agent's ``arguments`` are measured, checked, normalized and hashed here, once, into one
:class:`ToolArguments`; the size check, the schema, the approval snapshot, ``args_hash``, the sealed
frozen copy and the request body all read that one value (docs/protocol.md "Byte budgets",
"Approvals"):

* ``text`` is ``JSON.stringify(arguments)`` (compact, numbers as ECMAScript writes them) and
  ``size`` its UTF-8 length — the budget a JavaScript client measures. Over
  :data:`ARGUMENTS_MAX_BYTES` is 413 ``arguments_too_large`` (``limit_scope: arguments``).
* ``value`` is ``JSON.parse(text)``, what a JavaScript peer holds: ``1.0`` is ``1``, an integer
  beyond 2^53 the nearest double. The approval snapshot, the hash and the request sent use it.
* ``args_hash`` is SHA-256 of BailingHub's canonical JSON of ``value``.

One rule for control characters in arguments: a key or string anywhere in them may hold TAB, LF and
CR (arguments are often multi-line text) but no other C0 control, DEL or C1 control — NUL included,
which PostgreSQL cannot store in ``jsonb`` — else 400 ``invalid_request`` naming the field
(``arguments.<path>``), before anything is stored. Bidirectional and other invisible formatting
characters are allowed (right-to-left text needs them); the console shows them as visible escapes.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from agent_runtime.budgets import ARGUMENTS_MAX_BYTES
from agent_runtime.models import ToolInvocation
from agent_runtime.secrets_box import SealedKind, SealedSecretError
from bailing.api.errors import InvalidRequest, RequestBodyTooLarge
from bailing.api.hashing import sha256_hex
from bailing.api.jsjson import js_canonical, js_stringify

# The frozen arguments of an invocation, sealed for the approved dispatch (context: its job id). The
# sealed text is ``ToolArguments.text``, so its bound is the argument budget itself.
FROZEN_ARGUMENTS = SealedKind("tool_invocation.arguments", max_plaintext_bytes=ARGUMENTS_MAX_BYTES)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class ToolArguments:
    """The normalized arguments of one call (module docstring); build it with :func:`tool_arguments`."""

    value: dict[str, Any]
    text: str
    size: int
    args_hash: str

    @property
    def keys(self) -> list[str]:
        return sorted(self.value)


def arguments_hash(arguments: Any) -> str:
    """``args_hash``: SHA-256 of BailingHub's canonical JSON of the (normalized) arguments — what an
    approval is bound to and a business system may recompute (docs/protocol.md "Approvals")."""
    return sha256_hex(js_canonical(arguments))


def arguments_size_checked(raw: Any) -> str:
    """``JSON.stringify(raw)``, after checking its UTF-8 size against the budget (413 past it).
    Any JSON type is measured, so an oversized non-object is 413 before it is 400."""
    try:
        text = js_stringify(raw)
    except OverflowError:  # an integer beyond a double; the JSON parser refuses it first, naming it
        raise InvalidRequest("A number is too large.", field="arguments") from None
    size = len(text.encode("utf-8"))
    if size > ARGUMENTS_MAX_BYTES:
        raise RequestBodyTooLarge.arguments(max_bytes=ARGUMENTS_MAX_BYTES, actual_bytes=size)
    return text


def _control_problem(value: Any) -> str | None:
    """The path (``arguments.<path>``) of the first key or string holding a refused control."""
    stack: list[tuple[Any, str]] = [(value, "arguments")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _CONTROL.search(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}"
                if _CONTROL.search(key):
                    return path
                stack.append((child, child_path))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    return None


def tool_arguments(raw: Any, *, text: str | None = None) -> ToolArguments:
    """Measure, check and normalize ``raw`` (an agent's ``arguments`` object). ``text`` is its
    ``JSON.stringify`` when the caller already measured it (:func:`arguments_size_checked`)."""
    if text is None:
        text = arguments_size_checked(raw)
    if not isinstance(raw, dict):
        raise InvalidRequest(field="arguments")
    problem = _control_problem(raw)
    if problem is not None:
        raise InvalidRequest("A string in the arguments contains control characters.", field=problem)
    value = json.loads(text)
    return ToolArguments(
        value=value, text=text, size=len(text.encode("utf-8")), args_hash=arguments_hash(value)
    )


def arguments_seal(job_id: uuid.UUID, arguments: ToolArguments) -> str:
    return FROZEN_ARGUMENTS.seal(arguments.text, context=str(job_id))


def arguments_open(invocation: ToolInvocation) -> dict[str, Any] | None:
    """The frozen arguments, only if they open and still hash to the invocation's ``args_hash``."""
    try:
        text = FROZEN_ARGUMENTS.open(invocation.arguments_sealed, context=str(invocation.job_id))
    except SealedSecretError:
        return None
    arguments = json.loads(text)
    return arguments if arguments_hash(arguments) == invocation.args_hash else None
