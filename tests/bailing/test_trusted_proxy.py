"""Proxy headers are trusted only from the proxies ``BAILING_TRUSTED_PROXIES`` names (off by default).

Django's ``SECURE_PROXY_SSL_HEADER`` believes ``X-Forwarded-Proto`` from whoever sends it: with it set
unconditionally, any client reaching the hub directly could claim to be on HTTPS (skipping the HTTPS
redirect). ``X-Forwarded-For`` names the client only when a trusted proxy wrote it, and then it is
the address the per-IP throttles count.
"""

from __future__ import annotations

import pytest
from django.test import Client as HttpClient

from bailing.audit.models import AuditEvent
from tests.bailing.test_settings import PRODUCTION, run_manage

HTTPS = {"HTTP_X_FORWARDED_PROTO": "https"}
LOGIN = "/console/login/"


def _proxy_header(**env: str) -> str:
    import secrets

    result = run_manage(
        "shell",
        "-c",
        "from django.conf import settings; print(repr(settings.SECURE_PROXY_SSL_HEADER))",
        SECRET_KEY=secrets.token_urlsafe(64),
        **PRODUCTION,
        **env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_production_trusts_no_proxy_header_by_default():
    assert _proxy_header() == "None"


def test_naming_the_proxies_turns_the_header_on():
    assert (
        _proxy_header(BAILING_TRUSTED_PROXIES="10.0.0.5,192.0.2.0/24")
        == "('HTTP_X_FORWARDED_PROTO', 'https')"
    )


def test_a_malformed_proxy_address_refuses_to_start():
    result = run_manage("check", BAILING_TRUSTED_PROXIES="10.0.0.300")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr


@pytest.fixture
def https_only(settings):
    """Production's HTTPS redirect, with or without a named proxy (``trust``)."""
    settings.SECURE_SSL_REDIRECT = True

    def trust(*proxies: str):
        settings.BAILING_TRUSTED_PROXIES = list(proxies)
        settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if proxies else None

    trust()
    return trust


@pytest.mark.django_db
def test_without_a_named_proxy_nobody_can_claim_https(https_only):
    response = HttpClient(REMOTE_ADDR="203.0.113.9").get(LOGIN, **HTTPS)
    assert response.status_code == 301
    assert response["Location"].startswith("https://")


@pytest.mark.django_db
def test_only_the_named_proxy_can_claim_https(https_only):
    https_only("10.0.0.5", "192.0.2.0/28")
    for proxy in ("10.0.0.5", "192.0.2.14"):
        assert HttpClient(REMOTE_ADDR=proxy).get(LOGIN, **HTTPS).status_code == 200
    for stranger in ("10.0.0.6", "192.0.2.16", "203.0.113.9"):
        assert HttpClient(REMOTE_ADDR=stranger).get(LOGIN, **HTTPS).status_code == 301
    # The proxy's own plain-HTTP requests are still redirected.
    assert HttpClient(REMOTE_ADDR="10.0.0.5").get(LOGIN).status_code == 301


def _failed_login_ip(**meta) -> str:
    HttpClient(**meta).post(LOGIN, {"username": "nobody", "password": "x"})
    return AuditEvent.objects.filter(action="console.login.failed").latest("id").data["ip"]


@pytest.mark.django_db
def test_forwarded_for_names_the_client_only_behind_a_named_proxy(settings):
    forwarded = {"HTTP_X_FORWARDED_FOR": "198.51.100.7, 10.0.0.4"}
    settings.BAILING_TRUSTED_PROXIES = []
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", **forwarded) == "10.0.0.5"
    settings.BAILING_TRUSTED_PROXIES = ["10.0.0.0/29"]
    # The rightmost address that is not itself a trusted proxy is the client.
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", **forwarded) == "198.51.100.7"
    assert _failed_login_ip(REMOTE_ADDR="203.0.113.9", **forwarded) == "203.0.113.9"
    # Garbage from the proxy names nobody: the proxy's own address counts.
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="unknown") == "10.0.0.5"
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5") == "10.0.0.5"
    # A chain of trusted proxies only: the leftmost is who the first of them saw.
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="10.0.0.3, 10.0.0.4") == "10.0.0.3"


def test_the_front_and_gunicorn_read_the_same_list(settings):
    """One setting names the proxies for every tier: the front at the edge, gunicorn, the middleware."""
    from front.launcher import front_config

    settings.BAILING_TRUSTED_PROXIES = ["10.0.0.5"]
    assert front_config("/tmp/x.sock").trusted_proxies == ("10.0.0.5",)
    settings.BAILING_TRUSTED_PROXIES = []
    assert front_config("/tmp/x.sock").trusted_proxies == ()


@pytest.mark.django_db
def test_behind_the_front_the_middleware_keeps_what_the_front_vetted(settings):
    # The front already resolved the client at the edge and wrote it into REMOTE_ADDR (PROXY line);
    # resolving X-Forwarded-For a second time behind it would skip a hop.
    settings.BAILING_TRUSTED_PROXIES = ["10.0.0.0/29"]
    forwarded = {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}
    settings.BAILING_BEHIND_FRONT = False
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", **forwarded) == "198.51.100.7"
    settings.BAILING_BEHIND_FRONT = True
    assert _failed_login_ip(REMOTE_ADDR="10.0.0.5", **forwarded) == "10.0.0.5"
