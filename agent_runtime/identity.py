"""Who is calling the agent surface: an Agent Auth v1 session and its client, revalidated per request.

The bearer is resolved by one raw SQL statement per request (:func:`identity_load`), built once per
process from the models' columns: the session, its client and, when the view names the workspace it
is about to gate (or asks for all of the session's), those routes with the versions of the rows
their catalog and knowledge scope are built from. Nothing about an identity is cached: the
statement runs on every request and every check of :func:`agent_session_usable` runs on its
result. The route gate (``agent_runtime.selectors.routes``) then uses the prefetched routes instead
of querying again, in its own order of checks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils import timezone

from agent_runtime.models import AgentSession, Client, Route
from agent_runtime.patterns import AGENT_ROUTE
from agent_runtime.validation import authorize_url_problem
from bailing.audit.actor import Actor

_ROUTE_KEY_RE = re.compile(AGENT_ROUTE)

# --- OAuth scopes (docs/protocol.md "Scopes") -----------------------------------------------------------
# What a standard OAuth (MCP) sign-in may be granted, in the order they are shown and answered. Agent
# Auth v1 sessions (device and browser sign-in of the hub's own agents) carry no scopes: their rights
# are the whole agent surface, as before. ``tools:call`` implies ``tools:read`` (a broader scope
# implies the narrower one, as the MCP authorization spec asks servers to account for): a session
# allowed to call a tool is always allowed to see it.
SCOPE_KNOWLEDGE_READ = "knowledge:read"
SCOPE_TOOLS_READ = "tools:read"
SCOPE_TOOLS_CALL = "tools:call"
SCOPES = (SCOPE_KNOWLEDGE_READ, SCOPE_TOOLS_READ, SCOPE_TOOLS_CALL)
# Granted when the authorization request names no scope: everything, so that the clients that signed
# in before scopes existed (and the MCP SDK, which asks for what the 401 challenge lists) keep working.
DEFAULT_SCOPES = SCOPES
SCOPE_IMPLIES = {SCOPE_TOOLS_CALL: (SCOPE_TOOLS_READ,)}
# How the consent page says each scope, in plain words.
SCOPE_WORDS = {
    SCOPE_KNOWLEDGE_READ: "search the handbook",
    SCOPE_TOOLS_READ: "see the business tools",
    SCOPE_TOOLS_CALL: "call business tools; writes wait for approval",
}


def scopes_parse(scope: str | None) -> list[str] | None:
    """The scopes an OAuth ``scope`` parameter asks for (RFC 6749 §3.3: single-space separated), closed
    over :data:`SCOPE_IMPLIES` and in :data:`SCOPES` order; absent or empty asks for
    :data:`DEFAULT_SCOPES`. None when an item is not a scope of this hub (``invalid_scope``)."""
    if scope is None or scope == "":
        return list(DEFAULT_SCOPES)
    if not isinstance(scope, str):
        return None
    items = set(scope.split(" "))
    if not items <= set(SCOPES):
        return None
    return scopes_closed(items)


def scopes_closed(items) -> list[str]:
    """``items`` with every scope they imply, in :data:`SCOPES` order."""
    wanted = set(items)
    for item in list(wanted):
        wanted.update(SCOPE_IMPLIES.get(item, ()))
    return [scope for scope in SCOPES if scope in wanted]


# Prefetch modes: no route, the one route a view names, or every route the session lists.
PREFETCH_NONE = "none"
PREFETCH_ONE = "one"
PREFETCH_ALL = "all"


@dataclass(frozen=True)
class RoutePrefetch:
    """The routes the identity statement read with the session (enabled ones only).

    ``mode`` says what was asked: ``one`` — the route ``key`` (absent from ``routes`` when it does
    not exist or is disabled); ``all`` — every route the session's ``allowed_routes`` lists.
    """

    mode: str
    key: str | None
    routes: dict[str, Route]

    def knows(self, route_key: str) -> bool:
        return self.mode == PREFETCH_ALL or (self.mode == PREFETCH_ONE and route_key == self.key)


@dataclass(frozen=True)
class AgentIdentity:
    """Who is calling the agent surface: the session and its client, both just revalidated."""

    session: AgentSession
    client: Client
    prefetch: RoutePrefetch | None = field(default=None, compare=False, repr=False)

    @property
    def scopes(self) -> frozenset[str] | None:
        """The OAuth scopes the session was granted; None for an Agent Auth v1 session (no limit)."""
        granted = self.session.scopes
        return None if granted is None else frozenset(granted)

    def scopes_missing(self, required) -> list[str]:
        """Which of ``required`` the session lacks (none for an Agent Auth v1 session)."""
        granted = self.scopes
        if granted is None:
            return []
        return [scope for scope in required if scope not in granted]

    def has_scope(self, scope: str) -> bool:
        return not self.scopes_missing((scope,))

    @property
    def actor(self) -> Actor:
        """The agent as the audit ledger records it (named by its session, in its client's context)."""
        return Actor.agent(session_id=self.session.pk, client_app_id=self.client.app_id)


def agent_session_usable(session: AgentSession, *, now=None) -> bool:
    """Session not revoked, access and absolute refresh lifetime unexpired, client still an agent client."""
    now = now or timezone.now()
    client = session.client
    return (
        session.revoked_at is None
        and session.access_expires_at > now
        and session.refresh_expires_at > now
        and client.enabled
        and client.is_agent_client
        and (not client.agent_authorize_url or authorize_url_problem(client.agent_authorize_url) is None)
    )


# --- route dependencies ------------------------------------------------------------------------------
# Each dependency is a SQL expression over the route row ``r`` giving a JSON array of
# ``[name, id, version]`` of the rows a cached value of that route depends on. The runtime declares
# its tool providers; the knowledge app registers its knowledge bases (a port, as in
# agent_runtime.ports: the runtime never names the apps above it).
_PROVIDERS_SQL = """(SELECT coalesce(json_agg(json_build_array(p.name, p.id, p.version)
                                ORDER BY p.name), '[]'::json)
       FROM agent_runtime_toolprovider p
      WHERE p.name IN (SELECT e ->> 'provider' FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(r.tools -> 'sources') = 'array' THEN r.tools -> 'sources'
                     ELSE '[]'::jsonb END) AS e WHERE jsonb_typeof(e) = 'object'))"""

_route_dependencies: dict[str, str] = {"providers": _PROVIDERS_SQL}
_statements: dict[str, str] = {}


def route_dependency_register(name: str, sql: str) -> None:
    """Add a dependency read with every prefetched route (call from an ``AppConfig.ready``)."""
    _route_dependencies[name] = sql
    _statements.clear()


def route_dependencies(route: Route) -> dict[str, tuple[tuple[str, int, int], ...]] | None:
    """The dependency versions the identity statement read with ``route``, or None if it did not."""
    return getattr(route, "_bailing_dependencies", None)


def _columns(model, alias: str) -> list[str]:
    return [f'{alias}."{f.column}"' for f in model._meta.concrete_fields]


def _converters(model) -> list:
    return [
        (index, f.get_db_converters(connection))
        for index, f in enumerate(model._meta.concrete_fields)
        if f.get_db_converters(connection)
    ]


_SESSION_FIELDS = len(AgentSession._meta.concrete_fields)
_CLIENT_FIELDS = len(Client._meta.concrete_fields)
_ROUTE_FIELDS = len(Route._meta.concrete_fields)


def _statement(mode: str) -> str:
    """The identity statement for ``mode``, built once per process (module-level cache)."""
    sql = _statements.get(mode)
    if sql is not None:
        return sql
    select = _columns(AgentSession, "s") + _columns(Client, "c")
    joins = ""
    order = ""
    if mode != PREFETCH_NONE:
        select += _columns(Route, "r")
        select += [f"{expr} AS dep_{name}" for name, expr in _route_dependencies.items()]
        if mode == PREFETCH_ONE:
            condition = "r.route_key = %(route)s"
        else:
            condition = """r.route_key IN (SELECT jsonb_array_elements_text(
                CASE WHEN jsonb_typeof(s.allowed_routes) = 'array' THEN s.allowed_routes
                     ELSE '[]'::jsonb END))"""
        joins = f"LEFT JOIN agent_runtime_route r ON r.enabled AND {condition}"
        order = 'ORDER BY r."route_key"'
    # Only model column names and the registered dependency expressions: no request value is ever
    # part of the text (the token hash and route key are bound parameters).
    sql = (
        f"SELECT {', '.join(select)} FROM agent_runtime_agentsession s "  # noqa: S608
        f"JOIN agent_runtime_client c ON c.id = s.client_id {joins} "
        f"WHERE s.access_token_hash = %(hash)s {order}"
    )
    _statements[mode] = sql
    return sql


_model_converters: dict[type, list] = {}


def _instance(model, values: list[Any]):
    converters = _model_converters.get(model)
    if converters is None:
        converters = _model_converters[model] = _converters(model)
    for index, funcs in converters:
        value = values[index]
        for func in funcs:
            value = func(value, None, connection)
        values[index] = value
    return model.from_db(connection.alias, None, values)


def _dependency_versions(value: Any) -> tuple[tuple[str, int, int], ...]:
    if isinstance(value, str):
        value = json.loads(value)
    return tuple((name, pk, version) for name, pk, version in value or [])


def identity_load(token_hash: str, *, route_key: str | None = None, all_routes: bool = False):
    """The session whose access token hashes to ``token_hash`` with its client (and the asked-for
    routes), in one statement; None when no session has that token. Usability is the caller's check.

    ``route_key`` is prefetched only when it is a syntactically valid route key (the gate answers
    400 ``invalid_route`` for the rest without touching the database).
    """
    if all_routes:
        mode = PREFETCH_ALL
    elif route_key is not None and isinstance(route_key, str) and _ROUTE_KEY_RE.fullmatch(route_key):
        mode = PREFETCH_ONE
    else:
        mode = PREFETCH_NONE
    params: dict[str, Any] = {"hash": token_hash}
    if mode == PREFETCH_ONE:
        params["route"] = route_key
    with connection.cursor() as cursor:
        cursor.execute(_statement(mode), params)
        rows = cursor.fetchall()
    if not rows:
        return None
    first = list(rows[0])
    session = _instance(AgentSession, first[:_SESSION_FIELDS])
    client = _instance(Client, first[_SESSION_FIELDS : _SESSION_FIELDS + _CLIENT_FIELDS])
    AgentSession.client.field.set_cached_value(session, client)
    prefetch = None
    if mode != PREFETCH_NONE:
        start = _SESSION_FIELDS + _CLIENT_FIELDS
        names = list(_route_dependencies)
        routes = {}
        for row in rows:
            values = list(row[start : start + _ROUTE_FIELDS])
            if values[0] is None:  # the LEFT JOIN found no enabled route
                continue
            route = _instance(Route, values)
            deps = row[start + _ROUTE_FIELDS :]
            route._bailing_dependencies = {
                name: _dependency_versions(value) for name, value in zip(names, deps, strict=True)
            }
            routes[route.route_key] = route
        prefetch = RoutePrefetch(mode=mode, key=route_key if mode == PREFETCH_ONE else None, routes=routes)
    return session, client, prefetch
