"""Knowledge references and cursors: signing, opening, binding checks.

The rules: docs/protocol.md "References and cursors".
"""

import base64
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from bailing.api.errors import ApiError
from knowledge.errors import (
    KnowledgeChanged,
    KnowledgeReferenceExpired,
    KnowledgeReferenceInvalid,
    KnowledgeScopeChanged,
)
from knowledge.tokens import (
    MAX_TOKEN_CHARS,
    REFERENCE_TTL_SECONDS,
    cursor_issue,
    cursor_open,
    identity_binding,
    reference_check_access,
    reference_check_revision,
    reference_issue,
    reference_open,
)

T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
SCOPE = "a" * 64
REVISION = "0123456789abcdef" * 4
SESSION = uuid.UUID("6f1c2f49-3a3e-4b4e-9a55-3d3a7f0a6c11")
RUN = uuid.UUID("0b8f0c7e-52a8-4d51-8c3b-1f0a3cfb2d90")


def _binding(**changes):
    values = {
        "client_id": 7,
        "session_id": SESSION,
        "principal": {"sub": "u-1", "tenant": "t"},
        "route_key": "support",
        "run_id": RUN,
    }
    values.update(changes)
    return identity_binding(**values)


def _ref(now=T0, **changes):
    values = {"binding": _binding(), "scope_revision": SCOPE, "document_id": 42, "revision": REVISION}
    values.update(changes)
    return reference_issue(now=now, **values)


def _code(excinfo):
    assert isinstance(excinfo.value, ApiError)
    return excinfo.value.code, excinfo.value.http_status


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --------------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------------


def test_reference_round_trip_returns_the_claims_and_expiry():
    issued = _ref()
    assert issued.expires_at == T0 + timedelta(seconds=REFERENCE_TTL_SECONDS)
    claims = reference_open(issued.token, now=T0)
    assert claims.binding == _binding()
    assert claims.scope_revision == SCOPE
    assert claims.document_id == 42
    assert claims.revision == REVISION
    assert claims.expires_at == issued.expires_at


def test_reference_format_is_versioned_unpadded_base64url():
    token = _ref().token
    version, payload, mac = token.split(".")
    assert version == "v1"
    assert len(mac) == 43
    assert "=" not in token
    claims = json.loads(_unb64(payload))
    assert set(claims) == {"b", "s", "d", "r", "e"}
    assert claims["e"] == int((T0 + timedelta(seconds=REFERENCE_TTL_SECONDS)).timestamp())


def test_three_references_stay_compact():
    # Three of them must fit in a 4096-byte search response with titles and summaries.
    token = _ref(document_id=2**53 - 1).token
    assert len(token) <= 300


def test_sub_second_issue_time_never_extends_the_lifetime():
    issued = _ref(now=T0 + timedelta(microseconds=999_999))
    assert issued.expires_at == T0 + timedelta(seconds=REFERENCE_TTL_SECONDS)


def test_cursor_round_trip_and_expiry_of_its_reference():
    ref = _ref()
    ref_claims = reference_open(ref.token, now=T0)
    cursor = cursor_issue(ref=ref.token, ref_claims=ref_claims, offset=16000, served=16000)
    assert cursor.expires_at == ref.expires_at
    claims = cursor_open(cursor.token, ref=ref.token, now=T0 + timedelta(seconds=10))
    assert (claims.offset, claims.served, claims.expires_at) == (16000, 16000, ref.expires_at)


def test_tokens_verify_in_any_process_sharing_the_key():
    ref = _ref()
    with override_settings(SECRET_KEY="x" * 60):
        other = _ref()
    with override_settings(SECRET_KEY="x" * 60):
        assert reference_open(other.token, now=T0).document_id == 42
    assert other.token != ref.token


# --------------------------------------------------------------------------------------------------
# Rejections (400 knowledge_reference_invalid)
# --------------------------------------------------------------------------------------------------

INVALID = ("knowledge_reference_invalid", 400)


def _assert_invalid_ref(token, now=T0):
    with pytest.raises(KnowledgeReferenceInvalid) as excinfo:
        reference_open(token, now=now)
    assert _code(excinfo) == INVALID


