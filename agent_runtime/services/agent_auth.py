"""Agent Auth v1: browser authorization with PKCE, one-time codes, sessions and refresh rotation.

The flow (research §B.1): a local agent creates an authorization, a consent page (the business
system's, or the hub's own for hub-consent clients) approves or denies it, the agent exchanges the
one-time code with its PKCE verifier for an access/refresh token pair, and rotates the refresh
token until the session's absolute lifetime ends. Every secret is stored only as a SHA-256 digest.

Lock order, everywhere in this module: authorization row → session row → the session's refresh
tokens → audit chain (taken last by ``audit_record``). Errors that must leave a trace (an expired
authorization flipped to ``expired``, a session revoked after refresh-token replay) are raised only
after their transaction has committed, so the error response cannot roll the change back.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import math
import re
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import unquote_plus, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agent_runtime.errors import (
    AgentAuthorizeUrlInvalid,
    AuthorizationExpired,
    InvalidClient,
    InvalidGrant,
    InvalidState,
    RouteNotAllowed,
)
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession, Client
from agent_runtime.tokens import (
    ACCESS_TOKEN_PREFIX,
    AUTH_CODE_PREFIX,
    REFRESH_TOKEN_PREFIX,
    looks_like,
    new_secret,
    secret_hash,
)
from agent_runtime.validation import authorize_url_problem, loopback_redirect_problem
from bailing.api.errors import InvalidRequest, NotFound, RateLimited
from bailing.api.hashing import constant_time_equals
from bailing.api.limits import utf16_length
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

PKCE_VERIFIER_RE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
# Namespace of the creation-throttle advisory locks (two-int4 key space, disjoint from the audit
# chain's single-bigint key).
_THROTTLE_LOCK_NAMESPACE = 0x62684341  # "bhCA"

# Who revoked a session, as the audit ledger and ``AgentSession.revoked_by`` record it.
_REVOKED_BY = {"agent": "agent", "client": "business", "user": "admin", "system": "system"}


# --- helpers --------------------------------------------------------------------------------------------


def _parse_uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise NotFound() from None


def _normalized_ip(ip: str | None) -> str | None:
    if not ip:
        return None
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return None


def pkce_s256(verifier: str) -> str:
    """RFC 7636 S256: base64url(sha256(ascii verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _with_query(url: str, *, drop: set[str], add: list[tuple[str, str]]) -> str:
    """``url`` with the query keys in ``drop`` removed and ``add`` appended.

    The rest of the query is kept byte for byte (a consent page may rely on its own parameters);
    only the keys the hub owns are replaced, so a registered URL or redirect can never smuggle in
    a second ``authorization_id``, ``code`` or ``state``.
    """
    parts = urlsplit(url)
    kept = [
        piece
        for piece in parts.query.split("&")
        if piece and unquote_plus(piece.split("=", 1)[0]) not in drop
    ]
    kept.append(urlencode(add))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join(kept), ""))


def hub_consent_only(client: Client) -> bool:
    """Clients approved on the hub's own consent page: hub consent on and no business page."""
    return client.hub_consent and not client.agent_authorize_url


def _authorization_url(client: Client, authorization_id: uuid.UUID) -> str:
    if client.agent_authorize_url:
        return _with_query(
            client.agent_authorize_url,
            drop={"authorization_id"},
            add=[("authorization_id", str(authorization_id))],
        )
    return (
        f"{settings.BAILING_PUBLIC_URL}/console/consent/?{urlencode({'authorization_id': authorization_id})}"
    )


def _client_usable_for_agents(client: Client | None) -> bool:
    return (
        client is not None
        and client.enabled
        and client.is_agent_client
        and (not client.agent_authorize_url or authorize_url_problem(client.agent_authorize_url) is None)
    )


def subject_display_view(value: Any) -> dict[str, Any]:
    """``subject_display`` + ``subject_display_status`` as upstream Core 0.7 returns them."""
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        return {"subject_display": {"name": value["name"]}, "subject_display_status": "provided"}
    return {"subject_display": None, "subject_display_status": "missing"}


