"""Standard OAuth 2.1 endpoints for generic MCP clients (docs/protocol.md "Standard OAuth sign-in for MCP
clients").

Authorization server metadata (RFC 8414), dynamic client registration (RFC 7591), the authorize
endpoint (authorization code + PKCE S256, RFC 8707 resource indicators), the token endpoint and
revocation (RFC 7009). These views parse the OAuth wire formats (a JSON registration body, a query
string, form-encoded token and revocation bodies) strictly and call
``agent_runtime.services.agent_auth.oauth``; every JSON answer is ``{"error", "error_description"}``
on failure and carries ``Cache-Control: no-store`` (the token endpoint adds ``Pragma: no-cache``).
They live outside the API prefixes on purpose: the authorize endpoint answers HTML error pages.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from django.conf import settings
from django.http import HttpResponseRedirect, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from agent_runtime.identity import SCOPES, scopes_parse
from agent_runtime.models.oauth import OAUTH_CLIENT_NAME_MAX, OAUTH_REDIRECT_URIS_MAX
from agent_runtime.services.agent_auth.cimd import (
    MetadataDocumentError,
    is_metadata_document_id,
    oauth_client_from_metadata_document,
)
from agent_runtime.services.agent_auth.oauth import (
    AuthorizeError,
    AuthorizeRequest,
    OAuthError,
    error_redirect_trusted,
    invalid_client,
    mcp_resource_route,
    oauth_authorize,
    oauth_client_active,
    oauth_client_register,
    oauth_code_grant,
    oauth_error_redirect,
    oauth_refresh_grant,
    oauth_revoke,
    registered_redirect,
    scope_text,
)
from agent_runtime.validation import is_loopback_host, oauth_redirect_problem
from bailing.api.errors import InvalidRequest, RateLimited
from bailing.api.limits import utf16_length
from bailing.api.parsers import parse_json_bytes
from bailing.api.text import has_control_chars, has_lone_surrogate
from bailing.ui.pages import error_page

PKCE_CHALLENGE_RE = re.compile(r"[A-Za-z0-9_-]{43}")
DEFAULT_CLIENT_NAME = "MCP client"
_GRANT_TYPES = {"authorization_code", "refresh_token"}
_REGISTER_BODY_MAX = 16 * 1024
_FORM_BODY_MAX = 8 * 1024
_STATE_MAX = 512


def _json(data: dict, *, status: int = 200, token: bool = False) -> JsonResponse:
    response = JsonResponse(data, status=status)
    response["Cache-Control"] = "no-store"
    if token:
        response["Pragma"] = "no-cache"
    return response


def _error(exc: OAuthError, *, token: bool = False) -> JsonResponse:
    response = _json(exc.payload(), status=exc.status, token=token)
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response


def _invalid_request(description: str) -> OAuthError:
    return OAuthError("invalid_request", description)


def _endpoint(path: str) -> str:
    return f"{settings.BAILING_PUBLIC_URL}{path}"


def authorization_server_metadata() -> dict:
    """RFC 8414 metadata of the hub as the authorization server of its MCP endpoints."""
    return {
        "issuer": settings.BAILING_PUBLIC_URL,
        "authorization_endpoint": _endpoint("/oauth/authorize"),
        "token_endpoint": _endpoint("/oauth/token"),
        "registration_endpoint": _endpoint("/oauth/register"),
        "revocation_endpoint": _endpoint("/oauth/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": list(SCOPES),
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


class AuthorizationServerMetadataView(View):
    """``GET /.well-known/oauth-authorization-server``."""

    http_method_names = ["get", "head"]

    def get(self, request):
        return _json(authorization_server_metadata())


class OpenIdConfigurationView(View):
    """``GET /.well-known/openid-configuration``: 404, the hub is no OpenID provider (clients that
    probe it fall back to the OAuth metadata)."""

    http_method_names = ["get", "head"]

    def get(self, request):
        return _json(
            {"error": "not_found", "error_description": "This hub is not an OpenID provider."}, status=404
        )


# --- registration -------------------------------------------------------------------------------------


def _metadata_error(description: str) -> OAuthError:
    return OAuthError("invalid_client_metadata", description)


def _string_list(value, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _metadata_error(f"{name} must be a list of strings.")
    return value


def validate_registration(body) -> dict:
    """The RFC 7591 metadata a public MCP client may register with; unknown fields are ignored.

    ``redirect_uris`` (1–10, unique, each a loopback ``http`` or an ``https`` URI); ``client_name``
    (default "MCP client", ≤ 128 characters, no control characters or bidirectional controls);
    ``token_endpoint_auth_method`` only ``none``; ``grant_types`` ⊆ {authorization_code,
    refresh_token}; ``response_types`` ⊆ {code}; ``scope`` only scopes of this hub (answered closed
    over what they imply; not stored: each authorization request names its own);
    ``application_type`` absent, ``native`` or ``web`` (:func:`_application_type`).
    """
    if not isinstance(body, dict):
        raise _metadata_error("The body must be a JSON object.")
    if "redirect_uris" not in body:
        raise OAuthError("invalid_redirect_uri", "redirect_uris is required.")
    redirect_uris = body["redirect_uris"]
    if (
        not isinstance(redirect_uris, list)
        or not 1 <= len(redirect_uris) <= OAUTH_REDIRECT_URIS_MAX
        or not all(isinstance(uri, str) for uri in redirect_uris)
        or len(set(redirect_uris)) != len(redirect_uris)
    ):
        raise OAuthError(
            "invalid_redirect_uri", f"redirect_uris must be 1-{OAUTH_REDIRECT_URIS_MAX} unique strings."
        )
    for uri in redirect_uris:
        if oauth_redirect_problem(uri) is not None:
            raise OAuthError(
                "invalid_redirect_uri",
                "Each redirect URI must be http to 127.0.0.1, [::1] or localhost with a port, or https; "
                "no userinfo or fragment.",
            )
    client_name = body.get("client_name")
    if client_name is None:
        client_name = DEFAULT_CLIENT_NAME
    elif (
        not isinstance(client_name, str)
        or not client_name.strip()
        or utf16_length(client_name) > OAUTH_CLIENT_NAME_MAX
        or has_control_chars(client_name, multiline=False, display=True)
        or has_lone_surrogate(client_name)
        or "\u2028" in client_name
        or "\u2029" in client_name
    ):
        raise _metadata_error(
            f"client_name must be 1-{OAUTH_CLIENT_NAME_MAX} characters without control characters."
        )
    method = body.get("token_endpoint_auth_method")
    if method is not None and method != "none":
        raise _metadata_error("Only public clients: token_endpoint_auth_method must be none.")
    grant_types = body.get("grant_types")
    grant_types = ["authorization_code", "refresh_token"] if grant_types is None else grant_types
    if not set(_string_list(grant_types, "grant_types")) <= _GRANT_TYPES or not grant_types:
        raise _metadata_error("grant_types may hold only authorization_code and refresh_token.")
    response_types = body.get("response_types")
    response_types = ["code"] if response_types is None else response_types
    if not set(_string_list(response_types, "response_types")) <= {"code"} or not response_types:
        raise _metadata_error("response_types may hold only code.")
    scope = body.get("scope")
    scopes = scopes_parse(scope) if scope is None or isinstance(scope, str) else None
    if scopes is None:
        raise _metadata_error(f"scope may hold only {scope_text(SCOPES)}.")
    return {
        "client_name": client_name,
        "redirect_uris": redirect_uris,
        "grant_types": list(dict.fromkeys(grant_types)),
        "response_types": ["code"],
        "scope": scope_text(scopes),
        "application_type": _application_type(body.get("application_type"), redirect_uris),
    }


def _application_type(value, redirect_uris: list[str]) -> str:
    """``application_type`` (OpenID Connect Dynamic Client Registration §2, which the MCP
    authorization spec asks clients to send): ``web`` clients may only use ``https`` redirects to a
    host that is not this computer's (``invalid_redirect_uri`` otherwise); ``native`` ones loopback
    ``http`` redirects (RFC 8252 §7.3) or ``https`` ones (§7.2). Absent, it is not read as ``web``
    (the hub is no OpenID provider, and RFC 7591 has no such field): the redirects are judged by
    the general rules alone and the answer carries no ``application_type``. Anything else is
    ``invalid_client_metadata``. Private-use URI schemes are not accepted for any type."""
    if value is None:
        return ""
    if value not in ("web", "native"):
        raise _metadata_error("application_type must be web or native.")
    if value == "web":
        for uri in redirect_uris:
            parts = urlsplit(uri)
            if parts.scheme != "https" or is_loopback_host(parts.hostname or ""):
                raise OAuthError(
                    "invalid_redirect_uri",
                    "A web client's redirect URIs must be https to a host other than this computer.",
                )
    return value


@method_decorator(csrf_exempt, name="dispatch")
class RegisterView(View):
    """``POST /oauth/register`` (RFC 7591): unauthenticated, 201 with the client information."""

    http_method_names = ["post"]

    def post(self, request):
        try:
            if request.content_type != "application/json":
                raise _metadata_error("The body must be application/json.")
            if len(request.body) > _REGISTER_BODY_MAX:
                raise _metadata_error("The body is too large.")
            try:
                body = parse_json_bytes(request.body)
            except InvalidRequest:
                raise _metadata_error("The body is not valid JSON.") from None
            data = validate_registration(body)
            oauth_client = oauth_client_register(
                client_name=data["client_name"],
                redirect_uris=data["redirect_uris"],
                ip=request.META.get("REMOTE_ADDR"),
                application_type=data["application_type"],
            )
        except OAuthError as exc:
            return _error(exc)
        answer = {
            "client_id": oauth_client.client_id,
            "client_id_issued_at": int(oauth_client.created_at.timestamp()),
            "client_name": oauth_client.client_name,
            "redirect_uris": oauth_client.redirect_uris,
            "grant_types": data["grant_types"],
            "response_types": data["response_types"],
            "token_endpoint_auth_method": "none",
            "scope": data["scope"],
        }
        if oauth_client.application_type:
            answer["application_type"] = oauth_client.application_type
        return _json(answer, status=201)


def validate_metadata_document(body) -> dict:
    """A client metadata document's metadata: the registration rules (:func:`validate_registration`)
    plus a required ``client_name`` (the MCP authorization spec requires it; the consent page shows it)."""
    if not isinstance(body, dict) or "client_name" not in body:
        raise _metadata_error("A client metadata document must have a client_name.")
    return validate_registration(body)


# --- authorize ----------------------------------------------------------------------------------------


def _authorize_page(request, *, status: int, title: str, detail: str, code: str):
    response = error_page(request, status=status, title=title, detail=detail, code=code)
    response["Cache-Control"] = "no-store"
    return response


def authorize_error_response(request, oauth_client, redirect_uri: str, error: str, state: str | None):
    """An authorization error (RFC 6749 §4.1.2.1): redirected to ``redirect_uri`` with ``error`` and
    ``state`` when the hub can trust that URI (:func:`error_redirect_trusted`), otherwise the hub's
    own 400 page naming the error, with no link to the URI (RFC 9700 §4.11.2: a client anyone can
    register must not turn the hub into an open redirector)."""
    if error_redirect_trusted(oauth_client, redirect_uri):
        response = HttpResponseRedirect(oauth_error_redirect(redirect_uri, error, state))
        response["Cache-Control"] = "no-store"
        return response
    return _authorize_page(
        request,
        status=400,
        title="The sign-in request was refused",
        detail=(
            "The MCP client's sign-in request could not be accepted. The hub does not send you on to "
            "the client's website, because that client has not completed a sign-in on this hub yet. "
            "Close this page and start the sign-in again from the client."
        ),
        code=error,
    )


_METADATA_DOCUMENT_PROBLEMS = {
    "url_invalid": "The client_id is not a usable client metadata document URL: it must be https, with "
    "a path, and no user name, fragment or dot segments.",
    "target_forbidden": "The client metadata document is on an address this hub does not fetch from "
    "(only public addresses).",
    "timeout": "The client metadata document did not arrive in time.",
    "fetch_failed": "The client metadata document could not be fetched (connection or certificate).",
    "redirect": "The client metadata document URL answered with a redirect; the hub follows none.",
    "http_status": "The client metadata document URL did not answer 200.",
    "content_type": "The client metadata document is not served as JSON.",
    "too_large": "The client metadata document is larger than 5 KiB.",
    "invalid_json": "The client metadata document is not a JSON object.",
    "client_id_mismatch": "The client metadata document names another client_id than its own URL.",
    "invalid_metadata": "The client metadata document holds metadata this hub does not accept.",
}


def _rate_limited_page(request, exc: RateLimited):
    response = _authorize_page(
        request,
        status=429,
        title="Too many sign-in attempts",
        detail="Too many sign-ins were started from this address. Wait a minute, then try again.",
        code="rate_limited",
    )
    response["Retry-After"] = str(exc.extra["retry_after_seconds"])
    return response


def _metadata_document_page(request, exc: MetadataDocumentError):
    """A client metadata document that cannot identify its client: ``invalid_client`` on the hub's own
    page (its redirect URIs are unverified, so nothing is redirected), the check that failed named
    in the page's ``field`` slot as ``client_id (<reason>)``."""
    response = error_page(
        request,
        status=400,
        title="The MCP client could not be verified",
        detail=_METADATA_DOCUMENT_PROBLEMS[exc.reason],
        code=exc.error,
        field=f"client_id ({exc.reason})",
    )
    response["Cache-Control"] = "no-store"
    return response