@pytest.mark.parametrize("part", [0, 1, 2])
def test_tampering_with_any_part_is_invalid(part):
    token = _ref().token
    pieces = token.split(".")
    for position in (0, len(pieces[part]) // 2, len(pieces[part]) - 1):
        original = pieces[part][position]
        replacement = "A" if original != "A" else "B"
        changed = list(pieces)
        changed[part] = pieces[part][:position] + replacement + pieces[part][position + 1 :]
        _assert_invalid_ref(".".join(changed))


def test_re_signed_payload_with_other_claims_is_invalid():
    version, payload, mac = _ref().token.split(".")
    claims = json.loads(_unb64(payload))
    claims["d"] = 43
    forged = _b64(json.dumps(claims, separators=(",", ":")).encode())
    _assert_invalid_ref(f"{version}.{forged}.{mac}")


def test_reference_and_cursor_kinds_are_not_interchangeable():
    ref = _ref()
    cursor = cursor_issue(ref=ref.token, ref_claims=reference_open(ref.token, now=T0), offset=1, served=1)
    _assert_invalid_ref(cursor.token)
    with pytest.raises(KnowledgeReferenceInvalid) as excinfo:
        cursor_open(ref.token, ref=ref.token, now=T0)
    assert _code(excinfo) == INVALID


def test_rotated_secret_key_invalidates_outstanding_tokens():
    ref = _ref()
    cursor = cursor_issue(ref=ref.token, ref_claims=reference_open(ref.token, now=T0), offset=1, served=1)
    with override_settings(SECRET_KEY="rotated-" * 8, SECRET_KEY_FALLBACKS=[]):
        _assert_invalid_ref(ref.token)
        with pytest.raises(KnowledgeReferenceInvalid):
            cursor_open(cursor.token, ref=ref.token, now=T0)


def test_old_key_in_fallbacks_is_still_not_accepted():
    from django.conf import settings

    ref = _ref()
    with override_settings(SECRET_KEY="rotated-" * 8, SECRET_KEY_FALLBACKS=[settings.SECRET_KEY]):
        _assert_invalid_ref(ref.token)


def test_cursor_of_another_reference_is_invalid():
    ref = _ref()
    other = _ref(document_id=43)
    cursor = cursor_issue(ref=ref.token, ref_claims=reference_open(ref.token, now=T0), offset=5, served=5)
    with pytest.raises(KnowledgeReferenceInvalid) as excinfo:
        cursor_open(cursor.token, ref=other.token, now=T0)
    assert _code(excinfo) == INVALID
    # Even a reference to the same document issued a second later is another reference.
    later = _ref(now=T0 + timedelta(seconds=1))
    with pytest.raises(KnowledgeReferenceInvalid):
        cursor_open(cursor.token, ref=later.token, now=T0)


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        42,
        b"v1.abc.def",
        "",
        "v1",
        "v1..",
        "v1.abc",
        "v1.abc.def.ghi",
        "v2.eyJhIjoxfQ." + "A" * 43,
        "V1.eyJhIjoxfQ." + "A" * 43,
        "v1.eyJhIjoxfQ." + "A" * 42,
        "v1.eyJhIjoxfQ=." + "A" * 43,
        "v1.eyJhIjoxfQ." + "A" * 43 + "\n",
        "v1.参考.文献",
        "v1.eyJhIjoxfQ." + "Ａ" * 43,
        "v1.😀😀." + "A" * 43,
        "\ud800.v1.x",
        " v1.eyJhIjoxfQ." + "A" * 43,
    ],
)
def test_malformed_and_non_ascii_tokens_are_invalid(garbage):
    _assert_invalid_ref(garbage)
    with pytest.raises(KnowledgeReferenceInvalid):
        cursor_open(garbage, ref=_ref().token, now=T0)


def test_overlong_token_is_rejected_before_hashing(monkeypatch):
    import knowledge.tokens as tokens

    def no_mac(*args, **kwargs):
        raise AssertionError("hashed an overlong token")

    monkeypatch.setattr(tokens, "_mac", no_mac)
    overlong = "v1." + "A" * (MAX_TOKEN_CHARS - 3 - 44 + 1) + "." + "A" * 43  # well-shaped
    assert len(overlong) == MAX_TOKEN_CHARS + 1
    _assert_invalid_ref(overlong)
    with pytest.raises(KnowledgeReferenceInvalid):
        cursor_open("v1." + "A" * 5000 + "." + "A" * 43, ref="x", now=T0)


