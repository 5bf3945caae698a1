"""Clients: list, detail, create, enable/disable and Client Token rotation."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views import View
from django.views.generic import DetailView, FormView, ListView

from agent_runtime.config import ConfigError, validate_client_config
from agent_runtime.console.forms import ClientCreateForm
from agent_runtime.console.sessions import session_table
from agent_runtime.errors import ClientExists
from agent_runtime.models import Client
from agent_runtime.services.clients import client_create, client_set_enabled, client_token_rotate
from bailing.audit.actor import Actor
from bailing.ui import tables
from bailing.ui.forms import EnabledForm
from bailing.ui.mixins import ConsoleView
from bailing.ui.pages import PAGE_SIZE, error_page


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
        return Client.objects.order_by("app_id")

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
    slug_field = "app_id"
    slug_url_kwarg = "app_id"
    context_object_name = "client"
    queryset = Client.objects.all()
    recent_sessions = 20

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        client = self.object
        sessions = list(
            client.agent_sessions.select_related("client").order_by("-created_at")[: self.recent_sessions]
        )
        context["consent_kinds"] = consent_kinds(client)
        context["sessions_table"] = session_table(sessions, show_client=False)
        context["sessions_total"] = client.agent_sessions.count()
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


class ClientSetEnabledView(ConsoleView, View):
    permission_required = "agent_runtime.change_client"
    http_method_names = ["post"]

    def post(self, request, app_id):
        client = get_object_or_404(Client, app_id=app_id)
        form = EnabledForm(request.POST)
        if not form.is_valid():
            return error_page(
                request, status=400, title="Invalid request", detail="Choose enable or disable."
            )
        enabled = form.cleaned_data["enabled"]
        client_set_enabled(client=client, enabled=enabled, actor=Actor.user(request.user))
        messages.success(request, f"Client {client.app_id} {'enabled' if enabled else 'disabled'}.")
        return redirect("console:client_detail", app_id=client.app_id)


class ClientTokenRotateView(ConsoleView, View):
    """Shows the new Client Token exactly once, in this POST's response (no-store). It is never put in
    the session or a flash message, so no later request can reveal it again."""

    permission_required = "agent_runtime.change_client"
    http_method_names = ["post"]

    def post(self, request, app_id):
        client = get_object_or_404(Client, app_id=app_id)
        token = client_token_rotate(client=client, actor=Actor.user(request.user))
        return render(request, "agent_runtime/client_token.html", {"client": client, "token": token})
