"""Editing a client in the console: the same validation and service as ``bailing_apply``
(``validate_client_config`` + ``client_upsert``), config errors on the fields they name."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_runtime.models import Client
from bailing.models import AuditEvent
from tests.factories import ClientFactory
from tests.support.console import signed_in

FORM = {
    "name": "Demo Shop (renamed)",
    "description": "Orders and refunds.",
    "allowed_routes": "orders, support",
    "agent_authorize_url": "",
    "hub_consent": "on",
    "rate_limit_per_min": "120",
}


@pytest.fixture
def client_row(db):
    return ClientFactory(
        app_id="shop",
        name="Demo Shop",
        allowed_routes=["orders"],
        allowed_channels=["web"],
        budget=None,
        enabled=False,
    )


def _url(app_id="shop"):
    return reverse("console:client_edit", args=[app_id])


@pytest.mark.django_db
def test_edit_form_is_prefilled(admin_http, client_row):
    response = admin_http.get(_url())
    assert response.status_code == 200
    form = response.context["form"]
    assert "app_id" not in form.fields
    assert form.initial["name"] == "Demo Shop" and form.initial["allowed_routes"] == "orders"
    detail = admin_http.get(reverse("console:client_detail", args=["shop"])).content.decode()
    assert f'href="{_url()}"' in detail


@pytest.mark.django_db
def test_edit_saves_through_the_config_service_and_audits(admin_http, administrator, client_row):
    token_hash = client_row.token_hash
    response = admin_http.post(_url(), FORM, follow=True)
    assert response.redirect_chain == [(reverse("console:client_detail", args=["shop"]), 302)]
    assert [m.level_tag for m in response.context["messages"]] == ["success"]
    client_row.refresh_from_db()
    assert client_row.name == "Demo Shop (renamed)"
    assert client_row.description == "Orders and refunds."
    assert client_row.allowed_routes == ["orders", "support"]
    assert client_row.hub_consent is True and client_row.mcp_sign_in is False
    assert client_row.rate_limit_per_min == 120
    # What the form does not edit is kept, not reset to a default.
    assert client_row.enabled is False and client_row.allowed_channels == ["web"]
    assert client_row.token_hash == token_hash
    event = AuditEvent.objects.get(action="agent_runtime.client.updated", target_id="shop")
    assert event.actor == administrator.username
    fields = set(event.data["fields"])
    assert {"name", "description", "allowed_routes", "rate_limit_per_min"} <= fields
    assert not fields & {"enabled", "allowed_channels", "budget", "app_id"}
    again = admin_http.post(_url(), FORM, follow=True)
    assert [m.level_tag for m in again.context["messages"]] == ["info"]
    assert AuditEvent.objects.filter(action="agent_runtime.client.updated").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"allowed_routes": "Not/Valid"}, "allowed_routes"),
        ({"agent_authorize_url": "http://example.com/consent"}, "agent_authorize_url"),
        ({"hub_consent": "", "mcp_sign_in": "on"}, "mcp_sign_in"),
        ({"name": "bad\u202ename"}, "name"),
        ({"rate_limit_per_min": "-1"}, "rate_limit_per_min"),
    ],
)
def test_config_errors_are_shown_on_their_fields(admin_http, client_row, change, field):
    data = {**FORM, **change}
    if not data.get("hub_consent"):
        data.pop("hub_consent")
    response = admin_http.post(_url(), data)
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    client_row.refresh_from_db()
    assert client_row.name == "Demo Shop"
    assert not AuditEvent.objects.filter(action="agent_runtime.client.updated").exists()


@pytest.mark.django_db
def test_mcp_sign_in_held_by_another_client_is_a_field_error(admin_http, client_row):
    ClientFactory(app_id="other", hub_consent=True, mcp_sign_in=True)
    response = admin_http.post(_url(), {**FORM, "mcp_sign_in": "on"})
    assert response.status_code == 200
    assert "other" in response.context["form"].errors["mcp_sign_in"][0]
    assert Client.objects.get(app_id="shop").mcp_sign_in is False


@pytest.mark.django_db
def test_only_administrators_edit(client_row, approver, auditor):
    for user in (approver, auditor):
        browser = signed_in(user)
        assert browser.get(_url()).status_code == 403
        assert browser.post(_url(), FORM).status_code == 403
    client_row.refresh_from_db()
    assert client_row.name == "Demo Shop"


@pytest.mark.django_db
def test_unknown_client_is_404(admin_http):
    assert admin_http.get(_url("missing")).status_code == 404
