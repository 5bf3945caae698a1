"""Who is calling the agent surface: an Agent Auth v1 session and its client, revalidated per request."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from agent_runtime.models import AgentSession, Client
from agent_runtime.validation import authorize_url_problem
from bailing.audit.actor import Actor


@dataclass(frozen=True)
class AgentIdentity:
    """Who is calling the agent surface: the session and its client, both just revalidated."""

    session: AgentSession
    client: Client

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
