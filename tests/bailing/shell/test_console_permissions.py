"""The console permission matrix: every page and action × anonymous / no role / each role, CSRF on
every write, and no write handlers at all on the read-only audit pages."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client as HttpClient
from django.urls import reverse

from agent_runtime.models import AgentAuthorization, AgentSession, Client
from bailing.audit.actor import Actor
from bailing.audit.ledger import audit_record
from bailing.audit.models import AuditEvent
from tests.factories import AgentSessionFactory, UserFactory
from tests.support.console import signed_in

ALL = {"nobody", "approver", "auditor", "administrator"}
VIEWERS = {"approver", "auditor", "administrator"}
AUDITORS = {"auditor", "administrator"}
ADMINS = {"administrator"}
ROLES = {"nobody": [], "approver": ["approver"], "auditor": ["auditor"], "administrator": ["administrator"]}


@pytest.fixture
def world(console_roles, start_hub_login):
    """One of everything a console page can show, and the URL of every page and action."""
    login = start_hub_login()
    client = login.authorization.client
    session = AgentSessionFactory(client=client, allowed_routes=["orders"])
    with transaction.atomic():
        event = audit_record(action="tests.console.seeded", actor=Actor.system("pytest"))
    return {
        "login": login,
        "client": client,
        "session": session,
        "event": event,
        "get": {
            "dashboard": (reverse("console:dashboard"), ALL),
            "client_list": (reverse("console:client_list"), VIEWERS),
            "client_detail": (reverse("console:client_detail", args=[client.app_id]), VIEWERS),
            "client_create": (reverse("console:client_create"), ADMINS),
            "session_list": (reverse("console:session_list"), VIEWERS),
            "session_detail": (reverse("console:session_detail", args=[session.id]), VIEWERS),
            "workspace_list": (reverse("console:workspace_list"), VIEWERS),
            "workspace_detail": (reverse("console:workspace_detail", args=["orders"]), VIEWERS),
            "audit_list": (reverse("console:audit_list"), AUDITORS),
            "audit_detail": (reverse("console:audit_detail", args=[event.id]), AUDITORS),
            "audit_verify": (reverse("console:audit_verify"), AUDITORS),
            "consent": (
                reverse("console:consent") + f"?authorization_id={login.authorization.id}",
                VIEWERS,
            ),
        },
    }


def _post_actions(world):
    """name → (url, data, roles allowed, status on success, did-it-happen check)."""
    client, session, login = world["client"], world["session"], world["login"]
    return {
        "client_create": (
            reverse("console:client_create"),
            {"app_id": "new-client", "name": "New", "allowed_routes": "orders", "rate_limit_per_min": "60"},
            ADMINS,
            302,
            lambda: Client.objects.filter(app_id="new-client").exists(),
        ),
        "client_set_enabled": (
            reverse("console:client_set_enabled", args=[client.app_id]),
            {"enabled": "false", "confirm": "yes"},
            ADMINS,
            302,
            lambda: not Client.objects.get(pk=client.pk).enabled,
        ),
        "client_token_rotate": (
            reverse("console:client_token_rotate", args=[client.app_id]),
            {"confirm": "yes"},
            ADMINS,
            200,
            lambda: Client.objects.get(pk=client.pk).token_hash != client.token_hash,
        ),
        "session_revoke": (
            reverse("console:session_revoke", args=[session.id]),
            {"confirm": "yes"},
            ADMINS,
            302,
            lambda: AgentSession.objects.get(pk=session.pk).revoked_at is not None,
        ),
        "consent": (
            reverse("console:consent"),
            {"authorization_id": str(login.authorization.id), "decision": "approve", "routes": ["orders"]},
            VIEWERS,
            302,
            lambda: AgentAuthorization.objects.get(pk=login.authorization.pk).status == "approved",
        ),
    }


GET_PAGES = [
    "dashboard",
    "client_list",
    "client_detail",
    "client_create",
    "session_list",
    "session_detail",
    "workspace_list",
    "workspace_detail",
    "audit_list",
    "audit_detail",
    "audit_verify",
    "consent",
]
POST_ACTIONS = ["client_create", "client_set_enabled", "client_token_rotate", "session_revoke", "consent"]


@pytest.mark.django_db
@pytest.mark.parametrize("page", GET_PAGES)
def test_anonymous_get_redirects_to_login(world, page):
    url, _ = world["get"][page]
    response = HttpClient().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.django_db
@pytest.mark.parametrize("action", POST_ACTIONS)
def test_anonymous_post_redirects_to_login_and_changes_nothing(world, action):
    url, data, _, _, happened = _post_actions(world)[action]
    response = HttpClient().post(url, data)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")
    assert not happened()


@pytest.mark.django_db
@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("page", GET_PAGES)
def test_get_matrix(world, page, role):
    url, allowed = world["get"][page]
    user = UserFactory(roles=ROLES[role])
    response = signed_in(user).get(url)
    if role in allowed:
        assert response.status_code == 200
    else:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]


@pytest.mark.django_db
@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("action", POST_ACTIONS)
def test_post_matrix(world, action, role):
    url, data, allowed, success_status, happened = _post_actions(world)[action]
    user = UserFactory(roles=ROLES[role])
    response = signed_in(user).post(url, data)
    if role in allowed:
        assert response.status_code == success_status
        assert happened()
    else:
        assert response.status_code == 403
        assert not happened()


@pytest.mark.django_db
@pytest.mark.parametrize("action", POST_ACTIONS)
def test_post_without_csrf_token_is_rejected(world, administrator, action):
    url, data, _, _, happened = _post_actions(world)[action]
    response = signed_in(administrator, enforce_csrf_checks=True).post(url, data)
    assert response.status_code == 403
    assert not happened()


@pytest.mark.django_db
@pytest.mark.parametrize("action", POST_ACTIONS)
def test_post_with_csrf_token_is_accepted(world, administrator, action):
    url, data, _, success_status, happened = _post_actions(world)[action]
    browser = signed_in(administrator, enforce_csrf_checks=True)
    browser.get(reverse("console:dashboard"))  # the page sets the CSRF cookie, as a browser would see
    token = browser.cookies["csrftoken"].value
    response = browser.post(url, {**data, "csrfmiddlewaretoken": token})
    assert response.status_code == success_status
    assert happened()


@pytest.mark.django_db
def test_logout_requires_post_and_csrf(administrator):
    browser = signed_in(administrator, enforce_csrf_checks=True)
    assert browser.get(reverse("console:logout")).status_code == 405
    assert browser.post(reverse("console:logout")).status_code == 403
    assert browser.get(reverse("console:dashboard")).status_code == 200
    token = browser.cookies["csrftoken"].value
    response = browser.post(reverse("console:logout"), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert browser.get(reverse("console:dashboard")).status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["audit_list", "audit_detail", "audit_verify"])
@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_audit_pages_have_no_write_handlers(world, administrator, page, method):
    url, _ = world["get"][page]
    before = AuditEvent.objects.count()
    response = getattr(signed_in(administrator), method)(url)
    assert response.status_code == 405
    assert AuditEvent.objects.count() == before


DESTRUCTIVE = ["client_set_enabled", "client_token_rotate", "session_revoke"]


@pytest.mark.django_db
@pytest.mark.parametrize("action", DESTRUCTIVE)
def test_destructive_actions_get_is_a_confirmation_page_that_changes_nothing(world, administrator, action):
    url, _, _, _, happened = _post_actions(world)[action]
    response = signed_in(administrator).get(url)
    assert response.status_code == 200
    assert "console/confirm.html" in [t.name for t in response.templates]
    assert "no-store" in response["Cache-Control"]
    content = response.content.decode()
    assert f'action="{url}"' in content
    assert 'name="confirm" value="yes"' in content
    assert not happened()


@pytest.mark.django_db
@pytest.mark.parametrize("action", DESTRUCTIVE)
@pytest.mark.parametrize("confirm", [None, "", "no", "YES"])
def test_destructive_actions_refuse_a_post_without_the_confirmation(world, administrator, action, confirm):
    url, data, _, _, happened = _post_actions(world)[action]
    data = {key: value for key, value in data.items() if key != "confirm"}
    if confirm is not None:
        data["confirm"] = confirm
    before = AuditEvent.objects.count()
    response = signed_in(administrator).post(url, data)
    assert response.status_code == 400
    assert response.context["code"] == "not_confirmed"
    assert not happened()
    assert AuditEvent.objects.count() == before


@pytest.mark.django_db
def test_nav_shows_only_permitted_sections(world, approver, auditor):
    approver_page = signed_in(approver).get(reverse("console:dashboard"))
    names = [item["url_name"] for item in approver_page.context["console_nav"]]
    assert "console:audit_list" not in names
    assert "console:client_list" in names
    auditor_page = signed_in(auditor).get(reverse("console:dashboard"))
    assert "console:audit_list" in [item["url_name"] for item in auditor_page.context["console_nav"]]


# --- every console URL, read from the URLconf ------------------------------------------------------------
# A page added to any console urls module without an entry here fails
# ``test_every_console_url_is_in_the_matrix``; one added without a permission check fails the
# anonymous and no-permission tests below, which request every URL the URLconf has.

PUBLIC_PAGES = {"login", "logout"}
PAGE_PERMISSIONS = {
    "dashboard": (),
    "workspace_list": ("agent_runtime.view_route",),
    "workspace_detail": ("agent_runtime.view_route",),
    "provider_list": ("agent_runtime.view_toolprovider",),
    "provider_detail": ("agent_runtime.view_toolprovider",),
    "provider_refresh": ("agent_runtime.change_toolprovider",),
    "provider_tool_detail": ("agent_runtime.view_toolprovider", "agent_runtime.view_providertool"),
    "tool_list": ("agent_runtime.view_toolprovider", "agent_runtime.view_providertool"),
    "knowledge_list": ("knowledge.view_knowledgebase",),
    "knowledge_detail": ("knowledge.view_knowledgebase",),
    "knowledge_set_enabled": ("knowledge.manage_knowledgebase",),
    "knowledge_delete": ("knowledge.manage_knowledgebase",),
    "knowledge_hit_test": ("knowledge.view_knowledgebase",),
    "knowledge_document_add": ("knowledge.manage_knowledgebase",),
    "knowledge_document_upload": ("knowledge.manage_knowledgebase",),
    "knowledge_document_detail": ("knowledge.view_knowledgebase",),
    "knowledge_document_delete": ("knowledge.manage_knowledgebase",),
    "client_list": ("agent_runtime.view_client",),
    "client_create": ("agent_runtime.add_client",),
    "client_detail": ("agent_runtime.view_client",),
    "client_edit": ("agent_runtime.change_client",),
    "client_set_enabled": ("agent_runtime.change_client",),
    "client_token_rotate": ("agent_runtime.change_client",),
    "session_list": ("agent_runtime.view_agentsession",),
    "session_detail": ("agent_runtime.view_agentsession",),
    "session_revoke": ("agent_runtime.change_agentsession",),
    "conversation_list": ("agent_runtime.view_agentconversation", "agent_runtime.view_agentrun"),
    "conversation_detail": ("agent_runtime.view_agentconversation", "agent_runtime.view_agentrun"),
    "approval_list": ("agent_runtime.view_toolapproval",),
    "approval_detail": ("agent_runtime.view_toolapproval",),
    "approval_args": ("agent_runtime.view_toolapproval",),
    "approval_decide": ("agent_runtime.decide_toolapproval",),
    "approval_notification_resend": ("agent_runtime.change_toolapproval",),
    "invocation_list": ("agent_runtime.view_toolinvocation",),
    "invocation_detail": ("agent_runtime.view_toolinvocation",),
    "invocation_resolve": ("agent_runtime.resolve_toolcalljournal",),
    "invocation_answer_reveal": ("agent_runtime.reveal_toolcalljournal",),
    "audit_list": ("bailing.view_auditevent",),
    "audit_verify": ("bailing.verify_auditevent",),
    "audit_detail": ("bailing.view_auditevent",),
    "consent": ("agent_runtime.consent_agentauthorization",),
    "user_list": ("auth.change_user",),
    "user_create": ("auth.change_user",),
    "user_detail": ("auth.change_user",),
    "user_password": ("auth.change_user",),
    "user_deactivate": ("auth.change_user",),
    "user_reactivate": ("auth.change_user",),
}


def _console_urls() -> list[tuple[str, str, type]]:
    """(url name, a concrete URL, view class) for every console URL pattern."""
    import re
    import uuid

    from bailing.shell.console import urls as console_urls

    samples = {"uuid": str(uuid.uuid4()), "int": "1", "segment": "no-such-thing", "slug": "no-such-thing"}
    found = []
    for pattern in console_urls.urlpatterns:
        route = re.sub(r"<(?:(\w+):)?\w+>", lambda m: samples[m.group(1) or "str"], str(pattern.pattern))
        found.append((pattern.name, "/console/" + route, pattern.callback.view_class))
    return found


CONSOLE_URLS = _console_urls()
PROTECTED = [(name, url, view) for name, url, view in CONSOLE_URLS if name not in PUBLIC_PAGES]
PROTECTED_IDS = [name for name, _, _ in PROTECTED]


def test_every_console_url_is_in_the_matrix():
    assert {name for name, _, _ in CONSOLE_URLS} == set(PAGE_PERMISSIONS) | PUBLIC_PAGES


@pytest.mark.parametrize(("name", "url", "view"), PROTECTED, ids=PROTECTED_IDS)
def test_every_console_view_checks_its_permission(name, url, view):
    from bailing.ui.mixins import ConsolePermissionMixin, NoStoreMixin

    assert issubclass(view, ConsolePermissionMixin) and issubclass(view, NoStoreMixin)
    assert set(view().get_permission_required()) == set(PAGE_PERMISSIONS[name])


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(("name", "url", "view"), PROTECTED, ids=PROTECTED_IDS)
def test_every_console_url_sends_anonymous_visitors_to_login(name, url, view, method):
    response = getattr(HttpClient(), method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize(("name", "url", "view"), PROTECTED, ids=PROTECTED_IDS)
def test_every_console_url_is_403_without_its_permission(console_roles, name, url, view, method):
    browser = signed_in(UserFactory(roles=[]))
    response = getattr(browser, method)(url)
    if not PAGE_PERMISSIONS[name]:
        assert response.status_code != 403
    else:
        assert response.status_code == 403
        assert "console/forbidden.html" in [t.name for t in response.templates]
        assert "no-store" in response["Cache-Control"]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["approver", "auditor", "administrator"])
@pytest.mark.parametrize(("name", "url", "view"), PROTECTED, ids=PROTECTED_IDS)
def test_every_console_url_follows_the_role_permissions(console_roles, name, url, view, role):
    user = UserFactory(roles=[role])
    status = signed_in(user).get(url).status_code
    if user.has_perms(PAGE_PERMISSIONS[name]):
        assert status != 403 and status != 302
    else:
        assert status == 403
