"""Secrets at rest: AES-256-GCM under an HKDF key from SECRET_KEY, bound to purpose and context."""

from __future__ import annotations

import base64
import functools

import pytest
from django.test import override_settings

from agent_runtime import secrets_box
from agent_runtime.secrets_box import VERSION_PREFIX, SealedKind, SealedSecretError, sealed_length

PLAINTEXT = "s3cr3t-värde-🔑"
OTHER_KEY = "another-secret-key-" + "x" * 60
BOUND = 4096
seal = functools.partial(secrets_box.seal, max_plaintext_bytes=BOUND)
open_sealed = functools.partial(secrets_box.open_sealed, max_plaintext_bytes=BOUND)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _raw(token: str) -> bytes:
    body = token[len(VERSION_PREFIX) :]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


def test_round_trip_and_opaque_versioned_text():
    token = seal(PLAINTEXT, purpose="tool_provider.secret", context="demo-shop")
    assert token.startswith("v1.")
    assert PLAINTEXT not in token
    assert PLAINTEXT.encode() not in _raw(token)
    assert open_sealed(token, purpose="tool_provider.secret", context="demo-shop") == PLAINTEXT
    # 12-byte nonce + ciphertext + 16-byte tag.
    assert len(_raw(token)) == 12 + len(PLAINTEXT.encode()) + 16


def test_every_seal_uses_a_fresh_nonce():
    first = seal(PLAINTEXT, purpose="p", context="c")
    second = seal(PLAINTEXT, purpose="p", context="c")
    assert first != second
    assert _raw(first)[:12] != _raw(second)[:12]


def test_empty_plaintext_round_trips():
    assert open_sealed(seal("", purpose="p", context="c"), purpose="p", context="c") == ""


@pytest.mark.parametrize(
    ("purpose", "context"),
    [("tool_provider.secret", "other-shop"), ("callback.secret", "demo-shop"), ("tool_provider", "secret")],
)
def test_another_purpose_or_context_does_not_open(purpose, context):
    token = seal(PLAINTEXT, purpose="tool_provider.secret", context="demo-shop")
    with pytest.raises(SealedSecretError):
        open_sealed(token, purpose=purpose, context=context)


def test_a_changed_secret_key_does_not_open():
    token = seal(PLAINTEXT, purpose="p", context="c")
    with override_settings(SECRET_KEY=OTHER_KEY), pytest.raises(SealedSecretError):
        open_sealed(token, purpose="p", context="c")
    # And what the other key sealed does not open under the real one.
    with override_settings(SECRET_KEY=OTHER_KEY):
        foreign = seal(PLAINTEXT, purpose="p", context="c")
    with pytest.raises(SealedSecretError):
        open_sealed(foreign, purpose="p", context="c")
    assert open_sealed(token, purpose="p", context="c") == PLAINTEXT


def _flip(token: str, index: int) -> str:
    raw = bytearray(_raw(token))
    raw[index] ^= 0x01
    return VERSION_PREFIX + _b64(bytes(raw))


@pytest.mark.parametrize("index", [0, 11, 12, -17, -1])
def test_any_flipped_bit_is_detected(index):
    token = seal(PLAINTEXT, purpose="p", context="c")
    with pytest.raises(SealedSecretError):
        open_sealed(_flip(token, index), purpose="p", context="c")


def test_malformed_tokens_are_refused_without_detail():
    token = seal(PLAINTEXT, purpose="p", context="c")
    raw = _raw(token)
    malformed = [
        "",
        "v1.",
        "v2." + token[3:],
        token[3:],
        token + "A",
        token[:-1],
        token + "=",
        token.replace("v1.", "v1.!", 1),
        VERSION_PREFIX + _b64(raw[:27]),
        VERSION_PREFIX + _b64(raw + b"\x00"),
        "v1." + "A" * 70_000,
        token + "A" * (sealed_length(BOUND) - len(token) + 1),
    ]
    for bad in malformed:
        with pytest.raises(SealedSecretError) as info:
            open_sealed(bad, purpose="p", context="c")
        assert str(info.value) == "the sealed secret cannot be opened"
        assert info.value.__cause__ is None


def test_non_string_token_is_refused():
    with pytest.raises(SealedSecretError):
        open_sealed(None, purpose="p", context="c")  # type: ignore[arg-type]


@pytest.mark.parametrize(("purpose", "context"), [("", "c"), ("p", ""), ("p\x00", "c"), ("p", "c\x00d")])
def test_purpose_and_context_must_be_non_empty_without_nul(purpose, context):
    with pytest.raises(ValueError):
        seal(PLAINTEXT, purpose=purpose, context=context)


def test_nul_separation_keeps_purpose_and_context_apart():
    # ("a", "b.c") and ("a.b", "c") would collide under naive concatenation with ".".
    token = seal(PLAINTEXT, purpose="a", context="b.c")
    with pytest.raises(SealedSecretError):
        open_sealed(token, purpose="a.b", context="c")


@pytest.mark.parametrize("size", [0, 1, 2, 3, 100, 4095, 4096])
def test_sealed_length_is_exact(size):
    token = seal("x" * size, purpose="p", context="c")
    assert len(token) == sealed_length(size)


def test_a_value_at_its_bound_seals_and_opens_and_one_byte_more_is_refused():
    kind = SealedKind("p", max_plaintext_bytes=1000)
    at_bound = "é" * 500  # 1,000 UTF-8 bytes
    assert kind.open(kind.seal(at_bound, context="c"), context="c") == at_bound
    with pytest.raises(ValueError):
        kind.seal(at_bound + "x", context="c")
    # A stored text longer than any value of the kind can seal to is refused before decoding.
    larger = SealedKind("p", max_plaintext_bytes=1001).seal(at_bound + "x", context="c")
    with pytest.raises(SealedSecretError):
        kind.open(larger, context="c")


def test_each_sealed_kind_is_bounded_by_what_it_holds():
    from agent_runtime.services.clients import CLIENT_TOKEN
    from agent_runtime.services.invocations.arguments import ARGUMENTS_MAX_BYTES, FROZEN_ARGUMENTS
    from agent_runtime.services.providers import PROVIDER_SECRET, SECRET_MAX_CHARS
    from agent_runtime.tokens import CLIENT_TOKEN_PREFIX, new_secret

    # Frozen arguments: the whole argument budget (an approved 1 MiB write must still open).
    assert FROZEN_ARGUMENTS.max_plaintext_bytes == ARGUMENTS_MAX_BYTES
    budget = "a" * ARGUMENTS_MAX_BYTES
    assert FROZEN_ARGUMENTS.open(FROZEN_ARGUMENTS.seal(budget, context="job"), context="job") == budget
    # A provider secret stays a few KiB: its longest value (4,096 characters of 4 bytes) and no more.
    assert PROVIDER_SECRET.max_plaintext_bytes == 4 * SECRET_MAX_CHARS <= 16 * 1024
    longest = "🔑" * SECRET_MAX_CHARS
    assert PROVIDER_SECRET.open(PROVIDER_SECRET.seal(longest, context="shop"), context="shop") == longest
    with pytest.raises(SealedSecretError):
        oversized = SealedKind(PROVIDER_SECRET.purpose, max_plaintext_bytes=20_000)
        PROVIDER_SECRET.open(oversized.seal("a" * 20_000, context="shop"), context="shop")
    # A Client Token is short.
    token = new_secret(CLIENT_TOKEN_PREFIX)
    assert len(token) <= CLIENT_TOKEN.max_plaintext_bytes <= 1024
