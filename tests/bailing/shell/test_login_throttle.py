"""Console sign-in: five failures per (IP, username) in ten minutes lock the pair out; every attempt
is an audit event."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client as HttpClient
from django.utils import timezone

from bailing.audit.models import AuditEvent
from tests.factories import UserFactory
from tests.support.audit import audit_tampering
from tests.support.console import PASSWORD

pytestmark = pytest.mark.django_db
LOGIN = "/console/login/"


def attempt(password: str, *, ip: str = "203.0.113.7", username: str = "erin"):
    return HttpClient(REMOTE_ADDR=ip).post(LOGIN, {"username": username, "password": password})


@pytest.fixture
def erin(console_roles):
    return UserFactory(username="erin", roles=["auditor"])


def test_success_and_failure_are_audited(erin):
    assert attempt("wrong").status_code == 200
    assert attempt(PASSWORD).status_code == 302
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor", "data"))
    assert actions[-2:] == [
        ("console.login.failed", "erin", {"ip": "203.0.113.7"}),
        ("console.login.succeeded", "erin", {"ip": "203.0.113.7"}),
    ]


def test_five_failures_lock_the_pair_out_even_for_the_right_password(erin):
    for _ in range(5):
        assert attempt("wrong").status_code == 200
    locked = attempt(PASSWORD)
    assert locked.status_code == 429
    assert AuditEvent.objects.filter(action="console.login.succeeded").count() == 0
    # Another address, or another account from this address, is not affected.
    assert attempt(PASSWORD, ip="198.51.100.2").status_code == 302
    assert attempt("wrong", username="someone-else").status_code == 200


def test_the_lock_ends_with_the_window(erin):
    for _ in range(5):
        attempt("wrong")
    with audit_tampering():
        AuditEvent.objects.filter(action="console.login.failed").update(
            created_at=timezone.now() - timedelta(minutes=11)
        )
    assert attempt(PASSWORD).status_code == 302


# What authentication does to a username (strip, then NFKC) the throttle does too: every spelling that
# signs in as erin counts against erin's bucket.
VARIANTS = [" erin", "erin ", "\terin", "erin\xa0", "ｅｒｉｎ", " ｅｒｉｎ\u3000"]


@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_spellings_that_authenticate_alike_share_one_bucket(erin, variant):
    assert attempt(PASSWORD, username=variant).status_code == 302  # it really signs in as erin
    for _ in range(5):
        assert attempt("wrong").status_code == 200
    locked = attempt(PASSWORD, username=variant)
    assert locked.status_code == 429
    assert AuditEvent.objects.filter(action="console.login.succeeded").count() == 1


def test_failures_under_different_spellings_add_up(erin):
    for variant in VARIANTS[:5]:
        assert attempt("wrong", username=variant).status_code == 200
    assert attempt(PASSWORD).status_code == 429


def test_the_audit_event_names_the_normalized_username(erin):
    attempt("wrong", username=" ｅｒｉｎ\t")
    attempt(PASSWORD, username="erin\xa0")
    events = list(AuditEvent.objects.order_by("id").values_list("action", "actor"))
    assert events[-2:] == [("console.login.failed", "erin"), ("console.login.succeeded", "erin")]


def test_a_username_with_a_nul_is_a_failed_sign_in(erin):
    response = attempt("wrong", username="er\x00in")
    assert response.status_code == 200
    assert AuditEvent.objects.filter(action="console.login.failed").count() == 1


def test_one_address_is_locked_out_after_its_limit_of_failures_across_usernames(erin, settings):
    assert settings.BAILING_LOGIN_IP_MAX_FAILURES == 20
    settings.BAILING_LOGIN_IP_MAX_FAILURES = 7
    for n in range(7):
        assert attempt("wrong", username=f"guess-{n}").status_code == 200
    # Neither a fresh username nor erin's right password gets through from this address ...
    assert attempt("wrong", username="guess-new").status_code == 429
    assert attempt(PASSWORD).status_code == 429
    assert AuditEvent.objects.filter(action="console.login.failed").count() == 7
    # ... while another address signs in.
    assert attempt(PASSWORD, ip="198.51.100.2").status_code == 302
    # 0 turns the per-address limit off (the per-username one stays).
    settings.BAILING_LOGIN_IP_MAX_FAILURES = 0
    assert attempt("wrong", username="guess-newer").status_code == 200
