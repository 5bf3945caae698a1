"""The route gate: which workspace an agent session may use, resolved once per request.

Every agent request revalidates access from scratch (:func:`route_for_identity`): nothing is cached
between requests, so disabling a route or a client, narrowing an allowlist or an audience takes
effect on the very next call. The route row usually comes with the identity (the bearer statement
read it with the session, ``AgentIdentity.prefetch``); the gate then applies its checks to that row
in the same order, and queries only for a route the statement did not read. The gate returns the
route *and* its effective configuration, so a request computes the defaults once and hands them to
every read it makes.

Gate order (docs/protocol.md "Route gate"): route key syntax (400 ``invalid_route``) → client and
session allowlists (403 ``route_not_allowed``) → route exists and is enabled (404
``route_unavailable``) → audience policy (403 ``audience_not_allowed``) → ``agent_client.enabled``
for the runtime surfaces (403 ``agent_client_disabled``). The allowlists come before existence so a
session cannot probe which routes exist outside its grant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent_runtime import errors
from agent_runtime.config import route_effective
from agent_runtime.data_policy import DataPolicy, data_policy_from_config
from agent_runtime.identity import PREFETCH_ALL, AgentIdentity
from agent_runtime.models import Route
from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS
from bailing import tracing

_AGENT_ROUTE_RE = re.compile(AGENT_ROUTE)


@dataclass(frozen=True)
class WorkspaceAccess:
    """A route an agent session may use right now, with its effective configuration."""

    route: Route
    effective: dict[str, Any]

    @property
    def route_key(self) -> str:
        return self.route.route_key


def agent_route_key_valid(route_key: object) -> bool:
    """Agent surfaces accept ``^[a-z0-9][a-z0-9_-]{1,63}$`` except the reserved keys (``auto``)."""
    return (
        isinstance(route_key, str)
        and _AGENT_ROUTE_RE.fullmatch(route_key) is not None
        and route_key not in RESERVED_ROUTE_KEYS
    )


def audience_admits(audience: dict[str, Any], identity: AgentIdentity) -> bool:
    """Does the route's audience policy admit this agent session's principal?

    With the gate disabled everyone is admitted. With it enabled, every non-empty list is a
    condition that must hold (an empty list constrains nothing): ``clients`` contains the client's
    app_id; ``channels`` contains ``agent:<app_id>``; ``tenants`` contains the principal's tenant;
    ``roles`` shares a role with the principal; ``principals`` contains the principal id;
    ``audiences`` contains the principal's audience. A principal without an id is anonymous and is
    admitted only when ``anonymous`` is true.
    """
    if not audience.get("enabled"):
        return True
    principal = identity.session.principal or {}
    app_id = identity.client.app_id
    if not principal.get("id") and not audience.get("anonymous"):
        return False
    checks = [
        ("clients", lambda items: app_id in items),
        ("channels", lambda items: f"agent:{app_id}" in items),
        ("tenants", lambda items: principal.get("tenant") in items),
        ("roles", lambda items: bool(set(principal.get("roles") or []) & set(items))),
        ("principals", lambda items: principal.get("id") in items),
        ("audiences", lambda items: principal.get("audience") in items),
    ]
    return all(check(audience[key]) for key, check in checks if audience.get(key))


@tracing.traced("route.gate")
def route_for_identity(*, identity: AgentIdentity, route_key: str, runtime: bool = True) -> WorkspaceAccess:
    """The route ``route_key`` and its effective config if this agent session may use it, else the
    gate's error.

    ``runtime=False`` skips the ``agent_client.enabled`` check, for the older tool surface that
    stays available when the Agent Client Runtime is switched off for a route.
    """
    if not agent_route_key_valid(route_key):
        raise errors.InvalidRoute()
    if not identity.client.allows_route(route_key) or route_key not in (
        identity.session.allowed_routes or []
    ):
        raise errors.RouteNotAllowed()
    prefetch = identity.prefetch
    if prefetch is not None and prefetch.knows(route_key):
        route = prefetch.routes.get(route_key)
    else:
        route = Route.objects.filter(route_key=route_key, enabled=True).first()
    if route is None:
        raise errors.RouteUnavailable()
    effective = route_effective(route)
    if not audience_admits(effective["audience"], identity):
        raise errors.AudienceNotAllowed()
    if runtime and not effective["agent_client"]["enabled"]:
        raise errors.AgentClientDisabled()
    return WorkspaceAccess(route=route, effective=effective)


def routes_for_identity(identity: AgentIdentity) -> list[WorkspaceAccess]:
    """Every workspace the gate admits for this session (runtime surfaces), in route_key order."""
    keys = set(identity.session.allowed_routes or [])
    admitted = []
    prefetch = identity.prefetch
    if prefetch is not None and prefetch.mode == PREFETCH_ALL:
        # In the statement's ORDER BY route_key (the database's collation, as the query below).
        routes = [route for key, route in prefetch.routes.items() if key in keys]
    else:
        routes = Route.objects.filter(route_key__in=keys, enabled=True).order_by("route_key")
    for route in routes:
        if not identity.client.allows_route(route.route_key) or not agent_route_key_valid(route.route_key):
            continue
        effective = route_effective(route)
        if not effective["agent_client"]["enabled"] or not audience_admits(effective["audience"], identity):
            continue
        admitted.append(WorkspaceAccess(route=route, effective=effective))
    return admitted


def route_data_policy(route: Route) -> DataPolicy | None:
    """The data policy of ``route`` (its validated ``data_policy`` block), or None: no filtering.

    Built once per process for a given block (custom patterns compile once); a changed block is a new
    policy at the next read, so a policy change takes effect for the next answer.
    """
    return data_policy_from_config(route.data_policy)