def _principal_record(principal: dict) -> dict:
    """The principal as stored on the session: ``id``, ``roles`` always; the optional strings only
    when non-empty (an empty tenant means "no tenant", as upstream stores it)."""
    if not isinstance(principal, dict) or not isinstance(principal.get("id"), str) or not principal["id"]:
        raise InvalidRequest(field="principal.id")
    # The API view validates this already; the hub consent page builds the principal from a
    # username (up to 150 characters in Django), so the service enforces the limit for every caller.
    if utf16_length(principal["id"]) > 128:
        raise InvalidRequest(field="principal.id")
    record: dict[str, Any] = {"id": principal["id"]}
    if principal.get("tenant"):
        record["tenant"] = principal["tenant"]
    record["roles"] = list(principal.get("roles") or [])
    for key in ("audience", "channel"):
        if principal.get(key):
            record[key] = principal[key]
    return record


# --- authorizations -------------------------------------------------------------------------------------


def authorization_create(
    *,
    client_app_id: str,
    redirect_uri: str,
    state: str,
    requested_routes: list[str],
    device_label: str,
    code_challenge: str,
    ip: str | None,
) -> tuple[AgentAuthorization, str]:
    """Open a pending authorization for a local agent and return it with the consent page URL.

    The input is shape-validated by the caller. The client must be an enabled agent client that
    allows every requested route. Creation is throttled per (client, caller IP) by counting the
    rows created in the window under a transaction-scoped advisory lock, so concurrent requests
    cannot both slip under the limit and the throttle survives restarts and multiple workers.
    """
    client = Client.objects.filter(app_id=client_app_id).first()
    if (
        client is None
        or not client.enabled
        or not client.is_agent_client
        or not all(client.allows_route(route) for route in requested_routes)
    ):
        raise InvalidClient()
    if client.agent_authorize_url and authorize_url_problem(client.agent_authorize_url) is not None:
        raise AgentAuthorizeUrlInvalid()

    ip = _normalized_ip(ip)
    limit = settings.AGENT_AUTH_CREATE_LIMIT
    window = settings.AGENT_AUTH_CREATE_WINDOW
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                [_THROTTLE_LOCK_NAMESPACE, f"{client.app_id}/{ip or '-'}"],
            )
        now = timezone.now()
        # created_ip=None filters IS NULL: callers without an address share one bucket per client.
        recent = list(
            AgentAuthorization.objects.filter(
                client=client, created_ip=ip, created_at__gt=now - timedelta(seconds=window)
            )
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        if len(recent) >= limit:
            # The next creation fits once enough of the oldest rows have left the window.
            frees_at = recent[len(recent) - limit] + timedelta(seconds=window)
            raise RateLimited(retry_after=max(1, math.ceil((frees_at - now).total_seconds())))
        authorization = AgentAuthorization.objects.create(
            client=client,
            redirect_uri=redirect_uri,
            state_value=state,
            requested_routes=list(requested_routes),
            device_label=device_label,
            code_challenge=code_challenge,
            created_ip=ip,
            created_at=now,
            expires_at=now + timedelta(seconds=settings.AGENT_AUTH_AUTHORIZATION_TTL),
        )
        # The agent has no identity yet; its device label is self-asserted, so it is data, not actor.
        audit_record(
            action="agent_auth.authorization.created",
            actor=Actor("agent", "unauthenticated"),
            client_app_id=client.app_id,
            target_type="agent_authorization",
            target_id=str(authorization.id),
            data={
                "requested_routes": list(requested_routes),
                "device_label": device_label,
                "ip": ip,
                "hub_consent": hub_consent_only(client),
            },
        )
    return authorization, _authorization_url(client, authorization.id)


def authorization_effective_status(authorization: AgentAuthorization, *, now=None) -> str:
    """``expired`` for a pending authorization past its deadline even before anyone flipped it."""
    now = now or timezone.now()
    if authorization.status == AgentAuthorization.Status.PENDING and authorization.expires_at <= now:
        return AgentAuthorization.Status.EXPIRED
    return authorization.status


def authorization_get_for_client(*, client: Client, authorization_id) -> AgentAuthorization:
    """An authorization of ``client`` (the business backend's consent context); 404 otherwise.

    Another client's authorization is indistinguishable from an unknown one.
    """
    pk = _parse_uuid(authorization_id)
    authorization = (
        AgentAuthorization.objects.select_related("client", "session").filter(pk=pk, client=client).first()
    )
    if authorization is None:
        raise NotFound()
    return authorization


def authorization_get_for_hub_consent(*, authorization_id) -> AgentAuthorization:
    """An authorization that the hub's own consent page may show: its client is enabled and uses
    hub consent (and has no business consent page, which would own the decision instead)."""
    pk = _parse_uuid(authorization_id)
    authorization = AgentAuthorization.objects.select_related("client", "session").filter(pk=pk).first()
    if (
        authorization is None
        or not authorization.client.enabled
        or not hub_consent_only(authorization.client)
    ):
        raise NotFound()
    return authorization


def _lock_authorization_for_decision(*, authorization_id, client: Client | None) -> AgentAuthorization:
    """Lock the authorization and check who may decide it (must run inside a transaction)."""
    pk = _parse_uuid(authorization_id)
    authorization = (
        AgentAuthorization.objects.select_for_update(of=("self",))
        .select_related("client")
        .filter(pk=pk)
        .first()
    )
    if authorization is None:
        raise NotFound()
    if client is not None:
        if authorization.client_id != client.pk:
            raise NotFound()
    elif not authorization.client.enabled or not hub_consent_only(authorization.client):
        raise NotFound()
    return authorization


def _close_locked(
    authorization: AgentAuthorization, *, status: str, now, actor: Actor, data: dict | None = None
) -> None:
    """End a locked pending authorization as ``expired`` or ``denied`` and audit it."""
    authorization.status = status
    authorization.decided_at = now
    authorization.save(update_fields=["status", "decided_at"])
    audit_record(
        action=f"agent_auth.authorization.{status}",
        actor=actor,
        client_app_id=authorization.client.app_id,
        target_type="agent_authorization",
        target_id=str(authorization.id),
        data=data,
    )


def _expire_locked(authorization: AgentAuthorization, *, now, actor: Actor) -> None:
    _close_locked(authorization, status=AgentAuthorization.Status.EXPIRED, now=now, actor=actor)


def authorization_approve(
    *,
    authorization_id,
    client: Client | None,
    principal: dict,
    on_behalf_of: str,
    allowed_routes: list[str],
    subject_display: dict | None = None,
    approved_by=None,
    actor: Actor,
) -> str:
    """Approve a pending authorization with the trusted principal; return the loopback redirect.

    ``client`` is the business client deciding on its own consent page; ``None`` means the hub's
    consent page (then the authorization's client must use hub consent and ``approved_by`` is the
    console user). The granted routes must be a subset of what was requested and of what the
    client allows. Issues the one-time code (``bhc_``, 120 s); only its digest is stored and the
    plaintext leaves only inside the returned redirect URI.
    """
    if not isinstance(allowed_routes, list) or not allowed_routes:
        raise InvalidRequest(field="allowed_routes")
    if not isinstance(on_behalf_of, str) or not on_behalf_of:
        raise InvalidRequest(field="on_behalf_of")
    principal_record = _principal_record(principal)
    expired = False
    code = new_secret(AUTH_CODE_PREFIX)
    with transaction.atomic():
        authorization = _lock_authorization_for_decision(authorization_id=authorization_id, client=client)
        owner = authorization.client
        if any(
            route not in authorization.requested_routes or not owner.allows_route(route)
            for route in allowed_routes
        ):
            raise RouteNotAllowed()
        now = timezone.now()
        if authorization.status == AgentAuthorization.Status.PENDING and authorization.expires_at <= now:
            _expire_locked(authorization, now=now, actor=actor)
            expired = True
        elif authorization.status != AgentAuthorization.Status.PENDING:
            raise InvalidState()
        else:
            authorization.status = AgentAuthorization.Status.APPROVED
            authorization.principal = principal_record
            authorization.on_behalf_of = on_behalf_of
            authorization.allowed_routes = list(allowed_routes)
            authorization.subject_display = {"name": subject_display["name"]} if subject_display else None
            authorization.approved_by = approved_by
            authorization.code_hash = secret_hash(code)
            authorization.code_expires_at = now + timedelta(seconds=settings.AGENT_AUTH_CODE_TTL)
            authorization.decided_at = now
            authorization.save(
                update_fields=[
                    "status",
                    "principal",
                    "on_behalf_of",
                    "allowed_routes",
                    "subject_display",
                    "approved_by",
                    "code_hash",
                    "code_expires_at",
                    "decided_at",
                ]
            )
            audit_record(
                action="agent_auth.authorization.approved",
                actor=actor,
                client_app_id=owner.app_id,
                target_type="agent_authorization",
                target_id=str(authorization.id),
                data={
                    "allowed_routes": list(allowed_routes),
                    "on_behalf_of": on_behalf_of,
                    "principal_id": principal_record["id"],
                    "via": "business" if client is not None else "hub_consent",
                },
            )
    if expired:
        raise AuthorizationExpired()
    return _with_query(
        authorization.redirect_uri,
        drop={"code", "error", "state"},
        add=[("code", code), ("state", authorization.state_value)],
    )


def authorization_deny(*, authorization_id, client: Client | None, actor: Actor) -> str:
    """Deny a pending authorization; return the loopback redirect carrying ``error=access_denied``.

    Same access and state rules as :func:`authorization_approve`.
    """
    expired = False
    with transaction.atomic():
        authorization = _lock_authorization_for_decision(authorization_id=authorization_id, client=client)
        now = timezone.now()
        if authorization.status == AgentAuthorization.Status.PENDING and authorization.expires_at <= now:
            _expire_locked(authorization, now=now, actor=actor)
            expired = True
        elif authorization.status != AgentAuthorization.Status.PENDING:
            raise InvalidState()
        else:
            _close_locked(
                authorization,
                status=AgentAuthorization.Status.DENIED,
                now=now,
                actor=actor,
                data={"via": "business" if client is not None else "hub_consent"},
            )
    if expired:
        raise AuthorizationExpired()
    return _with_query(
        authorization.redirect_uri,
        drop={"code", "error", "state"},
        add=[("error", "access_denied"), ("state", authorization.state_value)],
    )


# --- tokens ---------------------------------------------------------------------------------------------


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
    if not _client_usable_for_agents(client):
        raise InvalidGrant()
    return client


def token_exchange_code(*, client_app_id: str, code: str, redirect_uri: str, code_verifier: str) -> dict:
    """Exchange an approved one-time code for the session's first token pair.

    The code must belong to the same client and redirect URI, be unexpired and match the PKCE
    challenge. Under the authorization's row lock the session and its first refresh token are
    created and the authorization flips to ``consumed``, so a code works exactly once even when
    presented concurrently. Every failure is the same ``invalid_grant``.
    """
    if (
        not looks_like(code, AUTH_CODE_PREFIX)
        or not isinstance(code_verifier, str)
        or not PKCE_VERIFIER_RE.fullmatch(code_verifier)
        or not isinstance(redirect_uri, str)
        or loopback_redirect_problem(redirect_uri) is not None
    ):
        raise InvalidGrant()
    client = _token_client(client_app_id)
    access_token = new_secret(ACCESS_TOKEN_PREFIX)
    refresh_token = new_secret(REFRESH_TOKEN_PREFIX)
    with transaction.atomic():
        authorization = (
            AgentAuthorization.objects.select_for_update().filter(code_hash=secret_hash(code)).first()
        )
        now = timezone.now()
        if (
            authorization is None
            or authorization.client_id != client.pk
            or authorization.status != AgentAuthorization.Status.APPROVED
            or authorization.code_expires_at is None
            or authorization.code_expires_at <= now
            or authorization.redirect_uri != redirect_uri
            or not constant_time_equals(pkce_s256(code_verifier), authorization.code_challenge)
        ):
            raise InvalidGrant()
        refresh_expires_at = now + timedelta(seconds=settings.AGENT_AUTH_REFRESH_TTL)
        session = AgentSession.objects.create(
            client=client,
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
            data={"authorization_id": str(authorization.id), "allowed_routes": session.allowed_routes},
        )
    return _token_response(session, access_token=access_token, refresh_token=refresh_token, now=now)


def token_refresh(*, client_app_id: str, refresh_token: str) -> dict:
    """Rotate a refresh token: new access token (the old one stops working at once), new refresh
    token, old refresh token ``used``. ``refresh_expires_at`` never moves (absolute lifetime).

    Presenting a refresh token that is no longer ``active`` is treated as theft (research H27):
    the whole session is revoked, the presented token marked ``replayed`` and its active sibling
    ``revoked``. That revocation commits before ``invalid_grant`` is raised. Two concurrent
    refreshes with the same token therefore end with one success and one replay, which revokes
    the session: a well-behaved agent serialises its own refreshes.
    """
    if not looks_like(refresh_token, REFRESH_TOKEN_PREFIX):
        raise InvalidGrant()
    client = _token_client(client_app_id)
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
        if session is None or token is None or session.client_id != client.pk:
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
            _revoke_locked(
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


# --- sessions -------------------------------------------------------------------------------------------


def _revoke_locked(session: AgentSession, *, by: str, reason: str, actor: Actor) -> bool:
    """Revoke a session whose row the caller holds locked. False if it was already revoked."""
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
        data={"by": by, "reason": reason},
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
        revoked = _revoke_locked(
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
    pk = _parse_uuid(session_id)
    session = AgentSession.objects.select_related("client").filter(pk=pk, client=client).first()
    if session is None:
        raise NotFound()
    return session
