"""The ``Authorization: Bearer`` header, as every authenticated surface reads it.

The authentication classes themselves belong to the app that owns the identities
(``agent_runtime.api.authentication``: Agent access tokens and Client Tokens).
"""

from __future__ import annotations


def bearer_token(request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), or None."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value:
        return None
    return value.strip()
