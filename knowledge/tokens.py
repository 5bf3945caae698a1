"""Opaque knowledge references and read cursors (docs/protocol.md "References and cursors").

Format: ``v1.<payload>.<mac>``, both parts base64url without padding. The payload is the compact
JSON of the claims; the MAC is HMAC-SHA256 over ``v1.<payload>`` with a key derived from the
current ``SECRET_KEY`` and the token kind::

    key(kind) = HMAC-SHA256(SECRET_KEY, "bailing.agent-knowledge.v1" NUL kind),  kind ∈ {ref, cursor}

so a reference never verifies as a cursor (or vice versa), and nothing else signed with
``SECRET_KEY`` verifies as either. ``SECRET_KEY_FALLBACKS`` are deliberately ignored: after a key
rotation every outstanding token is invalid (400) and the agent searches again — no migration and
no new configuration, as the spec asks. Any process sharing the key validates any token.

The payload is readable by whoever holds the token: it is opaque (agents must not parse it or rely
on its layout) but not secret. It carries no body, credential or clear-text identity.

Reference claims (kept short because three references must fit in a 4096-byte search response)::

    b  identity binding: base64url SHA-256 of client, session, principal, workspace and run
       (:func:`identity_binding`)
    s  knowledge scope revision        \\  the caller's 64-hex SHA-256 digests, carried as base64url
    r  document revision (title/body)  /   of the 32 bytes (43 instead of 64 characters)
    d  document id
    e  expiry, epoch seconds: issue time (whole seconds) + 300

Cursor claims::

    f  base64url SHA-256 of the exact reference string the cursor continues
    o  next content offset (UTF-8 bytes)
    n  content bytes served so far in this reading chain
    e  the expiry of that reference

A cursor names its reference instead of repeating the reference's claims: the read request always
carries the reference too, which is opened and checked first, so identity, scope, document and
revision have a single source of truth. A cursor lives exactly as long as its reference (the
five-minute TTL runs from the search), so continuing a chain never extends a reference's life.

Opening (:func:`reference_open`, :func:`cursor_open`) checks, in this order: length (over
``MAX_TOKEN_CHARS`` is rejected before any hashing), shape, version, MAC (constant time), claim
types, for cursors the reference digest, and only then expiry. Everything before expiry fails with
``knowledge_reference_invalid`` (400), so an expired *forgery* is still a 400; an authentic token
past its expiry is ``knowledge_reference_expired`` (410). The caller then compares the claims with
the current state via :func:`reference_check_access` (binding ⇒ 400, then scope ⇒ 409
``knowledge_scope_changed``) and, once it has loaded the document, :func:`reference_check_revision`
(⇒ 409 ``knowledge_changed``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from bailing.api.hashing import canonical_json
from knowledge.errors import (
    KnowledgeChanged,
    KnowledgeReferenceExpired,
    KnowledgeReferenceInvalid,
    KnowledgeScopeChanged,
)

REFERENCE_TTL_SECONDS = 300
# Real tokens are ~300 characters; the bound keeps hostile input from costing a hash or a decode.
MAX_TOKEN_CHARS = 2048
TOKEN_VERSION = "v1"

_DOMAIN = b"bailing.agent-knowledge.v1"
_KIND_REF = "ref"
_KIND_CURSOR = "cursor"
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]+")
_DIGEST_B64_RE = re.compile(r"[A-Za-z0-9_-]{43}")  # base64url of 32 bytes, unpadded
_HEX64_RE = re.compile(r"[0-9a-f]{64}")
# Claims are JSON numbers that JavaScript must read exactly; ids are PostgreSQL bigints.
_MAX_CLAIM_INT = 2**53 - 1
_REF_CLAIMS = frozenset("bsdre")
_CURSOR_CLAIMS = frozenset("fone")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A freshly signed token and the instant it stops being accepted (the hint's ``expires_at``)."""

    token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class RefClaims:
    """The authentic claims of a reference; still to be compared with the current state."""

    binding: str
    scope_revision: str
    document_id: int
    revision: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class CursorClaims:
    """Where the next page of a reading chain starts and how much of the chain is spent."""

    offset: int
    served: int
    expires_at: datetime


# --------------------------------------------------------------------------------------------------
# Issuing
# --------------------------------------------------------------------------------------------------


