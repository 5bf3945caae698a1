"""The business side of tool approvals: the hub's webhook in, a manager's decision out.

Wire contract (BailingHub, ``bailing.approval-decision.v1``):

* **In** ``POST /approvals`` from the hub, body ``kind: "tool_approval_request"``, signed with the
  agent client's Client Token: ``X-Bailing-Timestamp`` (milliseconds) and ``X-Bailing-Signature:
  sha256=hex(HMAC_SHA256(token, "<ms>.<raw body>"))``, 300 s window. :func:`parse_request` checks the
  envelope; :class:`ApprovalInbox` keeps it (bounded, in memory). The hub may deliver the same
  request more than once (it retries on network errors and 5xx): a redelivery changes nothing.
* **Out** ``POST <DEMO_HUB_URL>/approvals/<id>/decision`` with ``kind: "tool_approval_decision"``,
  authenticated by ``Authorization: Bearer <token>`` or by the same millisecond signature
  (:func:`post_decision`). The decision copies ``approval_id``, ``job_id``, ``request_id`` and
  ``args_hash`` from the stored request: the hub applies it only to exactly that argument snapshot.
  ``decision_id`` (``demo-<id>-<decision>``) makes a repeated post idempotent on the hub.

* **State** ``GET <DEMO_HUB_URL>/approvals/<id>`` (``bailing.approval-state.v1``, this hub's addition,
  docs/protocol.md "Approval state"), authenticated like a decision (the signature covers ``"<ms>."``):
  the upstream contract never tells a business system of a decision made in the hub console, so the
  approvals page asks for each request it still holds as pending (:func:`fetch_state`), and a 409
  answer to a decision is explained by reading the state after it. A final state (approved, denied,
  expired) settles the request here (:meth:`ApprovalInbox.settle_from_hub`); a hub that cannot be
  asked is reported as such, never as "pending".

Only the path of the decision endpoint comes from the webhook, and only when it is exactly
``/approvals/<approval_id>/decision``; the host is always ``DEMO_HUB_URL``, so a webhook can never
make the shop send its token anywhere else.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bailing import signing
from demo_business.config import DemoConfig
from demo_business.errors import DemoError, invalid_request

REQUEST_KIND = "tool_approval_request"
DECISION_KIND = "tool_approval_decision"
DECISION_SCHEMA_VERSION = "bailing.approval-decision.v1"
DECISIONS = ("approved", "denied")
STATE_SCHEMA_VERSION = "bailing.approval-state.v1"
# What the hub may answer for ``status``; the last three settle a request for good.
HUB_STATUSES = ("pending", "approved", "denied", "expired")
FINAL_HUB_STATUSES = frozenset({"approved", "denied", "expired"})
APPROVER = "demo-manager"
MAX_COMMENT_LENGTH = 1000
# JSON numbers are doubles on the hub's side; an id beyond this could not be echoed back exactly.
_MAX_APPROVAL_ID = 2**53 - 1
# What is kept of the hub's answer to a decision (its responses are a few hundred bytes).
_MAX_HUB_RESPONSE_BYTES = 64 * 1024

# Fields the contract always sends, by JSON type. Extra fields are kept (newer hubs may add some).
_REQUIRED_STRINGS = (
    "job_id",
    "request_id",
    "route",
    "provider",
    "tool",
    "scope",
    "risk",
    "policy",
    "reason",
    "method",
    "path",
    "args_hash",
    "decision_path",
)
# Identifiers the decision echoes: they must say something.
_NON_EMPTY = frozenset({"job_id", "request_id", "tool", "args_hash"})
_REQUIRED_OBJECTS = ("intent", "decision_contract", "metadata")
# ``args`` is an object, unless the hub left a large snapshot out (``args_omitted: true``, with its size
# in ``args_bytes``): the approver then reads the arguments in the hub's console.
_OPTIONAL_STRINGS = ("subject", "summary")
# A redelivery carries the same approval; anything else under a known id is a different approval.
_IDENTITY = ("job_id", "request_id", "tool", "args_hash")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decision_path_for(approval_id: int) -> str:
    return f"/approvals/{approval_id}/decision"


def parse_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """Check a ``tool_approval_request`` body (already a JSON object); return it as a plain dict.

    Raises ``invalid_request`` naming the first bad field. Validation covers what the shop relies
    on (the ids the decision echoes, the fields the page shows, the decision path); everything else
    is stored as sent.
    """
    if data.get("kind") != REQUEST_KIND:
        raise invalid_request("kind", f"Only kind {REQUEST_KIND!r} is accepted here.")
    approval_id = data.get("approval_id")
    if (
        isinstance(approval_id, bool)
        or not isinstance(approval_id, int)
        or not 0 < approval_id <= _MAX_APPROVAL_ID
    ):
        raise invalid_request("approval_id", "Must be a positive integer.")
    for name in _REQUIRED_STRINGS:
        value = data.get(name)
        if not isinstance(value, str) or (name in _NON_EMPTY and not value.strip()):
            raise invalid_request(
                name, "Must be a non-empty string." if name in _NON_EMPTY else "Must be a string."
            )
    for name in _REQUIRED_OBJECTS:
        if not isinstance(data.get(name), dict):
            raise invalid_request(name, "Must be a JSON object.")
    if data.get("args_omitted") is True:
        if (
            "args" in data
            or isinstance(data.get("args_bytes"), bool)
            or not isinstance(data.get("args_bytes"), int)
        ):
            raise invalid_request("args_bytes", "An omitted snapshot comes with its size and without args.")
    elif not isinstance(data.get("args"), dict):
        raise invalid_request("args", "Must be a JSON object.")
    for name in _OPTIONAL_STRINGS:
        if data.get(name) is not None and not isinstance(data[name], str):
            raise invalid_request(name, "Must be a string when present.")
    if data["decision_path"] != decision_path_for(approval_id):
        raise invalid_request("decision_path", "Must be /approvals/<approval_id>/decision.")
    contract = data["decision_contract"]
    if contract.get("schema_version", DECISION_SCHEMA_VERSION) != DECISION_SCHEMA_VERSION:
        # The shop only speaks v1 decisions; storing a request it cannot answer would strand it.
        raise invalid_request("decision_contract", f"Only {DECISION_SCHEMA_VERSION} decisions are supported.")
    return dict(data)


def parse_comment(value: str | None) -> str | None:
    """The approver's optional comment from the form: trimmed, empty means none, at most 1000."""
    if value is None:
        return None
    comment = value.strip()
    if not comment:
        return None
    if len(comment) > MAX_COMMENT_LENGTH:
        raise invalid_request("comment", f"At most {MAX_COMMENT_LENGTH} characters.")
    for char in comment:
        code = ord(char)
        if (code < 0x20 and char not in "\n\r\t") or 0x7F <= code < 0xA0 or 0xD800 <= code <= 0xDFFF:
            raise invalid_request("comment", "Contains characters that are not allowed.")
    return comment


