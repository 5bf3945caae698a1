"""Bearer authentication for the agent surface (Agent access tokens) and the business surface
(Client Tokens). Both revalidate on every request: nothing about an identity is cached.

The agent bearer is one raw statement (:func:`agent_runtime.identity.identity_load`): the session,
its client and the routes the view is about to gate (``AgentApiView.prefetch_routes``), so a
bootstrap, a search or a tool detail needs no other statement when its catalog is cached.

Tokens are looked up by their SHA-256 digest through a unique index, so the database never sees a
plaintext token and the lookup leaks nothing useful through timing.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication

from agent_runtime.identity import AgentIdentity, agent_session_usable, identity_load
from agent_runtime.models import AgentSession, Client
from agent_runtime.tokens import ACCESS_TOKEN_PREFIX, looks_like, secret_hash
from bailing import tracing
from bailing.api.authentication import bearer_token
from bailing.api.errors import Unauthorized

# What a view's ``prefetch_routes`` answers to have every route of the session read with it.
ALL_ROUTES = object()


class AgentBearerAuthentication(BaseAuthentication):
    """``Authorization: Bearer bha_…`` → :class:`AgentIdentity`, or 401 ``unauthorized``."""

    @tracing.traced("auth.bearer")
    def authenticate(self, request):
        token = bearer_token(request)
        if not looks_like(token, ACCESS_TOKEN_PREFIX):
            raise Unauthorized()
        view = (getattr(request, "parser_context", None) or {}).get("view")
        wanted = view.prefetch_routes(request) if hasattr(view, "prefetch_routes") else None
        loaded = identity_load(
            secret_hash(token),
            route_key=wanted if isinstance(wanted, str) else None,
            all_routes=wanted is ALL_ROUTES,
        )
        now = timezone.now()
        if loaded is None:
            raise Unauthorized()
        session, client, prefetch = loaded
        if not agent_session_usable(session, now=now):
            raise Unauthorized()
        threshold = now - timedelta(seconds=settings.AGENT_SESSION_TOUCH_INTERVAL)
        if session.last_seen_at is None or session.last_seen_at < threshold:
            AgentSession.objects.filter(pk=session.pk).filter(
                Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=threshold)
            ).update(last_seen_at=now)
        identity = AgentIdentity(session=session, client=client, prefetch=prefetch)
        return (None, identity)

    def authenticate_header(self, request):
        return 'Bearer realm="bailing"'


class ClientTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <Client Token>`` → the enabled :class:`Client`, or 401 ``unauthorized``."""

    @tracing.traced("auth.client_token")
    def authenticate(self, request):
        token = bearer_token(request)
        if token is None or len(token) < 20 or len(token) > 256 or not token.isascii():
            raise Unauthorized()
        client = Client.objects.filter(token_hash=secret_hash(token), enabled=True).first()
        if client is None:
            raise Unauthorized()
        now = timezone.now()
        threshold = now - timedelta(seconds=settings.AGENT_SESSION_TOUCH_INTERVAL)
        if client.last_used_at is None or client.last_used_at < threshold:
            Client.objects.filter(pk=client.pk).update(last_used_at=now)
        return (None, client)

    def authenticate_header(self, request):
        return 'Bearer realm="bailing"'
