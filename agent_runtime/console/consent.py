"""The hub's own consent page for agent sign-in (clients with ``hub_consent``).

The signed-in hub user approves an agent to act on their own behalf: the principal is that user and
their roles, never something the page lets them type. Before deciding, the page says what the agent
will be able to do in each workspace it asks for (:func:`workspace_grants`): the knowledge bases it
reads, the business tools it may call (reads and writes) and which calls wait for a human approval,
all read from the route-level catalog the agent itself is served, so the page cannot promise less
than the agent gets. Approve and deny both end in a redirect to the
agent's loopback URI (or, for a standard MCP sign-in, the OAuth client's registered redirect) that the
service generated; that is the only place this page ever navigates. A denied MCP sign-in goes back
only to a redirect the hub trusts (``error_redirect_trusted``); otherwise the page says so itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.utils import timezone
from django.views import View

from agent_runtime.console.forms import ConsentForm
from agent_runtime.console.providers import offered_tool_approval
from agent_runtime.errors import AuthorizationExpired, InvalidState
from agent_runtime.identity import (
    SCOPE_KNOWLEDGE_READ,
    SCOPE_TOOLS_CALL,
    SCOPE_TOOLS_READ,
    SCOPE_WORDS,
    SCOPES,
)
from agent_runtime.models import AgentAuthorization
from agent_runtime.selectors.principals import user_principal
from agent_runtime.selectors.providers import named_route_catalogs, provider_tools_by_id
from agent_runtime.services.agent_auth.authorizations import (
    authorization_approve,
    authorization_deny,
    authorization_effective_status,
    authorization_get_for_hub_consent,
)
from agent_runtime.services.agent_auth.oauth import error_redirect_trusted
from agent_runtime.validation import is_loopback_host, loopback_redirect_problem, oauth_redirect_problem
from bailing.api.errors import ApiError, InvalidRequest, NotFound
from bailing.audit.actor import Actor
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import error_page


def _not_found(request):
    return error_page(
        request,
        status=404,
        title="Sign-in request not found",
        detail="This agent sign-in request does not exist or is not approved on this hub.",
        code="not_found",
    )


def _expired(request):
    return error_page(
        request,
        status=410,
        title="Sign-in request expired",
        detail="This agent sign-in request has expired. Start the sign-in again from the agent.",
        code=AuthorizationExpired.code,
    )


def _not_pending(request):
    return error_page(
        request,
        status=409,
        title="Sign-in request already decided",
        detail=(
            "This agent sign-in request was already approved, denied or used. "
            "Start a new sign-in from the agent."
        ),
        code=InvalidState.code,
    )


def _denied_page(request):
    """A denied standard MCP sign-in whose client has not proved its https redirect: anyone can
    register one, and sending the browser there whatever the user decides would make a phishing
    link of the hub's consent page (RFC 9700 §4.11.2), so the hub says it here instead."""
    return error_page(
        request,
        status=400,
        title="Sign-in denied",
        detail=(
            "You denied this sign-in. The hub does not send you on to the client's website, because "
            "that client has not completed a sign-in on this hub yet. You can close this page."
        ),
        code="access_denied",
    )


def _problem_page(request, exc: ApiError):
    """The page for an authorization that cannot be decided (or a refusal from the service)."""
    if isinstance(exc, NotFound):
        return _not_found(request)
    if isinstance(exc, AuthorizationExpired):
        return _expired(request)
    if isinstance(exc, InvalidState):
        return _not_pending(request)
    field = str(exc.extra.get("field") or "") if isinstance(exc, InvalidRequest) else ""
    detail = exc.default_message
    if field == "on_behalf_of":
        # The user name is the subject every tool call of the session carries to business systems.
        detail = (
            "Your user name cannot be sent to business systems as the acting subject: the "
            "X-Bailing-On-Behalf-Of header takes printable ASCII only, with no space at either end. "
            "Ask an administrator for a user name that fits."
        )
    return error_page(
        request,
        status=exc.http_status,
        title="The sign-in could not be approved",
        detail=detail,
        code=exc.code,
        field=field,
    )


def _raise_unless_pending(authorization: AgentAuthorization) -> None:
    status = authorization_effective_status(authorization)
    if status == AgentAuthorization.Status.EXPIRED:
        raise AuthorizationExpired()
    if status != AgentAuthorization.Status.PENDING:
        raise InvalidState()


