"""The hash-chained audit ledger: appending, verification naming the first broken link after
tampering, deletion and insertion, the ``approvals_audit_verify`` command, and concurrent appends."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.audit.actor import Actor
from bailing.audit.ledger import (
    GENESIS_HASH,
    AuditEntry,
    audit_chain_verify,
    audit_record,
    audit_record_many,
)
from bailing.audit.models import AuditEvent
from tests.support.audit import audit_tampering

pytestmark = pytest.mark.django_db


def record(n: int = 0, **fields) -> AuditEvent:
    actor = Actor(fields.pop("actor_type", "system"), fields.pop("actor", "pytest"))
    arguments = {"action": "tests.audit.recorded", "data": {"n": n}, **fields}
    with transaction.atomic():
        return audit_record(actor=actor, **arguments)


def chain(length: int) -> list[AuditEvent]:
    return [record(n) for n in range(length)]


def content_of(event: AuditEvent) -> dict:
    return {
        "created_at": event.created_at.isoformat(),
        "actor_type": event.actor_type,
        "actor": event.actor,
        "action": event.action,
        "client_app_id": event.client_app_id,
        "session_id": str(event.session_id) if event.session_id else None,
        "route_key": event.route_key,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "data": event.data,
    }


@pytest.fixture(autouse=True)
def tampering_allowed(db):
    """These tests play an attacker with database access: the append-only trigger is lifted."""
    with audit_tampering():
        yield


def forge(event: AuditEvent, **changes) -> None:
    """Rewrite ``event`` the way an attacker with database access would, hashes made consistent."""
    for name, value in changes.items():
        setattr(event, name, value)
    event.content_hash = canonical_sha256(content_of(event))
    event.chain_hash = sha256_hex(event.prev_hash + event.content_hash)
    AuditEvent.objects.filter(pk=event.pk).update(
        **changes, content_hash=event.content_hash, chain_hash=event.chain_hash
    )


# --- appending ------------------------------------------------------------------------------------------


def test_each_event_links_to_the_previous_one_from_genesis():
    events = chain(3)
    stored = list(AuditEvent.objects.order_by("id"))
    assert [e.pk for e in stored] == [e.pk for e in events]
    previous = GENESIS_HASH
    for event in stored:
        assert event.prev_hash == previous
        assert event.content_hash == canonical_sha256(content_of(event))
        assert event.chain_hash == sha256_hex(event.prev_hash + event.content_hash)
        previous = event.chain_hash
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.first_broken_id) == (True, 3, None)


def test_an_empty_ledger_verifies():
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, 0)


def test_every_recorded_field_is_part_of_the_hash():
    session_id = uuid.uuid4()
    event = record(
        client_app_id="shop",
        session_id=session_id,
        route_key="orders",
        target_type="agent_session",
        target_id=str(session_id),
    )
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.content_hash == canonical_sha256(content_of(stored))
    assert content_of(stored)["session_id"] == str(session_id)


@pytest.mark.django_db(transaction=True)
def test_recording_outside_a_transaction_is_refused():
    # The event must commit or roll back with the change it describes.
    with pytest.raises(RuntimeError):
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    "data",
    [
        {"big": 1e20},  # jsonb gives this back as the integer 100000000000000000000
        {"huge": 1.5e300, "tiny": 1e-7, "plain": 0.1, "whole": 2.0},
        {"int": 12345678901234567890, "negative": -0.0},
        {"text": "é😀 \u2028", "nested": {"b": [1, {"a": None}], "a": True}},
    ],
)
def test_data_is_hashed_as_the_database_stores_it(data):
    record(data=data)
    record()
    assert audit_chain_verify().ok


def test_a_batch_appends_in_order_each_event_chained_onto_the_one_before():
    first = record(0)
    entries = [
        AuditEntry(actor=Actor.system("pytest"), action="tests.audit.batch", data={"n": n, "x": 1e20})
        for n in range(3)
    ]
    with transaction.atomic():
        events = audit_record_many(entries)
    stored = list(AuditEvent.objects.filter(action="tests.audit.batch").order_by("id"))
    assert [e.pk for e in stored] == [e.pk for e in events]
    assert [e.data["n"] for e in stored] == [0, 1, 2]
    assert stored[0].data["x"] == 100000000000000000000  # hashed as jsonb stores it
    assert [e.prev_hash for e in stored] == [first.chain_hash, stored[0].chain_hash, stored[1].chain_hash]
    record(4)
    assert audit_chain_verify().ok


@pytest.mark.django_db(transaction=True)
def test_an_empty_batch_appends_nothing_and_a_batch_outside_a_transaction_is_refused():
    with transaction.atomic():
        assert audit_record_many([]) == []
    with pytest.raises(RuntimeError):
        audit_record_many([AuditEntry(actor=Actor.system("pytest"), action="tests.audit.batch")])
    assert not AuditEvent.objects.exists()


def test_a_rolled_back_change_leaves_no_event_and_no_gap_in_the_chain():
    record(1)
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
        raise ZeroDivisionError  # the change fails after its event was appended
    record(2)
    assert AuditEvent.objects.count() == 2
    assert audit_chain_verify().ok


# --- verification names the first broken link -----------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"action": "tests.audit.rewritten"},
        {"actor": "someone-else"},
        {"actor_type": "user"},
        {"client_app_id": "other"},
        {"session_id": uuid.UUID(int=7)},
        {"route_key": "elsewhere"},
        {"target_type": "agent_session"},
        {"target_id": "42"},
        {"data": {"n": 999}},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_changing_a_field_breaks_that_event(changes):
    events = chain(4)
    AuditEvent.objects.filter(pk=events[1].pk).update(**changes)
    report = audit_chain_verify()
    assert report.first_broken_id == events[1].pk
    assert report.checked == 1
    assert report.reason == "content does not match content_hash"


def test_changing_the_time_breaks_that_event():
    events = chain(3)
    AuditEvent.objects.filter(pk=events[2].pk).update(created_at=events[2].created_at - timedelta(hours=1))
    assert audit_chain_verify().first_broken_id == events[2].pk


def test_rewriting_an_event_with_a_matching_content_hash_breaks_its_chain_hash():
    events = chain(3)
    event = AuditEvent.objects.get(pk=events[1].pk)
    event.data = {"n": "forged"}
    AuditEvent.objects.filter(pk=event.pk).update(
        data=event.data, content_hash=canonical_sha256(content_of(event))
    )
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (events[1].pk, "chain_hash does not match")


def test_rewriting_an_event_consistently_breaks_the_next_link():
    events = chain(4)
    forge(AuditEvent.objects.get(pk=events[1].pk), data={"n": "forged"})
    report = audit_chain_verify()
    assert report.first_broken_id == events[2].pk
    assert report.reason == "prev_hash does not match the previous event"
    assert report.checked == 2


def test_relinking_an_event_breaks_it():
    events = chain(3)
    AuditEvent.objects.filter(pk=events[2].pk).update(prev_hash=events[0].chain_hash)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (
        events[2].pk,
        "prev_hash does not match the previous event",
    )


@pytest.mark.parametrize("position", [0, 1, 2])
def test_deleting_an_event_breaks_the_link_after_it(position):
    events = chain(4)
    AuditEvent.objects.filter(pk=events[position].pk).delete()
    report = audit_chain_verify()
    assert report.first_broken_id == events[position + 1].pk
    assert report.checked == position


def _leave_id_gap(size: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('bailing_auditevent', 'id'), "
            "(SELECT max(id) FROM bailing_auditevent) + %s)",
            [size],
        )


def test_inserting_a_well_formed_event_breaks_the_link_after_it():
    first = record(1)
    _leave_id_gap(10)
    after = record(2)
    # A forged event slotted between them, chained correctly onto its predecessor.
    intruder = AuditEvent(
        id=first.pk + 5,
        created_at=first.created_at,
        actor_type="system",
        actor="intruder",
        action="tests.audit.forged",
        data={},
        prev_hash=first.chain_hash,
    )
    intruder.content_hash = canonical_sha256(content_of(intruder))
    intruder.chain_hash = sha256_hex(intruder.prev_hash + intruder.content_hash)
    intruder.save(force_insert=True)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.checked) == (after.pk, 2)


def test_inserting_an_event_with_made_up_hashes_breaks_at_the_intruder():
    first = record(1)
    _leave_id_gap(10)
    record(2)
    AuditEvent.objects.create(
        id=first.pk + 5,
        actor_type="system",
        actor="intruder",
        action="tests.audit.forged",
        prev_hash="f" * 64,
        content_hash="e" * 64,
        chain_hash="d" * 64,
    )
    assert audit_chain_verify().first_broken_id == first.pk + 5


# --- manage.py approvals_audit_verify ---------------------------------------------------------------------


def test_verify_command_reports_an_intact_chain(capsys):
    chain(3)
    call_command("approvals_audit_verify")
    assert capsys.readouterr().out.strip() == "audit chain ok: 3 events verified"


def test_verify_command_names_the_first_broken_event():
    events = chain(3)
    AuditEvent.objects.filter(pk=events[1].pk).update(actor="someone-else")
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_verify")
    assert f"event {events[1].pk}:" in str(info.value)
    assert "1 events verified before it" in str(info.value)


@pytest.mark.django_db(transaction=True)
def test_verify_command_exits_1_on_a_broken_chain(capsys):
    from django.core.management import ManagementUtility

    events = chain(2)
    AuditEvent.objects.filter(pk=events[0].pk).delete()
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", "approvals_audit_verify"]).execute()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert f"audit chain broken at event {events[1].pk}" in err


@pytest.mark.django_db(transaction=True)
def test_verify_command_exits_0_on_an_intact_chain(capsys):
    from django.core.management import ManagementUtility

    chain(2)
    # execute() returns normally (exit status 0) when the command succeeds.
    ManagementUtility(["manage.py", "approvals_audit_verify"]).execute()
    assert "audit chain ok: 2 events verified" in capsys.readouterr().out


# --- concurrency ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_parallel_transactions_never_fork_the_chain():
    workers = 8
    barrier = threading.Barrier(workers)
    failures: list[BaseException] = []

    def append(n: int) -> None:
        try:
            with transaction.atomic():
                # Every transaction is open and ready to append at the same moment...
                barrier.wait(timeout=30)
                audit_record(action="tests.audit.parallel", actor=Actor.system(f"worker-{n}"))
                # ...and stays open a little after appending, so an unserialised append would
                # read the same predecessor as its neighbours.
                time.sleep(0.05)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    events = list(AuditEvent.objects.order_by("id"))
    assert len(events) == workers
    assert len({event.prev_hash for event in events}) == workers
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, workers)


# --- append-only in the database -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_database_refuses_updates_and_deletes_of_audit_events(tampering_allowed):
    # ``tampering_allowed`` is autouse here; re-enable the trigger for this one test.
    events = chain(2)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE bailing_auditevent ENABLE TRIGGER bailing_auditevent_append_only")
    for attempt in (
        lambda: AuditEvent.objects.filter(pk=events[0].pk).update(actor="mallory"),
        lambda: AuditEvent.objects.filter(pk=events[1].pk).delete(),
    ):
        with pytest.raises(DatabaseError), transaction.atomic():
            attempt()
    assert audit_chain_verify().ok
