"""Every HTML page of the hub carries a Content-Security-Policy next to the other security headers,
and the templates keep to what that policy allows: no inline script, no event handler attributes,
no inline style."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client as HttpClient
from django.urls import reverse

from tests.factories import ClientFactory, RouteFactory

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def _directives(response) -> dict[str, str]:
    policy = response["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in policy.split(";"))


def _assert_hardened(response):
    directives = _directives(response)
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]
    # A consent decision redirects to the agent's loopback listener: form-action would block it.
    assert "form-action" not in directives
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.django_db
def test_the_sign_in_page_and_the_404_page_carry_the_policy():
    anonymous = HttpClient()
    login = anonymous.get(reverse("console:login"))
    assert login.status_code == 200
    _assert_hardened(login)
    missing = anonymous.get("/no-such-page")
    assert missing.status_code == 404
    _assert_hardened(missing)


@pytest.mark.django_db
def test_console_pages_carry_the_policy(admin_http):
    RouteFactory(route_key="orders")
    ClientFactory(app_id="desk")
    for name, args in [
        ("console:dashboard", []),
        ("console:client_list", []),
        ("console:client_detail", ["desk"]),
        ("console:client_create", []),
        ("console:workspace_detail", ["orders"]),
        ("console:tool_list", []),
        ("console:session_list", []),
        ("console:approval_list", []),
        ("console:audit_list", []),
        ("console:knowledge_list", []),
    ]:
        response = admin_http.get(reverse(name, args=args))
        assert response.status_code == 200, name
        _assert_hardened(response)


@pytest.mark.django_db
def test_the_consent_page_carries_the_policy(admin_http, start_hub_login):
    login = start_hub_login()
    response = admin_http.get(login.consent_url)
    assert response.status_code == 200
    _assert_hardened(response)


def test_the_oauth_error_page_carries_the_policy(db):
    response = HttpClient().get("/oauth/authorize")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    _assert_hardened(response)


def test_json_answers_are_left_alone(db):
    response = HttpClient().get("/agent-api/v1/nope")
    assert response["Content-Type"] == "application/json"
    assert "Content-Security-Policy" not in response


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
EVENT_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
INLINE_STYLE = re.compile(r"<style\b|\sstyle\s*=", re.IGNORECASE)


@pytest.mark.parametrize(
    "template", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES))
)
def test_templates_need_no_inline_script_or_style(template):
    text = template.read_text()
    assert not INLINE_SCRIPT.search(text), "inline <script>: move it to a static file"
    assert not EVENT_HANDLER.search(text), "event handler attribute: bind it from a static script"
    assert not INLINE_STYLE.search(text), "inline style: move it to static/console/console.css"
    assert "javascript:" not in text.lower()
