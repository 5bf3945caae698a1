"""Agent Auth v1 endpoints (/agent-auth/v1/; docs/protocol.md "Agent sign-in and consent").

Three kinds of caller: the local agent before it has tokens (no authentication: ``/authorizations``,
``/token``, ``/revoke`` with a refresh token), the local agent with its access token (``/session``,
``/revoke``), and the business backend with its Client Token (authorization context, approve, deny,
the sessions of an authorization, revoke by authorization or by session). Views validate the body
and query strictly, call one service or selector and return BailingHub's wire shape
(docs/compatibility.md "Agent sign-in"; this hub's additions: docs/agent-auth.md "Agent Auth");
``Cache-Control: no-store`` (and ``Pragma: no-cache`` on /token) come from the middleware.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.api.authentication import AgentBearerAuthentication, ClientTokenAuthentication
from agent_runtime.api.base import query_params
from agent_runtime.errors import UnsupportedGrantType
from agent_runtime.models import AgentAuthorization, AgentSession
from agent_runtime.patterns import AGENT_ROUTE, RESERVED_ROUTE_KEYS, RESOURCE_NAME
from agent_runtime.selectors.agent_sessions import sessions_for_authorization
from agent_runtime.services.agent_auth.authorizations import (
    authorization_approve,
    authorization_create,
    authorization_deny,
    authorization_effective_status,
    authorization_get_for_client,
    subject_display_view,
)
from agent_runtime.services.agent_auth.sessions import (
    authorization_session_revoke,
    session_get_for_client,
    session_revoke,
    session_revoke_self,
)
from agent_runtime.services.agent_auth.tokens import token_exchange_code, token_refresh
from agent_runtime.tokens import ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, looks_like
from agent_runtime.validation import loopback_redirect_problem
from bailing.api.authentication import bearer_token
from bailing.api.errors import InvalidRequest, Unauthorized
from bailing.api.limits import SHORT_TEXT_MAX_CHARS
from bailing.api.serializers import (
    StrictCharField,
    StrictListField,
    StrictSerializer,
    validate_strict,
)
from bailing.api.timefmt import utc_iso
from bailing.audit.actor import Actor

PKCE_CHALLENGE = r"[A-Za-z0-9_-]{43}"
# A UUID as the hub writes it (hyphenated, either case): a query value is parsed, never guessed at.
UUID_TEXT = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
# BailingHub Core 0.7 caps the display name at 120 UTF-16 units and rejects these separators too.
SUBJECT_DISPLAY_MAX = 120
_LINE_SEPARATORS = ("\u2028", "\u2029")


class RouteListField(StrictListField):
    """1–64 unique route keys of the agent pattern; ``auto`` is reserved (``*`` fails the pattern)."""

    default_error_messages = {**StrictListField.default_error_messages, "reserved": "Reserved route key."}

    def __init__(self, **kwargs):
        super().__init__(
            child=StrictCharField(pattern=AGENT_ROUTE), unique=True, min_length=1, max_length=64, **kwargs
        )

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if any(item in RESERVED_ROUTE_KEYS for item in value):
            self.fail("reserved")
        return value


class EmptyInput(StrictSerializer):
    """``{}`` (or no body): anything else is an unknown field."""


def _client_actor(client) -> Actor:
    return Actor.client(client)


# --- local agent, unauthenticated ------------------------------------------------------------------------


class AuthorizationCreateApi(APIView):
    """``POST /authorizations``: a local agent opens a browser authorization (201)."""

    authentication_classes: list = []
    body_max_bytes = 16 * 1024

    schema_created_status = True

    class InputSerializer(StrictSerializer):
        client_app_id = StrictCharField(pattern=RESOURCE_NAME)
        redirect_uri = StrictCharField(max_length=2048)
        state = StrictCharField(min_length=8, max_length=512)
        requested_routes = RouteListField()
        device_label = StrictCharField(min_length=1, max_length=128, display=True)
        code_challenge = StrictCharField(pattern=PKCE_CHALLENGE)
        code_challenge_method = StrictCharField(pattern="S256")

        def validate_redirect_uri(self, value: str) -> str:
            if loopback_redirect_problem(value) is not None:
                raise serializers.ValidationError("Must be an http loopback URI with an explicit port.")
            return value

        def validate_device_label(self, value: str) -> str:
            if not value.strip():
                raise serializers.ValidationError("Must not be blank.")
            return value

    def post(self, request):
        data = validate_strict(self.InputSerializer, request.data)
        authorization, url = authorization_create(
            client_app_id=data["client_app_id"],
            redirect_uri=data["redirect_uri"],
            state=data["state"],
            requested_routes=data["requested_routes"],
            device_label=data["device_label"],
            code_challenge=data["code_challenge"],
            ip=request.META.get("REMOTE_ADDR"),
        )
        return Response(
            {
                "authorization_id": str(authorization.id),
                "authorization_url": url,
                "expires_in": settings.AGENT_AUTH_AUTHORIZATION_TTL,
            },
            status=201,
        )


class TokenApi(APIView):
    """``POST /token``: ``authorization_code`` exchange or ``refresh_token`` rotation.

    A body that is not an object or has no string ``grant_type`` is ``invalid_request`` (as in
    BailingHub); a string ``grant_type`` other than the two grants is ``unsupported_grant_type``.
    Unknown fields, missing fields and wrong JSON types are ``invalid_request``; well-typed but
    wrong credentials (prefix, length, verifier pattern, redirect, PKCE, expiry, state) are all
    the same ``invalid_grant``.
    """

    authentication_classes: list = []
    body_max_bytes = 8 * 1024

    class CodeInputSerializer(StrictSerializer):
        grant_type = StrictCharField()
        client_app_id = StrictCharField(pattern=RESOURCE_NAME)
        code = StrictCharField()
        redirect_uri = StrictCharField()
        code_verifier = StrictCharField()

    class RefreshInputSerializer(StrictSerializer):
        grant_type = StrictCharField()
        client_app_id = StrictCharField(pattern=RESOURCE_NAME)
        refresh_token = StrictCharField()

    schema_request_serializer = (CodeInputSerializer, RefreshInputSerializer)

    def post(self, request):
        body = request.data
        if not isinstance(body, dict):
            raise InvalidRequest(field="$")
        grant_type = body.get("grant_type")
        if not isinstance(grant_type, str):
            raise InvalidRequest(field="grant_type")
        if grant_type == "authorization_code":
            data = validate_strict(self.CodeInputSerializer, body)
            result = token_exchange_code(
                client_app_id=data["client_app_id"],
                code=data["code"],
                redirect_uri=data["redirect_uri"],
                code_verifier=data["code_verifier"],
            )
        elif grant_type == "refresh_token":
            data = validate_strict(self.RefreshInputSerializer, body)
            result = token_refresh(client_app_id=data["client_app_id"], refresh_token=data["refresh_token"])
        else:
            raise UnsupportedGrantType()
        return Response(result)


class RevokeApi(APIView):
    """``POST /revoke``: the agent ends its own session.

    With ``Authorization: Bearer bha_…`` the access token names the session (a malformed bearer is
    401); the body may still carry ``client_app_id`` + ``refresh_token``, as BailingHub's agent SDK
    sends them. Without a bearer both body fields are required. The answer is ``{"revoked": true}``
    whether or not a session matched, so this endpoint reveals nothing about which tokens exist.
    """

    authentication_classes: list = []
    body_max_bytes = 4 * 1024

    class InputSerializer(StrictSerializer):
        client_app_id = StrictCharField(pattern=RESOURCE_NAME, required=False)
        refresh_token = StrictCharField(max_length=256, required=False)

    def post(self, request):
        token = bearer_token(request)
        if token is not None and not looks_like(token, ACCESS_TOKEN_PREFIX):
            raise Unauthorized()
        data = validate_strict(self.InputSerializer, request.data)
        refresh_token = data.get("refresh_token")
        if refresh_token is not None and not refresh_token.startswith(REFRESH_TOKEN_PREFIX):
            raise InvalidRequest(field="refresh_token")
        if token is None and ("client_app_id" not in data or refresh_token is None):
            raise InvalidRequest(field="client_app_id" if "client_app_id" not in data else "refresh_token")
        session_revoke_self(
            access_token=token, client_app_id=data.get("client_app_id"), refresh_token=refresh_token
        )
        return Response({"revoked": True})


# --- local agent, access token ---------------------------------------------------------------------------


def session_public_view(session: AgentSession) -> dict:
    """Non-secret session metadata in BailingHub's ``GET /session`` shape (``expires_at`` is the
    access token's expiry; ``refresh_expires_at`` the session's absolute end)."""
    return {
        "session_id": str(session.id),
        "client_app_id": session.client.app_id,
        "device_label": session.device_label,
        **subject_display_view(session.subject_display),
        "principal": session.principal,
        "on_behalf_of": session.on_behalf_of,
        "allowed_routes": session.allowed_routes,
        "created_at": utc_iso(session.created_at),
        "expires_at": utc_iso(session.access_expires_at),
        "refresh_expires_at": utc_iso(session.refresh_expires_at),
    }


class SessionDetailApi(APIView):
    """``GET /session``: what the current access token stands for."""

    authentication_classes = [AgentBearerAuthentication]

    def get(self, request):
        return Response(session_public_view(request.auth.session))


# --- business backend, Client Token ----------------------------------------------------------------------


def authorization_context_view(authorization: AgentAuthorization) -> dict:
    """Consent-page context: who asks, from which device, for which routes, until when. Never the
    redirect URI, state, challenge or code. A consumed authorization names its session."""
    body = {
        "authorization_id": str(authorization.id),
        "client": {"app_id": authorization.client.app_id, "name": authorization.client.name},
        "device": {"name": authorization.device_label},
        "requested_routes": authorization.requested_routes,
        "status": authorization_effective_status(authorization),
        "expires_at": utc_iso(authorization.expires_at),
    }
    if authorization.status == AgentAuthorization.Status.CONSUMED:
        session = authorization.session
        body["session"] = (
            {
                "session_id": str(session.id),
                "state": session.state,
                "expires_at": utc_iso(session.refresh_expires_at),
                **subject_display_view(session.subject_display),
                **({"revoked_at": utc_iso(session.revoked_at)} if session.revoked_at else {}),
            }
            if session is not None
            else None
        )
    return body


class AuthorizationDetailApi(APIView):
    """``GET /authorizations/{id}``: context for the business consent page."""

    authentication_classes = [ClientTokenAuthentication]

    def get(self, request, authorization_id: str):
        authorization = authorization_get_for_client(client=request.auth, authorization_id=authorization_id)
        return Response(authorization_context_view(authorization))


class PrincipalInput(StrictSerializer):
    """The trusted principal the business backend vouches for (see docs/protocol.md "Agent sign-in and
    consent")."""

    # Shown in the console (sessions, conversations): display text, no bidirectional controls.
    id = StrictCharField(min_length=1, max_length=128, display=True)
    tenant = StrictCharField(max_length=128, allow_blank=True, required=False, display=True)
    roles = StrictListField(
        child=StrictCharField(min_length=1, max_length=64, display=True), max_length=64, required=False
    )
    audience = StrictCharField(max_length=64, allow_blank=True, required=False, display=True)
    channel = StrictCharField(max_length=128, allow_blank=True, required=False, display=True)


class SubjectDisplayInput(StrictSerializer):
    """Display-only name of what the user authorized (a team, a shop...), never an identity."""

    name = StrictCharField(min_length=1, max_length=SUBJECT_DISPLAY_MAX, display=True)

    def validate_name(self, value: str) -> str:
        if not value.strip() or any(sep in value for sep in _LINE_SEPARATORS):
            raise serializers.ValidationError("Invalid display name.")
        return value


class AuthorizationApproveApi(APIView):
    """``POST /authorizations/{id}/approve``: the business backend grants a trusted principal."""

    authentication_classes = [ClientTokenAuthentication]
    body_max_bytes = 32 * 1024

    class InputSerializer(StrictSerializer):
        principal = PrincipalInput()
        on_behalf_of = StrictCharField(min_length=1, max_length=SHORT_TEXT_MAX_CHARS)
        allowed_routes = RouteListField()
        subject_display = SubjectDisplayInput(required=False, allow_null=True)

    def post(self, request, authorization_id: str):
        data = validate_strict(self.InputSerializer, request.data)
        redirect_uri = authorization_approve(
            authorization_id=authorization_id,
            client=request.auth,
            principal=data["principal"],
            on_behalf_of=data["on_behalf_of"],
            allowed_routes=data["allowed_routes"],
            subject_display=data.get("subject_display"),
            actor=_client_actor(request.auth),
        )
        return Response({"redirect_uri": redirect_uri})


class AuthorizationDenyApi(APIView):
    """``POST /authorizations/{id}/deny`` with ``{}``."""

    authentication_classes = [ClientTokenAuthentication]
    body_max_bytes = 4 * 1024

    def post(self, request, authorization_id: str):
        validate_strict(EmptyInput, request.data)
        redirect_uri = authorization_deny(
            authorization_id=authorization_id, client=request.auth, actor=_client_actor(request.auth)
        )
        return Response({"redirect_uri": redirect_uri})


class SessionRevokeApi(APIView):
    """``POST /sessions/{id}/revoke``: the business backend ends one of its own sessions (idempotent)."""

    authentication_classes = [ClientTokenAuthentication]
    body_max_bytes = 4 * 1024

    def post(self, request, session_id: str):
        validate_strict(EmptyInput, request.data)
        session = session_get_for_client(client=request.auth, session_id=session_id)
        session_revoke(session=session, actor=_client_actor(request.auth), reason="business_revoked")
        return Response({"revoked": True})


def business_session_view(session: AgentSession) -> dict:
    """A session as its business backend lists it: the ``GET /session`` metadata plus its ``state``
    (``active`` / ``expired`` / ``revoked``), ``revoked_at`` and ``last_seen_at`` (``null`` when not
    set). Never a token, hash or who revoked it."""
    return {
        **session_public_view(session),
        "state": session.state,
        "revoked_at": utc_iso(session.revoked_at),
        "last_seen_at": utc_iso(session.last_seen_at),
    }


class SessionListApi(APIView):
    """``GET /sessions?authorization_id=<uuid>``: the sessions the business's own authorization produced
    (zero or one). Unknown or repeated query parameters and a malformed id are 400; another client's or
    an unknown authorization is 404."""

    authentication_classes = [ClientTokenAuthentication]

    class InputSerializer(StrictSerializer):
        authorization_id = StrictCharField(pattern=UUID_TEXT)

    def get(self, request):
        params = query_params(request, self.InputSerializer)
        authorization_id = uuid.UUID(params["authorization_id"])
        sessions = sessions_for_authorization(client=request.auth, authorization_id=authorization_id)
        return Response(
            {
                "authorization_id": str(authorization_id),
                "sessions": [business_session_view(session) for session in sessions],
            }
        )


class AuthorizationRevokeApi(APIView):
    """``POST /authorizations/{id}/revoke`` with ``{}``: the business backend ends the session its
    authorization produced. Idempotent: ``{"revoked": true, "already_revoked": <bool>, "session_id"}``;
    409 ``invalid_state`` when the authorization produced no session."""

    authentication_classes = [ClientTokenAuthentication]
    body_max_bytes = 4 * 1024

    def post(self, request, authorization_id: str):
        validate_strict(EmptyInput, request.data)
        session, revoked = authorization_session_revoke(
            client=request.auth, authorization_id=authorization_id, actor=_client_actor(request.auth)
        )
        return Response({"revoked": True, "already_revoked": not revoked, "session_id": str(session.id)})
