"""Production settings refuse unsafe configuration; `check --deploy` is clean when configured well."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "bailing.settings", **env}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "BAILING_ENV": "production",
    "BAILING_DEBUG": "false",
    "ALLOWED_HOSTS": "hub.example.com",
    "BAILING_PUBLIC_URL": "https://hub.example.com",
}


def test_check_deploy_is_clean_with_production_settings():
    result = run_manage(
        "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=secrets.token_urlsafe(64), **PRODUCTION
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    "override",
    [
        {"BAILING_DEBUG": "true", "SECRET_KEY": secrets.token_urlsafe(64)},
        {"SECRET_KEY": "short"},
        {"SECRET_KEY": ""},
        {"SECRET_KEY": "a" * 60},
        {"SECRET_KEY": "django-insecure-" + secrets.token_urlsafe(64)},
        {"SECRET_KEY": secrets.token_urlsafe(64), "BAILING_DEBUG": "1"},
    ],
    ids=["debug", "short", "empty", "repetitive", "django-insecure", "debug-1"],
)
def test_production_refuses_unsafe_configuration(override):
    result = run_manage("check", **{**PRODUCTION, **override})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr


def test_production_starts_with_a_safe_configuration():
    result = run_manage("check", SECRET_KEY=secrets.token_urlsafe(64), **PRODUCTION)
    assert result.returncode == 0, result.stderr


def test_env_example_lists_every_setting_read_from_the_environment():
    import re

    sources = (ROOT / "bailing" / "settings.py").read_text() + (
        ROOT / "bailing" / "gunicorn.conf.py"
    ).read_text()
    read = set(re.findall(r"env\.\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", sources))
    read |= set(re.findall(r"os\.environ\.get\(\s*\"([A-Z][A-Z0-9_]*)\"", sources))
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert "SECRET_KEY" in read and "GUNICORN_WORKERS" in read
    assert read <= listed, sorted(read - listed)


@pytest.mark.parametrize(
    "networks",
    ["169.254.0.0/16", "10.0.0.0/8,fe80::/10", "169.254.169.254", "0.0.0.0/0", "224.0.0.0/4", "not-a-cidr"],
)
def test_outbound_allowed_networks_refuse_link_local_and_other_never_allowed_ranges(networks):
    result = run_manage("check", BAILING_OUTBOUND_ALLOWED_NETWORKS=networks)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "BAILING_OUTBOUND_ALLOWED_NETWORKS" in result.stderr


def test_outbound_allowed_networks_take_private_ranges():
    result = run_manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.BAILING_OUTBOUND_ALLOWED_NETWORKS)",
        BAILING_OUTBOUND_ALLOWED_NETWORKS="10.20.0.0/16, 100.64.0.0/10,fd00:1::/64",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['10.20.0.0/16', '100.64.0.0/10', 'fd00:1::/64']"


@pytest.mark.parametrize("timeout", ["0", "-1", "301"])
def test_the_approval_webhook_timeout_must_be_a_sensible_number_of_seconds(timeout):
    result = run_manage("check", BAILING_APPROVAL_NOTIFY_TIMEOUT=timeout)
    assert result.returncode != 0
    assert "BAILING_APPROVAL_NOTIFY_TIMEOUT" in result.stderr