# --- inbox -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class ApprovalRecord:
    """One approval request as received, and what the shop did about it.

    ``status`` stays ``pending`` until the hub accepted a decision (any 2xx), or until the hub says it
    is decided or expired (``hub_decision``: who decided, where, when, as the hub records it); a
    refused or failed post is kept as ``last_failure`` and the request can be decided again.
    """

    approval_id: int
    request: dict[str, Any]
    received_at: str
    deliveries: int = 1
    status: str = "pending"
    in_flight: str | None = None
    decided_at: str | None = None
    decision_id: str | None = None
    comment: str | None = None
    hub_response: Any = None
    attempts: int = 0
    last_failure: dict[str, Any] | None = None
    hub_decision: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "approval_id": self.approval_id,
            "status": self.status,
            "received_at": self.received_at,
            "deliveries": self.deliveries,
            "in_flight": self.in_flight,
            "decided_at": self.decided_at,
            "decision_id": self.decision_id,
            "comment": self.comment,
            "attempts": self.attempts,
            "last_failure": dict(self.last_failure) if self.last_failure else None,
            "hub_response": self.hub_response,
            "hub_decision": dict(self.hub_decision) if self.hub_decision else None,
            "request": json.loads(json.dumps(self.request)),
        }


@dataclass(frozen=True, slots=True)
class DecisionOutcome:
    """What the hub answered to one decision post: ``hub_status`` is None when it never answered."""

    ok: bool
    hub_status: int | None
    hub_error: str | None = None
    body: Any = None