def offered_routes(authorization: AgentAuthorization) -> list[str]:
    """Requested workspaces the client is still allowed: the most this consent may grant."""
    client = authorization.client
    return [route for route in authorization.requested_routes if client.allows_route(route)]


def redirect_problem(authorization: AgentAuthorization, redirect_uri: str) -> str | None:
    """Why the page must not send the browser to ``redirect_uri`` (the decision's redirect), or None."""
    if authorization.oauth_client_id is not None:
        return oauth_redirect_problem(redirect_uri)
    return loopback_redirect_problem(redirect_uri.split("?", 1)[0])


def mcp_client_view(authorization: AgentAuthorization) -> dict | None:
    """For a standard MCP sign-in: the OAuth client's self-asserted name, where the browser goes
    back to (the redirect's host and port, and whether that is this computer) and, for a client
    metadata document client, the URL of its document and the host that vouches for it."""
    if authorization.oauth_client_id is None:
        return None
    parts = urlsplit(authorization.redirect_uri)
    oauth_client = authorization.oauth_client
    return {
        "name": oauth_client.client_name,
        "redirect_host": parts.netloc,
        "loopback": is_loopback_host(parts.hostname or ""),
        "metadata_url": oauth_client.client_id if oauth_client.metadata_document else "",
        "metadata_host": oauth_client.metadata_host,
    }


def scopes_view(authorization: AgentAuthorization) -> dict | None:
    """For a standard MCP sign-in: every scope in plain words, and whether this sign-in asks for it
    (approving grants exactly those); None for Agent Auth v1 (no scopes: the whole agent surface)."""
    if authorization.scopes is None:
        return None
    asked = set(authorization.scopes)
    items = [{"scope": scope, "words": SCOPE_WORDS[scope], "asked": scope in asked} for scope in SCOPES]
    return {
        "items": items,
        "not_asked": [item for item in items if not item["asked"]],
        "knowledge": SCOPE_KNOWLEDGE_READ in asked,
        "tools_read": SCOPE_TOOLS_READ in asked,
        "tools_call": SCOPE_TOOLS_CALL in asked,
    }


# Tool names listed per kind on the consent page; a workspace of fifty tools says "and 38 more".
GRANT_NAMES_SHOWN = 12


@dataclass(frozen=True)
class Names:
    """Some names of a longer list, and how many were left out."""

    shown: list[str]
    more: int = 0

    @classmethod
    def of(cls, names: list[str]) -> Names:
        return cls(names[:GRANT_NAMES_SHOWN], max(0, len(names) - GRANT_NAMES_SHOWN))

    @property
    def total(self) -> int:
        return len(self.shown) + self.more


@dataclass(frozen=True)
class WorkspaceGrant:
    """What an agent signed in to one workspace will be able to do there.

    ``unusable`` says why it can do nothing there right now (the workspace is missing, disabled or
    closed to agents); the lists are then empty. ``approvals`` pairs each tool whose calls may wait
    for a human approval with when they do (``always (high risk)``, ``when amount > 500``).
    """

    route_key: str
    name: str = ""
    unusable: str = ""
    kb_ids: list[str] = field(default_factory=list)
    business_tools: bool = False
    read_tools: Names = field(default_factory=lambda: Names([]))
    write_tools: Names = field(default_factory=lambda: Names([]))
    approvals: list[tuple[str, str]] = field(default_factory=list)
    approvals_more: int = 0

    @property
    def tool_total(self) -> int:
        return self.read_tools.total + self.write_tools.total


