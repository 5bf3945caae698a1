"""HMAC signatures of BailingHub's business contract (docs/protocol.md "Signatures").

Two schemes, both ``sha256=`` + lowercase hex HMAC-SHA256 with the tool provider's (or callback's)
shared secret:

* Tool calls and spec fetches sign ``<ts>.<METHOD>.<path?query>.<sha256hex(body)>.<On-Behalf-Of>.<Job-Id>``
  with a timestamp in **seconds**. A spec fetch is a GET with an empty body, subject and job id; an
  absent header and an empty one sign the same (the empty string), so the signer omits empty headers.
* Callbacks sign ``<ts>.<raw body>`` with a timestamp in **milliseconds**.

Both accept a ±300 s clock skew (the contract's window). The path is the one the business receives
(the spec path plus the serialised query), never the hub's base URL prefix: the business must sit
behind a proxy that does not rewrite URIs.

This module is stdlib-only on purpose: the demo business system (a separate process without Django)
verifies with it too, and the frozen vectors in the tests pin it to the contract's "Tool Call
Signature" rules (docs/compatibility.md "Business contract").
Verification never reveals the expected signature; ``VerifyResult.reason`` names only which check
failed.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

SIGNATURE_HEADER = "X-Bailing-Signature"
TIMESTAMP_HEADER = "X-Bailing-Timestamp"
ON_BEHALF_OF_HEADER = "X-Bailing-On-Behalf-Of"
JOB_ID_HEADER = "X-Bailing-Job-Id"
# Sent with tool calls but not covered by the signature (the contract binds only the six parts above).
TOOL_SCOPE_HEADER = "X-Bailing-Tool-Scope"
IDEMPOTENCY_KEY_HEADER = "X-Bailing-Idempotency-Key"
CLIENT_HEADER = "X-Bailing-Client"

SIGNATURE_PREFIX = "sha256="
DEFAULT_TOLERANCE_SECONDS = 300

# Verification failure reasons (stable strings; callers may put them in logs or error extras).
REASON_MISSING_SIGNATURE = "missing_signature"
REASON_MISSING_TIMESTAMP = "missing_timestamp"
REASON_MALFORMED_SIGNATURE = "malformed_signature"
REASON_MALFORMED_TIMESTAMP = "malformed_timestamp"
REASON_TIMESTAMP_SKEW = "timestamp_skew"
REASON_SIGNATURE_MISMATCH = "signature_mismatch"

_SIGNATURE_RE = re.compile(r"sha256=[0-9a-f]{64}")
# Seconds fit in 11 digits until the year 5138 and milliseconds in 14; a bound keeps a hostile header
# from turning into a huge integer.
_SECONDS_RE = re.compile(r"[0-9]{1,11}")
_MILLISECONDS_RE = re.compile(r"[0-9]{1,14}")
# Header values travel as bytes and the receiver must rebuild the exact signed string, so subject and
# job id are limited to printable ASCII: no agreed encoding exists for anything else across stacks,
# and CR/LF would allow header injection.
_HEADER_VALUE_RE = re.compile(r"[\x20-\x7e]*")


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Outcome of a signature check, truthy only when it passed.

    Carries the signed subject and job id so a business handler authorises exactly what was signed,
    and a ``reason`` on failure that never includes the expected signature.
    """

    ok: bool
    reason: str | None = None
    timestamp: int | None = None
    on_behalf_of: str = ""
    job_id: str = ""

    def __bool__(self) -> bool:
        return self.ok


def _secret_bytes(secret: str | bytes) -> bytes:
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not secret:
        raise ValueError("signing secret must not be empty")
    return secret


