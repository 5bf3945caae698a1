"""Helpers shared by the Agent Auth v1 services."""

from __future__ import annotations

import ipaddress
import math
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from agent_runtime.models import Client
from agent_runtime.validation import authorize_url_problem
from bailing.api.errors import NotFound, RateLimited


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


def normalized_ip(ip: str | None) -> str | None:
    """The caller's address as PostgreSQL's inet stores it, or None when it is not an address."""
    if not ip:
        return None
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return None


def throttle_lock(namespace: int, key: str) -> None:
    """Serialise the throttle check of ``key`` until the transaction ends (must run inside one)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [namespace, key])


def throttle_check(created: list[datetime], *, limit: int, window: int, now: datetime) -> None:
    """429 ``RateLimited`` when ``created`` (creation times inside the window, oldest first) already
    holds ``limit`` rows; ``retry_after`` is when enough of the oldest have left the window."""
    if len(created) >= limit:
        frees_at = created[len(created) - limit] + timedelta(seconds=window)
        raise RateLimited(retry_after=max(1, math.ceil((frees_at - now).total_seconds())))
