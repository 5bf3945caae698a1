"""Test-only access around the audit ledger's append-only trigger.

Tests that simulate tampering (or backdate events to build fixtures) must say so explicitly; the
trigger is disabled inside the test's own transaction and re-enabled on exit.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection

_TRIGGER = "bailing_auditevent_append_only"


@contextmanager
def audit_tampering():
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE bailing_auditevent DISABLE TRIGGER {_TRIGGER}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE bailing_auditevent ENABLE TRIGGER {_TRIGGER}")
