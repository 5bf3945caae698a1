"""Clients: list, detail, create, enable/disable and Client Token rotation."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import cached_property
from django.views import View
from django.views.generic import DetailView, FormView, ListView

from agent_runtime.config import ConfigError, validate_client_config
from agent_runtime.console.forms import ClientCreateForm, ClientEditForm
from agent_runtime.console.sessions import session_table
from agent_runtime.errors import ClientExists
from agent_runtime.models import Client
from agent_runtime.selectors.clients import (
    client_get,
    client_list,
    client_sessions_not_revoked_count,
    client_sessions_recent,
)
from agent_runtime.services.clients import client_create, client_set_enabled, client_token_rotate
from agent_runtime.services.config_apply import client_upsert
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.confirm import Confirmation, confirm_page, is_confirmed, not_confirmed
from bailing.ui.forms import EnabledForm
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page, or_404


def consent_kinds(client: Client) -> list[str]:
    """How an agent of this client gets its sign-in approved: a business page, the hub, or not at all."""
    kinds = []
    if client.agent_authorize_url:
        kinds.append("business page")
    if client.hub_consent:
        kinds.append("hub")
    if client.mcp_sign_in and kinds:
        kinds.append("MCP sign-in")
    return kinds or ["none"]


class ClientListView(ConsoleView, ListView):
    permission_required = "agent_runtime.view_client"
    template_name = "agent_runtime/client_list.html"
    paginate_by = PAGE_SIZE

    def get_queryset(self):
        return client_list()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        table = tables.Table(
            ["App ID", "Name", "Status", "Agent consent", "Allowed workspaces", "Token", "Last used"],
            empty="No clients yet.",
        )
        for client in context["object_list"]:
            table.rows.append(
                [
                    tables.mono(client.app_id, href=reverse("console:client_detail", args=[client.app_id])),
                    tables.text(client.name),
                    tables.badge("enabled" if client.enabled else "disabled"),
                    tables.text(", ".join(consent_kinds(client))),
                    tables.words(client.allowed_routes, empty="none"),
                    tables.mono(client.token_prefix + "…" if client.token_prefix else ""),
                    tables.time(client.last_used_at),
                ]
            )
        context["table"] = table
        context["can_add"] = self.request.user.has_perm("agent_runtime.add_client")
        return context


class ClientDetailView(ConsoleView, DetailView):
    permission_required = "agent_runtime.view_client"
    template_name = "agent_runtime/client_detail.html"
    context_object_name = "client"
    recent_sessions = 20

    def get_object(self, queryset=None):
        return or_404(client_get(app_id=self.kwargs["app_id"]))

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        client = self.object
        sessions = client_sessions_recent(client=client, limit=self.recent_sessions)
        context["consent_kinds"] = consent_kinds(client)
        context["sessions_table"] = session_table(sessions.rows, show_client=False)
        context["sessions_total"] = sessions.total
        context["sessions_url"] = reverse("console:session_list") + "?" + urlencode({"client": client.app_id})
        context["can_change"] = self.request.user.has_perm("agent_runtime.change_client")
        return context


class ClientCreateView(ConsoleView, FormView):
    """Creates a client through the same validation and service as ``bailing_apply`` config files."""

    permission_required = "agent_runtime.add_client"
    template_name = "agent_runtime/client_form.html"
    form_class = ClientCreateForm

    def form_valid(self, form):
        try:
            data = validate_client_config(form.config_data(), path="client")
        except ConfigError as exc:
            form.add_config_error(exc.path, exc.reason)
            return self.form_invalid(form)
        try:
            client = client_create(data=data, actor=Actor.user(self.request.user))
        except ConfigError as exc:
            form.add_config_error(exc.path, exc.reason)
            return self.form_invalid(form)
        except ClientExists as exc:
            form.add_error("app_id", exc.message)
            return self.form_invalid(form)
        app_id = client.app_id
        messages.success(
            self.request,
            f"Client {app_id} created. Rotate its token to hand a Client Token to the business system.",
        )
        return redirect("console:client_detail", app_id=app_id)


class ClientEditView(ConsoleView, FormView):
    """Edits a client through the same validation and service as ``bailing_apply`` (``client_upsert``);
    config errors are shown on the fields they name."""

    permission_required = "agent_runtime.change_client"
    template_name = "agent_runtime/client_form.html"
    form_class = ClientEditForm

    @cached_property
    def client(self) -> Client:
        # Looked up on first use, after the permission check (an anonymous visitor is sent to the
        # login page, never told whether the client exists).
        return or_404(client_get(app_id=self.kwargs["app_id"]))

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "client": self.client}

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "client": self.client}

    def form_valid(self, form):
        try:
            data = validate_client_config(form.config_data(), path="client")
            _, action = client_upsert(data=data, actor=Actor.user(self.request.user))
        except ConfigError as exc:
            form.add_config_error(exc.path, exc.reason)
            return self.form_invalid(form)
        if action == "unchanged":
            messages.info(self.request, "Nothing changed.")
        else:
            messages.success(self.request, f"Client {self.client.app_id} saved.")
        return redirect("console:client_detail", app_id=self.client.app_id)


def _client_facts(client: Client) -> list[tuple[str, str]]:
    return [
        ("App ID", client.app_id),
        ("Name", client.name),
        ("Allowed workspaces", ", ".join(client.allowed_routes or []) or "none"),
    ]


def _client_crumbs(client: Client) -> list[tuple[str, str]]:
    return [
        ("Clients", reverse("console:client_list")),
        (client.app_id, reverse("console:client_detail", args=[client.app_id])),
    ]


class ClientSetEnabledView(ConsoleView, View):
    """Enabling is one POST; disabling goes through a confirmation page (GET) first, and its POST
    is refused without the confirmation field."""

    permission_required = "agent_runtime.change_client"
    http_method_names = ["get", "post"]

    def get(self, request, app_id):
        client = or_404(client_get(app_id=app_id))
        detail_url = reverse("console:client_detail", args=[client.app_id])
        if not client.enabled:
            messages.info(request, f"Client {client.app_id} is already disabled; nothing to do.")
            return redirect(detail_url)
        active = client_sessions_not_revoked_count(client=client)
        return confirm_page(
            request,
            Confirmation(
                title=f"Disable client {client.app_id}?",
                action_url=reverse("console:client_set_enabled", args=[client.app_id]),
                cancel_url=detail_url,
                button="Disable client",
                consequences=[
                    "The business system's Client Token is refused at once (401) "
                    "while the client is disabled.",
                    f"Its agent sessions ({active} not revoked) stop working on their next request; "
                    "they are not revoked, so enabling the client again restores them.",
                    "No new agent can sign in through this client until it is enabled again.",
                ],
                facts=_client_facts(client),
                hidden={"enabled": "false"},
                crumbs=_client_crumbs(client),
            ),
        )

    def post(self, request, app_id):
        client = or_404(client_get(app_id=app_id))
        form = EnabledForm(request.POST)
        if not form.is_valid():
            return error_page(
                request, status=400, title="Invalid request", detail="Choose enable or disable."
            )
        enabled = form.cleaned_data["enabled"]
        if not enabled and not is_confirmed(request):
            return not_confirmed(request)
        client_set_enabled(client=client, enabled=enabled, actor=Actor.user(request.user))
        messages.success(request, f"Client {client.app_id} {'enabled' if enabled else 'disabled'}.")
        return redirect("console:client_detail", app_id=client.app_id)


class ClientTokenRotateView(ConsoleView, View):
    """GET: the confirmation page. POST (with the confirmation): shows the new Client Token exactly
    once, in this POST's response (no-store). It is never put in the session or a flash message, so
    no later request can reveal it again."""

    permission_required = "agent_runtime.change_client"
    http_method_names = ["get", "post"]

    def get(self, request, app_id):
        client = or_404(client_get(app_id=app_id))
        consequences = [
            "A new Client Token is issued and shown once, on the next page: "
            "copy it into the business system.",
        ]
        if client.token_prefix:
            consequences.insert(
                0,
                f"The current Client Token ({client.token_prefix}…) stops working at once: the business "
                "system gets 401 until it is given the new one.",
            )
        consequences.append("Agent sessions of this client are not affected. The rotation is audited.")
        return confirm_page(
            request,
            Confirmation(
                title=f"Rotate the Client Token of {client.app_id}?",
                action_url=reverse("console:client_token_rotate", args=[client.app_id]),
                cancel_url=reverse("console:client_detail", args=[client.app_id]),
                button="Rotate token",
                consequences=consequences,
                facts=_client_facts(client),
                crumbs=_client_crumbs(client),
            ),
        )

    def post(self, request, app_id):
        client = or_404(client_get(app_id=app_id))
        if not is_confirmed(request):
            return not_confirmed(request)
        token = client_token_rotate(client=client, actor=Actor.user(request.user))
        return render(request, "agent_runtime/client_token.html", {"client": client, "token": token})
