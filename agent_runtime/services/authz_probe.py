"""The authorization probe: does the business system refuse a subject it has never heard of?

A valid hub signature proves the hub sent a call, never that the acting subject may do anything
(contract: "never treat a valid signature as business authorization"). A provider whose spec
declares ``x-bailing-authz-probe`` gets, after every successful refresh, one request signed exactly
like a tool call whose ``X-Bailing-On-Behalf-Of`` is the synthetic subject :data:`PROBE_SUBJECT`. A
business that authorizes by subject refuses it; one that only checks the signature lets it through.

**Declaration** (BailingHub's two forms): at the spec root ``"x-bailing-authz-probe": {"method":
"POST"|"GET", "path": "/...", "operationId"?: name}`` (method defaults to ``POST``), or
``"x-bailing-authz-probe": true`` on a ``get``/``post`` operation whose path has no template
variables. The root declaration wins; otherwise the first marked operation in document order. The
path follows the ``spec_url`` rule (``agent_runtime.config.origin_path_problem``): it is requested
on ``base_url``'s origin and signed exactly as sent.

**Request.** ``POST`` sends the compact JSON ``{"subject": PROBE_SUBJECT, "reason":
"bailing-authz-probe", "expect": "deny"}``; ``GET`` has no body. Headers: the tool-call signature
(``bailing.signing.sign_tool_request``) over method, path, body, the probe subject and job id
``probe``, plus ``X-Bailing-Client: __probe__`` and ``X-Bailing-Tool-Scope: __probe__.authz``, as
BailingHub sends them. The provider's ``timeout_ms`` is one absolute deadline for connecting, sending,
the headers and the body (``bailing.outbound``); no redirects, no proxy environment, only addresses the
outbound target policy allows, at most :data:`PROBE_BODY_MAX_BYTES` of answer read. Never inside a
transaction.

**Outcome** (``ToolProvider.authz_probe``): ``{status, http?, tool?, mode?, requires_subject?,
reason, at}``, ``mode`` ``dedicated`` (a declared endpoint; ``tool`` is reserved for probing one of
the compiled tools, which this hub does not do) and ``requires_subject`` always ``true`` for it.

=================  =============================================================================
``pass``           401/403 (``nobody_refused``), or a 2xx whose JSON says ``authorized``/``allow``/
                   ``allowed``/``ok`` is ``false`` (``nobody_denied``: BailingHub's demo business answers so)
``suspect``        any other 2xx: the nobody subject was served (``nobody_authorized`` when the
                   body says ``true``, else ``nobody_served``)
``inconclusive``   any other status (``unexpected_status``: redirects, 404, 5xx...), no answer
                   (``no_answer``), the deadline (``timeout``) or an address the outbound target
                   policy refuses (``target_forbidden``)
``skipped``        nothing probed: ``inline_spec``, ``not_declared``, ``declaration_invalid``,
                   ``secret_missing``, ``secret_unreadable``
=================  =============================================================================

A probe never fails the refresh: the spec is already stored when it runs. Its outcome is written in
its own short transaction with the audit event ``agent_runtime.provider.authz_probe``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.db import transaction
from django.utils import timezone

from agent_runtime.config import origin_path_problem
from agent_runtime.models import ToolProvider
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.outbound import TargetForbidden, outbound_client
from bailing.signing import CLIENT_HEADER, TOOL_SCOPE_HEADER, sign_tool_request

__all__ = [
    "PROBE_BODY_MAX_BYTES",
    "PROBE_KEY",
    "PROBE_SUBJECT",
    "DeclarationInvalid",
    "ProbeTarget",
    "authz_probe_run",
    "authz_probe_skipped",
    "authz_probe_store",
    "authz_probe_target",
]

PROBE_KEY = "x-bailing-authz-probe"
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"
PROBE_JOB_ID = "probe"
PROBE_CLIENT = "__probe__"
PROBE_SCOPE = "__probe__.authz"
PROBE_DEFAULT_NAME = "authz_probe"
PROBE_PATH_MAX = 512
PROBE_BODY_MAX_BYTES = 64 * 1024
_PROBE_BODY = json.dumps(
    {"subject": PROBE_SUBJECT, "reason": "bailing-authz-probe", "expect": "deny"}, separators=(",", ":")
).encode("utf-8")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_DECISION_KEYS = ("authorized", "allow", "allowed", "ok")
_USER_AGENT = "bailing-hub-authz-probe/1"


@dataclass(frozen=True)
class ProbeTarget:
    """A declared probe endpoint: ``method`` ``GET``/``POST``, ``path`` on the provider's origin and
    the name shown as the probe's ``tool``."""

    method: str
    path: str
    tool: str


class DeclarationInvalid(ValueError):
    """The spec declares a probe that cannot be requested (the text names the rule, never a value)."""


def _name(value: Any) -> str:
    return value if isinstance(value, str) and _NAME_RE.fullmatch(value) else PROBE_DEFAULT_NAME


def _checked_path(path: Any) -> str:
    if not isinstance(path, str) or not path or len(path) > PROBE_PATH_MAX:
        raise DeclarationInvalid(f"the probe path must be a string of 1 to {PROBE_PATH_MAX} characters")
    problem = origin_path_problem(path)
    if problem:
        raise DeclarationInvalid(f"the probe path {problem}")
    return path


