"""The audit ledger: appends are unsealed (content hash, no chain, no lock), the sealer chains them in
seal order, and verification names the first broken link after tampering, deletion and insertion,
checks unsealed events too and reports the unsealed tail. The ``approvals_audit_verify`` and
``bailing_audit_seal`` commands. Concurrency with real connections: late committers, the sealer
lock, parallel appenders. The append-only trigger."""

from __future__ import annotations

import importlib
import threading
import uuid
from datetime import timedelta

import pytest
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from bailing.api.hashing import canonical_sha256, sha256_hex
from bailing.audit.actor import Actor
from bailing.audit.ledger import (
    GENESIS_HASH,
    AuditEntry,
    audit_chain_verify,
    audit_record,
    audit_record_many,
    audit_seal,
    audit_sealer_drain,
)
from bailing.audit.metrics import audit_tail_metrics
from bailing.audit.models import AuditEvent
from tests.support.audit import audit_tampering

pytestmark = pytest.mark.django_db


def record(n: int = 0, **fields) -> AuditEvent:
    actor = Actor(fields.pop("actor_type", "system"), fields.pop("actor", "pytest"))
    arguments = {"action": "tests.audit.recorded", "data": {"n": n}, **fields}
    with transaction.atomic():
        return audit_record(actor=actor, **arguments)


def chain(length: int) -> list[AuditEvent]:
    """``length`` events, sealed (in these tests' transaction no commit runs the after-commit seal)."""
    ids = [record(n).pk for n in range(length)]
    audit_seal()
    return list(AuditEvent.objects.filter(pk__in=ids).order_by("chain_seq"))


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


@pytest.fixture
def tampering(db):
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


def chain_positions() -> list[int]:
    return list(
        AuditEvent.objects.filter(chain_seq__isnull=False)
        .order_by("chain_seq")
        .values_list("chain_seq", flat=True)
    )


# --- appending and sealing -----------------------------------------------------------------------------


def test_an_event_is_appended_unsealed_with_its_content_hash():
    event = record(1)
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.chain_seq, stored.prev_hash, stored.chain_hash) == (None, None, None)
    assert not stored.sealed
    assert stored.content_hash == canonical_sha256(content_of(stored))
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.sealed, report.unsealed) == (True, 0, 0, 1)
    assert report.oldest_unsealed_at == stored.created_at


def test_sealing_links_each_event_to_the_previous_one_from_genesis():
    events = [record(n) for n in range(3)]
    assert audit_seal().sealed == 3
    stored = list(AuditEvent.objects.order_by("chain_seq"))
    assert [e.pk for e in stored] == [e.pk for e in events]  # one batch seals in id order
    assert [e.chain_seq for e in stored] == [1, 2, 3]
    previous = GENESIS_HASH
    for event in stored:
        assert event.prev_hash == previous
        assert event.content_hash == canonical_sha256(content_of(event))
        assert event.chain_hash == sha256_hex(event.prev_hash + event.content_hash)
        previous = event.chain_hash
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.sealed, report.unsealed, report.first_broken_id) == (
        True,
        3,
        3,
        0,
        None,
    )
    assert report.oldest_unsealed_at is None


def test_later_seals_continue_the_chain_and_sealing_twice_seals_nothing_new():
    first = chain(2)
    assert audit_seal().sealed == 0
    later = record(9)
    report = audit_seal(batch_size=1)
    assert (report.sealed, report.batches, report.busy) == (1, 1, False)
    later = AuditEvent.objects.get(pk=later.pk)
    assert (later.chain_seq, later.prev_hash) == (3, first[-1].chain_hash)
    assert audit_chain_verify().checked == 3


def test_small_batches_seal_everything_in_order():
    ids = [record(n).pk for n in range(7)]
    report = audit_seal(batch_size=3)
    assert (report.sealed, report.batches) == (7, 3)
    assert list(AuditEvent.objects.order_by("chain_seq").values_list("pk", flat=True)) == ids
    assert audit_seal(batch_size=3, max_batches=1).sealed == 0
    assert audit_chain_verify().checked == 7


def test_an_empty_ledger_seals_and_verifies():
    assert audit_seal().sealed == 0
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, 0, 0)


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
    assert audit_seal().mismatched == ()
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, 2)