def workspace_grants(route_keys: list[str]) -> list[WorkspaceGrant]:
    """One :class:`WorkspaceGrant` per requested workspace, in the order asked.

    Read from the selectors that serve agents: the route's effective knowledge settings and its
    route-level catalog (exposure rules, write allow list, permission, forced approval), and each
    offered tool's declared approval rule (ACC ``risk`` / ``approval.required`` / ``approval.when``).
    A hub user approving for themselves always has a trusted subject, which is the route-level view.
    """
    found = {entry.route.route_key: entry for entry in named_route_catalogs(route_keys=route_keys)}
    gated = [tool for entry in found.values() for tool in entry.catalog.tools if tool.approval_required]
    declared = provider_tools_by_id(tool_ids=[tool.tool_id for tool in gated]) if gated else {}
    grants = []
    for route_key in route_keys:
        entry = found.get(route_key)
        if entry is None:
            grants.append(WorkspaceGrant(route_key, unusable="This workspace does not exist on this hub."))
            continue
        route, effective, catalog = entry.route, entry.effective, entry.catalog
        if not route.enabled:
            grants.append(
                WorkspaceGrant(
                    route_key, route.name, unusable="This workspace is disabled: nothing works in it."
                )
            )
            continue
        if not effective["agent_client"]["enabled"]:
            grants.append(
                WorkspaceGrant(
                    route_key,
                    route.name,
                    unusable="This workspace is closed to agents (its agent runtime is off).",
                )
            )
            continue
        approvals = [
            (
                tool.name,
                offered_tool_approval(
                    tool, approval_declared=declared.get(tool.tool_id, {}).get("approval_declared")
                ),
            )
            for tool in catalog.tools
            if tool.approval_required
        ]
        grants.append(
            WorkspaceGrant(
                route_key,
                route.name,
                kb_ids=list(effective["knowledge"]["kb_ids"]),
                business_tools=catalog.agent_direct,
                read_tools=Names.of([tool.name for tool in catalog.tools if tool.readonly]),
                write_tools=Names.of([tool.name for tool in catalog.tools if not tool.readonly]),
                approvals=approvals[:GRANT_NAMES_SHOWN],
                approvals_more=max(0, len(approvals) - GRANT_NAMES_SHOWN),
            )
        )
    return grants


class ConsentView(ConsoleView, View):
    permission_required = "agent_runtime.consent_agentauthorization"
    http_method_names = ["get", "post"]

    def _render(self, request, authorization, form, status=200):
        principal = user_principal(user=request.user)
        context = {
            "authorization": authorization,
            "client": authorization.client,
            "mcp_client": mcp_client_view(authorization),
            "scopes": scopes_view(authorization),
            "form": form,
            "principal_id": principal["id"],
            "principal_roles": principal["roles"],
            "seconds_left": max(0, int((authorization.expires_at - timezone.now()).total_seconds())),
            "grants": workspace_grants(offered_routes(authorization)),
        }
        return render(request, "agent_runtime/consent.html", context, status=status)

    def get(self, request):
        try:
            # A malformed id is the same 404 as an unknown one (the service parses it).
            authorization = authorization_get_for_hub_consent(
                authorization_id=request.GET.get("authorization_id")
            )
            _raise_unless_pending(authorization)
        except ApiError as exc:
            return _problem_page(request, exc)
        form = ConsentForm(
            initial={"authorization_id": authorization.id}, offered_routes=offered_routes(authorization)
        )
        return self._render(request, authorization, form)

    def post(self, request):
        user = request.user
        actor = Actor.user(user)
        try:
            authorization = authorization_get_for_hub_consent(
                authorization_id=request.POST.get("authorization_id")
            )
            form = ConsentForm(request.POST, offered_routes=offered_routes(authorization))
            if not form.is_valid():
                _raise_unless_pending(authorization)
                return self._render(request, authorization, form, status=400)
            # Expiry and state are decided by the service under the row lock (it also records an
            # expired request as expired).
            if form.cleaned_data["decision"] == "approve":
                redirect_uri = authorization_approve(
                    authorization_id=authorization.id,
                    client=None,
                    principal=user_principal(user=user),
                    on_behalf_of=user.get_username(),
                    allowed_routes=form.cleaned_data["routes"],
                    approved_by=user,
                    actor=actor,
                )
            else:
                redirect_uri = authorization_deny(authorization_id=authorization.id, client=None, actor=actor)
                if authorization.oauth_client_id is not None and not error_redirect_trusted(
                    authorization.oauth_client, authorization.redirect_uri
                ):
                    return _denied_page(request)
        except ApiError as exc:
            return _problem_page(request, exc)
        # Defence in depth: the service built this URI from the validated redirect (loopback for Agent
        # Auth v1, a registered redirect of the OAuth client for a standard MCP sign-in); refuse to
        # navigate anywhere else even if that ever changed.
        if redirect_problem(authorization, redirect_uri) is not None:
            return error_page(request, status=500, title="Internal error", code="internal_error")
        return HttpResponseRedirect(redirect_uri)
