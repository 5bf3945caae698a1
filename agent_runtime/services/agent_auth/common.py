"""Helpers shared by the Agent Auth v1 services."""

from __future__ import annotations

import uuid
from typing import Any

from agent_runtime.models import Client
from agent_runtime.validation import authorize_url_problem
from bailing.api.errors import NotFound


def uuid_or_404(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise NotFound() from None


def client_usable_for_agents(client: Client | None) -> bool:
    return (
        client is not None
        and client.enabled
        and client.is_agent_client
        and (not client.agent_authorize_url or authorize_url_problem(client.agent_authorize_url) is None)
    )