class ApprovalInbox:
    """Thread-safe, bounded store of approval requests (oldest forgotten first, like idempotency keys).

    A decision is posted outside the lock (it may take the full hub timeout), so a record is marked
    ``in_flight`` meanwhile and a second click on the same request is refused instead of racing.
    """

    def __init__(self, *, max_records: int = 500) -> None:
        self._lock = threading.Lock()
        self._records: OrderedDict[int, ApprovalRecord] = OrderedDict()
        self._max_records = max_records

    def receive(self, request: dict[str, Any]) -> bool:
        """Store a validated request; ``False`` when it is a redelivery of one already stored."""
        approval_id = request["approval_id"]
        with self._lock:
            known = self._records.get(approval_id)
            if known is not None:
                if any(known.request.get(k) != request.get(k) for k in _IDENTITY):
                    raise DemoError(
                        409,
                        "approval_id_conflict",
                        "Another approval request was already stored under this approval_id.",
                        approval_id=approval_id,
                    )
                known.deliveries += 1
                return False
            self._records[approval_id] = ApprovalRecord(
                approval_id=approval_id, request=request, received_at=_now()
            )
            while len(self._records) > self._max_records:
                self._records.popitem(last=False)
            return True

    def begin_decision(self, approval_id: int, decision: str) -> dict[str, Any]:
        """Reserve a pending request for one decision post; return a copy of the stored request."""
        with self._lock:
            record = self._records.get(approval_id)
            if record is None:
                raise DemoError(404, "approval_not_found", "No such approval request.")
            if record.status != "pending":
                raise DemoError(
                    409,
                    "already_decided",
                    "This approval request is already decided.",
                    approval_status=record.status,
                )
            if record.in_flight is not None:
                raise DemoError(409, "decision_in_progress", "A decision for this request is being sent.")
            record.in_flight = decision
            record.attempts += 1
            return json.loads(json.dumps(record.request))

    def finish_decision(
        self, approval_id: int, decision: str, comment: str | None, outcome: DecisionOutcome
    ) -> None:
        with self._lock:
            record = self._records.get(approval_id)
            if record is None:  # forgotten meanwhile (inbox full); nothing left to update
                return
            record.in_flight = None
            if outcome.ok:
                record.status = decision
                record.decided_at = _now()
                record.decision_id = decision_id_for(approval_id, decision)
                record.comment = comment
                record.hub_response = outcome.body
                record.last_failure = None
            else:
                record.last_failure = {
                    "decision": decision,
                    "hub_status": outcome.hub_status,
                    "hub_error": outcome.hub_error,
                    "at": _now(),
                }

    def settle_from_hub(self, approval_id: int, state: Mapping[str, Any]) -> bool:
        """Record a final state the hub reported (:func:`fetch_state` checked it names this request);
        ``False`` when there is nothing to settle (unknown, no longer pending, a post in flight, or the
        hub still says pending)."""
        if state.get("status") not in FINAL_HUB_STATUSES:
            return False
        with self._lock:
            record = self._records.get(approval_id)
            if record is None or record.status != "pending" or record.in_flight is not None:
                return False
            record.status = state["status"]
            record.decided_at = state.get("decided_at") or _now()
            record.decision_id = state.get("decision_id")
            record.hub_decision = {key: state.get(key) for key in _HUB_DECISION_KEYS}
            record.last_failure = None
            return True

    def pending(self) -> list[dict[str, Any]]:
        """Copies of the requests still pending here, no decision being sent, in arrival order."""
        with self._lock:
            return [
                json.loads(json.dumps(r.request))
                for r in self._records.values()
                if r.status == "pending" and r.in_flight is None
            ]

    def records(self) -> list[dict[str, Any]]:
        """Every stored request: pending ones first in arrival order, then decided ones, latest first."""
        with self._lock:
            items = list(self._records.values())
            pending = [r.to_json() for r in items if r.status == "pending"]
            decided = [r.to_json() for r in reversed(items) if r.status != "pending"]
        decided.sort(key=lambda r: r["decided_at"] or "", reverse=True)  # stable: ties stay latest first
        return pending + decided