def _single(params: dict[str, list[str]], name: str) -> str | None:
    """The one value of query parameter ``name``; None when absent. Repeated is invalid (RFC 6749 §3.1)."""
    values = params.get(name)
    if values is None:
        return None
    if len(values) != 1:
        raise AuthorizeError("invalid_request")
    return values[0]


class AuthorizeView(View):
    """``GET /oauth/authorize``: checks the client and redirect first (failures there are an error
    page, never a redirect), then the rest (failures go back to the redirect with ``error`` and
    ``state`` when the hub trusts it, else an error page: :func:`authorize_error_response`), then
    opens the sign-in and sends the browser to the consent page."""

    http_method_names = ["get"]

    def get(self, request):
        params = dict(request.GET.lists())
        client_values = params.get("client_id") or []
        client_id = client_values[0] if len(client_values) == 1 else None
        if is_metadata_document_id(client_id):
            try:
                oauth_client = oauth_client_from_metadata_document(
                    client_id, validate=validate_metadata_document, ip=request.META.get("REMOTE_ADDR")
                )
            except MetadataDocumentError as exc:
                return _metadata_document_page(request, exc)
            except RateLimited as exc:
                return _rate_limited_page(request, exc)
        else:
            oauth_client = oauth_client_active(client_id)
        if oauth_client is None:
            return _authorize_page(
                request,
                status=400,
                title="Unknown MCP client",
                detail="This client is not registered on this hub, or MCP sign-in is turned off.",
                code="invalid_client",
            )
        redirect_values = params.get("redirect_uri") or []
        if len(redirect_values) != 1 or not registered_redirect(oauth_client, redirect_values[0]):
            return _authorize_page(
                request,
                status=400,
                title="Unregistered redirect",
                detail="The redirect_uri is missing or is not one this client registered.",
                code="invalid_redirect_uri",
            )
        redirect_uri = redirect_values[0]
        state_values = params.get("state") or []
        state = state_values[0] if len(state_values) == 1 else None
        try:
            authorize_request = self._validated(params, oauth_client, redirect_uri, state)
            target = oauth_authorize(authorize_request, ip=request.META.get("REMOTE_ADDR"))
        except AuthorizeError as exc:
            return authorize_error_response(request, oauth_client, redirect_uri, exc.error, state)
        except RateLimited as exc:
            return _rate_limited_page(request, exc)
        response = HttpResponseRedirect(target)
        response["Cache-Control"] = "no-store"
        return response

    @staticmethod
    def _validated(params, oauth_client, redirect_uri: str, state: str | None) -> AuthorizeRequest:
        if state is None or not 1 <= len(state) <= _STATE_MAX or has_control_chars(state, multiline=False):
            raise AuthorizeError("invalid_request")
        response_type = _single(params, "response_type")
        if response_type is None:
            raise AuthorizeError("invalid_request")
        if response_type != "code":
            raise AuthorizeError("unsupported_response_type")
        challenge = _single(params, "code_challenge")
        if _single(params, "code_challenge_method") != "S256" or not (
            challenge and PKCE_CHALLENGE_RE.fullmatch(challenge)
        ):
            raise AuthorizeError("invalid_request")
        scopes = scopes_parse(_single(params, "scope"))
        if scopes is None:
            raise AuthorizeError("invalid_scope")
        resource = _single(params, "resource")
        if resource is None:
            raise AuthorizeError("invalid_request")
        route_key = mcp_resource_route(resource)
        if route_key is None:
            raise AuthorizeError("invalid_target")
        return AuthorizeRequest(
            oauth_client=oauth_client,
            redirect_uri=redirect_uri,
            state=state,
            code_challenge=challenge,
            route_key=route_key,
            scopes=tuple(scopes),
        )


