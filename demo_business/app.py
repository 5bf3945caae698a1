"""WSGI application of the Demo Shop (stdlib only).

Every tool call passes the same gates, in this order, before any business code runs:

1. hub signature and timestamp (``bailing.signing``) -> 401 ``invalid_signature``;
2. acting customer from the *signed* ``X-Bailing-On-Behalf-Of``: missing for a subject tool -> 401
   ``subject_required``, not a customer of the shop -> 403 ``subject_not_allowed``;
3. for writes, ``X-Bailing-Idempotency-Key`` -> 400 when missing or malformed;
4. strict input validation -> 400 ``invalid_request`` with ``field``;
5. the business rule, authorised by the acting customer (someone else's order is a 404).

A valid signature proves the hub sent the call; it never replaces step 5 (contract: "Never treat a
valid signature as business authorization").

The authorization probe endpoint (``POST /.well-known/bailing/authz-probe``, declared in the spec)
goes through gates 1 and 2 exactly like a tool call, so what a hub observes there is what its tool
calls would meet: 403 ``subject_not_allowed`` for the hub's synthetic nobody subject, 401
``subject_required`` without a subject, ``{"authorized": true}`` only for a customer of the shop.

Approvals (``demo_business.approvals``) have their own gates:

* ``POST /approvals`` (the hub's approval webhook) is verified with the Client Token
  (``DEMO_CLIENT_TOKEN``, millisecond callback signature) -> 401 ``invalid_signature``; without a
  token configured -> 503 ``approvals_not_configured``;
* the approver's pages ``GET /approvals``, ``GET /approvals.json`` and the forms
  ``POST /approvals/<id>/approve|deny`` have no login of their own: they answer loopback clients
  only (403 ``loopback_only``), to a loopback ``Host`` only (403 ``host_not_loopback``, against DNS
  rebinding), and a form post whose browser ``Origin`` is another site is refused (403
  ``cross_origin_form``). Never put them behind a reverse proxy: every client would then be local.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qsl, quote

from bailing import signing
from demo_business import approvals, pages
from demo_business.config import DemoConfig
from demo_business.errors import DemoError, invalid_request
from demo_business.spec import AUTHZ_PROBE_PATH, ORDER_ID_PATTERN, SPEC_PATH, spec_bytes
from demo_business.store import ORDER_STATUSES, USERS, DemoStore

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_ORDER_ID_RE = re.compile(ORDER_ID_PATTERN)
_IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_MAX_AMOUNT_CENTS = 100_000_000
# An oversized body is read and thrown away up to this size so the client sees the 413 instead of a
# connection reset; beyond it the connection is simply closed.
_DRAIN_LIMIT_BYTES = 1024 * 1024

_JSON_CONTENT_TYPE = "application/json; charset=utf-8"

_REASONS = {
    200: "OK",
    201: "Created",
    303: "See Other",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class Request:
    """The parts of a WSGI request the shop uses; ``path_with_query`` is exactly what was signed."""

    method: str
    path: str
    path_with_query: str
    query_string: str
    headers: Mapping[str, str]
    content_type: str
    body: bytes
    # The TCP peer (never a forwarded-for header: nothing here trusts a proxy).
    remote_addr: str = ""


@dataclass(slots=True)
class Response:
    status: int
    body: dict[str, Any] | bytes
    headers: list[tuple[str, str]] = field(default_factory=list)
    content_type: str = _JSON_CONTENT_TYPE


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool handler may rely on: verified request, acting customer, path parameters."""

    request: Request
    user: str | None
    params: dict[str, str]
    store: DemoStore


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint and its gate.

    ``access``: ``public`` (no check), ``signed`` (tool signature only), ``tool`` (signature and
    acting customer), ``webhook`` (callback signature with the Client Token) or ``local`` (loopback
    clients only; ``form`` adds the cross-origin check). ``html`` routes render errors as a page.
    """

    method: str
    pattern: re.Pattern[str]
    access: str
    handler: Callable[..., Response]
    subject_required: bool = True
    html: bool = False
    form: bool = False


# --- request parsing -------------------------------------------------------------------------------


def _headers(environ: Mapping[str, Any]) -> dict[str, str]:
    headers = {
        key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")
    }
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    return headers


def _path_with_query(environ: Mapping[str, Any]) -> str:
    # The signature covers the request target as sent, before any percent-decoding. The bundled server
    # (and gunicorn) pass it as RAW_URI; otherwise rebuild it from the decoded WSGI path.
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
    if raw.startswith("/"):
        return raw
    path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1")
    query = environ.get("QUERY_STRING", "")
    return quote(path, safe="/-._~!$&'()*+,;=:@%") + (f"?{query}" if query else "")


def _read_body(environ: Mapping[str, Any], max_bytes: int) -> bytes:
    if environ.get("HTTP_TRANSFER_ENCODING"):
        # wsgiref does not decode chunked bodies; insist on Content-Length instead of misreading one.
        raise DemoError(411, "length_required", "Send the body with a Content-Length header.")
    raw_length = environ.get("CONTENT_LENGTH") or ""
    if not raw_length:
        return b""
    if not raw_length.isdigit():
        raise invalid_request("content_length", "Content-Length must be a non-negative integer.")
    length = int(raw_length)
    stream = environ["wsgi.input"]
    if length > max_bytes:
        remaining = min(length, _DRAIN_LIMIT_BYTES)
        while remaining > 0:
            chunk = stream.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)
        raise DemoError(413, "request_too_large", "The request body is too large.", max_bytes=max_bytes)
    body = stream.read(length) if length else b""
    if len(body) != length:
        raise invalid_request("body", "The request body ended early.")
    return body


def _build_request(environ: Mapping[str, Any], config: DemoConfig) -> Request:
    headers = _headers(environ)
    return Request(
        method=environ.get("REQUEST_METHOD", "GET").upper(),
        path=environ.get("PATH_INFO", "") or "/",
        path_with_query=_path_with_query(environ),
        query_string=environ.get("QUERY_STRING", ""),
        headers=headers,
        content_type=headers.get("content-type", ""),
        body=_read_body(environ, config.max_body_bytes),
        remote_addr=environ.get("REMOTE_ADDR", ""),
    )


# --- input validation ------------------------------------------------------------------------------


class _DuplicateKeyError(ValueError):
    pass


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def _json_object(request: Request) -> dict[str, Any]:
    if not request.body:
        return {}
    if request.content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise DemoError(415, "unsupported_media_type", "Send the arguments as application/json.")
    try:
        data = json.loads(
            request.body.decode("utf-8"),
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_reject_constant,
        )
    except ValueError:  # also UnicodeDecodeError, JSONDecodeError and duplicate keys
        raise DemoError(400, "invalid_json", "The body is not a valid JSON document.") from None
    if not isinstance(data, dict):
        raise invalid_request("body", "The body must be a JSON object.")
    return data


def _no_body(request: Request) -> None:
    if request.body:
        raise invalid_request("body", "This operation takes no request body.")


def _query(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    try:
        pairs = parse_qsl(request.query_string, keep_blank_values=True, strict_parsing=True, errors="strict")
    except ValueError:
        raise invalid_request("query", "The query string is malformed.") from None
    result: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            raise invalid_request(name, "Unknown query parameter.")
        if name in result:
            raise invalid_request(name, "The query parameter is repeated.")
        result[name] = value
    return result


def _check_fields(data: Mapping[str, Any], *, allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise invalid_request(key, "Unknown field.")
    for key in required:
        if key not in data:
            raise invalid_request(key, "This field is required.")


def _text(data: Mapping[str, Any], name: str, *, max_length: int, multiline: bool = False) -> str | None:
    if name not in data:
        return None
    value = data[name]
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise invalid_request(name, f"Must be a non-blank string of at most {max_length} characters.")
    for char in value:
        code = ord(char)
        control = code < 0x20 or 0x7F <= code < 0xA0
        if (control and not (multiline and char in "\n\t")) or 0xD800 <= code <= 0xDFFF:
            raise invalid_request(name, "Contains characters that are not allowed.")
    return value


def _order_id(value: Any, name: str = "order_id") -> str:
    if not isinstance(value, str) or not _ORDER_ID_RE.fullmatch(value):
        raise invalid_request(name, "Order ids look like SO-1234.")
    return value


def _amount_cents(data: Mapping[str, Any], name: str = "amount") -> int:
    value = data[name]
    # bool is an int in Python but never an amount; strings are not coerced (ACC rules stay typed).
    # Huge JSON integers stay ints (math.isfinite would overflow on them); only floats can be inf.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise invalid_request(name, "Must be a JSON number.")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:  # pragma: no cover - str() of a finite number always parses
        raise invalid_request(name, "Must be a JSON number.") from None
    if amount.as_tuple().exponent < -2 and amount != amount.quantize(Decimal("0.01")):
        raise invalid_request(name, "At most two decimal places.")
    cents = int(amount * 100)
    if cents <= 0 or cents > _MAX_AMOUNT_CENTS:
        raise invalid_request(name, "Must be greater than 0 and at most 1000000.")
    return cents


def _idempotency_key(request: Request) -> str:
    key = request.headers.get(signing.IDEMPOTENCY_KEY_HEADER.lower(), "")
    if not key:
        raise DemoError(
            400, "idempotency_key_required", "Side-effecting tools need an X-Bailing-Idempotency-Key header."
        )
    if not _IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise DemoError(400, "invalid_idempotency_key", "The idempotency key has an invalid format.")
    return key


def _fingerprint(operation: str, arguments: Mapping[str, Any]) -> str:
    canonical = json.dumps(
        {"operation": operation, "arguments": arguments},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _idempotent_write(
    ctx: ToolContext,
    *,
    operation: str,
    arguments: Mapping[str, Any],
    action: Callable[[], tuple[int, dict[str, Any]]],
) -> Response:
    key = _idempotency_key(ctx.request)
    status, body, replayed = ctx.store.run_idempotent(
        key=key,
        subject=ctx.user or "",
        operation=operation,
        fingerprint=_fingerprint(operation, arguments),
        action=action,
    )
    return Response(status, body, [("Idempotent-Replayed", "true")] if replayed else [])


# --- endpoints -------------------------------------------------------------------------------------


def health(request: Request) -> Response:
    return Response(200, {"ok": True, "app": "demo-business"})


def list_orders(ctx: ToolContext) -> Response:
    _no_body(ctx.request)
    query = _query(ctx.request, frozenset({"status"}))
    status = query.get("status")
    if status is not None and status not in ORDER_STATUSES:
        raise invalid_request("status", "Unknown order status.")
    orders = ctx.store.orders_for(user=ctx.user, status=status)
    return Response(200, {"ok": True, "count": len(orders), "orders": orders})


def get_order(ctx: ToolContext) -> Response:
    _no_body(ctx.request)
    _query(ctx.request, frozenset())
    order_id = _order_id(ctx.params["order_id"])
    return Response(200, {"ok": True, "order": ctx.store.order_for(user=ctx.user, order_id=order_id)})


def create_ticket(ctx: ToolContext) -> Response:
    _query(ctx.request, frozenset())
    data = _json_object(ctx.request)
    _check_fields(data, allowed=("subject", "message", "order_id"), required=("subject", "message"))
    subject = _text(data, "subject", max_length=120)
    message = _text(data, "message", max_length=2000, multiline=True)
    order_id = _order_id(data["order_id"]) if "order_id" in data else None
    arguments = {"subject": subject, "message": message, "order_id": order_id}

    def action() -> tuple[int, dict[str, Any]]:
        ticket = ctx.store.ticket_create(user=ctx.user, subject=subject, message=message, order_id=order_id)
        return 201, {
            "ok": True,
            "status": "open",
            "message": f"Support ticket {ticket['ticket_id']} is open; a support agent will follow up.",
            "business_id": ticket["ticket_id"],
            "ticket": ticket,
        }

    return _idempotent_write(ctx, operation="create_ticket", arguments=arguments, action=action)


def cancel_order(ctx: ToolContext) -> Response:
    _query(ctx.request, frozenset())
    order_id = _order_id(ctx.params["order_id"])
    data = _json_object(ctx.request)
    _check_fields(data, allowed=("reason",), required=())
    reason = _text(data, "reason", max_length=200)
    arguments = {"order_id": order_id, "reason": reason}

    def action() -> tuple[int, dict[str, Any]]:
        order = ctx.store.order_cancel(user=ctx.user, order_id=order_id)
        return 200, {
            "ok": True,
            "status": "cancelled",
            "message": f"Order {order_id} is cancelled.",
            "business_id": order_id,
            "order": order,
        }

    return _idempotent_write(ctx, operation="cancel_order", arguments=arguments, action=action)


def request_refund(ctx: ToolContext) -> Response:
    _query(ctx.request, frozenset())
    order_id = _order_id(ctx.params["order_id"])
    data = _json_object(ctx.request)
    _check_fields(data, allowed=("amount", "reason"), required=("amount", "reason"))
    cents = _amount_cents(data)
    reason = _text(data, "reason", max_length=500, multiline=True)
    # Cents, not the JSON number, so 120 and 120.0 are the same request.
    arguments = {"order_id": order_id, "amount_cents": cents, "reason": reason}

    def action() -> tuple[int, dict[str, Any]]:
        refund = ctx.store.refund_request(user=ctx.user, order_id=order_id, amount_cents=cents, reason=reason)
        return 201, {
            "ok": True,
            "status": "submitted",
            "message": f"Refund request {refund['refund_id']} was submitted for order {order_id}.",
            "business_id": refund["refund_id"],
            "refund": refund,
        }

    return _idempotent_write(ctx, operation="request_refund", arguments=arguments, action=action)


def authz_probe(ctx: ToolContext) -> Response:
    """Reached only by a signed request for a customer of the shop (the gates refused anyone else)."""
    _query(ctx.request, frozenset())
    data = _json_object(ctx.request)
    _check_fields(data, allowed=("subject", "reason", "expect"), required=())
    for name in ("reason", "expect"):
        _text(data, name, max_length=200)
    # The verdict is about the signed subject; a body naming someone else is a confused caller.
    if "subject" in data and data["subject"] != ctx.user:
        raise invalid_request("subject", "The body names another subject than the signed one.")
    return Response(200, {"authorized": True, "subject": ctx.user})


def demo_failure_probe(ctx: ToolContext) -> Response:
    _no_body(ctx.request)
    _query(ctx.request, frozenset())
    raise DemoError(500, "demo_failure", "Simulated backend failure for trace and reconciliation drills.")


# --- approvals -------------------------------------------------------------------------------------


def _loopback_address(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _loopback_host(host: str) -> bool:
    """``Host`` names this process on the loopback interface: localhost, 127.0.0.0/8 or [::1]."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name == "localhost" or _loopback_address(name)