# What the shop keeps of a state the hub reported (everything but the identifiers it checked).
_HUB_DECISION_KEYS = ("status", "decided_by", "decided_at", "decision_source", "decision_id", "expires_at")


# --- decisions to the hub --------------------------------------------------------------------------


def decision_id_for(approval_id: int, decision: str) -> str:
    return f"demo-{approval_id}-{decision}"


def decision_payload(request: Mapping[str, Any], decision: str, comment: str | None) -> dict[str, Any]:
    """The decision body, every identifying value copied from the stored request."""
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}")
    payload: dict[str, Any] = {
        "kind": DECISION_KIND,
        "schema_version": DECISION_SCHEMA_VERSION,
        "approval_id": request["approval_id"],
        "job_id": request["job_id"],
        "request_id": request["request_id"],
        "args_hash": request["args_hash"],
        "decision": decision,
        "decision_id": decision_id_for(request["approval_id"], decision),
        "approver": APPROVER,
    }
    if comment:
        payload["comment"] = comment
    return payload


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, never followed: the token must not travel to another URL."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


# Never a proxy (ProxyHandler({}) ignores *_proxy variables) and never a redirect.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def _error_code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"][:100]
    return None


def _read_json(response: Any) -> Any:
    raw = response.read(_MAX_HUB_RESPONSE_BYTES + 1)
    if not raw or len(raw) > _MAX_HUB_RESPONSE_BYTES:
        return None
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return None


def decision_headers(config: DemoConfig, body: bytes, *, now_ms: int | None = None) -> dict[str, str]:
    """Authentication headers of one request to the hub, per ``DEMO_DECISION_AUTH`` (a bodiless GET
    signs the empty body)."""
    headers = {"Accept": "application/json"}
    if body:
        headers["Content-Type"] = "application/json"
    if config.decision_auth == "signed":
        headers.update(signing.sign_callback(secret=config.client_token, body=body, timestamp_ms=now_ms))
    else:
        headers["Authorization"] = f"Bearer {config.client_token}"
    return headers


def _exchange(config: DemoConfig, method: str, path: str, body: bytes, timeout: float) -> DecisionOutcome:
    """One request to the hub; any 2xx is ``ok``. Never raises for an HTTP or network outcome."""
    # DemoConfig admits only http(s) hub URLs, and the path is built here, never taken from a webhook.
    http_request = urllib.request.Request(  # noqa: S310
        config.hub_url + path,
        data=body if method == "POST" else None,
        method=method,
        headers={**decision_headers(config, body), "User-Agent": "demo-business/1"},
    )
    try:
        with _OPENER.open(http_request, timeout=timeout) as response:
            answer = _read_json(response)
            status = response.status
    except urllib.error.HTTPError as exc:  # any non-2xx answer, redirects included
        try:
            answer = _read_json(exc)
        finally:
            exc.close()
        return DecisionOutcome(ok=False, hub_status=exc.code, hub_error=_error_code(answer), body=answer)
    except TimeoutError:
        return DecisionOutcome(ok=False, hub_status=None, hub_error="hub_timeout")
    except urllib.error.URLError as exc:
        code = "hub_timeout" if isinstance(exc.reason, TimeoutError) else "hub_unreachable"
        return DecisionOutcome(ok=False, hub_status=None, hub_error=code)
    except OSError:  # connection reset while reading, and the like
        return DecisionOutcome(ok=False, hub_status=None, hub_error="hub_unreachable")
    except http.client.HTTPException:  # not an HTTP answer (bad status line, broken headers)
        return DecisionOutcome(ok=False, hub_status=None, hub_error="hub_bad_response")
    return DecisionOutcome(ok=True, hub_status=status, body=answer)


