"""The API surfaces: the URL prefixes under which the hub answers JSON, as the apps register them.

An app that serves an API registers each of its prefixes with :func:`api_prefix_register` from its
``AppConfig.ready()`` (the agent runtime ``/agent-api/`` and ``/agent-auth/``, knowledge ``/kb/``,
approvals ``/approvals/``, the MCP surface ``/mcp/``). The plumbing only reads them: under a prefix
every response carries ``Cache-Control: no-store``, Django's HTML errors become the flat JSON
envelope and bodies are read under the view's byte budget (``bailing.api.middleware``); the front
answers its own refusals there in the envelope (``front/server.py``); the root URLconf's catch-all
answers the JSON 404 for any other path under them (:func:`api_prefix_pattern`).

The prefixes are read only once every app is ready, and the first read freezes them: a read before
``django.setup()`` finished, or a registration after the first read, is a bug and raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.apps import apps
from django.core.exceptions import AppRegistryNotReady

_registered: dict[str, tuple[str, ...]] = {}


@dataclass(frozen=True)
class _Surfaces:
    prefixes: tuple[str, ...]
    pattern: str
    pragma_no_cache: frozenset[str]


_frozen: _Surfaces | None = None


def api_prefix_register(prefix: str, *, pragma_no_cache: Iterable[str] = ()) -> None:
    """Put ``prefix`` (``"/name/"``) on the API surface. ``pragma_no_cache``: paths under it whose
    responses also carry ``Pragma: no-cache`` (a token endpoint's, RFC 6749 §5.1)."""
    if _frozen is not None:
        raise RuntimeError(f"API prefix {prefix!r} registered after the prefixes were read")
    if not re.fullmatch(r"/[a-z0-9][a-z0-9._-]*/", prefix):
        raise ValueError(f"an API prefix is one path segment between slashes, not {prefix!r}")
    if prefix in _registered:
        raise ValueError(f"API prefix {prefix!r} is registered already")
    paths = tuple(path.rstrip("/") for path in pragma_no_cache)
    if any(not path.startswith(prefix) for path in paths):
        raise ValueError(f"a Pragma: no-cache path must lie under {prefix!r}")
    _registered[prefix] = paths


def _surfaces() -> _Surfaces:
    global _frozen
    if _frozen is None:
        if not apps.ready:
            raise AppRegistryNotReady("the API prefixes are read once every app is ready")
        prefixes = tuple(_registered)
        _frozen = _Surfaces(
            prefixes=prefixes,
            pattern=r"^(?:" + "|".join(re.escape(p.strip("/")) for p in prefixes) + r")(?:/.*)?$",
            pragma_no_cache=frozenset(path for paths in _registered.values() for path in paths),
        )
    return _frozen


def api_prefixes() -> tuple[str, ...]:
    """Every registered prefix, in registration order."""
    return _surfaces().prefixes


def api_prefix_pattern() -> str:
    """A ``re_path`` pattern for any path under a prefix, the bare prefixes included."""
    return _surfaces().pattern


def on_agent_surface(path: str) -> bool:
    """Is ``path`` under an API prefix (``/mcp`` without its slash included)?"""
    prefixes = _surfaces().prefixes
    return path.startswith(prefixes) or path.rstrip("/") + "/" in prefixes


def pragma_no_cache(path: str) -> bool:
    """Does the response to ``path`` also carry ``Pragma: no-cache``?"""
    return path.rstrip("/") in _surfaces().pragma_no_cache