def identity_binding(
    *,
    client_id: int | str,
    session_id: UUID | str,
    principal: Any,
    route_key: str,
    run_id: UUID | str | None,
) -> str:
    """Digest of everything a reference is bound to besides scope and document (see docs/protocol.md
    "References and cursors").

    ``principal`` is the session's principal / on-behalf-of value (any JSON value). UUIDs are taken
    as their canonical strings, so a UUID object and its string bind the same. A search and the
    reads that follow must compute it from the same sources.
    """
    material = canonical_json(
        {
            "client": client_id,
            "principal": principal,
            "route": route_key,
            "run": None if run_id is None else str(run_id),
            "session": str(session_id),
        }
    )
    return _b64encode(hashlib.sha256(_DOMAIN + b"\0binding\0" + material).digest())


def reference_issue(
    *,
    binding: str,
    scope_revision: str,
    document_id: int,
    revision: str,
    now: datetime | None = None,
) -> IssuedToken:
    """Sign a reference to one document revision, valid for ``REFERENCE_TTL_SECONDS``.

    Arguments come from the server, never from the agent: a malformed one is a programming error
    (``ValueError``), not a client error.
    """
    if not (isinstance(binding, str) and _DIGEST_B64_RE.fullmatch(binding)):
        raise ValueError("binding must come from identity_binding()")
    _require_positive_int(document_id, "document_id")
    expires = math.floor(_now(now).timestamp()) + REFERENCE_TTL_SECONDS
    claims = {
        "b": binding,
        "s": _hex_to_b64(scope_revision, "scope_revision"),
        "d": document_id,
        "r": _hex_to_b64(revision, "revision"),
        "e": expires,
    }
    return IssuedToken(token=_sign(_KIND_REF, claims), expires_at=_from_epoch(expires))


def cursor_issue(*, ref: str, ref_claims: RefClaims, offset: int, served: int) -> IssuedToken:
    """Sign the cursor to the next page of ``ref`` (whose opened claims are ``ref_claims``).

    The cursor expires with its reference.
    """
    if not (_is_claim_int(offset, minimum=0) and _is_claim_int(served, minimum=0)):
        raise ValueError("offset and served must be non-negative integers")
    expires = _to_epoch(ref_claims.expires_at)
    claims = {"f": _ref_digest(ref), "o": offset, "n": served, "e": expires}
    return IssuedToken(token=_sign(_KIND_CURSOR, claims), expires_at=_from_epoch(expires))


# --------------------------------------------------------------------------------------------------
# Opening and checking
# --------------------------------------------------------------------------------------------------


def reference_open(token: Any, *, now: datetime | None = None) -> RefClaims:
    """Verify a reference and return its claims; raises ``KnowledgeReferenceInvalid`` or
    ``KnowledgeReferenceExpired`` (see the module docstring for the order of checks)."""
    claims = _verify(token, _KIND_REF, _REF_CLAIMS)
    binding, scope, doc_id, revision, expires = (claims[k] for k in "bsdre")
    if not (
        _is_digest_b64(binding)
        and _is_digest_b64(scope)
        and _is_digest_b64(revision)
        and _is_claim_int(doc_id, minimum=1)
        and _is_claim_int(expires, minimum=0)
    ):
        raise KnowledgeReferenceInvalid()
    _check_expiry(expires, now)
    return RefClaims(
        binding=binding,
        scope_revision=_b64_to_hex(scope),
        document_id=doc_id,
        revision=_b64_to_hex(revision),
        expires_at=_from_epoch(expires),
    )


def cursor_open(token: Any, *, ref: str, now: datetime | None = None) -> CursorClaims:
    """Verify a cursor that must continue exactly the reference string ``ref``.

    Open ``ref`` with :func:`reference_open` first: a cursor proves only where its chain stands,
    not that the reference is still acceptable.
    """
    claims = _verify(token, _KIND_CURSOR, _CURSOR_CLAIMS)
    ref_digest, offset, served, expires = (claims[k] for k in "fone")
    if not (
        _is_digest_b64(ref_digest)
        and _is_claim_int(offset, minimum=0)
        and _is_claim_int(served, minimum=0)
        and _is_claim_int(expires, minimum=0)
    ):
        raise KnowledgeReferenceInvalid()
    if not hmac.compare_digest(ref_digest.encode("ascii"), _ref_digest(ref).encode("ascii")):
        raise KnowledgeReferenceInvalid()
    _check_expiry(expires, now)
    return CursorClaims(offset=offset, served=served, expires_at=_from_epoch(expires))


