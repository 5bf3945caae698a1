"""Console forms of the agent runtime: client creation, session filters, the consent decision."""

from __future__ import annotations

import re

from django import forms

from agent_runtime.models import Client
from agent_runtime.selectors.clients import client_app_ids
from agent_runtime.selectors.workspace_overview import route_keys
from bailing.ui.forms import split_list

_CONFIG_PATH_FIELD = re.compile(r"^client\.([a-z_]+)")


class ClientCreateForm(forms.Form):
    app_id = forms.CharField(
        max_length=64,
        label="App ID",
        help_text="Lowercase letters, digits, '-' and '_'; 2–64 characters.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    name = forms.CharField(max_length=128)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    allowed_routes = forms.CharField(
        required=False,
        label="Allowed workspaces",
        help_text="Route keys separated by commas or spaces; * allows every workspace; empty allows none.",
    )
    agent_authorize_url = forms.CharField(
        required=False,
        max_length=2048,
        label="Agent authorize URL",
        help_text="Business consent page for agent sign-in (https, or http to a loopback host with a port).",
    )
    hub_consent = forms.BooleanField(
        required=False,
        label="Hub consent",
        help_text="Let signed-in hub users approve agent sign-ins on the hub's own consent page.",
    )
    mcp_sign_in = forms.BooleanField(
        required=False,
        label="MCP sign-in",
        help_text=(
            "Generic MCP clients that register dynamically sign in as this client "
            "(at most one client; needs hub consent or an agent authorize URL)."
        ),
    )
    rate_limit_per_min = forms.IntegerField(
        min_value=0, initial=60, label="Rate limit per minute", help_text="0 = unlimited."
    )

    def config_data(self) -> dict:
        """The client as a config file would state it (``validate_client_config`` input)."""
        data = self.cleaned_data
        config = {
            "app_id": data["app_id"],
            "name": data["name"],
            "description": data["description"],
            "enabled": True,
            "allowed_routes": split_list(data["allowed_routes"]),
            "allowed_channels": [],
            "rate_limit_per_min": data["rate_limit_per_min"],
            "hub_consent": data["hub_consent"],
            "mcp_sign_in": data["mcp_sign_in"],
        }
        if data["agent_authorize_url"]:
            config["agent_authorize_url"] = data["agent_authorize_url"]
        return config

    def add_config_error(self, path: str, reason: str) -> None:
        """Attach a ``ConfigError`` to the field it names (``client.allowed_routes[1]`` → allowed_routes)."""
        match = _CONFIG_PATH_FIELD.match(path or "")
        field = match.group(1) if match else None
        if field in self.fields:
            self.add_error(field, reason)
        else:
            self.add_error(None, f"{path}: {reason}" if path else reason)


class ClientEditForm(ClientCreateForm):
    """The console-editable fields of an existing client; its App ID is fixed (it names the client
    everywhere, tokens and sessions included)."""

    def __init__(self, *args, client: Client, **kwargs):
        self.client = client
        kwargs["initial"] = {
            **{
                "name": client.name,
                "description": client.description,
                "allowed_routes": ", ".join(client.allowed_routes or []),
                "agent_authorize_url": client.agent_authorize_url,
                "hub_consent": client.hub_consent,
                "mcp_sign_in": client.mcp_sign_in,
                "rate_limit_per_min": client.rate_limit_per_min,
            },
            **(kwargs.get("initial") or {}),
        }
        super().__init__(*args, **kwargs)
        del self.fields["app_id"]

    def config_data(self) -> dict:
        """The client as a config file would state it: the form's fields, and the client's current
        values for what the form does not edit (validation resets an absent field to its default)."""
        self.cleaned_data["app_id"] = self.client.app_id
        config = super().config_data()
        config["enabled"] = self.client.enabled
        config["allowed_channels"] = list(self.client.allowed_channels or [])
        config["budget"] = self.client.budget
        return config


class ClientRouteFilterForm(forms.Form):
    """A list filter by client and workspace, choosing among those that exist (the session and
    conversation lists)."""

    client = forms.ChoiceField(required=False)
    route = forms.ChoiceField(required=False, label="Workspace")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["client"].choices = [("", "any client")] + [
            (app_id, app_id) for app_id in client_app_ids()
        ]
        self.fields["route"].choices = [("", "any workspace")] + [(key, key) for key in route_keys()]


class SessionFilterForm(ClientRouteFilterForm):
    STATES = [("", "any state"), ("active", "active"), ("expired", "expired"), ("revoked", "revoked")]
    # How the agent signed in (``agent_runtime.selectors.agent_sessions.SESSION_VIA``).
    VIAS = [("", "any sign-in"), ("mcp", "MCP"), ("agent_auth", "Agent Auth")]

    state = forms.ChoiceField(required=False, choices=STATES)
    via = forms.ChoiceField(required=False, choices=VIAS, label="Signed in via")

    field_order = ["client", "state", "route", "via"]


class ConsentForm(forms.Form):
    """The consent decision. ``routes`` choices are requested ∩ client allowlist, set by the view."""

    authorization_id = forms.UUIDField(widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")])
    routes = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, offered_routes: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["routes"].choices = [(route, route) for route in offered_routes]
        self.fields["routes"].initial = list(offered_routes)

    def clean(self):
        data = super().clean()
        if data.get("decision") == "approve" and not data.get("routes"):
            self.add_error("routes", "Choose at least one workspace, or deny the request.")
        return data
