"""Standard OAuth 2.1 sign-in for generic MCP clients, on the Agent Auth v1 machinery.

docs/protocol.md "Standard OAuth sign-in for MCP clients". A generic MCP client (Claude Code, Cursor,
the MCP SDK's ``OAuthClientProvider``) registers itself (RFC 7591) and gets a public ``client_id``;
it then signs in *as the hub's* ``mcp_sign_in`` *client*: the authorize endpoint opens an ordinary
authorization (:func:`authorization_create`) approved on the usual consent page, and the token
endpoint runs the same code exchange and refresh rotation as ``/agent-auth/v1/token``
(:func:`code_grant`, :func:`refresh_grant`), bound to the OAuth client that started the sign-in.
There is no second token store: the access token is an ordinary agent bearer (``bha_``).

Errors are :class:`OAuthError` in the OAuth wire shape (``error`` + ``error_description``), not the
hub's error envelope. Lock order: the registration throttle lock → audit chain.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agent_runtime.errors import AgentAuthorizeUrlInvalid, InvalidClient, InvalidGrant
from agent_runtime.identity import DEFAULT_SCOPES, SCOPES, scopes_closed
from agent_runtime.models import AgentAuthorization, AgentRefreshToken, AgentSession, Client, OAuthClient
from agent_runtime.models.oauth import OAUTH_METADATA_URL_MAX
from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS
from agent_runtime.services.agent_auth.authorizations import authorization_create, redirect_with
from agent_runtime.services.agent_auth.common import (
    client_usable_for_agents,
    normalized_ip,
    throttle_check,
    throttle_lock,
)
from agent_runtime.services.agent_auth.sessions import session_revoke
from agent_runtime.services.agent_auth.tokens import code_grant, refresh_grant
from agent_runtime.tokens import (
    ACCESS_TOKEN_PREFIX,
    AUTH_CODE_PREFIX,
    OAUTH_CLIENT_ID_PREFIX,
    REFRESH_TOKEN_PREFIX,
    looks_like,
    new_secret,
    secret_hash,
)
from agent_runtime.validation import is_loopback_host, oauth_redirect_matches
from bailing.api.errors import RateLimited
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record

# Two-int4 advisory-lock namespace of the registration throttle ("bhOR"), apart from the
# authorization throttle's and the audit chain's keys.
_REGISTER_LOCK_NAMESPACE = 0x62684F52
_AGENT_ROUTE_RE = re.compile(AGENT_ROUTE)


class OAuthError(Exception):
    """An OAuth error answer: ``error`` (an RFC 6749 / 7591 / 8707 code, or ``mcp_sign_in_disabled``),
    its HTTP status and a fixed ``error_description`` (never input)."""

    def __init__(self, error: str, description: str, *, status: int = 400, retry_after: int | None = None):
        super().__init__(error)
        self.error = error
        self.description = description
        self.status = status
        self.retry_after = retry_after

    def payload(self) -> dict:
        return {"error": self.error, "error_description": self.description}


def invalid_client() -> OAuthError:
    return OAuthError("invalid_client", "Unknown client_id.", status=401)


def _invalid_grant() -> OAuthError:
    return OAuthError("invalid_grant", "The grant is invalid, expired, already used or not this client's.")


def _invalid_target() -> OAuthError:
    return OAuthError("invalid_target", "resource must be the MCP endpoint this sign-in was authorized for.")


def invalid_scope() -> OAuthError:
    return OAuthError("invalid_scope", f"scope may hold only {' '.join(SCOPES)}, as granted.")


def scope_text(scopes) -> str:
    """Scopes as OAuth writes them (RFC 6749 §3.3)."""
    return " ".join(scopes)


def mcp_resource_url(route_key: str) -> str:
    """The RFC 8707 resource indicator of a workspace's MCP endpoint: ``<public URL>/mcp/<route>``."""
    return f"{settings.BAILING_PUBLIC_URL}/mcp/{route_key}"