def test_a_batch_appends_in_order_and_is_sealed_in_that_order():
    first = chain(1)[0]
    entries = [
        AuditEntry(actor=Actor.system("pytest"), action="tests.audit.batch", data={"n": n, "x": 1e20})
        for n in range(3)
    ]
    with transaction.atomic():
        events = audit_record_many(entries)
    audit_seal()
    stored = list(AuditEvent.objects.filter(action="tests.audit.batch").order_by("chain_seq"))
    assert [e.pk for e in stored] == [e.pk for e in events]
    assert [e.data["n"] for e in stored] == [0, 1, 2]
    assert stored[0].data["x"] == 100000000000000000000  # hashed as jsonb stores it
    assert [e.prev_hash for e in stored] == [first.chain_hash, stored[0].chain_hash, stored[1].chain_hash]
    record(4)
    audit_seal()
    assert audit_chain_verify().checked == 5


@pytest.mark.django_db(transaction=True)
def test_an_empty_batch_appends_nothing_and_a_batch_outside_a_transaction_is_refused():
    with transaction.atomic():
        assert audit_record_many([]) == []
    with pytest.raises(RuntimeError):
        audit_record_many([AuditEntry(actor=Actor.system("pytest"), action="tests.audit.batch")])
    assert not AuditEvent.objects.exists()


def test_legacy_events_chained_in_id_order_get_their_positions_and_verify():
    """Migration 0004's backfill: events chained at append (the old way) keep their hashes and get
    ``chain_seq`` in id order; they verify, and new events are sealed after them."""
    migration = importlib.import_module("bailing.migrations.0004_auditevent_sealer")
    with audit_tampering():
        prev_hash = GENESIS_HASH
        for n in range(3):
            event = AuditEvent(
                actor_type="system", actor="legacy", action="tests.audit.legacy", data={"n": n}
            )
            event.created_at = timezone.now()
            event.content_hash = canonical_sha256(content_of(event))
            event.prev_hash = prev_hash
            event.chain_hash = sha256_hex(prev_hash + event.content_hash)
            prev_hash = event.chain_hash
            event.save(force_insert=True)
        with connection.cursor() as cursor:
            cursor.execute(migration.BACKFILL)
    assert chain_positions() == [1, 2, 3]
    record(3)
    audit_seal()
    report = audit_chain_verify()
    assert (report.ok, report.checked) == (True, 4)
    assert AuditEvent.objects.get(chain_seq=4).prev_hash == prev_hash


def test_going_back_past_0004_is_refused_once_the_seal_order_is_not_the_id_order():
    """The old schema chains in id order; dropping ``chain_seq`` would lose a late committer's place."""
    guard = importlib.import_module("bailing.migrations.0004_auditevent_sealer").REVERSE_GUARD

    def reversible() -> bool:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(guard)
        except DatabaseError:
            return False
        return True

    first, second = record(1), record(2)
    assert not reversible()  # unsealed events
    audit_seal()
    assert reversible()  # sealed in id order
    with audit_tampering():  # as if the first had committed after the second
        AuditEvent.objects.filter(pk=first.pk).update(chain_seq=-1)
        AuditEvent.objects.filter(pk=second.pk).update(chain_seq=1)
        AuditEvent.objects.filter(pk=first.pk).update(chain_seq=2)
    assert not reversible()


# --- rolled back, late, concurrent: real transactions on their own connections ---------------------------


@pytest.mark.django_db(transaction=True)
def test_an_append_is_sealed_by_the_process_sealer_once_its_transaction_commits():
    with transaction.atomic():
        event = audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
        assert not AuditEvent.objects.get(pk=event.pk).sealed
    assert audit_sealer_drain()  # the sealer thread ran the seal the commit asked for
    assert chain_positions() == [1, 2]
    assert audit_chain_verify().checked == 2