def post_decision(
    config: DemoConfig, request: Mapping[str, Any], decision: str, comment: str | None
) -> DecisionOutcome:
    """Send one decision to the hub and report what it answered (never raises for HTTP outcomes)."""
    payload = decision_payload(request, decision, comment)
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return _exchange(
        config, "POST", decision_path_for(request["approval_id"]), body, config.hub_timeout_seconds
    )


# --- the hub's view of an approval ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HubState:
    """What the hub said about one approval: ``state`` (a checked ``bailing.approval-state.v1``
    document) or ``error`` (``hub_unreachable``, ``hub_timeout``, ``hub_bad_response``,
    ``hub_refused`` with ``hub_status``, ``state_mismatch``, ``not_checked``, ``hub_not_configured``)."""

    state: dict[str, Any] | None = None
    error: str | None = None
    hub_status: int | None = None

    @property
    def unreachable(self) -> bool:
        """The hub gave no HTTP answer at all: asking it about the next approval would not help."""
        return self.error in ("hub_unreachable", "hub_timeout", "hub_bad_response")


def state_path_for(approval_id: int) -> str:
    return f"/approvals/{approval_id}"


def _checked_state(answer: Any, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state document if it is one and names exactly the stored request, else None."""
    if not isinstance(answer, dict) or answer.get("schema_version") != STATE_SCHEMA_VERSION:
        return None
    if answer.get("approval_id") != request["approval_id"] or answer.get("status") not in HUB_STATUSES:
        return None
    if any(answer.get(key) != request[key] for key in ("job_id", "request_id", "args_hash")):
        return None
    for key in _HUB_DECISION_KEYS[1:]:
        value = answer.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 200):
            return None
    return {key: answer.get(key) for key in ("approval_id", *_HUB_DECISION_KEYS)}


def fetch_state(config: DemoConfig, request: Mapping[str, Any], *, timeout: float) -> HubState:
    """Ask the hub where the stored ``request`` stands (``GET /approvals/<id>``, bounded by
    ``timeout``); an answer that is not the state of exactly this request is ``state_mismatch``."""
    if not config.hub_url or not config.client_token:
        return HubState(error="hub_not_configured")
    outcome = _exchange(config, "GET", state_path_for(request["approval_id"]), b"", timeout)
    if not outcome.ok:
        if outcome.hub_status is None:
            return HubState(error=outcome.hub_error or "hub_unreachable")
        return HubState(error="hub_refused", hub_status=outcome.hub_status)
    state = _checked_state(outcome.body, request)
    if state is None:
        return HubState(error="state_mismatch", hub_status=outcome.hub_status)
    return HubState(state=state, hub_status=outcome.hub_status)


def refresh_from_hub(
    config: DemoConfig,
    inbox: ApprovalInbox,
    *,
    budget_seconds: float,
    clock: Any = time.monotonic,
) -> dict[int, HubState]:
    """Ask the hub about every request still pending here; settle the decided ones; return what the
    hub said of the others, by approval id (a pending state or why the hub could not tell).

    One request after the other, each bounded by ``config.hub_state_timeout_seconds`` and all by
    ``budget_seconds``: once the hub gave no answer, or the budget is spent, the rest are
    ``not_checked``/unreachable without asking, so a hub that is down costs the page one timeout."""
    checks: dict[int, HubState] = {}
    deadline = clock() + budget_seconds
    gave_up: HubState | None = None
    for request in inbox.pending():
        approval_id = request["approval_id"]
        remaining = deadline - clock()
        if gave_up is None and remaining <= 0:
            gave_up = HubState(error="not_checked")
        if gave_up is not None:
            checks[approval_id] = gave_up
            continue
        result = fetch_state(config, request, timeout=min(config.hub_state_timeout_seconds, remaining))
        if result.state is not None and inbox.settle_from_hub(approval_id, result.state):
            continue
        checks[approval_id] = result
        if result.unreachable or result.error == "hub_not_configured":
            gave_up = result
    return checks
