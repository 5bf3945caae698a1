"""Read-only lookups of agent sessions: for the business backend that owns them, and for the console.

A business system sees only its own client's authorizations and sessions: another client's
authorization is the same 404 ``not_found`` as an unknown one, so ids cannot be probed across
clients. The console sees every session (its views check the model permissions first).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from agent_runtime.models import AgentAuthorization, AgentSession, Client
from bailing.api.errors import NotFound
from bailing.db.queries import filter_by


def sessions_for_authorization(*, client: Client, authorization_id: uuid.UUID) -> list[AgentSession]:
    """The sessions ``client`` got from its authorization ``authorization_id``, oldest first.

    A code is exchanged at most once, so this is zero sessions (not exchanged yet, denied, expired)
    or one, whatever its state (active, expired, revoked). 404 when the authorization is unknown or
    belongs to another client.
    """
    if not AgentAuthorization.objects.filter(pk=authorization_id, client=client).exists():
        raise NotFound()
    return list(
        AgentSession.objects.select_related("client")
        .filter(client=client, authorization__pk=authorization_id)
        .order_by("created_at", "id")
    )


def session_state_q(state: str, *, now: datetime) -> Q:
    """``AgentSession.state`` as SQL, so filtering and pagination happen in the database."""
    if state == "revoked":
        return Q(revoked_at__isnull=False)
    if state == "expired":
        return Q(revoked_at__isnull=True, refresh_expires_at__lte=now)
    return Q(revoked_at__isnull=True, refresh_expires_at__gt=now)


# How a session was signed in, from what it stores: a standard OAuth sign-in of an MCP client keeps
# its OAuth client registration (``oauth_client``, copied from the authorization at the code
# exchange, never cleared); an Agent Auth v1 sign-in has none.
SESSION_VIA_MCP = "mcp"
SESSION_VIA_AGENT_AUTH = "agent_auth"


def session_via(session: AgentSession) -> str:
    """``mcp`` or ``agent_auth``: how ``session`` was signed in (no query: the column is local)."""
    return SESSION_VIA_MCP if session.oauth_client_id is not None else SESSION_VIA_AGENT_AUTH


def session_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[AgentSession]:
    """Agent sessions with their client, newest first. ``filters``: ``client`` (App ID), ``state``
    (active / expired / revoked), ``route`` (signed in to that workspace) and ``via`` (``mcp`` /
    ``agent_auth``: :func:`session_via`)."""
    filters = filters or {}
    queryset = filter_by(
        AgentSession.objects.select_related("client").order_by("-created_at", "-id"),
        filters,
        {"client": "client__app_id"},
    )
    if filters.get("state"):
        queryset = queryset.filter(session_state_q(filters["state"], now=timezone.now()))
    if filters.get("route"):
        # Sessions signed in to the workspace (JSONB containment on the session's routes).
        queryset = queryset.filter(allowed_routes__contains=[filters["route"]])
    if filters.get("via"):
        queryset = queryset.filter(oauth_client__isnull=filters["via"] != SESSION_VIA_MCP)
    return queryset


def session_get(*, session_id: uuid.UUID) -> AgentSession | None:
    """One agent session with its client and, for a standard MCP sign-in, its OAuth client."""
    return AgentSession.objects.select_related("client", "oauth_client").filter(pk=session_id).first()


def session_counts() -> dict[str, int]:
    """``active`` agent sessions (neither revoked nor expired) and the ``total``, in one query."""
    return AgentSession.objects.aggregate(
        active=Count("id", filter=session_state_q("active", now=timezone.now())), total=Count("id")
    )
