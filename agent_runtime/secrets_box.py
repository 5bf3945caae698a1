"""Encryption at rest for secrets the hub must be able to read back (tool provider HMAC secrets).

Client Tokens and agent tokens are only ever *compared*, so they are stored as hashes. A provider's
HMAC secret is different: the hub signs with it, so it needs the plaintext. It is stored sealed:

* AES-256-GCM (``cryptography``), a fresh random 96-bit nonce per seal;
* the key is HKDF-SHA256 of ``settings.SECRET_KEY`` with a fixed, versioned ``info`` string, so this
  key is unrelated to every other use of ``SECRET_KEY`` (sessions, signed cookies, knowledge refs);
* the associated data binds a *purpose* (what kind of secret) and a *context* (whose secret, e.g.
  the provider name): a sealed value copied onto another provider's row, or into another column,
  does not open;
* the text form is ``v1.`` + unpadded base64url of ``nonce || ciphertext || tag``. The version
  prefix lets a later format or key schedule coexist with stored values.

Opening fails with :class:`SealedSecretError`, which carries no detail: a changed ``SECRET_KEY``,
a tampered value and a value sealed for another purpose or context look the same to the caller.
After a ``SECRET_KEY`` change every sealed secret must be set again (``bailing_apply`` does that
automatically for providers whose secret comes from ``secret_env``/``secret_file``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

__all__ = ["SealedKind", "SealedSecretError", "open_sealed", "seal", "sealed_length"]

VERSION_PREFIX = "v1."
# Domain separation: this exact string is part of the key schedule. Changing it invalidates every
# stored value, so a new scheme gets a new prefix instead.
_HKDF_INFO = b"bailing-hub secrets_box v1: AES-256-GCM key for secrets at rest"
_AAD_LABEL = b"bailing-hub.secrets_box.v1"
_NONCE_BYTES = 12
_TAG_BYTES = 16


class SealedSecretError(Exception):
    """A sealed secret cannot be opened (key changed, value tampered, wrong purpose or context).

    Deliberately without detail: which of those happened is not something to print or log.
    """

    def __init__(self) -> None:
        super().__init__("the sealed secret cannot be opened")


@functools.lru_cache(maxsize=4)
def _derive_key(secret_key: str) -> bytes:
    # Cached per SECRET_KEY value, so tests that override the setting get the matching key.
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(
        secret_key.encode("utf-8")
    )


def _key() -> bytes:
    secret_key = settings.SECRET_KEY
    if not secret_key:
        raise ImproperlyConfigured("SECRET_KEY is empty: secrets cannot be sealed or opened")
    return _derive_key(secret_key)


def _label(value: str, name: str) -> bytes:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ValueError(f"{name} must be a non-empty string without NUL")
    return value.encode("utf-8")


def _aad(purpose: str, context: str) -> bytes:
    # NUL-separated: neither part may contain NUL, so ("a", "b\0c") and ("a\0b", "c") cannot collide.
    return b"\x00".join((_AAD_LABEL, _label(purpose, "purpose"), _label(context, "context")))


def sealed_length(plaintext_bytes: int) -> int:
    """Length of the text :func:`seal` makes of a plaintext of ``plaintext_bytes`` UTF-8 bytes: the
    version prefix plus unpadded base64url of nonce, ciphertext (as long as the plaintext) and tag."""
    raw = _NONCE_BYTES + plaintext_bytes + _TAG_BYTES
    return len(VERSION_PREFIX) + (raw * 4 + 2) // 3


def seal(plaintext: str, *, purpose: str, context: str, max_plaintext_bytes: int) -> str:
    """Encrypt ``plaintext`` for ``purpose`` (e.g. ``"tool_provider.secret"``) and ``context``
    (e.g. the provider name); return the opaque text to store.

    ``max_plaintext_bytes`` is the bound of this kind of value, named where the kind is defined (a
    provider secret, a Client Token, the frozen arguments of an invocation); :func:`open_sealed`
    takes the same bound. Sealing a longer value is a programming error (``ValueError``): the caller
    checks its budget first, with its own error for the client.
    """
    if not isinstance(plaintext, str):
        raise TypeError("plaintext must be a string")
    data = plaintext.encode("utf-8")
    if len(data) > max_plaintext_bytes:
        raise ValueError(f"the value is longer than its bound of {max_plaintext_bytes} bytes")
    nonce = os.urandom(_NONCE_BYTES)
    sealed = AESGCM(_key()).encrypt(nonce, data, _aad(purpose, context))
    return VERSION_PREFIX + base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")


def open_sealed(token: str, *, purpose: str, context: str, max_plaintext_bytes: int) -> str:
    """Decrypt a value made by :func:`seal` with the same purpose, context and bound.

    Raises :class:`SealedSecretError` for anything that does not open cleanly, including a stored
    text longer than a sealed value of ``max_plaintext_bytes`` can be (a corrupted column is refused
    before it costs a decode).
    """
    aad = _aad(purpose, context)
    if (
        not isinstance(token, str)
        or not token.startswith(VERSION_PREFIX)
        or len(token) > sealed_length(max_plaintext_bytes)
    ):
        raise SealedSecretError
    body = token[len(VERSION_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise SealedSecretError from None
    # Canonical encoding only: a re-padded or otherwise altered text is a different token.
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
        raise SealedSecretError
    if len(raw) < _NONCE_BYTES + _TAG_BYTES:
        raise SealedSecretError
    try:
        plaintext = AESGCM(_key()).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], aad)
        return plaintext.decode("utf-8")
    except (InvalidTag, UnicodeDecodeError):
        raise SealedSecretError from None


@dataclass(frozen=True)
class SealedKind:
    """One kind of sealed value: its purpose (part of the associated data) and the bound of its
    plaintext, defined once where the kind is (``PROVIDER_SECRET``, ``CLIENT_TOKEN``,
    ``FROZEN_ARGUMENTS``), so sealing and opening always agree on both."""

    purpose: str
    max_plaintext_bytes: int

    def seal(self, plaintext: str, *, context: str) -> str:
        return seal(
            plaintext, purpose=self.purpose, context=context, max_plaintext_bytes=self.max_plaintext_bytes
        )

    def open(self, token: str, *, context: str) -> str:
        return open_sealed(
            token, purpose=self.purpose, context=context, max_plaintext_bytes=self.max_plaintext_bytes
        )
