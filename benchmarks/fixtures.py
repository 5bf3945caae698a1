"""What the benchmark and chaos fixtures share: an agent session opened without a sign-in.

A benchmark or a chaos run needs an agent that is signed in already; going through Agent Auth would
put a browser consent in front of every run. :func:`agent_session_open` leaves the row a completed
sign-in leaves (a fresh access token, stored only as its hash) and hands back the token. It is the
one place outside the agent runtime that knows the token format, and only tools call it.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from agent_runtime.models import AgentSession, Client
from agent_runtime.tokens import ACCESS_TOKEN_PREFIX, new_secret, secret_hash


def agent_session_open(
    *, client: Client, routes: list[str], subject: str, device_label: str, access_hours: int
) -> tuple[AgentSession, str]:
    """A session of ``client`` acting for ``subject`` on ``routes`` (access for ``access_hours``,
    refresh for a day), and its access token."""
    access = new_secret(ACCESS_TOKEN_PREFIX)
    now = timezone.now()
    session = AgentSession.objects.create(
        client=client,
        device_label=device_label,
        principal={"id": subject},
        on_behalf_of=subject,
        allowed_routes=list(routes),
        access_token_hash=secret_hash(access),
        access_expires_at=now + timedelta(hours=access_hours),
        refresh_expires_at=now + timedelta(days=1),
    )
    return session, access
