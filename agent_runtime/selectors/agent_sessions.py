"""Read-only lookups of agent sessions for the business backend that owns them.

A business system sees only its own client's authorizations and sessions: another client's
authorization is the same 404 ``not_found`` as an unknown one, so ids cannot be probed across
clients.
"""

from __future__ import annotations

import uuid

from agent_runtime.models import AgentAuthorization, AgentSession, Client
from bailing.api.errors import NotFound


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