def _local_gate(request: Request, route: Route) -> None:
    if not _loopback_address(request.remote_addr):
        raise DemoError(403, "loopback_only", "The approvals pages answer local clients only.")
    host = request.headers.get("host", "")
    # Browsers always send Host: a foreign name pointing at 127.0.0.1 (DNS rebinding) stops here.
    if host and not _loopback_host(host):
        raise DemoError(403, "host_not_loopback", "Open the approvals pages through a loopback address.")
    if route.form and _cross_origin(request, host):
        # A page on another origin (the operator's browser is local too) must not decide approvals.
        raise DemoError(403, "cross_origin_form", "Decisions are accepted only from the approvals page.")


def _cross_origin(request: Request, host: str) -> bool:
    """A browser says where a form post comes from; scripts and curl send neither header."""
    origin = request.headers.get("origin")
    if origin is not None and origin.lower() != f"http://{host.lower()}":
        return True
    return request.headers.get("sec-fetch-site", "same-origin") not in {"same-origin", "none"}


def _form(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    """An HTML form post (urlencoded) or the same fields as a JSON object of strings."""
    if not request.body:
        return {}
    media_type = request.content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/json":
        data = _json_object(request)
    elif media_type == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(
                request.body.decode("ascii"), keep_blank_values=True, strict_parsing=True, errors="strict"
            )
        except ValueError:  # also UnicodeDecodeError
            raise invalid_request("body", "The form data is malformed.") from None
        data = {}
        for name, value in pairs:
            if name in data:
                raise invalid_request(name, "The field is repeated.")
            data[name] = value
    else:
        raise DemoError(415, "unsupported_media_type", "Send the form urlencoded or as application/json.")
    for name, value in data.items():
        if name not in allowed:
            raise invalid_request(name, "Unknown field.")
        if not isinstance(value, str):
            raise invalid_request(name, "Must be a string.")
    return data


def _html(status: int, body: bytes, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(
        status, body, [*pages.HTML_HEADERS, *(headers or [])], content_type=pages.HTML_CONTENT_TYPE
    )


def _approval_routes(config: DemoConfig, inbox: approvals.ApprovalInbox) -> list[Route]:
    def notes() -> list[str]:
        found = []
        if not config.client_token:
            found.append("DEMO_CLIENT_TOKEN is not set: the hub cannot deliver approval requests here.")
        if not config.hub_url:
            found.append("DEMO_HUB_URL is not set: decisions cannot be sent to the hub.")
        return found

    def receive(request: Request, params: dict[str, str]) -> Response:
        approval = approvals.parse_request(_json_object(request))
        inbox.receive(approval)
        return Response(200, {"ok": True, "approval_id": approval["approval_id"], "stored": True})

    def render(status: int, notice: str | None = None) -> Response:
        """The inbox after asking the hub about every request still pending here."""
        checks = approvals.refresh_from_hub(config, inbox, budget_seconds=config.hub_state_budget_seconds)
        return _html(
            status, pages.approvals_page(inbox.records(), notes=notes(), notice=notice, checks=checks)
        )

    def page(request: Request, params: dict[str, str]) -> Response:
        _query(request, frozenset())
        return render(200)

    def listing(request: Request, params: dict[str, str]) -> Response:
        _query(request, frozenset())
        records = inbox.records()
        return Response(200, {"ok": True, "count": len(records), "approvals": records})

    def decide(request: Request, params: dict[str, str]) -> Response:
        _query(request, frozenset())
        decision = "approved" if params["action"] == "approve" else "denied"
        approval_id = int(params["approval_id"])
        comment = approvals.parse_comment(_form(request, frozenset({"comment"})).get("comment"))
        if not config.client_token:
            raise DemoError(503, "approvals_not_configured", "DEMO_CLIENT_TOKEN is not set.")
        if not config.hub_url:
            raise DemoError(503, "hub_not_configured", "DEMO_HUB_URL is not set.")
        stored = inbox.begin_decision(approval_id, decision)
        outcome = approvals.DecisionOutcome(ok=False, hub_status=None, hub_error="internal_error")
        try:
            outcome = approvals.post_decision(config, stored, decision, comment)
        finally:  # even on an unexpected error, so the request does not stay "being sent" forever
            inbox.finish_decision(approval_id, decision, comment, outcome)
        if outcome.ok:
            return Response(303, b"", [("Location", "/approvals")], content_type="text/plain; charset=utf-8")
        check = None
        if outcome.hub_status == 409:
            # approval_conflict: the hub holds another decision (made in its console, most likely).
            # Say which, read from the hub, instead of guessing.
            check = approvals.fetch_state(config, stored, timeout=config.hub_state_timeout_seconds)
            if check.state is not None and inbox.settle_from_hub(approval_id, check.state):
                return render(409, pages.already_decided_notice(approval_id, decision, check.state))
        failure = next((r["last_failure"] for r in inbox.records() if r["approval_id"] == approval_id), None)
        return render(502, pages.failure_notice(approval_id, failure, check))

    approval_id = r"(?P<approval_id>[1-9][0-9]{0,15})"
    return [
        Route("POST", re.compile(r"/approvals"), "webhook", receive),
        Route("GET", re.compile(r"/approvals"), "local", page, html=True),
        Route("GET", re.compile(r"/approvals\.json"), "local", listing),
        Route(
            "POST",
            re.compile(rf"/approvals/{approval_id}/(?P<action>approve|deny)"),
            "local",
            decide,
            html=True,
            form=True,
        ),
    ]


# --- application -----------------------------------------------------------------------------------


def _routes(config: DemoConfig, store: DemoStore) -> list[Route]:
    served_spec = spec_bytes()

    def spec(request: Request) -> Response:
        # A signed-only catalog must not be replayable from a shared cache (contract).
        return Response(200, served_spec, [("Cache-Control", "private, no-store")])

    def records(request: Request) -> Response:
        _query(request, frozenset())
        return Response(200, {"ok": True, **store.records()})

    order_id = r"(?P<order_id>[^/]+)"
    return [
        Route("GET", re.compile(r"/health"), "public", health),
        Route("GET", re.compile(re.escape(SPEC_PATH)), "signed", spec),
        # The same signature and subject gates as every tool (see the module docstring).
        Route("POST", re.compile(re.escape(AUTHZ_PROBE_PATH)), "tool", authz_probe),
        # Reconciliation aid: what the shop actually recorded, for operators and tests.
        Route("GET", re.compile(r"/_demo/records"), "signed", records),
        Route("GET", re.compile(r"/orders"), "tool", list_orders),
        Route("GET", re.compile(rf"/orders/{order_id}"), "tool", get_order),
        Route("POST", re.compile(r"/tickets"), "tool", create_ticket),
        Route("POST", re.compile(rf"/orders/{order_id}/cancel"), "tool", cancel_order),
        Route("POST", re.compile(rf"/orders/{order_id}/refunds"), "tool", request_refund),
        Route("GET", re.compile(r"/diagnostics/failure"), "tool", demo_failure_probe, subject_required=False),
    ]


def _verify_webhook(config: DemoConfig, request: Request, now: float) -> None:
    if not config.client_token:
        raise DemoError(503, "approvals_not_configured", "This shop has no Client Token (DEMO_CLIENT_TOKEN).")
    verified = signing.verify_callback(
        secret=config.client_token,
        headers=request.headers,
        body=request.body,
        now_ms=int(now * 1000),
        tolerance_seconds=config.signature_tolerance_seconds,
    )
    if not verified:
        raise DemoError(
            401, "invalid_signature", "The request is not signed by the hub.", reason=verified.reason
        )


def _acting_user(subject: str, *, required: bool) -> str | None:
    if not subject:
        if required:
            raise DemoError(401, "subject_required", "This tool acts for a customer; none was signed.")
        return None
    if subject not in USERS:
        # Also what the hub's authorization probe (a synthetic nobody subject) must see.
        raise DemoError(403, "subject_not_allowed", "The acting subject is not a customer of this shop.")
    return subject


def make_app(
    config: DemoConfig,
    *,
    store: DemoStore | None = None,
    inbox: approvals.ApprovalInbox | None = None,
    clock: Callable[[], float] = time.time,
) -> WsgiApp:
    """Build the Demo Shop WSGI callable; ``store``, ``inbox`` and ``clock`` are injectable for
    in-process use."""
    store = store or DemoStore(max_idempotency_records=config.max_idempotency_records)
    inbox = inbox or approvals.ApprovalInbox(max_records=config.max_approval_records)
    routes = _routes(config, store) + _approval_routes(config, inbox)

    def run(route: Route, request: Request, params: dict[str, str]) -> Response:
        if route.access == "public":
            return route.handler(request)
        if route.access == "webhook":
            _verify_webhook(config, request, clock())
            return route.handler(request, params)
        if route.access == "local":
            _local_gate(request, route)
            return route.handler(request, params)
        verified = signing.verify_tool_request(
            secret=config.tool_secret,
            headers=request.headers,
            method=request.method,
            path_with_query=request.path_with_query,
            body=request.body,
            now=clock(),
            tolerance_seconds=config.signature_tolerance_seconds,
        )
        if not verified:
            raise DemoError(
                401, "invalid_signature", "The request is not signed by the hub.", reason=verified.reason
            )
        if route.access == "signed":
            return route.handler(request)
        traceparent = request.headers.get("traceparent", "")
        if traceparent:
            store.trace_received(
                path=request.path,
                job_id=request.headers.get(signing.JOB_ID_HEADER.lower(), ""),
                traceparent=traceparent,
                tracestate=request.headers.get("tracestate", ""),
            )
        user = _acting_user(verified.on_behalf_of, required=route.subject_required)
        return route.handler(ToolContext(request=request, user=user, params=params, store=store))

    def dispatch(request: Request) -> Response:
        allowed: list[str] = []
        for route in routes:
            match = route.pattern.fullmatch(request.path)
            if match is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            try:
                return run(route, request, match.groupdict())
            except DemoError as exc:
                if not route.html:
                    raise
                return _html(exc.status, pages.error_page(exc.status, exc.code, exc.message))
        if allowed:
            error = DemoError(405, "method_not_allowed", "This path does not accept that method.")
            return Response(405, error.body(), [("Allow", ", ".join(sorted(set(allowed))))])
        raise DemoError(404, "not_found", "No such endpoint.")

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            response = dispatch(_build_request(environ, config))
        except DemoError as exc:
            response = Response(exc.status, exc.body())
        except Exception:
            traceback.print_exc(file=sys.stderr)
            response = Response(500, {"error": "internal_error", "message": "Unexpected server error."})
        payload = (
            response.body
            if isinstance(response.body, bytes)
            else json.dumps(response.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        )
        headers = [
            ("Content-Type", response.content_type),
            ("Content-Length", str(len(payload))),
        ]
        if not any(name == "Cache-Control" for name, _ in response.headers):
            headers.append(("Cache-Control", "no-store"))
        start_response(
            f"{response.status} {_REASONS.get(response.status, '')}".rstrip(), headers + response.headers
        )
        return [payload]

    return app
