"""The knowledge worker seals the audit tail a request's after-commit seal had to leave."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from bailing.audit.actor import Actor
from bailing.audit.ledger import _SEAL_LOCK_KEY, audit_chain_verify, audit_record, audit_sealer_drain
from bailing.audit.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_tail_left_unsealed_is_sealed_by_the_next_poll():
    holding, release = threading.Event(), threading.Event()

    def hold_the_sealer_lock() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_SEAL_LOCK_KEY])
                holding.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_sealer_lock)
    holder.start()
    try:
        assert holding.wait(timeout=30)
        with transaction.atomic():  # its after-commit seal finds the lock taken
            audit_record(action="tests.worker.recorded", actor=Actor.system("pytest"))
        assert audit_sealer_drain()
        assert AuditEvent.objects.filter(chain_seq__isnull=True).count() == 1
    finally:
        release.set()
        holder.join(timeout=30)
    call_command("knowledge_worker", once=True, stdout=io.StringIO())
    assert AuditEvent.objects.filter(chain_seq__isnull=True).count() == 0
    report = audit_chain_verify()
    assert report.ok and report.unsealed == 0