def mcp_resource_route(resource: str | None) -> str | None:
    """The route key of ``resource`` when it is exactly ``<public URL>/mcp/<route>`` with an agent
    route key (docs/protocol.md "Identifiers"); None otherwise (no normalization: a trailing slash,
    a query, another host or case are all refused)."""
    prefix = f"{settings.BAILING_PUBLIC_URL}/mcp/"
    if not isinstance(resource, str) or not resource.startswith(prefix):
        return None
    route = resource[len(prefix) :]
    if not _AGENT_ROUTE_RE.fullmatch(route) or route in RESERVED_ROUTE_KEYS:
        return None
    return route


def mcp_sign_in_client() -> Client | None:
    """The client generic MCP clients sign in as: the ``mcp_sign_in`` client, while it is enabled
    and a usable agent client; None when MCP sign-in is off."""
    client = Client.objects.filter(mcp_sign_in=True).first()
    return client if client_usable_for_agents(client) else None


def _pending_expired_before(now=None):
    """Clients that never completed a sign-in and were created before this have expired."""
    return (now or timezone.now()) - timedelta(seconds=settings.OAUTH_REGISTER_PENDING_TTL)


def oauth_client_active(client_id: object) -> OAuthClient | None:
    """The OAuth client ``client_id`` (a registration's ``bhm_`` id, or the URL of a metadata
    document client already resolved at the authorize endpoint) while it can sign in: its hub client
    is still the enabled ``mcp_sign_in`` client, and it has completed a sign-in or is younger than
    ``OAUTH_REGISTER_PENDING_TTL``. Unknown ids, expired ones and clients whose hub client was
    disabled or lost ``mcp_sign_in`` are None."""
    if isinstance(client_id, str) and "://" in client_id and len(client_id) <= OAUTH_METADATA_URL_MAX:
        lookup = {"client_id": client_id, "metadata_document": True}
    elif looks_like(client_id, OAUTH_CLIENT_ID_PREFIX) and len(client_id) <= 64:
        lookup = {"client_id": client_id, "metadata_document": False}
    else:
        return None
    oauth_client = OAuthClient.objects.select_related("hub_client").filter(**lookup).first()
    if (
        oauth_client is None
        or (oauth_client.signed_in_at is None and oauth_client.created_at <= _pending_expired_before())
        or not oauth_client.hub_client.mcp_sign_in
        or not client_usable_for_agents(oauth_client.hub_client)
    ):
        return None
    return oauth_client


def _touch(oauth_client: OAuthClient, *, signed_in: bool = False) -> None:
    """Record a use of the client; ``signed_in`` (a code exchange succeeded) also marks its first
    completed sign-in, once, which makes its redirect URIs trusted for error redirects
    (:func:`error_redirect_trusted`)."""
    now = timezone.now()
    changes: dict = {"last_used_at": now}
    if signed_in:
        changes["signed_in_at"] = Coalesce(F("signed_in_at"), Value(now))
    OAuthClient.objects.filter(pk=oauth_client.pk).update(**changes)


# --- registration (RFC 7591) ---------------------------------------------------------------------------


def oauth_clients_purge(*, now=None, limit: int = 500) -> int:
    """Delete up to ``limit`` OAuth clients (registrations and metadata document clients) that never
    completed a sign-in and are past ``OAUTH_REGISTER_PENDING_TTL``, with their authorizations (none
    of which became a session: a session marks its client signed in). Returns how many went.

    Run lazily by every registration and by ``manage.py oauth_clients_purge``. A client that signed
    in meanwhile, or that a session points to, stays.
    """
    cutoff = _pending_expired_before(now)
    with_session = AgentSession.objects.filter(oauth_client=OuterRef("pk"))
    with transaction.atomic():
        pks = list(
            OAuthClient.objects.select_for_update(skip_locked=True)
            .filter(signed_in_at__isnull=True, created_at__lte=cutoff)
            .exclude(Exists(with_session))
            .order_by("created_at")
            .values_list("pk", flat=True)[:limit]
        )
        if not pks:
            return 0
        AgentAuthorization.objects.filter(oauth_client_id__in=pks, session__isnull=True).delete()
        left = AgentAuthorization.objects.filter(oauth_client=OuterRef("pk"))
        deleted, _ = (
            OAuthClient.objects.filter(pk__in=pks)
            .exclude(Exists(with_session))
            .exclude(Exists(left))
            .delete()
        )
    return deleted


