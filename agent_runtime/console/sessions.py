"""Agent sessions: filterable list, detail and administrator revoke."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, ListView

from agent_runtime.console.forms import SessionFilterForm
from agent_runtime.selectors.agent_sessions import (
    SESSION_VIA_AGENT_AUTH,
    SESSION_VIA_MCP,
    session_get,
    session_list,
    session_via,
)
from agent_runtime.services.agent_auth.sessions import session_revoke
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.forms import form_filters
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, or_404

VIA_BADGES = {SESSION_VIA_MCP: ("MCP", "mcp"), SESSION_VIA_AGENT_AUTH: ("Agent Auth", "neutral")}


def via_cell(session) -> tables.Cell:
    """How the agent signed in: an MCP client by standard OAuth, or an Agent Auth v1 host."""
    word, tone = VIA_BADGES[session_via(session)]
    return tables.Cell(word, kind="badge", tone=tone)


def session_table(sessions, *, show_client: bool = True) -> tables.Table:
    columns = [
        "Session",
        "Device",
        "Via",
        "Principal",
        "On behalf of",
        "Workspaces",
        "Last seen",
        "Expires",
        "State",
    ]
    if show_client:
        columns.insert(1, "Client")
    table = tables.Table(columns, empty="No agent sessions.")
    for session in sessions:
        row = [
            tables.ident(session.id, href=reverse("console:session_detail", args=[session.id])),
            tables.text(session.device_label),
            via_cell(session),
            tables.mono((session.principal or {}).get("id", "")),
            tables.mono(session.on_behalf_of),
            tables.words(session.allowed_routes, empty="none"),
            tables.time(session.last_seen_at),
            tables.time(session.refresh_expires_at),
            tables.badge(session.state),
        ]
        if show_client:
            row.insert(
                1,
                tables.mono(
                    session.client.app_id, href=reverse("console:client_detail", args=[session.client.app_id])
                ),
            )
        table.rows.append(row)
    return table


class SessionListView(ConsoleView, ListView):
    permission_required = "agent_runtime.view_agentsession"
    template_name = "agent_runtime/session_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        self.filter_form = SessionFilterForm(self.request.GET or None)
        return session_list(filters=form_filters(self.filter_form))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filter_form"] = self.filter_form
        context["table"] = session_table(context["object_list"])
        return context


class SessionDetailView(ConsoleView, DetailView):
    permission_required = "agent_runtime.view_agentsession"
    template_name = "agent_runtime/session_detail.html"
    context_object_name = "agent_session"

    def get_object(self, queryset=None):
        return or_404(session_get(session_id=self.kwargs["session_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["can_revoke"] = self.request.user.has_perm("agent_runtime.change_agentsession")
        context["audit_url"] = reverse("console:audit_list") + "?" + urlencode({"session": self.object.id})
        return context


class SessionRevokeView(ConsoleView, View):
    """GET: the confirmation page saying what revoking does; POST (with the confirmation): revoke."""

    permission_required = "agent_runtime.change_agentsession"
    http_method_names = ["get", "post"]

    def get(self, request, session_id):
        session = or_404(session_get(session_id=session_id))
        detail_url = reverse("console:session_detail", args=[session.id])
        if session.state == "revoked":
            messages.info(request, "This session is already revoked; nothing to do.")
            return redirect(detail_url)
        device = session.device_label or "this device"
        return confirm_page(
            request,
            Confirmation(
                title="Revoke this agent session?",
                action_url=reverse("console:session_revoke", args=[session.id]),
                cancel_url=detail_url,
                button="Revoke session",
                consequences=[
                    f"The agent on {device} loses access at once: "
                    "its access token is refused on its next request.",
                    "Its refresh token stops working, so the agent cannot renew the session; "
                    "it has to sign in again (and be approved again).",
                    "This cannot be undone. The revocation is recorded in the audit history.",
                ],
                facts=[
                    ("Session", str(session.id)),
                    ("Client", session.client.app_id),
                    ("Device", session.device_label),
                    ("On behalf of", session.on_behalf_of),
                    ("Workspaces", ", ".join(session.allowed_routes or []) or "none"),
                ],
                crumbs=[
                    ("Agent sessions", reverse("console:session_list")),
                    (str(session.id)[:8], detail_url),
                ],
            ),
        )

    def post(self, request, session_id):
        session = or_404(session_get(session_id=session_id))
        if not is_confirmed(request):
            return not_confirmed(request)
        revoked = session_revoke(session=session, actor=Actor.user(request.user), reason="admin")
        if revoked:
            messages.success(request, "Session revoked. Its access and refresh tokens no longer work.")
        else:
            messages.info(request, "This session was already revoked; nothing changed.")
        return redirect("console:session_detail", session_id=session.id)
