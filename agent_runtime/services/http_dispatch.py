"""One signed business request for a compiled tool, and what came of it (docs/protocol.md "Dispatch").

No database here: :func:`dispatch_request_build` turns a tool and its (already validated) arguments into
the exact bytes to send, :func:`dispatch_send` sends them and classifies the outcome. The request is
what BailingHub business systems expect:

* URL = provider ``base_url`` + the spec path with path parameters encoded like JavaScript's
  ``encodeURIComponent`` + the query parameters in argument order, each ``String(value)``, encoded like
  ``URLSearchParams``; the signature covers exactly this path and query.
* Body: for every method but GET and HEAD, ``JSON.stringify`` of the body-located arguments (``{}``
  when there are none), with the tool's JSON media type; GET and HEAD send no body. A null argument
  is sent nowhere (no path, query, header or body entry).
* Headers: ``X-Bailing-Timestamp`` (seconds) and ``X-Bailing-Signature`` over
  ``<ts>.<METHOD>.<path?query>.<sha256(body)>.<on-behalf-of>.<job id>``, ``X-Bailing-Job-Id``,
  ``X-Bailing-Client``, ``X-Bailing-Tool-Scope``, ``X-Bailing-On-Behalf-Of`` when there is a subject,
  ``X-Bailing-Idempotency-Key`` for every tool that is not read-only, and the declared header
  parameters.

A path whose arguments make a ``.`` or ``..`` segment is refused (``path_invalid``): the path sent
must be the path signed, and dot segments are removed on the way (:func:`has_dot_segment`).

Outcomes: a response with a status is *answered* (2xx executed, anything else business-rejected, its
text shaped by :func:`answer_text`); a connection that could not be opened, or a target the outbound
policy refuses (``target_forbidden``, docs/protocol.md "Outbound targets"), is *not sent*; anything
after the connection was opened that left no complete response (timeout, reset, a body cut short or
unreadable) is *unknown*, and is never sent again (docs/protocol.md "Unknown outcomes"). The call has
one absolute deadline — the tool's ``timeout_ms`` or the provider's — for connecting, sending, the
response headers and the body together; past it the outcome is unknown (``timeout``). Redirects are
not followed; proxies are never used.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from agent_runtime import budgets
from agent_runtime.invocation_results import result_text
from agent_runtime.tools.compiler import CompiledTool
from bailing.api.jsjson import js_string, js_stringify
from bailing.api.limits import cut_utf16, utf16_length
from bailing.outbound import TargetForbidden, outbound_client
from bailing.signing import (
    CLIENT_HEADER,
    IDEMPOTENCY_KEY_HEADER,
    TOOL_SCOPE_HEADER,
    is_sendable_header_value,
    sign_tool_request,
)

# A response body beyond this is not read further (the result text keeps 8,192 characters anyway).
RESPONSE_READ_MAX_BYTES = 1024 * 1024
_BODYLESS = frozenset({"GET", "HEAD"})
# ``encodeURIComponent`` leaves these unescaped besides letters and digits.
_URI_COMPONENT_SAFE = "-_.!~*'()"
# ``application/x-www-form-urlencoded`` (URLSearchParams) leaves these bytes as they are.
_FORM_SAFE = frozenset(b"*-._0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

OUTCOME_ANSWERED = "answered"
OUTCOME_NOT_SENT = "not_sent"
OUTCOME_UNKNOWN = "unknown"


class DispatchBuildError(Exception):
    """The arguments cannot be put on the wire (e.g. a header value with a line break): the call is
    refused before dispatch with this stable ``code``."""

    def __init__(self, code: str, field: str = ""):
        self.code = code
        self.field = field
        super().__init__(code)


@dataclass(frozen=True)
class DispatchRequest:
    method: str
    url: str
    path_with_query: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class DispatchOutcome:
    """``kind`` is answered / not_sent / unknown; ``error`` names why when not answered."""

    kind: str
    status: int | None = None
    text: str = ""
    error: str = ""
    duration_ms: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.kind == OUTCOME_ANSWERED and self.status is not None and 200 <= self.status < 300


def _form_encode(text: str) -> str:
    out = []
    for byte in text.encode("utf-8"):
        if byte in _FORM_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


ERROR_TEXT_MAX_CHARS = budgets.ERROR_TEXT_MAX_CHARS
_HTML_START = re.compile(r"^\s*(?:<!doctype\s+html|<html\b)", re.IGNORECASE)


def answer_text(status: int, body: str, content_type: str) -> str:
    """What the agent reads of an answer, as BailingHub shapes it: a 2xx body as it is (bounded); any
    other status as ``HTTP <status>: <at most 2,048 characters>``, with an HTML error page (a proxy's,
    a crashed server's) reduced to a one-line note so it never floods the agent's context."""
    if 200 <= status < 300:
        return result_text(body)
    if "text/html" in content_type.lower() or _HTML_START.match(body):
        length = utf16_length(body)
        return f"HTTP {status}: the business system answered an HTML error page ({length} characters)."
    error = cut_utf16(result_text(body), ERROR_TEXT_MAX_CHARS)[0]
    return f"HTTP {status}: {error}" if error else f"HTTP {status} with an empty body."


def has_dot_segment(path: str) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` segment (also written ``%2e``).

    ``encodeURIComponent`` leaves dots as they are, so a path argument ``..`` makes one; HTTP clients
    and servers remove dot segments (httpx does so when it parses the URL, after the hub signed it),
    and the call would reach another path than the one signed. Such a path is refused instead.
    """
    return any(segment.lower().replace("%2e", ".") in (".", "..") for segment in path.split("/"))


def dispatch_request_build(
    *,
    tool: CompiledTool,
    arguments: dict[str, Any],
    base_url: str,
    secret: str,
    job_id: str,
    client_app_id: str,
    on_behalf_of: str,
    idempotency_key: str | None,
    timestamp: int | None = None,
) -> DispatchRequest:
    """The exact request for ``tool`` with ``arguments`` (module docstring). Raises
    :class:`DispatchBuildError` for arguments that cannot be sent as they are."""
    path = tool.path
    query: list[str] = []
    body: dict[str, Any] = {}
    extra_headers: dict[str, str] = {}
    for name, value in arguments.items():
        if value is None:
            continue  # a null argument is sent nowhere, as BailingHub does
        location = tool.param_locations.get(name, "body")
        if location == "path":
            path = path.replace("{" + name + "}", quote(js_string(value), safe=_URI_COMPONENT_SAFE))
        elif location == "query":
            query.append(f"{_form_encode(name)}={_form_encode(js_string(value))}")
        elif location == "header":
            text = js_string(value)
            if not is_sendable_header_value(text):
                raise DispatchBuildError("header_value_invalid", name)
            extra_headers[name] = text
        else:
            body[name] = value
    path_with_query = path + ("?" + "&".join(query) if query else "")
    if not is_sendable_header_value(path_with_query) or has_dot_segment(path):
        raise DispatchBuildError("path_invalid")
    method = tool.method.upper()
    raw_body = b"" if method in _BODYLESS else js_stringify(body).encode("utf-8")
    headers = sign_tool_request(
        secret=secret,
        method=method,
        path_with_query=path_with_query,
        body=raw_body,
        on_behalf_of=on_behalf_of,
        job_id=job_id,
        timestamp=timestamp,
    )
    headers[CLIENT_HEADER] = client_app_id
    headers[TOOL_SCOPE_HEADER] = tool.scope
    if idempotency_key is not None:
        headers[IDEMPOTENCY_KEY_HEADER] = idempotency_key
    if raw_body:
        headers["Content-Type"] = (tool.request_body or {}).get("media_type") or "application/json"
    headers["Accept"] = "application/json"
    # Declared header parameters cannot override the hub's own headers (the compiler refuses
    # X-Bailing-* and connection headers as parameters).
    for name, value in extra_headers.items():
        headers.setdefault(name, value)
    return DispatchRequest(
        method=method,
        url=base_url.rstrip("/") + path_with_query,
        path_with_query=path_with_query,
        headers=headers,
        body=raw_body,
    )


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    try:
        # A JSON body is shown compact: the agent reads data, not the business system's whitespace.
        return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        return text


def dispatch_send(request: DispatchRequest, *, timeout_ms: int) -> DispatchOutcome:
    """Send ``request`` on a fresh connection within ``timeout_ms`` overall and classify the outcome.

    A fresh connection per call: a reused keep-alive connection that the server closed would fail
    after the request was written, making an unsent call look uncertain.
    """
    started = time.monotonic()

    def elapsed_ms() -> int:
        return int((time.monotonic() - started) * 1000)

    # The client gives the request one absolute deadline (connect, TLS, sending, headers and body
    # together; bailing.outbound): a business system that drips header lines or body bytes cannot
    # hold the call past it.
    with outbound_client(timeout=timeout_ms / 1000, keep_alive=False) as client:
        http_request = client.build_request(
            request.method, request.url, headers=request.headers, content=request.body or None
        )
        try:
            response = client.send(http_request, stream=True)
        except TargetForbidden:
            # Refused before any connection was opened: nothing was sent.
            return DispatchOutcome(OUTCOME_NOT_SENT, error="target_forbidden", duration_ms=elapsed_ms())
        except (httpx.ConnectError, httpx.ConnectTimeout):
            return DispatchOutcome(OUTCOME_NOT_SENT, error="business_unreachable", duration_ms=elapsed_ms())
        except httpx.TimeoutException:
            return DispatchOutcome(OUTCOME_UNKNOWN, error="timeout", duration_ms=elapsed_ms())
        except httpx.TransportError:
            return DispatchOutcome(OUTCOME_UNKNOWN, error="connection_lost", duration_ms=elapsed_ms())
        try:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size <= RESPONSE_READ_MAX_BYTES:
                    chunks.append(chunk)
                if size > RESPONSE_READ_MAX_BYTES:
                    break
        except httpx.TimeoutException:
            return DispatchOutcome(
                OUTCOME_UNKNOWN, status=response.status_code, error="timeout", duration_ms=elapsed_ms()
            )
        except httpx.HTTPError:
            return DispatchOutcome(
                OUTCOME_UNKNOWN,
                status=response.status_code,
                error="body_unreadable",
                duration_ms=elapsed_ms(),
            )
        finally:
            response.close()
    raw = b"".join(chunks)[:RESPONSE_READ_MAX_BYTES]
    return DispatchOutcome(
        OUTCOME_ANSWERED,
        status=response.status_code,
        text=answer_text(response.status_code, _decode(raw), response.headers.get("content-type", "")),
        duration_ms=elapsed_ms(),
        extra={"truncated": size > RESPONSE_READ_MAX_BYTES},
    )
