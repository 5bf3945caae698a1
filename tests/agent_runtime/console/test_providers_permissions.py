"""The permission matrix of the tool provider pages and the Refresh action: anonymous → login,
no role → 403, every role reads, only administrators refresh; CSRF on the refresh POST; no GET
handler on it. (Kept beside ``test_permissions.py`` rather than inside it.)"""

from __future__ import annotations

import pytest
from django.test import Client as HttpClient
from django.urls import reverse

from agent_runtime.models import ToolProvider
from tests.factories import ToolProviderFactory, UserFactory
from tests.support.console import signed_in
from tests.support.providers_seed import load_spec

pytestmark = pytest.mark.django_db

ROLES = {"nobody": [], "approver": ["approver"], "auditor": ["auditor"], "administrator": ["administrator"]}
VIEWERS = {"approver", "auditor", "administrator"}
ADMINS = {"administrator"}


@pytest.fixture
def provider(console_roles):
    # Inline, so a refresh needs no network: it recompiles the stored inline spec.
    spec = load_spec("catalog_shop")
    return ToolProviderFactory(name="shop", spec=spec, spec_inline=spec)


def pages(provider) -> dict[str, str]:
    return {
        "provider_list": reverse("console:provider_list"),
        "provider_detail": reverse("console:provider_detail", args=[provider.name]),
        "provider_tool_detail": reverse("console:provider_tool_detail", args=[provider.name, "order_get"]),
    }


def refreshed(provider) -> bool:
    return ToolProvider.objects.get(pk=provider.pk).last_refresh_at != provider.last_refresh_at


def refresh_url(provider) -> str:
    return reverse("console:provider_refresh", args=[provider.name])


PAGES = ["provider_list", "provider_detail", "provider_tool_detail"]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_get_redirects_to_login(provider, page):
    response = HttpClient().get(pages(provider)[page])
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


def test_anonymous_refresh_redirects_to_login_and_refreshes_nothing(provider):
    response = HttpClient().post(refresh_url(provider))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")
    assert not refreshed(provider)


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("page", PAGES)
def test_get_matrix(provider, page, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(pages(provider)[page])
    if role in VIEWERS:
        assert response.status_code == 200
        assert "no-store" in response["Cache-Control"]
    else:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]


@pytest.mark.parametrize("role", sorted(ROLES))
def test_refresh_matrix(provider, role):
    response = signed_in(UserFactory(roles=ROLES[role])).post(refresh_url(provider))
    if role in ADMINS:
        assert response.status_code == 302
        assert response["Location"] == pages(provider)["provider_detail"]
        assert refreshed(provider)
    else:
        assert response.status_code == 403
        assert not refreshed(provider)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_refresh_button_is_shown_only_to_those_who_may_refresh(provider, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(pages(provider)["provider_detail"])
    if role in VIEWERS:
        assert (refresh_url(provider) in response.content.decode()) is (role in ADMINS)
        assert response.context["can_refresh"] is (role in ADMINS)


def test_refresh_without_csrf_token_is_rejected(provider, administrator):
    response = signed_in(administrator, enforce_csrf_checks=True).post(refresh_url(provider))
    assert response.status_code == 403
    assert not refreshed(provider)


def test_refresh_with_csrf_token_is_accepted(provider, administrator):
    browser = signed_in(administrator, enforce_csrf_checks=True)
    browser.get(pages(provider)["provider_detail"])
    token = browser.cookies["csrftoken"].value
    response = browser.post(refresh_url(provider), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert refreshed(provider)


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_refresh_has_no_other_method_handlers(provider, administrator, method):
    response = getattr(signed_in(administrator), method)(refresh_url(provider))
    assert response.status_code == 405
    assert not refreshed(provider)


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize("page", PAGES)
def test_pages_have_no_write_handlers(provider, administrator, page, method):
    response = getattr(signed_in(administrator), method)(pages(provider)[page])
    assert response.status_code == 405
    assert not refreshed(provider)


@pytest.mark.parametrize(
    "url",
    [
        "/console/providers/ghost/",
        "/console/providers/ghost/tools/order_get/",
        "/console/providers/shop/tools/ghost_tool/",
    ],
)
def test_unknown_provider_or_tool_is_404_for_a_viewer(provider, auditor, url):
    assert signed_in(auditor).get(url).status_code == 404


def test_unknown_provider_refresh_is_404_for_an_administrator(provider, administrator):
    assert signed_in(administrator).post("/console/providers/ghost/refresh/").status_code == 404


@pytest.mark.parametrize("role", sorted(ROLES))
def test_nav_lists_tool_providers_for_every_role(console_roles, role):
    response = signed_in(UserFactory(roles=ROLES[role])).get(reverse("console:dashboard"))
    names = [item["url_name"] for item in response.context["console_nav"]]
    assert ("console:provider_list" in names) is (role in VIEWERS)
    if role in VIEWERS:
        assert names.index("console:provider_list") == names.index("console:workspace_list") + 1