def _pending_cap_check(now) -> None:
    """429 when ``OAUTH_REGISTER_PENDING_MAX`` registrations already wait for their first sign-in;
    ``retry_after`` is when the oldest of them expires. Runs under the registration lock."""
    cap = settings.OAUTH_REGISTER_PENDING_MAX
    pending = OAuthClient.objects.filter(
        metadata_document=False, signed_in_at__isnull=True, created_at__gt=_pending_expired_before(now)
    )
    if pending.count() < cap:
        return
    oldest = pending.order_by("created_at").values_list("created_at", flat=True).first()
    frees_at = (oldest or now) + timedelta(seconds=settings.OAUTH_REGISTER_PENDING_TTL)
    raise OAuthError(
        "rate_limited",
        "Too many registrations are waiting for their first sign-in; retry later.",
        status=429,
        retry_after=max(1, math.ceil((frees_at - now).total_seconds())),
    )


def oauth_client_register(
    *, client_name: str, redirect_uris: list[str], ip: str | None, application_type: str = ""
) -> OAuthClient:
    """Register a public MCP client for the ``mcp_sign_in`` client; the metadata is validated by the
    caller. 403 ``mcp_sign_in_disabled`` when no client takes MCP sign-ins; 429 past
    ``OAUTH_REGISTER_LIMIT`` registrations per ``OAUTH_REGISTER_WINDOW`` seconds and caller IP,
    counted in the database under a transaction-scoped advisory lock (as authorizations are), and
    429 while ``OAUTH_REGISTER_PENDING_MAX`` registrations wait for their first sign-in (expired ones
    are purged first, :func:`oauth_clients_purge`)."""
    client = mcp_sign_in_client()
    if client is None:
        raise OAuthError("mcp_sign_in_disabled", "This hub does not accept MCP client sign-ins.", status=403)
    ip = normalized_ip(ip)
    oauth_clients_purge()
    window = settings.OAUTH_REGISTER_WINDOW
    with transaction.atomic():
        throttle_lock(_REGISTER_LOCK_NAMESPACE, ip or "-")
        now = timezone.now()
        # created_ip=None filters IS NULL: callers without an address share one bucket.
        recent = list(
            OAuthClient.objects.filter(created_ip=ip, created_at__gt=now - timedelta(seconds=window))
            .order_by("created_at")
            .values_list("created_at", flat=True)
        )
        try:
            throttle_check(recent, limit=settings.OAUTH_REGISTER_LIMIT, window=window, now=now)
        except RateLimited as exc:
            raise OAuthError(
                "rate_limited",
                "Too many client registrations from this address; retry later.",
                status=429,
                retry_after=exc.extra["retry_after_seconds"],
            ) from None
        # One lock for the global cap (every caller), taken after the per-address one.
        throttle_lock(_REGISTER_LOCK_NAMESPACE, "pending-cap")
        _pending_cap_check(now)
        oauth_client = OAuthClient.objects.create(
            client_id=new_secret(OAUTH_CLIENT_ID_PREFIX),
            hub_client=client,
            client_name=client_name,
            redirect_uris=list(redirect_uris),
            application_type=application_type,
            created_at=now,
            created_ip=ip,
        )
        # The client is not signed in and its name is self-asserted: data, not actor.
        audit_record(
            action="agent_auth.oauth_client.registered",
            actor=Actor("agent", "unauthenticated"),
            client_app_id=client.app_id,
            target_type="oauth_client",
            target_id=oauth_client.client_id,
            data={
                "client_name": client_name,
                "redirect_hosts": sorted({urlsplit(uri).netloc for uri in redirect_uris}),
                "ip": ip,
            },
        )
    return oauth_client


# --- authorization -------------------------------------------------------------------------------------


def registered_redirect(oauth_client: OAuthClient, redirect_uri: str) -> bool:
    """Whether ``redirect_uri`` is one of the client's registered redirects (a loopback one with any
    port, RFC 8252 §7.3). A metadata document client's must be one its document lists, exactly."""
    if oauth_client.metadata_document:
        return redirect_uri in oauth_client.redirect_uris and oauth_redirect_matches(
            redirect_uri, redirect_uri
        )
    return any(oauth_redirect_matches(registered, redirect_uri) for registered in oauth_client.redirect_uris)


