"""Agent Auth v1 tokens: the one-time code exchange (PKCE S256) and refresh-token rotation.

:func:`code_grant` and :func:`refresh_grant` are the one implementation behind both front doors:
``/agent-auth/v1/token`` (:func:`token_exchange_code`, :func:`token_refresh`) and the standard OAuth
token endpoint for MCP clients (``agent_runtime.services.agent_auth.oauth``). A code or session
started by an OAuth client works only for that OAuth client, and one started through Agent Auth v1
only there.

Every secret is stored only as a SHA-256 digest. Reusing a used refresh token revokes the whole
session (replay protection); that revocation commits before the error is raised, so the error
response cannot roll it back. Lock order: session row → refresh tokens → audit chain.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_runtime.errors import (
    InvalidGrant,
)
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession, Client, OAuthClient
from agent_runtime.services.agent_auth.authorizations import subject_display_view
from agent_runtime.services.agent_auth.common import client_usable_for_agents
from agent_runtime.services.agent_auth.sessions import session_revoke_locked
from agent_runtime.tokens import (
    ACCESS_TOKEN_PREFIX,
    AUTH_CODE_PREFIX,
    REFRESH_TOKEN_PREFIX,
    looks_like,
    new_secret,
    secret_hash,
)
from agent_runtime.validation import loopback_redirect_problem
from bailing.api.hashing import constant_time_equals
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

PKCE_VERIFIER_RE = re.compile(r"[A-Za-z0-9._~-]{43,128}")


def pkce_s256(verifier: str) -> str:
    """RFC 7636 S256: base64url(sha256(ascii verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _token_response(session: AgentSession, *, access_token: str, refresh_token: str, now) -> dict:
    refresh_left = int((session.refresh_expires_at - now).total_seconds())
    return {
        "token_type": "Bearer",
        "access_token": access_token,
        "expires_in": settings.AGENT_AUTH_ACCESS_TTL,
        "refresh_token": refresh_token,
        "refresh_expires_in": max(0, refresh_left),
        "session_id": str(session.id),
        "client_app_id": session.client.app_id,
        **subject_display_view(session.subject_display),
    }


def _token_client(client_app_id: str) -> Client:
    client = Client.objects.filter(app_id=client_app_id).first() if isinstance(client_app_id, str) else None
    if not client_usable_for_agents(client):
        raise InvalidGrant()
    return client


def _oauth_pk(oauth_client: OAuthClient | None) -> int | None:
    return oauth_client.pk if oauth_client is not None else None


def token_exchange_code(*, client_app_id: str, code: str, redirect_uri: str, code_verifier: str) -> dict:
    """Agent Auth v1 front door of :func:`code_grant` (``POST /agent-auth/v1/token``).

    The redirect must be a loopback URI of the v1 rules, and the authorization must not have been
    started by an OAuth client (those codes work only at ``/oauth/token``). Every failure is the same
    ``invalid_grant``.
    """
    if not isinstance(redirect_uri, str) or loopback_redirect_problem(redirect_uri) is not None:
        raise InvalidGrant()
    client = _token_client(client_app_id)
    return code_grant(
        client=client, oauth_client=None, code=code, redirect_uri=redirect_uri, code_verifier=code_verifier
    )


def code_grant(
    *,
    client: Client,
    oauth_client: OAuthClient | None,
    code: str,
    redirect_uri: str,
    code_verifier: str,
) -> dict:
    """Exchange an approved one-time code for the session's first token pair: the one
    implementation behind both front doors (Agent Auth v1 and the standard OAuth token endpoint).

    The code must belong to ``client`` and to ``oauth_client`` (None: an Agent Auth v1 sign-in), be
    presented with the exact redirect URI it was issued for, be unexpired and match the PKCE
    challenge. Under the authorization's row lock the session (bound to the same OAuth client) and
    its first refresh token are created and the authorization flips to ``consumed``, so a code works
    exactly once even when presented concurrently.

    A code presented again after it was consumed means it leaked (RFC 6749 §4.1.2): the session it
    produced is revoked, and that revocation commits before ``invalid_grant`` is raised. Every
    failure is the same ``invalid_grant``.
    """
    if (
        not looks_like(code, AUTH_CODE_PREFIX)
        or not isinstance(code_verifier, str)
        or not PKCE_VERIFIER_RE.fullmatch(code_verifier)
        or not isinstance(redirect_uri, str)
    ):
        raise InvalidGrant()
    access_token = new_secret(ACCESS_TOKEN_PREFIX)
    refresh_token = new_secret(REFRESH_TOKEN_PREFIX)
    replayed = False
    with transaction.atomic():
        authorization = (
            AgentAuthorization.objects.select_for_update(of=("self",))
            .select_related("client")
            .filter(code_hash=secret_hash(code))
            .first()
        )
        now = timezone.now()
        if authorization is not None and authorization.status == AgentAuthorization.Status.CONSUMED:
            _code_replayed_locked(authorization)
            replayed = True
        elif (
            authorization is None
            or authorization.client_id != client.pk
            or authorization.oauth_client_id != _oauth_pk(oauth_client)
            or authorization.status != AgentAuthorization.Status.APPROVED
            or authorization.code_expires_at is None
            or authorization.code_expires_at <= now
            or authorization.redirect_uri != redirect_uri
            or not constant_time_equals(pkce_s256(code_verifier), authorization.code_challenge)
        ):
            raise InvalidGrant()
        else:
            session = _session_open_locked(
                authorization, client=client, access_token=access_token, refresh_token=refresh_token, now=now
            )
    if replayed:
        raise InvalidGrant()
    return _token_response(session, access_token=access_token, refresh_token=refresh_token, now=now)


def _code_replayed_locked(authorization: AgentAuthorization) -> None:
    """A consumed code came back: audit it and revoke the session it produced (if still live)."""
    session = None
    if authorization.session_id is not None:
        session = (
            AgentSession.objects.select_for_update(of=("self",))
            .select_related("client")
            .filter(pk=authorization.session_id)
            .first()
        )
    audit_record(
        action="agent_auth.code.replayed",
        actor=Actor("agent", "unauthenticated"),
        client_app_id=authorization.client.app_id,
        session_id=session.id if session is not None else None,
        target_type="agent_authorization",
        target_id=str(authorization.id),
    )
    if session is not None:
        session_revoke_locked(
            session,
            by="code_replay",
            reason="code_replay",
            actor=Actor("agent", str(session.id)),
            data={"authorization_id": str(authorization.id)},
        )


def _session_open_locked(
    authorization: AgentAuthorization, *, client: Client, access_token: str, refresh_token: str, now
) -> AgentSession:
    refresh_expires_at = now + timedelta(seconds=settings.AGENT_AUTH_REFRESH_TTL)
    session = AgentSession.objects.create(
        client=client,
        oauth_client_id=authorization.oauth_client_id,
        scopes=authorization.scopes,
        resource=authorization.resource,
        device_label=authorization.device_label,
        principal=authorization.principal or {},
        on_behalf_of=authorization.on_behalf_of,
        allowed_routes=list(authorization.allowed_routes or []),
        subject_display=authorization.subject_display,
        access_token_hash=secret_hash(access_token),
        access_expires_at=now + timedelta(seconds=settings.AGENT_AUTH_ACCESS_TTL),
        refresh_expires_at=refresh_expires_at,
        created_at=now,
    )
    AgentRefreshToken.objects.create(
        token_hash=secret_hash(refresh_token),
        session=session,
        created_at=now,
        expires_at=refresh_expires_at,
    )
    authorization.status = AgentAuthorization.Status.CONSUMED
    authorization.consumed_at = now
    authorization.session = session
    authorization.save(update_fields=["status", "consumed_at", "session"])
    audit_record(
        action="agent_auth.token.issued",
        actor=Actor.agent(session_id=session.id, client_app_id=client.app_id),
        target_type="agent_session",
        target_id=str(session.id),
        data={
            "authorization_id": str(authorization.id),
            "allowed_routes": session.allowed_routes,
            **({"scopes": session.scopes} if session.scopes is not None else {}),
        },
    )
    return session


def token_refresh(*, client_app_id: str, refresh_token: str) -> dict:
    """Agent Auth v1 front door of :func:`refresh_grant`: the session must not belong to an OAuth
    client (those refresh tokens work only at ``/oauth/token``)."""
    if not looks_like(refresh_token, REFRESH_TOKEN_PREFIX):
        raise InvalidGrant()
    client = _token_client(client_app_id)
    return refresh_grant(client=client, oauth_client=None, refresh_token=refresh_token)


def refresh_grant(*, client: Client, oauth_client: OAuthClient | None, refresh_token: str) -> dict:
    """Rotate a refresh token: new access token (the old one stops working at once), new refresh
    token, old refresh token ``used``. ``refresh_expires_at`` never moves (absolute lifetime). The
    one implementation behind both front doors: the session must belong to ``client`` and to
    ``oauth_client`` (None: an Agent Auth v1 session).

    Presenting a refresh token that is no longer ``active`` is treated as theft, as BailingHub does
    (docs/protocol.md "Refresh replay"): the whole session is revoked, the presented token marked
    ``replayed`` and its active sibling ``revoked``. That revocation commits before ``invalid_grant``
    is raised. Two concurrent refreshes with the same token therefore end with one success and one
    replay, which revokes the session: a well-behaved agent serialises its own refreshes.
    """
    if not looks_like(refresh_token, REFRESH_TOKEN_PREFIX):
        raise InvalidGrant()
    token_hash = secret_hash(refresh_token)
    located = (
        AgentRefreshToken.objects.filter(token_hash=token_hash).values_list("session_id", flat=True).first()
    )
    if located is None:
        raise InvalidGrant()
    access_token = new_secret(ACCESS_TOKEN_PREFIX)
    next_refresh = new_secret(REFRESH_TOKEN_PREFIX)
    replayed = False
    with transaction.atomic():
        session = (
            AgentSession.objects.select_for_update(of=("self",))
            .select_related("client")
            .filter(pk=located)
            .first()
        )
        token = AgentRefreshToken.objects.select_for_update().filter(token_hash=token_hash).first()
        now = timezone.now()
        if (
            session is None
            or token is None
            or session.client_id != client.pk
            or session.oauth_client_id != _oauth_pk(oauth_client)
        ):
            raise InvalidGrant()
        if session.revoked_at is not None or session.refresh_expires_at <= now or token.expires_at <= now:
            raise InvalidGrant()
        if token.status != AgentRefreshToken.Status.ACTIVE:
            token.status = AgentRefreshToken.Status.REPLAYED
            token.save(update_fields=["status"])
            audit_record(
                action="agent_auth.refresh.replayed",
                actor=Actor.agent(session_id=session.id, client_app_id=client.app_id),
                target_type="agent_session",
                target_id=str(session.id),
            )
            session_revoke_locked(
                session, by="refresh_replay", reason="refresh_replay", actor=Actor("agent", str(session.id))
            )
            replayed = True
        else:
            token.status = AgentRefreshToken.Status.USED
            token.used_at = now
            token.save(update_fields=["status", "used_at"])
            AgentRefreshToken.objects.create(
                token_hash=secret_hash(next_refresh),
                session=session,
                created_at=now,
                expires_at=session.refresh_expires_at,
            )
            session.access_token_hash = secret_hash(access_token)
            session.access_expires_at = now + timedelta(seconds=settings.AGENT_AUTH_ACCESS_TTL)
            session.save(update_fields=["access_token_hash", "access_expires_at", "updated_at"])
            audit_record(
                action="agent_auth.token.refreshed",
                actor=Actor.agent(session_id=session.id, client_app_id=client.app_id),
                target_type="agent_session",
                target_id=str(session.id),
            )
    if replayed:
        raise InvalidGrant()
    return _token_response(session, access_token=access_token, refresh_token=next_refresh, now=now)