# --- token and revocation -----------------------------------------------------------------------------


def _form(request) -> dict[str, str]:
    """The ``application/x-www-form-urlencoded`` body as one value per name; anything else (another
    content type, a repeated parameter, a body over 8 KiB, bad encoding) is ``invalid_request``."""
    if request.content_type != "application/x-www-form-urlencoded":
        raise _invalid_request("The body must be application/x-www-form-urlencoded.")
    raw = request.body
    if len(raw) > _FORM_BODY_MAX:
        raise _invalid_request("The body is too large.")
    try:
        pairs = parse_qsl(
            raw.decode("ascii"), keep_blank_values=True, strict_parsing=bool(raw), errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise _invalid_request("The body is not a valid form.") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise _invalid_request("A parameter is repeated.")
        form[name] = value
    return form


def _required(form: dict[str, str], name: str) -> str:
    value = form.get(name)
    if not value:
        raise _invalid_request(f"{name} is required.")
    return value


def _client_of(form: dict[str, str]):
    """The calling OAuth client (public: ``client_id`` in the body, no secret); 401 if unknown."""
    client_id = _required(form, "client_id")
    if "client_secret" in form or "client_assertion" in form:
        raise invalid_client()
    oauth_client = oauth_client_active(client_id)
    if oauth_client is None:
        raise invalid_client()
    return oauth_client


@method_decorator(csrf_exempt, name="dispatch")
class TokenView(View):
    """``POST /oauth/token``: ``authorization_code`` and ``refresh_token`` grants (RFC 6749 §4.1.3,
    §6), errors per §5.2."""

    http_method_names = ["post"]

    def post(self, request):
        try:
            if "HTTP_AUTHORIZATION" in request.META:
                raise invalid_client()
            form = _form(request)
            grant_type = _required(form, "grant_type")
            if grant_type not in _GRANT_TYPES:
                raise OAuthError(
                    "unsupported_grant_type", "grant_type must be authorization_code or refresh_token."
                )
            if grant_type == "authorization_code":
                fields = [_required(form, name) for name in ("code", "redirect_uri", "code_verifier")]
                oauth_client = _client_of(form)
                code, redirect_uri, code_verifier = fields
                result = oauth_code_grant(
                    oauth_client=oauth_client,
                    code=code,
                    redirect_uri=redirect_uri,
                    code_verifier=code_verifier,
                    resource=form.get("resource"),
                )
            else:
                refresh_token = _required(form, "refresh_token")
                oauth_client = _client_of(form)
                result = oauth_refresh_grant(
                    oauth_client=oauth_client,
                    refresh_token=refresh_token,
                    resource=form.get("resource"),
                    scope=form.get("scope"),
                )
        except OAuthError as exc:
            return _error(exc, token=True)
        return _json(result, token=True)


@method_decorator(csrf_exempt, name="dispatch")
class RevokeView(View):
    """``POST /oauth/revoke`` (RFC 7009): ``token`` (access or refresh) and ``client_id``; 200 with an
    empty object whether or not the token was known."""

    http_method_names = ["post"]

    def post(self, request):
        try:
            form = _form(request)
            token = _required(form, "token")
            oauth_client = _client_of(form)
            oauth_revoke(oauth_client=oauth_client, token=token)
        except OAuthError as exc:
            return _error(exc)
        return _json({})