def error_redirect_trusted(oauth_client: OAuthClient, redirect_uri: str) -> bool:
    """Whether an authorization error may be sent to ``redirect_uri`` (a registered redirect of
    ``oauth_client``) by redirecting the browser there (RFC 6749 §4.1.2.1).

    Anyone can register an https redirect URI, so redirecting errors to it unconditionally makes the
    hub an open redirector: a crafted authorize link with a bogus parameter would bounce a user from
    the hub's trusted address to any website (RFC 9700 §4.11.2). Only two kinds are trusted: a
    loopback redirect (a native client on the user's own computer, RFC 8252; the registration rules
    admit ``http`` only to loopback hosts), and any redirect of a client that has completed a sign-in
    (a user approved it on the consent page and the client exchanged the code), whose redirect URIs
    have then been seen in use. Everything else gets the hub's own error page instead.
    """
    parts = urlsplit(redirect_uri)
    if parts.scheme == "http" and is_loopback_host(parts.hostname or ""):
        return True
    return oauth_client.signed_in_at is not None


class AuthorizeError(Exception):
    """An authorization error for the client's redirect (RFC 6749 §4.1.2.1): ``error`` is its code.
    Whether it is redirected or shown on the hub's page is :func:`error_redirect_trusted`'s call."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class AuthorizeRequest:
    """A shape-checked ``GET /oauth/authorize`` whose client and redirect are known good."""

    oauth_client: OAuthClient
    redirect_uri: str
    state: str
    code_challenge: str
    route_key: str
    # What the request asks for (agent_runtime.identity.scopes_parse: closed, in order).
    scopes: tuple[str, ...] = DEFAULT_SCOPES


def oauth_authorize(request: AuthorizeRequest, *, ip: str | None) -> str:
    """Open the authorization and return the consent page URL to send the browser to.
    :class:`AuthorizeError` ``invalid_target`` when the client may not use the workspace,
    ``access_denied`` when no sign-in is possible; the creation throttle's ``RateLimited``
    propagates (the caller shows a page)."""
    oauth_client = request.oauth_client
    hub_client = oauth_client.hub_client
    if not hub_client.allows_route(request.route_key):
        raise AuthorizeError("invalid_target")
    try:
        _, consent_url = authorization_create(
            client_app_id=hub_client.app_id,
            redirect_uri=request.redirect_uri,
            state=request.state,
            requested_routes=[request.route_key],
            device_label=oauth_client.client_name,
            code_challenge=request.code_challenge,
            ip=ip,
            oauth_client=oauth_client,
            scopes=list(request.scopes),
            resource=mcp_resource_url(request.route_key),
        )
    except (InvalidClient, AgentAuthorizeUrlInvalid):
        # The client was disabled or misconfigured a moment ago: no sign-in is possible.
        raise AuthorizeError("access_denied") from None
    _touch(oauth_client)
    return consent_url


def oauth_issuer() -> str:
    """The hub's issuer identifier (RFC 8414 ``issuer``), sent as ``iss`` on every authorization
    response of a standard MCP sign-in (RFC 9207)."""
    return settings.BAILING_PUBLIC_URL


def oauth_error_redirect(redirect_uri: str, error: str, state: str | None) -> str:
    """The client's redirect carrying an authorization error (RFC 6749 §4.1.2.1) and ``iss``."""
    params = [("error", error)]
    if state is not None:
        params.append(("state", state))
    params.append(("iss", oauth_issuer()))
    return redirect_with(redirect_uri, params)


# --- token endpoint ------------------------------------------------------------------------------------


def _token_answer(result: dict) -> dict:
    """The Agent Auth v1 token answer plus ``scope``: what the session was granted (RFC 6749 §5.1)."""
    granted = AgentSession.objects.filter(pk=result["session_id"]).values_list("scopes", flat=True).first()
    return {**result, "scope": scope_text(granted if granted is not None else DEFAULT_SCOPES)}


