"""Console users (administrators only) and ``manage.py bailing_user``: create, set roles, reset a
password (generated and shown once, or set), deactivate with a confirmation; every change audited."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client as HttpClient
from django.urls import reverse

from bailing.models import AuditEvent
from bailing.shell.users import user_roles
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
def test_reset_password_generated_or_set(admin_http, subject):
    generated = admin_http.post(_urls()["password"], {"password": ""})
    assert generated.status_code == 200
    password = generated.context["password"]
    subject.refresh_from_db()
    assert subject.check_password(password) and not subject.check_password(PASSWORD)
    chosen = admin_http.post(_urls()["password"], {"password": NEW_PASSWORD})
    assert chosen.status_code == 302
    subject.refresh_from_db()
    assert subject.check_password(NEW_PASSWORD)
    weak = admin_http.post(_urls()["password"], {"password": "123"})
    assert weak.status_code == 400
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
    url = _urls(administrator.username)["deactivate"]
    admin_http.post(url, {"confirm": "yes"})
    administrator.refresh_from_db()
    assert administrator.is_active


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
