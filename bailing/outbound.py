"""The one way the hub opens HTTP clients towards business systems and webhooks.

Every outbound client follows no redirects (a redirect could move a signed request to another host)
and ignores proxy settings from the environment (a signed call goes where its provider says). They
all share one TLS context: building a context loads the CA bundle, which costs about 19 ms on this
machine — more than the rest of a loopback tool call — while a shared context is safe to use from
many threads at once (the ``ssl`` module's contexts are).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping
from typing import Any

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The hub's outbound TLS context (system-independent CA bundle from ``certifi``, as httpx uses)."""
    return httpx.create_ssl_context()


def outbound_client(
    *,
    timeout: float | httpx.Timeout,
    headers: Mapping[str, str] | None = None,
    keep_alive: bool = True,
    **options: Any,
) -> httpx.Client:
    """An ``httpx.Client`` for business systems: no redirects, no proxies, the shared TLS context.

    ``keep_alive=False`` opens a fresh connection for every request (tool dispatch: a reused
    connection the server already closed would fail after the request was written, making an unsent
    call look uncertain).
    """
    if not keep_alive:
        options["limits"] = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(
        timeout=timeout,
        headers=dict(headers or {}),
        follow_redirects=False,
        trust_env=False,
        verify=tls_context(),
        **options,
    )