@pytest.mark.django_db(transaction=True)
def test_an_append_that_asks_for_no_seal_is_sealed_by_the_next_one_in_order():
    entry = AuditEntry(actor=Actor.system("pytest"), action="tests.audit.journal", data={"n": 1})
    with transaction.atomic():
        (journal,) = audit_record_many([entry], seal=False)
    assert audit_sealer_drain()
    assert not AuditEvent.objects.get(pk=journal.pk).sealed  # committed, left for the next seal
    with transaction.atomic():
        outcome = audit_record(action="tests.audit.outcome", actor=Actor.system("pytest"))
    assert audit_sealer_drain()
    sealed = list(AuditEvent.objects.order_by("chain_seq"))
    assert [event.pk for event in sealed] == [journal.pk, outcome.pk]
    assert chain_positions() == [1, 2]
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, 2, 0)


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_append_is_never_sealed_and_leaves_no_gap():
    with transaction.atomic():
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"), data={"n": 1})
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"), data={"n": 2})
        raise ZeroDivisionError  # the change fails after its event was appended
    with transaction.atomic():
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"), data={"n": 3})
    audit_seal()
    assert [e.data["n"] for e in AuditEvent.objects.order_by("chain_seq")] == [1, 3]
    assert chain_positions() == [1, 2]
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, 2, 0)


def _in_thread(target) -> threading.Thread:
    def run():
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_late_committer_is_sealed_after_the_events_committed_before_it():
    """The event with the lower id commits last: it is not sealed while in flight, and lands after."""
    appended, release = threading.Event(), threading.Event()
    ids: dict[str, int] = {}
    failures: list[BaseException] = []

    def slow() -> None:
        try:
            with transaction.atomic():
                ids["slow"] = audit_record(action="tests.audit.slow", actor=Actor.system("slow")).pk
                appended.set()
                assert release.wait(timeout=30)
        except BaseException as exc:  # reported below
            failures.append(exc)
            appended.set()

    def fast() -> None:
        with transaction.atomic():
            ids["fast"] = audit_record(action="tests.audit.fast", actor=Actor.system("fast")).pk

    slow_thread = _in_thread(slow)
    assert appended.wait(timeout=30)
    _in_thread(fast).join(timeout=30)
    # The fast event committed (and its after-commit seal ran); the slow one is still in flight.
    assert ids["slow"] < ids["fast"]
    audit_seal()
    assert list(AuditEvent.objects.values_list("pk", "chain_seq")) == [(ids["fast"], 1)]
    release.set()
    slow_thread.join(timeout=30)
    assert not failures
    audit_seal()
    assert dict(AuditEvent.objects.values_list("pk", "chain_seq")) == {ids["fast"]: 1, ids["slow"]: 2}
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, 2, 0)


@pytest.mark.django_db(transaction=True)
def test_one_sealer_at_a_time_the_other_gives_up_or_waits():
    with transaction.atomic():
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
    holding, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [0x6261696C5345414C])
            holding.set()
            release.wait(timeout=30)

    holder = _in_thread(hold_the_lock)
    assert holding.wait(timeout=30)
    with transaction.atomic():  # this append's after-commit seal finds the lock taken: left unsealed
        audit_record(action="tests.audit.recorded", actor=Actor.system("pytest"))
    assert audit_sealer_drain()
    assert audit_seal(wait=False).busy
    assert audit_seal(wait=False, max_batches=1).busy
    assert AuditEvent.objects.filter(chain_seq__isnull=True).count() == 1
    release.set()
    holder.join(timeout=30)
    assert audit_seal(wait=True).sealed == 1
    assert audit_chain_verify().checked == 2


def _parallel_appends(workers: int, per_worker: int, action: str) -> None:
    """``workers`` threads, started together, each appending ``per_worker`` events in transactions of
    their own; fails with the first thread's exception."""
    barrier = threading.Barrier(workers)
    failures: list[BaseException] = []

    def append(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            for index in range(per_worker):
                with transaction.atomic():
                    audit_record(action=action, actor=Actor.system(f"worker-{n}"), data={"i": index})
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [_in_thread(lambda n=n: append(n)) for n in range(workers)]
    for thread in threads:
        thread.join(timeout=120)
    assert not failures


@pytest.mark.django_db(transaction=True)
def test_parallel_appenders_every_event_sealed_exactly_once_in_a_dense_chain():
    workers, per_worker = 8, 25
    _parallel_appends(workers, per_worker, "tests.audit.parallel")
    audit_seal()
    events = list(AuditEvent.objects.order_by("chain_seq"))
    assert len(events) == workers * per_worker
    assert [event.chain_seq for event in events] == list(range(1, workers * per_worker + 1))
    assert len({event.prev_hash for event in events}) == len(events)
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, workers * per_worker, 0)