def _body_bytes(body: bytes | str) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def _hmac_signature(secret: bytes, message: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(secret, message, hashlib.sha256).hexdigest()


def tool_request_message(
    *,
    timestamp: int | str,
    method: str,
    path_with_query: str,
    body: bytes | str,
    on_behalf_of: str,
    job_id: str,
) -> bytes:
    """The exact byte string a tool call or spec fetch signs."""
    body_hash = hashlib.sha256(_body_bytes(body)).hexdigest()
    return f"{timestamp}.{method.upper()}.{path_with_query}.{body_hash}.{on_behalf_of}.{job_id}".encode()


def is_sendable_header_value(value: object) -> bool:
    """Whether ``value`` can be sent and signed as ``X-Bailing-On-Behalf-Of`` or ``X-Bailing-Job-Id``.

    Printable ASCII only, and no space at either end: HTTP clients refuse to send such a value (h11,
    under httpx) and receivers strip it, so the receiver could never rebuild the signed string. The
    empty string is sendable: it goes out as no header at all. Whoever stores a subject that will be
    dispatched later (an agent session's ``on_behalf_of``) checks it with this, once, up front.
    """
    return (
        isinstance(value, str) and _HEADER_VALUE_RE.fullmatch(value) is not None and value == value.strip(" ")
    )


def _check_sendable(name: str, value: str) -> None:
    if not is_sendable_header_value(value):
        raise ValueError(f"{name} must be printable ASCII without spaces at either end")


def sign_tool_request(
    *,
    secret: str | bytes,
    method: str,
    path_with_query: str,
    body: bytes | str,
    on_behalf_of: str = "",
    job_id: str = "",
    timestamp: int | None = None,
) -> dict[str, str]:
    """Headers that sign one outbound tool call (or, with empty body/subject/job, a spec fetch).

    Empty subject and job id headers are left out: the receiver reads an absent header as the empty
    string, which is what was signed, and some HTTP stacks drop empty header values anyway.
    """
    if not path_with_query.startswith("/"):
        raise ValueError("path_with_query must start with '/'")
    _check_sendable("path_with_query", path_with_query)
    _check_sendable("on_behalf_of", on_behalf_of)
    _check_sendable("job_id", job_id)
    ts = int(time.time()) if timestamp is None else int(timestamp)
    message = tool_request_message(
        timestamp=ts,
        method=method,
        path_with_query=path_with_query,
        body=body,
        on_behalf_of=on_behalf_of,
        job_id=job_id,
    )
    headers = {
        SIGNATURE_HEADER: _hmac_signature(_secret_bytes(secret), message),
        TIMESTAMP_HEADER: str(ts),
    }
    if on_behalf_of:
        headers[ON_BEHALF_OF_HEADER] = on_behalf_of
    if job_id:
        headers[JOB_ID_HEADER] = job_id
    return headers


def sign_spec_fetch(
    *, secret: str | bytes, path_with_query: str, timestamp: int | None = None
) -> dict[str, str]:
    """Headers for a signed ``GET`` of a provider's tool catalog (no body, subject or job)."""
    return sign_tool_request(
        secret=secret, method="GET", path_with_query=path_with_query, body=b"", timestamp=timestamp
    )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # HTTP header names are case-insensitive; plain dicts from tests or WSGI adapters are not.
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def _compare(expected: str, presented: str) -> bool:
    # Both are ASCII by the time this runs (the presented value matched _SIGNATURE_RE).
    return hmac.compare_digest(expected.encode("ascii"), presented.encode("ascii"))


def _verify(
    *,
    secret: str | bytes,
    headers: Mapping[str, str],
    timestamp_re: re.Pattern[str],
    units_per_second: int,
    now: float,
    tolerance_seconds: int,
    message: Callable[[str], bytes],
) -> VerifyResult:
    """The one verification ladder of both schemes: presence, shape, clock skew (in the scheme's
    unit), then one constant-time comparison. ``message(raw_timestamp)`` rebuilds the signed bytes."""
    signature = _header(headers, SIGNATURE_HEADER)
    raw_ts = _header(headers, TIMESTAMP_HEADER)
    if not signature:
        return VerifyResult(ok=False, reason=REASON_MISSING_SIGNATURE)
    if not raw_ts:
        return VerifyResult(ok=False, reason=REASON_MISSING_TIMESTAMP)
    if not _SIGNATURE_RE.fullmatch(signature):
        return VerifyResult(ok=False, reason=REASON_MALFORMED_SIGNATURE)
    if not timestamp_re.fullmatch(raw_ts):
        return VerifyResult(ok=False, reason=REASON_MALFORMED_TIMESTAMP)
    ts = int(raw_ts)
    if abs(now - ts) > tolerance_seconds * units_per_second:
        return VerifyResult(ok=False, reason=REASON_TIMESTAMP_SKEW, timestamp=ts)
    expected = _hmac_signature(_secret_bytes(secret), message(raw_ts))
    if not _compare(expected, signature):
        return VerifyResult(ok=False, reason=REASON_SIGNATURE_MISMATCH, timestamp=ts)
    return VerifyResult(ok=True, timestamp=ts)


def verify_tool_request(
    *,
    secret: str | bytes,
    headers: Mapping[str, str],
    method: str,
    path_with_query: str,
    body: bytes | str,
    now: float | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> VerifyResult:
    """Check an inbound tool call or spec fetch against the shared secret (seconds clock).

    The subject and job id come from the headers as received (absent = empty), exactly as the
    signer bound them, and are returned on success so a handler authorises exactly what was signed.
    """
    on_behalf_of = _header(headers, ON_BEHALF_OF_HEADER) or ""
    job_id = _header(headers, JOB_ID_HEADER) or ""
    result = _verify(
        secret=secret,
        headers=headers,
        timestamp_re=_SECONDS_RE,
        units_per_second=1,
        now=time.time() if now is None else now,
        tolerance_seconds=tolerance_seconds,
        message=lambda raw_ts: tool_request_message(
            timestamp=raw_ts,
            method=method,
            path_with_query=path_with_query,
            body=body,
            on_behalf_of=on_behalf_of,
            job_id=job_id,
        ),
    )
    if not result.ok:
        return result
    return VerifyResult(ok=True, timestamp=result.timestamp, on_behalf_of=on_behalf_of, job_id=job_id)


def callback_message(*, timestamp_ms: int | str, body: bytes | str) -> bytes:
    """The exact byte string a callback signs: the raw body, byte for byte, after the timestamp."""
    return f"{timestamp_ms}.".encode("ascii") + _body_bytes(body)


def sign_callback(
    *, secret: str | bytes, body: bytes | str, timestamp_ms: int | None = None
) -> dict[str, str]:
    """Headers that sign an outbound callback or webhook body (millisecond timestamp)."""
    ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
    return {
        SIGNATURE_HEADER: _hmac_signature(
            _secret_bytes(secret), callback_message(timestamp_ms=ts, body=body)
        ),
        TIMESTAMP_HEADER: str(ts),
    }


def verify_callback(
    *,
    secret: str | bytes,
    headers: Mapping[str, str],
    body: bytes | str,
    now_ms: int | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> VerifyResult:
    """Check an inbound callback; same rules as tool requests with a millisecond clock."""
    return _verify(
        secret=secret,
        headers=headers,
        timestamp_re=_MILLISECONDS_RE,
        units_per_second=1000,
        now=int(time.time() * 1000) if now_ms is None else now_ms,
        tolerance_seconds=tolerance_seconds,
        message=lambda raw_ts: callback_message(timestamp_ms=raw_ts, body=body),
    )
