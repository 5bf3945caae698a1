"""No debug page anywhere: ``/`` leads to the console, console errors are styled pages that lead back
(to the dashboard, or to sign-in when signed out; a refused CSRF token included), API errors are JSON
under every API prefix (business endpoints included), and debug is off unless asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.support.console import PASSWORD

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_root_redirects_to_the_console():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/console/"


@pytest.mark.django_db
def test_an_unknown_console_page_is_the_styled_404_not_a_url_listing(admin_user):
    client = Client()
    client.force_login(admin_user)
    response = client.get("/console/no-such-page/")
    assert response.status_code == 404
    assert "console/error.html" in [t.name for t in response.templates]
    body = response.content.decode()
    assert "Page not found" in body
    assert "URLconf" not in body and "agent-api/v1/" not in body


@pytest.mark.django_db
def test_an_unknown_page_outside_the_console_is_styled_too():
    response = Client().get("/no-such-page")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "URLconf" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/agent-api/v1/nope", "/agent-auth/v1/nope", "/kb/x/y/z", "/approvals/nope", "/mcp/nope/x", "/mcp"],
)
def test_unknown_paths_under_every_api_prefix_are_json(path):
    response = Client().post(path, data=b"{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "not_found"
    assert response["Cache-Control"] == "no-store"


def test_server_error_page_renders_without_the_database(rf):
    from bailing.shell.errors import server_error

    response = server_error(rf.get("/console/clients/"))
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode()
    api = server_error(rf.get("/agent-api/v1/workspaces"))
    assert api.status_code == 500 and api["Content-Type"] == "application/json"


def test_debug_is_off_unless_asked_for():
    def debug(**env) -> str:
        result = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "-c",
                "from django.conf import settings; print(settings.DEBUG)",
            ],
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip().splitlines()[-1]

    assert debug() == "False"
    assert debug(BAILING_DEBUG="1") == "True"


@pytest.mark.django_db
def test_the_404_leads_back_to_sign_in_or_the_dashboard(admin_user):
    signed_out = Client().get("/console/no-such-page/").content.decode()
    assert '<a href="/console/login/">Sign in to the console</a>' in signed_out
    client = Client()
    client.force_login(admin_user)
    signed_in = client.get("/console/no-such-page/").content.decode()
    assert '<a href="/console/">Back to the dashboard</a>' in signed_in
    assert "Sign in to the console" not in signed_in


@pytest.mark.django_db
def test_a_form_without_its_csrf_token_gets_the_styled_403_with_a_way_back(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post("/console/logout/")
    assert response.status_code == 403
    assert "console/error.html" in [t.name for t in response.templates]
    assert response.context["code"] == "csrf_failed"
    assert '<a href="/console/">Back to the dashboard</a>' in response.content.decode()
    anonymous = Client(enforce_csrf_checks=True).post("/console/login/", {"username": "a", "password": "b"})
    assert anonymous.status_code == 403 and anonymous.context["code"] == "csrf_failed"
    assert "Sign in to the console" in anonymous.content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_404_way_back_in_a_browser(hub_server, administrator, browser_page, screenshot):
    page = browser_page
    base = hub_server.url
    response = page.goto(base + "/console/no-such-page/")
    assert response.status == 404
    screenshot(page, "error-404-signed-out")
    page.get_by_role("link", name="Sign in to the console").click()
    page.wait_for_url(base + "/console/login/")
    page.get_by_label("Username").fill(administrator.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/console/")

    assert page.goto(base + "/console/clients/no-such-client/").status == 404
    assert "Page not found" in page.locator("main").inner_text()
    screenshot(page, "error-404-signed-in")
    page.locator("main").get_by_role("link", name="Back to the dashboard").click()
    page.wait_for_url(base + "/console/")
