"""Agent sessions: revocation by the agent, the business system or an administrator.

Lock order: authorization row (revocation by authorization) → session row → its refresh tokens →
audit chain.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agent_runtime.errors import InvalidState
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession, Client
from agent_runtime.services.agent_auth.common import uuid_or_404
from agent_runtime.tokens import (
    ACCESS_TOKEN_PREFIX,
    REFRESH_TOKEN_PREFIX,
    looks_like,
    secret_hash,
)
from bailing.api.errors import NotFound
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

# Who revoked a session, as the audit ledger and ``AgentSession.revoked_by`` record it.
_REVOKED_BY = {"agent": "agent", "client": "business", "user": "admin", "system": "system"}


def session_revoke_locked(
    session: AgentSession, *, by: str, reason: str, actor: Actor, data: dict | None = None
) -> bool:
    """Revoke a session whose row the caller holds locked. False if it was already revoked.

    ``data`` adds facts to the audit event (``by`` and ``reason`` are always recorded)."""
    if session.revoked_at is not None:
        return False
    now = timezone.now()
    session.revoked_at = now
    session.revoked_by = f"{by}:{actor.name}"[:200]
    session.revoke_reason = reason[:64]
    # Clearing the hash makes the current access token unusable even before revoked_at is checked.
    session.access_token_hash = None
    session.save(
        update_fields=["revoked_at", "revoked_by", "revoke_reason", "access_token_hash", "updated_at"]
    )
    AgentRefreshToken.objects.filter(session=session, status=AgentRefreshToken.Status.ACTIVE).update(
        status=AgentRefreshToken.Status.REVOKED
    )
    audit_record(
        action="agent_auth.session.revoked",
        actor=actor,
        client_app_id=session.client.app_id,
        session_id=session.id,
        target_type="agent_session",
        target_id=str(session.id),
        data={**(data or {}), "by": by, "reason": reason},
    )
    return True


def session_revoke(*, session: AgentSession, actor: Actor, reason: str) -> bool:
    """Revoke ``session``: it stops working at once (access hash cleared, active refresh tokens
    revoked). Idempotent: returns False if it was already revoked, and audits only the first time.
    """
    with transaction.atomic():
        locked = (
            AgentSession.objects.select_for_update(of=("self",)).select_related("client").get(pk=session.pk)
        )
        revoked = session_revoke_locked(
            locked, by=_REVOKED_BY.get(actor.type, actor.type), reason=reason, actor=actor
        )
    session.refresh_from_db()
    return revoked


def session_revoke_self(
    *, access_token: str | None = None, client_app_id: str | None = None, refresh_token: str | None = None
) -> None:
    """An agent's own logout (``POST /revoke``): by its access token and/or its refresh token.

    Unknown credentials are not an error: the answer is the same whether or not anything was
    revoked, so the endpoint cannot be used to probe which tokens exist, and an agent whose
    session already died can still log out cleanly. A refresh token of any status identifies its
    session (an agent that lost a rotation race still means to end its login).
    """
    sessions: list[AgentSession] = []
    if access_token and looks_like(access_token, ACCESS_TOKEN_PREFIX):
        found = AgentSession.objects.filter(access_token_hash=secret_hash(access_token)).first()
        if found is not None:
            sessions.append(found)
    if refresh_token and client_app_id and looks_like(refresh_token, REFRESH_TOKEN_PREFIX):
        token = (
            AgentRefreshToken.objects.select_related("session", "session__client")
            .filter(token_hash=secret_hash(refresh_token), session__client__app_id=client_app_id)
            .first()
        )
        if token is not None and all(s.pk != token.session_id for s in sessions):
            sessions.append(token.session)
    for session in sessions:
        session_revoke(session=session, actor=Actor("agent", str(session.id)), reason="agent_logout")


def session_get_for_client(*, client: Client, session_id) -> AgentSession:
    """A session of ``client`` (business revoke); another client's or unknown id is 404."""
    pk = uuid_or_404(session_id)
    session = AgentSession.objects.select_related("client").filter(pk=pk, client=client).first()
    if session is None:
        raise NotFound()
    return session


def authorization_session_revoke(
    *, client: Client, authorization_id, actor: Actor
) -> tuple[AgentSession, bool]:
    """The business backend ends the session its authorization ``authorization_id`` produced.

    Returns the session and whether this call revoked it (False: it was already revoked, by anyone;
    nothing is written or audited then). Another client's or an unknown authorization is 404; one
    that produced no session (pending, approved but not yet exchanged, denied, expired) is 409
    ``invalid_state``: a code that was approved but not exchanged expires within two minutes, after
    which its session, if any, can be revoked here.
    """
    pk = uuid_or_404(authorization_id)
    with transaction.atomic():
        authorization = (
            AgentAuthorization.objects.select_for_update(of=("self",)).filter(pk=pk, client=client).first()
        )
        if authorization is None:
            raise NotFound()
        if authorization.session_id is None:
            raise InvalidState("The authorization has not produced a session; there is nothing to revoke.")
        session = (
            AgentSession.objects.select_for_update(of=("self",))
            .select_related("client")
            .get(pk=authorization.session_id)
        )
        revoked = session_revoke_locked(
            session,
            by=_REVOKED_BY.get(actor.type, actor.type),
            reason="business_revoked",
            actor=actor,
            data={"authorization_id": str(authorization.id)},
        )
    return session, revoked
