"""Secret formats of Agent Auth v1 and Client Tokens (docs/protocol.md "Tokens and lifetimes").

Every secret is a prefix plus base64url of 32 random bytes (43 characters). Only its SHA-256 hex
digest is stored; lookups go by digest (a unique index), and any comparison of a presented secret
with a stored digest uses ``hmac.compare_digest``. Client Tokens are stored hashed too, unlike in
BailingHub (docs/compatibility.md "Client Tokens stored hashed").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

AUTH_CODE_PREFIX = "bhc_"
ACCESS_TOKEN_PREFIX = "bha_"
REFRESH_TOKEN_PREFIX = "bhr_"
CLIENT_TOKEN_PREFIX = "bct_"
# OAuth client ids of dynamically registered MCP clients: public identifiers, not secrets (stored as
# they are), but as unguessable as a secret so a registration cannot be found by guessing.
OAUTH_CLIENT_ID_PREFIX = "bhm_"
# Prefix + 43 base64url characters; anything shorter than this is rejected before hashing.
MIN_TOKEN_LENGTH = 40
DISPLAY_PREFIX_LENGTH = 10


def new_secret(prefix: str) -> str:
    body = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")
    return prefix + body


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_matches(secret: str, stored_hash: str | None) -> bool:
    if not stored_hash:
        return False
    return hmac.compare_digest(secret_hash(secret), stored_hash)


def looks_like(secret: str | None, prefix: str) -> bool:
    """Cheap shape check done before any database lookup."""
    return (
        isinstance(secret, str)
        and secret.startswith(prefix)
        and MIN_TOKEN_LENGTH <= len(secret) <= 256
        # Visible ASCII only: an OAuth client id is looked up as it is, and PostgreSQL text refuses NUL.
        and all("!" <= char <= "~" for char in secret)
    )


def display_prefix(secret: str) -> str:
    return secret[:DISPLAY_PREFIX_LENGTH]