def authz_probe_target(spec: Any) -> ProbeTarget | None:
    """The probe ``spec`` declares, or None. Raises :class:`DeclarationInvalid` for a declaration
    that exists but cannot be requested (see the module docstring for both forms)."""
    if not isinstance(spec, dict):
        return None
    if PROBE_KEY in spec:
        root = spec[PROBE_KEY]
        if not isinstance(root, dict):
            raise DeclarationInvalid("the root declaration must be an object")
        method = root.get("method", "POST")
        if not isinstance(method, str) or method.upper() not in ("GET", "POST"):
            raise DeclarationInvalid("the probe method must be GET or POST")
        return ProbeTarget(method.upper(), _checked_path(root.get("path")), _name(root.get("operationId")))
    paths = spec.get("paths")
    for path, item in paths.items() if isinstance(paths, dict) else ():
        if not isinstance(item, dict):
            continue
        for method, operation in item.items():
            if not isinstance(operation, dict) or operation.get(PROBE_KEY) is not True:
                continue
            if method not in ("get", "post"):
                raise DeclarationInvalid("a marked probe operation must be a get or post")
            if "{" in path:
                raise DeclarationInvalid("a marked probe operation's path must have no template variables")
            return ProbeTarget(method.upper(), _checked_path(path), _name(operation.get("operationId")))
    return None


# --- outcomes -----------------------------------------------------------------------------------------
def _now() -> str:
    return timezone.now().isoformat()


def authz_probe_skipped(reason: str, target: ProbeTarget | None = None) -> dict[str, Any]:
    """A probe that did not reach the network (``reason`` is one of the ``skipped`` codes)."""
    outcome: dict[str, Any] = {"status": "skipped", "reason": reason, "at": _now()}
    if target is not None:
        outcome.update(_target_facts(target))
    return outcome


def _target_facts(target: ProbeTarget) -> dict[str, Any]:
    return {"tool": target.tool, "mode": "dedicated", "requires_subject": True}


def _decision(body: bytes) -> bool | None:
    """The boolean verdict a 2xx body states (first of ``authorized``/``allow``/``allowed``/``ok``)."""
    try:
        parsed = json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    for key in _DECISION_KEYS:
        if isinstance(parsed.get(key), bool):
            return parsed[key]
    return None


def _classified(status: int, body: bytes) -> tuple[str, str]:
    if status in (401, 403):
        return "pass", "nobody_refused"
    if 200 <= status < 300:
        decision = _decision(body)
        if decision is False:
            return "pass", "nobody_denied"
        return "suspect", "nobody_authorized" if decision is True else "nobody_served"
    return "inconclusive", "unexpected_status"


def _send(provider: ToolProvider, target: ProbeTarget, secret: str) -> tuple[int, bytes]:
    """One signed probe request: the status and at most ``PROBE_BODY_MAX_BYTES`` of its 2xx body."""
    # Like the spec fetch: the declared path on base_url's origin, sent exactly as signed.
    parts = urlsplit(provider.base_url)
    url = f"{parts.scheme}://{parts.netloc}{target.path}"
    body = _PROBE_BODY if target.method == "POST" else b""
    headers = sign_tool_request(
        secret=secret,
        method=target.method,
        path_with_query=target.path,
        body=body,
        on_behalf_of=PROBE_SUBJECT,
        job_id=PROBE_JOB_ID,
    )
    headers.update({CLIENT_HEADER: PROBE_CLIENT, TOOL_SCOPE_HEADER: PROBE_SCOPE})
    if body:
        headers["Content-Type"] = "application/json"
    # One deadline, the provider's timeout, for connecting, sending, headers and body together.
    with (
        outbound_client(
            timeout=provider.timeout_ms / 1000,
            headers={"User-Agent": _USER_AGENT, "Accept": "application/json", "Accept-Encoding": "identity"},
        ) as client,
        client.stream(target.method, url, headers=headers, content=body) as response,
    ):
        status = response.status_code
        received = bytearray()
        if 200 <= status < 300:
            for chunk in response.iter_bytes():
                received += chunk
                # Only the start matters (a small JSON verdict).
                if len(received) >= PROBE_BODY_MAX_BYTES:
                    break
        return status, bytes(received[:PROBE_BODY_MAX_BYTES])


def authz_probe_run(*, provider: ToolProvider, target: ProbeTarget, secret: str) -> dict[str, Any]:
    """Send the probe to ``target`` and classify the answer (never raises for a provider problem).

    Uses the network: call it outside any transaction.
    """
    facts = _target_facts(target)
    try:
        status, body = _send(provider, target, secret)
    except TargetForbidden:
        return {"status": "inconclusive", **facts, "reason": "target_forbidden", "at": _now()}
    except httpx.TimeoutException:
        return {"status": "inconclusive", **facts, "reason": "timeout", "at": _now()}
    except httpx.HTTPError:
        return {"status": "inconclusive", **facts, "reason": "no_answer", "at": _now()}
    verdict, reason = _classified(status, body)
    return {"status": verdict, "http": status, **facts, "reason": reason, "at": _now()}


def authz_probe_store(*, provider: ToolProvider, outcome: dict[str, Any], actor: Actor) -> None:
    """Record ``outcome`` as the provider's ``authz_probe`` and audit it, in one short transaction."""
    with transaction.atomic():
        locked = ToolProvider.objects.select_for_update().only("id", "name").get(pk=provider.pk)
        locked.authz_probe = outcome
        locked.save(update_fields=["authz_probe", "updated_at"])
        audit_record(
            action="agent_runtime.provider.authz_probe",
            actor=actor,
            target_type="tool_provider",
            target_id=locked.name,
            data=outcome,
        )