@pytest.mark.django_db(transaction=True)
def test_the_sealer_thread_answers_every_commit_so_parallel_appends_end_up_sealed_without_a_sweep():
    """Appends that commit while a seal runs are sealed by the next one: after the sealer has answered
    every request, nothing is left for a sweep (no explicit seal here)."""
    workers, per_worker = 6, 20
    _parallel_appends(workers, per_worker, "tests.audit.sealer")
    assert audit_sealer_drain(timeout=30)
    assert chain_positions() == list(range(1, workers * per_worker + 1))
    report = audit_chain_verify()
    assert (report.ok, report.checked, report.unsealed) == (True, workers * per_worker, 0)


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
        {"request_id": "req-forged"},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_changing_a_field_of_a_sealed_event_breaks_that_event(tampering, changes):
    events = chain(4)
    AuditEvent.objects.filter(pk=events[1].pk).update(**changes)
    report = audit_chain_verify()
    assert report.first_broken_id == events[1].pk
    assert report.checked == 1
    assert report.reason == "content does not match content_hash"


def test_changing_the_time_breaks_that_event(tampering):
    events = chain(3)
    AuditEvent.objects.filter(pk=events[2].pk).update(created_at=events[2].created_at - timedelta(hours=1))
    assert audit_chain_verify().first_broken_id == events[2].pk


def test_rewriting_an_event_with_a_matching_content_hash_breaks_its_chain_hash(tampering):
    events = chain(3)
    event = AuditEvent.objects.get(pk=events[1].pk)
    event.data = {"n": "forged"}
    AuditEvent.objects.filter(pk=event.pk).update(
        data=event.data, content_hash=canonical_sha256(content_of(event))
    )
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (events[1].pk, "chain_hash does not match")


def test_rewriting_an_event_consistently_breaks_the_next_link(tampering):
    events = chain(4)
    forge(AuditEvent.objects.get(pk=events[1].pk), data={"n": "forged"})
    report = audit_chain_verify()
    assert report.first_broken_id == events[2].pk
    assert report.reason == "prev_hash does not match the previous event"
    assert report.checked == 2


def test_relinking_an_event_breaks_it(tampering):
    events = chain(3)
    AuditEvent.objects.filter(pk=events[2].pk).update(prev_hash=events[0].chain_hash)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (
        events[2].pk,
        "prev_hash does not match the previous event",
    )


def test_moving_the_newest_event_to_a_later_position_breaks_it(tampering):
    events = chain(3)
    AuditEvent.objects.filter(pk=events[2].pk).update(chain_seq=7)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (events[2].pk, "chain_seq is not the next position")


@pytest.mark.parametrize("position", [0, 1, 2])
def test_deleting_a_sealed_event_breaks_the_link_after_it(tampering, position):
    events = chain(4)
    AuditEvent.objects.filter(pk=events[position].pk).delete()
    report = audit_chain_verify()
    assert report.first_broken_id == events[position + 1].pk
    assert report.checked == position


