"""Console users (administrators only) and ``manage.py bailing_user``: create, set roles, reset a
password (generated and shown once, or set), deactivate and reactivate with a confirmation; every
change audited; the last active administrator can be neither demoted nor deactivated."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client as HttpClient
from django.urls import reverse

from bailing.audit.actor import Actor
from bailing.models import AuditEvent
from bailing.shell.users import (
    LAST_ADMINISTRATOR,
    SELF_DEACTIVATION,
    UserError,
    user_deactivate,
    user_deactivation_refusal,
    user_reactivate,
    user_roles,
    user_set_roles,
)
from tests.factories import UserFactory
from tests.support.console import PASSWORD, signed_in

User = get_user_model()
NEW_PASSWORD = "tangerine-orbit-lantern-42"


@pytest.fixture
def subject(console_roles):
    return UserFactory(username="bob", roles=["auditor"])


def _urls(username="bob"):
    return {
        "list": reverse("console:user_list"),
        "create": reverse("console:user_create"),
        "detail": reverse("console:user_detail", args=[username]),
        "password": reverse("console:user_password", args=[username]),
        "deactivate": reverse("console:user_deactivate", args=[username]),
    }


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["approver", "auditor", None])
@pytest.mark.parametrize("page", ["list", "create", "detail", "password", "deactivate"])
def test_non_administrators_get_403_and_change_nothing(subject, role, page):
    browser = signed_in(UserFactory(roles=[role] if role else []))
    url = _urls()[page]
    assert browser.get(url).status_code == 403
    before = AuditEvent.objects.count()
    response = browser.post(url, {"username": "eve", "roles": ["administrator"], "confirm": "yes"})
    assert response.status_code == 403
    assert AuditEvent.objects.count() == before
    assert not User.objects.filter(username="eve").exists()
    subject.refresh_from_db()
    assert subject.is_active and user_roles(subject) == ["auditor"]


@pytest.mark.django_db
def test_list_shows_users_and_roles(admin_http, subject):
    response = admin_http.get(_urls()["list"])
    assert response.status_code == 200
    content = response.content.decode()
    assert "bob" in content and "auditor" in content
    nav = [item["url_name"] for item in response.context["console_nav"]]
    assert "console:user_list" in nav


@pytest.mark.django_db
def test_nav_has_no_users_entry_for_non_administrators(subject):
    page = signed_in(subject).get(reverse("console:dashboard"))
    assert "console:user_list" not in [item["url_name"] for item in page.context["console_nav"]]


@pytest.mark.django_db
def test_create_with_generated_password_shows_it_once_and_audits(admin_http, administrator):
    response = admin_http.post(_urls()["create"], {"username": "carol", "roles": ["approver"]})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    password = response.context["password"]
    assert len(password) >= 20 and response.content.decode().count(password) == 1
    carol = User.objects.get(username="carol")
    assert carol.check_password(password)
    assert user_roles(carol) == ["approver"]
    event = AuditEvent.objects.get(action="console.user.created", target_id="carol")
    assert event.actor == administrator.username and event.data == {"roles": ["approver"]}
    assert password not in str(event.data)
    detail = admin_http.get(_urls("carol")["detail"]).content.decode()
    assert password not in detail


@pytest.mark.django_db
def test_create_with_a_chosen_password_and_refusals(admin_http, subject):
    response = admin_http.post(_urls()["create"], {"username": "dave", "password": NEW_PASSWORD})
    assert response.status_code == 302
    assert User.objects.get(username="dave").check_password(NEW_PASSWORD)
    taken = admin_http.post(_urls()["create"], {"username": "bob", "password": NEW_PASSWORD})
    assert taken.status_code == 200 and taken.context["form"].errors["username"]
    weak = admin_http.post(_urls()["create"], {"username": "erin", "password": "123"})
    assert weak.context["form"].errors["password"]
    reserved = admin_http.post(_urls()["create"], {"username": "_new", "password": NEW_PASSWORD})
    assert reserved.context["form"].errors["username"]
    unknown = admin_http.post(_urls()["create"], {"username": "erin", "roles": ["root"]})
    assert unknown.context["form"].errors["roles"]
    assert not User.objects.filter(username__in=["erin", "_new"]).exists()


@pytest.mark.django_db
def test_set_roles(admin_http, subject):
    response = admin_http.post(_urls()["detail"], {"roles": ["administrator", "approver"]})
    assert response.status_code == 302
    assert user_roles(subject) == ["administrator", "approver"]
    event = AuditEvent.objects.get(action="console.user.roles_set", target_id="bob")
    assert event.data == {"before": ["auditor"], "after": ["administrator", "approver"]}
    admin_http.post(_urls()["detail"], {"roles": ["administrator", "approver"]})
    assert AuditEvent.objects.filter(action="console.user.roles_set").count() == 1
    admin_http.post(_urls()["detail"], {})
    assert user_roles(subject) == []


@pytest.mark.django_db
def test_reset_password_asks_first(admin_http, subject):
    url = _urls()["password"]
    confirm = admin_http.get(url)
    assert confirm.status_code == 200
    assert "console/confirm.html" in [t.name for t in confirm.templates]
    assert "no-store" in confirm["Cache-Control"]
    content = confirm.content.decode()
    assert f'action="{url}"' in content and 'name="confirm" value="yes"' in content
    assert 'name="password"' in content  # the new password is typed on the confirmation page
    for data in ({"password": NEW_PASSWORD}, {"password": NEW_PASSWORD, "confirm": "no"}, {}):
        refused = admin_http.post(url, data)
        assert refused.status_code == 400 and refused.context["code"] == "not_confirmed"
    subject.refresh_from_db()
    assert subject.check_password(PASSWORD)
    assert not AuditEvent.objects.filter(action="console.user.password_reset").exists()


@pytest.mark.django_db
def test_reset_password_generated_or_set(admin_http, subject):
    generated = admin_http.post(_urls()["password"], {"password": "", "confirm": "yes"})
    assert generated.status_code == 200
    password = generated.context["password"]
    subject.refresh_from_db()
    assert subject.check_password(password) and not subject.check_password(PASSWORD)
    chosen = admin_http.post(_urls()["password"], {"password": NEW_PASSWORD, "confirm": "yes"})
    assert chosen.status_code == 302
    subject.refresh_from_db()
    assert subject.check_password(NEW_PASSWORD)
    weak = admin_http.post(_urls()["password"], {"password": "123", "confirm": "yes"})
    assert weak.status_code == 400
    # Refused on the confirmation page itself, with the field's error: still one step to retry.
    assert "console/confirm.html" in [t.name for t in weak.templates]
    assert weak.context["confirmation"].form.errors["password"]
    subject.refresh_from_db()
    assert subject.check_password(NEW_PASSWORD)
    events = AuditEvent.objects.filter(action="console.user.password_reset", target_id="bob").order_by("id")
    assert [event.data for event in events] == [{"generated": True}, {"generated": False}]


@pytest.mark.django_db
def test_deactivate_asks_first_then_signs_the_user_out(admin_http, subject):
    theirs = signed_in(subject)
    assert theirs.get(reverse("console:dashboard")).status_code == 200
    url = _urls()["deactivate"]
    confirm = admin_http.get(url)
    assert confirm.status_code == 200
    assert "console/confirm.html" in [t.name for t in confirm.templates]
    assert "can no longer sign in" in confirm.content.decode()
    assert admin_http.post(url).status_code == 400
    subject.refresh_from_db()
    assert subject.is_active
    response = admin_http.post(url, {"confirm": "yes"})
    assert response.status_code == 302
    subject.refresh_from_db()
    assert not subject.is_active
    assert AuditEvent.objects.filter(action="console.user.deactivated", target_id="bob").count() == 1
    assert theirs.get(reverse("console:dashboard")).status_code == 302
    assert not HttpClient().login(username="bob", password=PASSWORD)


@pytest.mark.django_db
def test_an_administrator_cannot_deactivate_themselves(admin_http, administrator):
    UserFactory(username="other-admin", roles=["administrator"])  # not the last one: still refused
    url = _urls(administrator.username)["deactivate"]
    page = admin_http.get(url)
    assert page.status_code == 409 and page.context["code"] == SELF_DEACTIVATION
    assert "console/confirm.html" not in [t.name for t in page.templates]
    before = AuditEvent.objects.count()
    response = admin_http.post(url, {"confirm": "yes"})
    assert response.status_code == 409 and response.context["code"] == SELF_DEACTIVATION
    administrator.refresh_from_db()
    assert administrator.is_active
    assert AuditEvent.objects.count() == before


# --- the last administrator, reactivation (service) ------------------------------------------------------

ACTOR = Actor.system("tests")


@pytest.mark.django_db
def test_service_keeps_the_last_active_administrator(console_roles):
    ada = UserFactory(username="ada", roles=["administrator", "approver"])
    bob = UserFactory(username="bob", roles=["auditor"])
    before = AuditEvent.objects.count()
    with pytest.raises(UserError) as demoted:
        user_set_roles(user=ada, roles=["approver"], actor=ACTOR)
    assert (demoted.value.code, demoted.value.field) == (LAST_ADMINISTRATOR, "roles")
    with pytest.raises(UserError) as deactivated:
        user_deactivate(user=ada, actor=ACTOR)
    assert deactivated.value.code == LAST_ADMINISTRATOR
    assert user_deactivation_refusal(user=ada).code == LAST_ADMINISTRATOR
    ada.refresh_from_db()
    assert ada.is_active and user_roles(ada) == ["administrator", "approver"]
    assert AuditEvent.objects.count() == before
    # Other changes to the last administrator, and any change to others, are fine.
    assert user_set_roles(user=ada, roles=["administrator"], actor=ACTOR)
    assert user_deactivate(user=bob, actor=ACTOR)
    # An inactive administrator does not count: bob made administrator while inactive is no rescue.
    user_set_roles(user=bob, roles=["administrator"], actor=ACTOR)
    with pytest.raises(UserError) as still_last:
        user_deactivate(user=ada, actor=ACTOR)
    assert still_last.value.code == LAST_ADMINISTRATOR
    # Once another administrator is active, the first may step down.
    assert user_reactivate(user=bob, actor=ACTOR)
    assert user_set_roles(user=ada, roles=[], actor=ACTOR)
    with pytest.raises(UserError) as now_bob:
        user_set_roles(user=bob, roles=["auditor"], actor=ACTOR)
    assert now_bob.value.code == LAST_ADMINISTRATOR


@pytest.mark.django_db
def test_service_refuses_self_deactivation_and_reactivates_once(console_roles):
    ada = UserFactory(username="ada", roles=["administrator"])
    bob = UserFactory(username="bob", roles=["administrator"])
    with pytest.raises(UserError) as itself:
        user_deactivate(user=bob, actor=Actor.user(bob), acting_user=bob)
    assert itself.value.code == SELF_DEACTIVATION
    assert user_deactivation_refusal(user=bob, acting_user=bob).code == SELF_DEACTIVATION
    assert user_deactivation_refusal(user=bob, acting_user=ada) is None
    assert user_deactivate(user=bob, actor=Actor.user(ada), acting_user=ada)
    assert not bob.is_active
    assert user_reactivate(user=bob, actor=Actor.user(ada))
    assert not user_reactivate(user=bob, actor=Actor.user(ada))  # already active: nothing audited
    bob.refresh_from_db()
    assert bob.is_active and user_roles(bob) == ["administrator"]
    assert HttpClient().login(username="bob", password=PASSWORD)
    events = AuditEvent.objects.filter(target_id="bob").order_by("id")
    assert [(e.action, e.actor) for e in events] == [
        ("console.user.deactivated", "ada"),
        ("console.user.reactivated", "ada"),
    ]


# --- the last administrator, reactivation (console) ------------------------------------------------------


@pytest.mark.django_db
def test_console_refuses_to_demote_the_last_administrator(admin_http, administrator):
    response = admin_http.post(_urls(administrator.username)["detail"], {"roles": ["approver"]})
    assert response.status_code == 409
    assert response.context["error_code"] == LAST_ADMINISTRATOR
    assert response.context["roles_form"].errors["roles"]
    assert f"409 · {LAST_ADMINISTRATOR}" in response.content.decode()
    assert response.context["roles_form"]["roles"].value() == ["administrator"]  # shown as they are
    assert user_roles(administrator) == ["administrator"]
    assert not AuditEvent.objects.filter(action="console.user.roles_set").exists()


@pytest.mark.django_db
def test_console_refuses_to_deactivate_the_last_administrator(console_roles):
    """Someone who may manage users without being an administrator (the ``auth.change_user``
    permission given directly) cannot deactivate the only active administrator, neither on the
    confirmation page nor with a forged POST."""
    from django.contrib.auth.models import Permission

    ada = UserFactory(username="ada", roles=["administrator"])
    manager = UserFactory(username="manager", roles=[])
    manager.user_permissions.add(
        Permission.objects.get(codename="change_user", content_type__app_label="auth")
    )
    browser = signed_in(manager)
    url = _urls("ada")["deactivate"]
    page = browser.get(url)
    assert page.status_code == 409 and page.context["code"] == LAST_ADMINISTRATOR
    response = browser.post(url, {"confirm": "yes"})
    assert response.status_code == 409 and response.context["code"] == LAST_ADMINISTRATOR
    ada.refresh_from_db()
    assert ada.is_active
    assert not AuditEvent.objects.filter(action="console.user.deactivated").exists()
    UserFactory(username="second", roles=["administrator"])
    assert browser.get(url).status_code == 200  # another active administrator: the page asks


@pytest.mark.django_db
def test_console_reactivate_asks_first_then_lets_the_user_back_in(admin_http, subject):
    user_deactivate(user=subject, actor=ACTOR)
    detail = admin_http.get(_urls()["detail"]).content.decode()
    assert _urls()["deactivate"] not in detail
    url = reverse("console:user_reactivate", args=["bob"])
    assert url in detail
    confirm = admin_http.get(url)
    assert confirm.status_code == 200 and "no-store" in confirm["Cache-Control"]
    assert "console/confirm.html" in [t.name for t in confirm.templates]
    assert 'name="confirm" value="yes"' in confirm.content.decode()
    refused = admin_http.post(url, {"confirm": "no"})
    assert refused.status_code == 400 and refused.context["code"] == "not_confirmed"
    subject.refresh_from_db()
    assert not subject.is_active
    response = admin_http.post(url, {"confirm": "yes"})
    assert response.status_code == 302
    subject.refresh_from_db()
    assert subject.is_active and user_roles(subject) == ["auditor"]
    assert HttpClient().login(username="bob", password=PASSWORD)
    event = AuditEvent.objects.get(action="console.user.reactivated", target_id="bob")
    assert event.actor == "ada"
    # Active again: the reactivate page has nothing to do and sends back to the user.
    assert admin_http.get(url).status_code == 302
    assert _urls()["deactivate"] in admin_http.get(_urls()["detail"]).content.decode()


# --- manage.py bailing_user -------------------------------------------------------------------------------


def _run(*args, stdin: str = "", monkeypatch=None):
    out, err = io.StringIO(), io.StringIO()
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command("bailing_user", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_command_create_with_generated_password(console_roles, monkeypatch):
    out, err = _run("create", "frank", "--role", "approver", "--role", "auditor", monkeypatch=monkeypatch)
    password = out.strip()
    frank = User.objects.get(username="frank")
    assert frank.check_password(password)
    assert user_roles(frank) == ["approver", "auditor"]
    assert password not in err
    event = AuditEvent.objects.get(action="console.user.created", target_id="frank")
    assert (event.actor_type, event.actor) == ("system", "bailing_user")


@pytest.mark.django_db
def test_command_password_from_stdin_set_roles_reset_deactivate(console_roles, monkeypatch):
    UserFactory(username="keeper", roles=["administrator"])  # gina is not the last administrator
    out, _ = _run("create", "gina", "--password-stdin", stdin=NEW_PASSWORD + "\n", monkeypatch=monkeypatch)
    assert out == ""
    gina = User.objects.get(username="gina")
    assert gina.check_password(NEW_PASSWORD) and user_roles(gina) == []
    _run("set-roles", "gina", "--role", "administrator")
    assert user_roles(gina) == ["administrator"]
    out, _ = _run("reset-password", "gina", monkeypatch=monkeypatch)
    gina.refresh_from_db()
    assert gina.check_password(out.strip())
    _run("deactivate", "gina")
    gina.refresh_from_db()
    assert not gina.is_active
    actions = list(
        AuditEvent.objects.filter(target_id="gina").order_by("id").values_list("action", flat=True)
    )
    assert actions == [
        "console.user.created",
        "console.user.roles_set",
        "console.user.password_reset",
        "console.user.deactivated",
    ]


@pytest.mark.django_db
def test_command_refusals(console_roles, monkeypatch):
    with pytest.raises(CommandError, match="no user"):
        _run("deactivate", "nobody-here")
    with pytest.raises(CommandError, match="password"):
        _run("create", "hank", "--password-stdin", stdin="123\n", monkeypatch=monkeypatch)
    with pytest.raises(CommandError, match="no password"):
        _run("create", "hank", "--password-stdin", stdin="", monkeypatch=monkeypatch)
    with pytest.raises(CommandError):
        _run("create", "hank", "--role", "root")
    with pytest.raises(CommandError):
        _run("create", "hank", "--password", NEW_PASSWORD)  # never on the command line
    assert not User.objects.filter(username="hank").exists()


@pytest.mark.django_db
def test_command_keeps_the_last_administrator_and_reactivates(console_roles):
    ada = UserFactory(username="ada", roles=["administrator"])
    with pytest.raises(CommandError, match=rf"^{LAST_ADMINISTRATOR} "):
        _run("deactivate", "ada")
    with pytest.raises(CommandError, match=rf"^{LAST_ADMINISTRATOR} "):
        _run("set-roles", "ada", "--role", "auditor")
    ada.refresh_from_db()
    assert ada.is_active and user_roles(ada) == ["administrator"]
    UserFactory(username="ben", roles=["auditor"])
    _, err = _run("deactivate", "ben")
    assert "ben deactivated" in err
    _, err = _run("reactivate", "ben")
    assert "ben reactivated" in err and User.objects.get(username="ben").is_active
    _, err = _run("reactivate", "ben")
    assert "already active" in err
    assert AuditEvent.objects.filter(action="console.user.reactivated", target_id="ben").count() == 1
    with pytest.raises(CommandError, match="no user"):
        _run("reactivate", "nobody-here")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_users_page_in_a_browser(hub_server, administrator, browser_page, screenshot):
    UserFactory(username="bob", roles=["auditor"])
    page = browser_page
    base = hub_server.url
    page.goto(base + reverse("console:user_list"))
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + reverse("console:user_list"))
    screenshot(page, "users-01-list")
    page.get_by_role("link", name="New user").click()
    page.get_by_label("Username").fill("carol")
    page.get_by_role("checkbox", name="approver", exact=True).check()
    screenshot(page, "users-02-create")
    page.get_by_role("button", name="Create user").click()
    password = page.get_by_label("Password").input_value()
    assert User.objects.get(username="carol").check_password(password)
    screenshot(page, "users-03-password-once")
    page.goto(base + _urls("bob")["detail"])
    screenshot(page, "users-04-detail")
    page.get_by_role("link", name="Deactivate…").click()
    page.get_by_role("button", name="Deactivate user").click()
    page.wait_for_url(base + _urls("bob")["detail"])
    assert not User.objects.get(username="bob").is_active
    screenshot(page, "users-05-deactivated")
    page.get_by_role("link", name="Reactivate…").click()
    page.get_by_role("button", name="Reactivate user").wait_for()
    screenshot(page, "users-06-reactivate-confirm")
    page.get_by_role("button", name="Reactivate user").click()
    page.wait_for_url(base + _urls("bob")["detail"])
    assert User.objects.get(username="bob").is_active
    assert page.get_by_text("User bob reactivated.").is_visible()
    # The last administrator cannot take their own role away: the refusal names its code.
    page.goto(base + _urls(administrator.username)["detail"])
    page.get_by_role("checkbox", name="administrator", exact=True).uncheck()
    page.get_by_role("button", name="Set roles").click()
    assert page.get_by_text("409 · last_administrator").is_visible()
    assert page.get_by_role("checkbox", name="administrator", exact=True).is_checked()
    screenshot(page, "users-07-last-administrator")
    assert user_roles(User.objects.get(username=administrator.username)) == ["administrator"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_reset_password_asks_first_in_a_browser(hub_server, administrator, browser_page, screenshot):
    UserFactory(username="bob", roles=["auditor"])
    page = browser_page
    base = hub_server.url
    detail = base + _urls("bob")["detail"]
    page.goto(detail)
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(detail)

    page.get_by_role("link", name="Reset password…").click()
    page.wait_for_url(base + _urls("bob")["password"])
    text = page.locator("main").inner_text()
    assert "The current password of bob stops working at once" in text
    page.get_by_label("New password").fill(NEW_PASSWORD)
    screenshot(page, "users-07-password-confirm")
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(detail)
    assert User.objects.get(username="bob").check_password(PASSWORD)

    page.get_by_role("link", name="Reset password…").click()
    page.get_by_label("New password").fill("123")
    page.get_by_role("button", name="Reset password").click()
    # Refused on the same page, the reason on the field; nothing changed.
    assert page.locator(".field.has-error").is_visible()
    assert User.objects.get(username="bob").check_password(PASSWORD)
    screenshot(page, "users-08-password-refused")
    page.get_by_label("New password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Reset password").click()
    page.wait_for_url(detail)
    assert "Password of bob set" in page.locator(".alert-success").inner_text()
    assert User.objects.get(username="bob").check_password(NEW_PASSWORD)

    page.get_by_role("link", name="Reset password…").click()
    page.get_by_role("button", name="Reset password").click()  # empty: a generated one, shown once
    generated = page.get_by_label("Password").input_value()
    assert User.objects.get(username="bob").check_password(generated)
