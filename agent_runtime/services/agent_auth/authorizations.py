"""Agent Auth v1 authorizations: create, read for the consent page, approve, deny, expire.

A local agent creates an authorization; a consent page (the business system's, or the hub's own
for hub-consent clients) approves or denies it. Lock order: authorization row → session row →
audit chain.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import unquote_plus, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agent_runtime.errors import (
    AgentAuthorizeUrlInvalid,
    AuthorizationExpired,
    HubConsentOnly,
    InvalidClient,
    InvalidState,
    RouteNotAllowed,
)
from agent_runtime.models import AgentAuthorization, Client, OAuthClient
from agent_runtime.services.agent_auth.common import (
    normalized_ip,
    throttle_check,
    throttle_lock,
    uuid_or_404,
)
from agent_runtime.tokens import (
    AUTH_CODE_PREFIX,
    new_secret,
    secret_hash,
)
from agent_runtime.validation import authorize_url_problem
from bailing.api.errors import InvalidRequest, NotFound
from bailing.api.limits import utf16_length
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.signing import is_sendable_header_value

# Namespace of the creation-throttle advisory locks (two-int4 key space, disjoint from the audit
# chain's single-bigint key).
_THROTTLE_LOCK_NAMESPACE = 0x62684341  # "bhCA"


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


def redirect_with(url: str, params: list[tuple[str, str]]) -> str:
    """``url`` (a validated redirect URI) carrying ``params``; the keys the hub sends back to a
    redirect (``code``, ``error``, ``state``, ``iss`` and those in ``params``) are replaced, never
    doubled."""
    return _with_query(url, drop={"code", "error", "state", "iss", *(key for key, _ in params)}, add=params)


def _iss(authorization: AgentAuthorization) -> list[tuple[str, str]]:
    """``iss`` (RFC 9207) for the redirect of a standard MCP sign-in: the hub's issuer identifier,
    the ``issuer`` of its authorization server metadata. Agent Auth v1 redirects carry none."""
    if authorization.oauth_client_id is None:
        return []
    return [("iss", settings.BAILING_PUBLIC_URL)]


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


def subject_display_view(value: Any) -> dict[str, Any]:
    """``subject_display`` + ``subject_display_status`` as BailingHub Core 0.7 returns them."""
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        return {"subject_display": {"name": value["name"]}, "subject_display_status": "provided"}
    return {"subject_display": None, "subject_display_status": "missing"}


def _principal_record(principal: dict) -> dict:
    """The principal as stored on the session: ``id``, ``roles`` always; the optional strings only
    when non-empty (an empty tenant means "no tenant", as BailingHub stores it)."""
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


def authorization_create(
    *,
    client_app_id: str,
    redirect_uri: str,
    state: str,
    requested_routes: list[str],
    device_label: str,
    code_challenge: str,
    ip: str | None,
    oauth_client: OAuthClient | None = None,
    scopes: list[str] | None = None,
    resource: str = "",
) -> tuple[AgentAuthorization, str]:
    """Open a pending authorization for a local agent and return it with the consent page URL.

    The input is shape-validated by the caller (the redirect URI by the rules of its front door).
    ``oauth_client`` is the OAuth client of a standard MCP sign-in that starts it (its code will
    work only for that OAuth client), with the ``scopes`` it asks for and the ``resource`` its token is
    for; None (and no scopes, no resource) for Agent Auth v1. The client must be an enabled agent client that
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

    ip = normalized_ip(ip)
    window = settings.AGENT_AUTH_CREATE_WINDOW
    with transaction.atomic():
        throttle_lock(_THROTTLE_LOCK_NAMESPACE, f"{client.app_id}/{ip or '-'}")
        now = timezone.now()
        # created_ip=None filters IS NULL: callers without an address share one bucket per client.
        recent = list(
            AgentAuthorization.objects.filter(
                client=client, created_ip=ip, created_at__gt=now - timedelta(seconds=window)
            )
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        throttle_check(recent, limit=settings.AGENT_AUTH_CREATE_LIMIT, window=window, now=now)
        authorization = AgentAuthorization.objects.create(
            client=client,
            redirect_uri=redirect_uri,
            state_value=state,
            requested_routes=list(requested_routes),
            device_label=device_label,
            code_challenge=code_challenge,
            created_ip=ip,
            oauth_client=oauth_client,
            scopes=scopes,
            resource=resource,
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
                **(
                    {"oauth_client_id": oauth_client.client_id, "scopes": scopes, "resource": resource}
                    if oauth_client is not None
                    else {}
                ),
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
    pk = uuid_or_404(authorization_id)
    authorization = (
        AgentAuthorization.objects.select_related("client", "session").filter(pk=pk, client=client).first()
    )
    if authorization is None:
        raise NotFound()
    return authorization


def authorization_get_for_hub_consent(*, authorization_id) -> AgentAuthorization:
    """An authorization that the hub's own consent page may show: its client is enabled and uses
    hub consent (and has no business consent page, which would own the decision instead)."""
    pk = uuid_or_404(authorization_id)
    authorization = (
        AgentAuthorization.objects.select_related("client", "session", "oauth_client").filter(pk=pk).first()
    )
    if (
        authorization is None
        or not authorization.client.enabled
        or not hub_consent_only(authorization.client)
    ):
        raise NotFound()
    return authorization


def _lock_authorization_for_decision(*, authorization_id, client: Client | None) -> AgentAuthorization:
    """Lock the authorization and check who may decide it (must run inside a transaction): a business
    client only its own authorizations, and only when it has its own consent page (403
    ``hub_consent_only`` otherwise); the hub's consent page (``client`` None) only those of enabled
    hub-consent clients."""
    pk = uuid_or_404(authorization_id)
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
        # Its sign-ins are decided on the hub's page by the signed-in user: the Client Token must
        # not approve them for a principal of its choosing (nor deny them).
        if hub_consent_only(authorization.client):
            raise HubConsentOnly()
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


def _expired_before_decision_locked(authorization: AgentAuthorization, *, now, actor: Actor) -> bool:
    """Under the row lock, before a decision: True when the pending authorization has run out (it is
    closed as expired now, so the caller commits that and then raises); ``InvalidState`` when it is
    no longer pending."""
    if authorization.status == AgentAuthorization.Status.PENDING and authorization.expires_at <= now:
        _expire_locked(authorization, now=now, actor=actor)
        return True
    if authorization.status != AgentAuthorization.Status.PENDING:
        raise InvalidState()
    return False


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
    client allows. ``on_behalf_of`` must be sendable in ``X-Bailing-On-Behalf-Of``
    (``bailing.signing.is_sendable_header_value``), else 400 ``invalid_request`` before anything is
    stored. Issues the one-time code (``bhc_``, 120 s); only its digest is stored and the plaintext
    leaves only inside the returned redirect URI.
    """
    if not isinstance(allowed_routes, list) or not allowed_routes:
        raise InvalidRequest(field="allowed_routes")
    # The subject travels to business systems in the signed X-Bailing-On-Behalf-Of header of every
    # tool call; one that cannot be sent there must not become a session that could never act.
    if not isinstance(on_behalf_of, str) or not on_behalf_of or not is_sendable_header_value(on_behalf_of):
        raise InvalidRequest(field="on_behalf_of")
    principal_record = _principal_record(principal)
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
        expired = _expired_before_decision_locked(authorization, now=now, actor=actor)
        if not expired:
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
    return redirect_with(
        authorization.redirect_uri,
        [("code", code), ("state", authorization.state_value), *_iss(authorization)],
    )


def authorization_deny(*, authorization_id, client: Client | None, actor: Actor) -> str:
    """Deny a pending authorization; return the loopback redirect carrying ``error=access_denied``.

    Same access and state rules as :func:`authorization_approve`.
    """
    with transaction.atomic():
        authorization = _lock_authorization_for_decision(authorization_id=authorization_id, client=client)
        now = timezone.now()
        expired = _expired_before_decision_locked(authorization, now=now, actor=actor)
        if not expired:
            _close_locked(
                authorization,
                status=AgentAuthorization.Status.DENIED,
                now=now,
                actor=actor,
                data={"via": "business" if client is not None else "hub_consent"},
            )
    if expired:
        raise AuthorizationExpired()
    return redirect_with(
        authorization.redirect_uri,
        [("error", "access_denied"), ("state", authorization.state_value), *_iss(authorization)],
    )