def _make_room_after(position: int) -> None:
    """Shift every sealed event after ``position`` one place on (as an intruder must)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE bailing_auditevent SET chain_seq = -chain_seq WHERE chain_seq > %s", [position]
        )
        cursor.execute("UPDATE bailing_auditevent SET chain_seq = -chain_seq + 1 WHERE chain_seq < 0")


def test_inserting_a_well_formed_event_into_the_chain_breaks_the_link_after_it(tampering):
    first, after = chain(2)
    _make_room_after(1)
    intruder = AuditEvent(
        created_at=first.created_at,
        actor_type="system",
        actor="intruder",
        action="tests.audit.forged",
        data={},
        chain_seq=2,
        prev_hash=first.chain_hash,
    )
    intruder.content_hash = canonical_sha256(content_of(intruder))
    intruder.chain_hash = sha256_hex(intruder.prev_hash + intruder.content_hash)
    intruder.save(force_insert=True)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.checked) == (after.pk, 2)


def test_inserting_an_event_with_made_up_hashes_breaks_at_the_intruder(tampering):
    chain(2)
    _make_room_after(1)
    intruder = AuditEvent.objects.create(
        actor_type="system",
        actor="intruder",
        action="tests.audit.forged",
        chain_seq=2,
        prev_hash="f" * 64,
        content_hash="e" * 64,
        chain_hash="d" * 64,
    )
    assert audit_chain_verify().first_broken_id == intruder.pk


def test_changing_an_unsealed_event_is_named_and_stays_evident_once_sealed(tampering):
    events = chain(2)
    victim = record(5)
    record(6)
    AuditEvent.objects.filter(pk=victim.pk).update(actor="mallory")
    report = audit_chain_verify()
    assert (report.first_broken_id, report.checked, report.unsealed) == (victim.pk, 2, 2)
    assert report.reason == "unsealed event's content does not match content_hash"
    # The sealer re-checks what it chains: it seals the event as recorded and says so.
    assert audit_seal().mismatched == (victim.pk,)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.checked, report.reason) == (
        victim.pk,
        len(events),
        "content does not match content_hash",
    )


def test_an_unsealed_event_carrying_chain_hashes_is_named(tampering):
    chain(1)
    victim = record(2)
    AuditEvent.objects.filter(pk=victim.pk).update(prev_hash="a" * 64, chain_hash="b" * 64)
    report = audit_chain_verify()
    assert (report.first_broken_id, report.reason) == (victim.pk, "unsealed event carries chain hashes")


def test_a_sealed_break_is_named_before_an_unsealed_one(tampering):
    events = chain(3)
    unsealed = record(9)
    AuditEvent.objects.filter(pk=unsealed.pk).update(actor="mallory")
    AuditEvent.objects.filter(pk=events[2].pk).update(actor="mallory")
    assert audit_chain_verify().first_broken_id == events[2].pk


def test_the_unsealed_tail_is_counted_with_its_oldest_event(tampering):
    chain(2)
    old, new = record(1), record(2)
    AuditEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    forge_unsealed = AuditEvent.objects.get(pk=old.pk)
    AuditEvent.objects.filter(pk=old.pk).update(content_hash=canonical_sha256(content_of(forge_unsealed)))
    report = audit_chain_verify()
    assert (report.ok, report.sealed, report.unsealed) == (True, 2, 2)
    assert report.oldest_unsealed_at == forge_unsealed.created_at
    assert 299 < report.oldest_unsealed_age() < 600
    assert AuditEvent.objects.get(pk=new.pk).created_at > report.oldest_unsealed_at


def test_the_unsealed_tail_is_a_scrape_time_gauge(tampering):
    def gauges() -> dict[str, float]:
        return {family.name: family.samples[0].value for family in audit_tail_metrics()}

    assert gauges() == {"bailing_audit_unsealed_events": 0, "bailing_audit_unsealed_oldest_seconds": 0}
    chain(1)
    late = record(2)
    AuditEvent.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(seconds=90))
    tail = gauges()
    assert tail["bailing_audit_unsealed_events"] == 1
    assert 89 < tail["bailing_audit_unsealed_oldest_seconds"] < 600


# --- manage.py approvals_audit_verify and bailing_audit_seal ----------------------------------------------


def test_verify_command_seals_then_reports_an_intact_chain(capsys):
    for n in range(3):
        record(n)
    call_command("approvals_audit_verify")
    assert capsys.readouterr().out.strip() == "audit chain ok: 3 events verified"
    assert chain_positions() == [1, 2, 3]


def test_verify_command_without_sealing_reports_the_tail(capsys):
    chain(2)
    record(3)
    call_command("approvals_audit_verify", "--no-seal")
    out = capsys.readouterr().out.strip()
    assert out.startswith(
        "audit chain ok: 2 events verified; 1 unsealed (content hashes verified), the oldest "
    )
    assert AuditEvent.objects.filter(chain_seq__isnull=True).count() == 1


def test_verify_command_names_the_first_broken_event(tampering):
    events = chain(3)
    AuditEvent.objects.filter(pk=events[1].pk).update(actor="someone-else")
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_verify")
    assert info.value.returncode == 1
    assert f"event {events[1].pk}:" in str(info.value)
    assert "1 events verified before it" in str(info.value)


def test_verify_command_exits_3_when_the_unsealed_tail_is_too_old(tampering):
    chain(1)
    stale = record(2)
    AuditEvent.objects.filter(pk=stale.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    AuditEvent.objects.filter(pk=stale.pk).update(
        content_hash=canonical_sha256(content_of(AuditEvent.objects.get(pk=stale.pk)))
    )
    call_command("approvals_audit_verify", "--no-seal", "--max-unsealed-age", "3600")
    with pytest.raises(CommandError) as info:
        call_command("approvals_audit_verify", "--no-seal", "--max-unsealed-age", "60")
    assert info.value.returncode == 3
    assert "1 audit events unsealed" in str(info.value)
    call_command("approvals_audit_verify", "--max-unsealed-age", "60")  # sealed now: no tail


@pytest.mark.django_db(transaction=True)
def test_verify_command_exits_1_on_a_broken_chain(capsys):
    events = chain(2)
    with audit_tampering():
        AuditEvent.objects.filter(pk=events[0].pk).delete()
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", "approvals_audit_verify"]).execute()
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert f"audit chain broken at event {events[1].pk}" in err


@pytest.mark.django_db(transaction=True)
def test_verify_command_exits_0_on_an_intact_chain(capsys):
    chain(2)
    # execute() returns normally (exit status 0) when the command succeeds.
    ManagementUtility(["manage.py", "approvals_audit_verify"]).execute()
    assert "audit chain ok: 2 events verified" in capsys.readouterr().out


def test_seal_command_seals_what_is_committed(capsys):
    record(1)
    record(2)
    call_command("bailing_audit_seal")
    assert capsys.readouterr().out.strip() == "sealed 2 audit events in 1 batches"
    assert chain_positions() == [1, 2]


# --- append-only in the database (the trigger is on in these tests) --------------------------------------


def _refused(sql: str, params=()) -> None:
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_the_database_refuses_changes_and_deletes_of_sealed_events():
    events = chain(2)
    sealed = events[0].pk
    _refused("UPDATE bailing_auditevent SET actor = 'mallory' WHERE id = %s", [sealed])
    _refused("UPDATE bailing_auditevent SET chain_hash = %s WHERE id = %s", ["c" * 64, sealed])
    _refused(
        "UPDATE bailing_auditevent SET chain_seq = NULL, prev_hash = NULL, chain_hash = NULL WHERE id = %s",
        [sealed],
    )
    _refused("DELETE FROM bailing_auditevent WHERE id = %s", [sealed])
    assert audit_chain_verify().checked == 2


def test_the_database_allows_only_the_one_time_fill_of_an_unsealed_events_chain():
    chain(1)
    unsealed = record(2).pk
    fill = "chain_seq = 2, prev_hash = %s, chain_hash = %s"
    hashes = ["a" * 64, "b" * 64]
    _refused("UPDATE bailing_auditevent SET actor = 'mallory' WHERE id = %s", [unsealed])
    _refused(f"UPDATE bailing_auditevent SET {fill}, actor = 'mallory' WHERE id = %s", [*hashes, unsealed])
    _refused("UPDATE bailing_auditevent SET chain_seq = 2 WHERE id = %s", [unsealed])  # partial fill
    _refused("DELETE FROM bailing_auditevent WHERE id = %s", [unsealed])
    with connection.cursor() as cursor:  # the fill itself (made-up hashes: verify will name them)
        cursor.execute(f"UPDATE bailing_auditevent SET {fill} WHERE id = %s", [*hashes, unsealed])
    _refused(f"UPDATE bailing_auditevent SET {fill} WHERE id = %s", [*hashes, unsealed])
    assert audit_chain_verify().first_broken_id == unsealed


def test_the_database_refuses_inserting_a_sealed_event_and_clears_chain_hashes_of_a_new_one():
    columns = (
        "created_at, actor_type, actor, action, client_app_id, route_key, target_type, target_id, data, "
        "request_id, content_hash"
    )
    values = "now(), 'system', 'x', 'tests.audit.raw', '', '', '', '', '{}', '', %s"
    _refused(
        f"INSERT INTO bailing_auditevent ({columns}, chain_seq, prev_hash, chain_hash) "
        f"VALUES ({values}, 1, %s, %s)",
        ["e" * 64, GENESIS_HASH, "d" * 64],
    )
    with connection.cursor() as cursor:  # as a process still running the previous version appends
        cursor.execute(
            f"INSERT INTO bailing_auditevent ({columns}, prev_hash, chain_hash) VALUES ({values}, %s, %s) "
            "RETURNING id",
            ["e" * 64, GENESIS_HASH, "d" * 64],
        )
        inserted = cursor.fetchone()[0]
    stored = AuditEvent.objects.get(pk=inserted)
    assert (stored.chain_seq, stored.prev_hash, stored.chain_hash) == (None, None, None)