def oauth_code_grant(
    *, oauth_client: OAuthClient, code: str, redirect_uri: str, code_verifier: str, resource: str | None
) -> dict:
    """``grant_type=authorization_code`` for an OAuth client: the shared :func:`code_grant` (one-time
    code, 120 s, PKCE, replay revokes). ``resource``, when sent, must be the MCP endpoint of the
    workspace the sign-in asked for (else ``invalid_target``)."""
    if resource is not None:
        route = mcp_resource_route(resource)
        if route is None:
            raise _invalid_target()
        # The requested routes never change after creation, so this read needs no lock; the grant
        # itself re-checks everything under the authorization's row lock.
        requested = (
            AgentAuthorization.objects.filter(code_hash=secret_hash(code), oauth_client=oauth_client)
            .values_list("requested_routes", flat=True)
            .first()
            if looks_like(code, AUTH_CODE_PREFIX)
            else None
        )
        if requested is not None and requested != [route]:
            raise _invalid_target()
    try:
        result = code_grant(
            client=oauth_client.hub_client,
            oauth_client=oauth_client,
            code=code,
            redirect_uri=redirect_uri,
            code_verifier=code_verifier,
        )
    except InvalidGrant:
        raise _invalid_grant() from None
    _touch(oauth_client, signed_in=True)
    return _token_answer(result)


def oauth_refresh_grant(
    *, oauth_client: OAuthClient, refresh_token: str, resource: str | None, scope: str | None = None
) -> dict:
    """``grant_type=refresh_token`` for an OAuth client: the shared :func:`refresh_grant` (rotation;
    a replayed token revokes the session). ``resource``, when sent, must be the MCP endpoint of a
    workspace the session was granted (else ``invalid_target``). ``scope``, when sent, must be among
    the granted scopes (else ``invalid_scope``, RFC 6749 §6); the session keeps what it was granted
    either way — a refresh never widens nor narrows it, and the answer's ``scope`` says so."""
    items = None if scope is None or scope == "" else set(scope.split(" "))
    if items is not None and not items <= set(SCOPES):
        raise invalid_scope()
    if resource is not None or items is not None:
        route = None
        if resource is not None:
            route = mcp_resource_route(resource)
            if route is None:
                raise _invalid_target()
        # These never change after the code exchange, so this read needs no lock; the grant itself
        # re-checks the token under the session's row lock.
        found = (
            AgentSession.objects.filter(
                refresh_tokens__token_hash=secret_hash(refresh_token), oauth_client=oauth_client
            )
            .values("allowed_routes", "scopes")
            .first()
            if looks_like(refresh_token, REFRESH_TOKEN_PREFIX)
            else None
        )
        if found is not None:
            if route is not None and route not in found["allowed_routes"]:
                raise _invalid_target()
            granted = set(found["scopes"] if found["scopes"] is not None else DEFAULT_SCOPES)
            if items is not None and not set(scopes_closed(items)) <= granted:
                raise invalid_scope()
    try:
        result = refresh_grant(
            client=oauth_client.hub_client, oauth_client=oauth_client, refresh_token=refresh_token
        )
    except InvalidGrant:
        raise _invalid_grant() from None
    _touch(oauth_client)
    return _token_answer(result)


# --- revocation (RFC 7009) -----------------------------------------------------------------------------


def oauth_revoke(*, oauth_client: OAuthClient, token: str) -> None:
    """End the session an access or refresh token of ``oauth_client`` belongs to. Unknown tokens,
    other clients' tokens and already revoked sessions are not an error (RFC 7009 §2.2): the answer
    is the same either way. A refresh token of any status names its session."""
    session = None
    if looks_like(token, ACCESS_TOKEN_PREFIX):
        session = AgentSession.objects.filter(
            access_token_hash=secret_hash(token), oauth_client=oauth_client
        ).first()
    elif looks_like(token, REFRESH_TOKEN_PREFIX):
        refresh = (
            AgentRefreshToken.objects.select_related("session")
            .filter(token_hash=secret_hash(token), session__oauth_client=oauth_client)
            .first()
        )
        session = refresh.session if refresh is not None else None
    if session is not None:
        session_revoke(session=session, actor=Actor("agent", str(session.id)), reason="agent_logout")
