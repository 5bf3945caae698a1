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