def reference_check_access(claims: RefClaims, *, binding: str, scope_revision: str) -> None:
    """Compare a reference with the caller's current identity, then with the current scope.

    Identity comes first: a reference of another client, session, principal, workspace or run is
    ``knowledge_reference_invalid`` (400) whatever else changed, so it cannot be used to learn
    whether someone else's scope moved. Run this before loading the document.
    """
    if not _same(claims.binding, binding):
        raise KnowledgeReferenceInvalid()
    if not _same(claims.scope_revision, scope_revision):
        raise KnowledgeScopeChanged()


def reference_check_revision(claims: RefClaims, *, revision: str | None) -> None:
    """Compare a reference with the document's current revision (``None``: gone or not ready).

    A changed document is never served in place of the revision the reference names.
    """
    if revision is None or not _same(claims.revision, revision):
        raise KnowledgeChanged()


# --------------------------------------------------------------------------------------------------
# Internals
# --------------------------------------------------------------------------------------------------


def _key(kind: Literal["ref", "cursor"]) -> bytes:
    # Derived on every call (one HMAC) so override_settings and rotation take effect immediately.
    secret = settings.SECRET_KEY.encode("utf-8")
    return hmac.new(secret, _DOMAIN + b"\0" + kind.encode("ascii"), hashlib.sha256).digest()


def _mac(kind: Literal["ref", "cursor"], signed: str) -> str:
    return _b64encode(hmac.new(_key(kind), signed.encode("ascii"), hashlib.sha256).digest())


def _sign(kind: Literal["ref", "cursor"], claims: dict[str, Any]) -> str:
    signed = f"{TOKEN_VERSION}.{_b64encode(canonical_json(claims))}"
    return f"{signed}.{_mac(kind, signed)}"


def _verify(token: Any, kind: Literal["ref", "cursor"], expected_claims: frozenset[str]) -> dict[str, Any]:
    """Length, shape, version and MAC, then decode; returns the claims with exactly the expected keys."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise KnowledgeReferenceInvalid()
    parts = token.split(".")
    if len(parts) != 3 or not _B64URL_RE.fullmatch(parts[1]) or not _DIGEST_B64_RE.fullmatch(parts[2]):
        raise KnowledgeReferenceInvalid()
    if parts[0] != TOKEN_VERSION:
        raise KnowledgeReferenceInvalid()
    signed = f"{parts[0]}.{parts[1]}"
    # Comparing the encoded MACs (not decoded bytes) also rejects alternative encodings of one MAC.
    if not hmac.compare_digest(_mac(kind, signed).encode("ascii"), parts[2].encode("ascii")):
        raise KnowledgeReferenceInvalid()
    try:
        claims = json.loads(_b64decode(parts[1]).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise KnowledgeReferenceInvalid() from exc
    if not isinstance(claims, dict) or claims.keys() != expected_claims:
        raise KnowledgeReferenceInvalid()
    return claims


def _check_expiry(expires: int, now: datetime | None) -> None:
    # Valid for [issued, issued + TTL): at exactly the expiry second the token is already expired.
    if _now(now).timestamp() >= expires:
        raise KnowledgeReferenceExpired()


def _ref_digest(ref: str) -> str:
    return _b64encode(hashlib.sha256(ref.encode("utf-8", "surrogatepass")).digest())


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def _is_digest_b64(value: Any) -> bool:
    return isinstance(value, str) and _DIGEST_B64_RE.fullmatch(value) is not None


def _is_claim_int(value: Any, *, minimum: int) -> bool:
    return type(value) is int and minimum <= value <= _MAX_CLAIM_INT


def _require_positive_int(value: Any, name: str) -> None:
    if not _is_claim_int(value, minimum=1):
        raise ValueError(f"{name} must be a positive integer")


def _hex_to_b64(value: Any, name: str) -> str:
    if not (isinstance(value, str) and _HEX64_RE.fullmatch(value)):
        raise ValueError(f"{name} must be 64 lowercase hex characters")
    return _b64encode(bytes.fromhex(value))


def _b64_to_hex(value: str) -> str:
    return _b64decode(value).hex()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _now(now: datetime | None) -> datetime:
    return timezone.now() if now is None else now


def _to_epoch(value: datetime) -> int:
    return math.floor(value.timestamp())


def _from_epoch(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)