def test_token_at_the_length_bound_is_still_verified():
    # Exactly MAX_TOKEN_CHARS is accepted for verification (and fails only on its MAC here).
    token = "v1." + "A" * (MAX_TOKEN_CHARS - 3 - 44) + "." + "A" * 43
    assert len(token) == MAX_TOKEN_CHARS
    _assert_invalid_ref(token)


@pytest.mark.parametrize(
    "claims",
    [
        {"b": "x", "s": "A" * 43, "d": 1, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": "1", "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": True, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 0, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 1.5, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 1, "r": "A" * 43, "e": "9999999999"},
        {"b": "A" * 43, "s": "A" * 64, "d": 1, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 1, "r": None, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 2**60, "r": "A" * 43, "e": 9_999_999_999},
        {"b": "A" * 43, "s": "A" * 43, "d": 1, "r": "A" * 43},
        {"b": "A" * 43, "s": "A" * 43, "d": 1, "r": "A" * 43, "e": 9_999_999_999, "x": 1},
        ["b", "s", "d", "r", "e"],
    ],
)
def test_authentic_tokens_with_wrong_claim_types_are_invalid(claims):
    # Correctly signed (as a bug elsewhere might sign them) yet rejected, never a 500.
    _assert_invalid_ref(_hand_signed(claims))


def test_hand_signed_well_typed_claims_are_accepted():
    # The positive control for the test above: the same signing helper with correct types.
    claims = {"b": "A" * 43, "s": "A" * 43, "d": 2**53 - 1, "r": "_" * 43, "e": 9_999_999_999}
    opened = reference_open(_hand_signed(claims), now=T0)
    assert opened.document_id == 2**53 - 1
    assert opened.scope_revision == "0" * 64
    assert opened.revision.startswith("ffff")


def _hand_signed(claims, kind="ref"):
    from knowledge import tokens

    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signed = f"v1.{payload}"
    return f"{signed}.{tokens._mac(kind, signed)}"


def test_signing_keys_are_separated_by_kind():
    # Well-formed claims of each kind, MAC'd with the other kind's key, are rejected: the claim
    # sets differ too, but the keys alone already keep the kinds apart.
    ref = _ref()
    cursor_claims = {"f": _digest_of(ref.token), "o": 1, "n": 1, "e": 9_999_999_999}
    assert cursor_open(_hand_signed(cursor_claims, "cursor"), ref=ref.token, now=T0).offset == 1
    with pytest.raises(KnowledgeReferenceInvalid):
        cursor_open(_hand_signed(cursor_claims, "ref"), ref=ref.token, now=T0)
    ref_claims = {"b": "A" * 43, "s": "A" * 43, "d": 1, "r": "A" * 43, "e": 9_999_999_999}
    assert reference_open(_hand_signed(ref_claims, "ref"), now=T0).document_id == 1
    _assert_invalid_ref(_hand_signed(ref_claims, "cursor"))


def _digest_of(ref_token):
    return _b64(hashlib.sha256(ref_token.encode()).digest())


def test_authentic_token_with_undecodable_payload_is_invalid():
    from knowledge import tokens

    for payload in (_b64(b"\xff\xfe"), _b64(b"not json"), "A"):
        signed = f"v1.{payload}"
        _assert_invalid_ref(f"{signed}.{tokens._mac('ref', signed)}")


# --------------------------------------------------------------------------------------------------
# Expiry (410 knowledge_reference_expired)
# --------------------------------------------------------------------------------------------------


def test_expiry_boundary_is_exactly_the_ttl():
    ref = _ref()
    just_before = T0 + timedelta(seconds=REFERENCE_TTL_SECONDS) - timedelta(microseconds=1)
    assert reference_open(ref.token, now=just_before).document_id == 42
    for late in (T0 + timedelta(seconds=REFERENCE_TTL_SECONDS), T0 + timedelta(days=1)):
        with pytest.raises(KnowledgeReferenceExpired) as excinfo:
            reference_open(ref.token, now=late)
        assert _code(excinfo) == ("knowledge_reference_expired", 410)


def test_cursor_expires_with_its_reference():
    ref = _ref()
    ref_claims = reference_open(ref.token, now=T0 + timedelta(seconds=299))
    cursor = cursor_issue(ref=ref.token, ref_claims=ref_claims, offset=1, served=1)
    with pytest.raises(KnowledgeReferenceExpired):
        cursor_open(cursor.token, ref=ref.token, now=T0 + timedelta(seconds=REFERENCE_TTL_SECONDS))


def test_expired_forgery_is_invalid_not_expired():
    version, payload, _mac = _ref().token.split(".")
    _assert_invalid_ref(f"{version}.{payload}.{'A' * 43}", now=T0 + timedelta(days=1))


def test_expired_cursor_of_another_reference_is_invalid_not_expired():
    ref = _ref()
    cursor = cursor_issue(ref=ref.token, ref_claims=reference_open(ref.token, now=T0), offset=1, served=1)
    with pytest.raises(KnowledgeReferenceInvalid):
        cursor_open(cursor.token, ref=_ref(document_id=9).token, now=T0 + timedelta(days=1))


def test_default_clock_is_now():
    issued = reference_issue(binding=_binding(), scope_revision=SCOPE, document_id=1, revision=REVISION)
    assert reference_open(issued.token).document_id == 1
    with pytest.raises(KnowledgeReferenceExpired):
        reference_open(_ref(now=T0 - timedelta(days=365 * 10)).token)


# --------------------------------------------------------------------------------------------------
# Binding, scope and revision checks
# --------------------------------------------------------------------------------------------------


def test_identity_binding_covers_every_identity_part():
    base = _binding()
    assert len(base) == 43
    assert _binding(session_id=str(SESSION)) == base  # a UUID and its string bind the same
    variants = [
        _binding(client_id=8),
        _binding(client_id="7"),
        _binding(session_id=uuid.uuid4()),
        _binding(principal={"sub": "u-2", "tenant": "t"}),
        _binding(principal="u-1"),
        _binding(route_key="sales"),
        _binding(run_id=None),
        _binding(run_id=uuid.uuid4()),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_access_check_order_is_binding_then_scope():
    claims = reference_open(_ref().token, now=T0)
    reference_check_access(claims, binding=_binding(), scope_revision=SCOPE)
    # Another identity is a 400 even when the scope changed too.
    for other in (_binding(run_id=None), _binding(client_id=8), _binding(principal="someone-else")):
        with pytest.raises(KnowledgeReferenceInvalid) as excinfo:
            reference_check_access(claims, binding=other, scope_revision="b" * 64)
        assert _code(excinfo) == INVALID
    with pytest.raises(KnowledgeScopeChanged) as excinfo:
        reference_check_access(claims, binding=_binding(), scope_revision="b" * 64)
    assert _code(excinfo) == ("knowledge_scope_changed", 409)


def test_revision_check():
    claims = reference_open(_ref().token, now=T0)
    reference_check_revision(claims, revision=REVISION)
    for current in ("f" * 64, None):
        with pytest.raises(KnowledgeChanged) as excinfo:
            reference_check_revision(claims, revision=current)
        assert _code(excinfo) == ("knowledge_changed", 409)


@pytest.mark.parametrize(
    "changes",
    [
        {"binding": "short"},
        {"scope_revision": "A" * 64},
        {"scope_revision": "a" * 63},
        {"revision": None},
        {"document_id": 0},
        {"document_id": True},
        {"document_id": "42"},
    ],
)
def test_issuing_with_malformed_server_values_is_a_programming_error(changes):
    with pytest.raises(ValueError):
        _ref(**changes)


def test_cursor_issue_rejects_negative_positions():
    ref = _ref()
    claims = reference_open(ref.token, now=T0)
    for offset, served in ((-1, 0), (0, -1), (True, 0)):
        with pytest.raises(ValueError):
            cursor_issue(ref=ref.token, ref_claims=claims, offset=offset, served=served)


def test_error_messages_never_echo_the_token():
    token = _ref().token
    with pytest.raises(KnowledgeReferenceExpired) as excinfo:
        reference_open(token, now=T0 + timedelta(days=1))
    payload = excinfo.value.payload()
    assert set(payload) == {"error", "message"}
    assert token not in payload["message"]
    assert token.split(".")[1] not in payload["message"]
