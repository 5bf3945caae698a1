"""The provider bulkhead's slots in one process: a call waits a bounded time for a slot another call
gives back, a slot is given back once (early or at the block's end), and a provider that keeps its
slots refuses after the wait. No database: the slots are this process's."""

from __future__ import annotations

import threading
import time

from agent_runtime.services.invocations.locks import provider_calls_in_flight, provider_slot


def test_a_slot_given_back_while_a_call_waits_goes_to_that_call():
    taken = threading.Event()
    release = threading.Event()

    def holder():
        with provider_slot("p-wait", 1, wait_ms=0) as slot:
            assert slot
            taken.set()
            release.wait(5)
            slot.release()  # early, as a dispatch does once the business system has answered
            assert provider_calls_in_flight("p-wait") <= 1
            time.sleep(0.2)  # still inside the block: the slot is already someone else's

    thread = threading.Thread(target=holder)
    thread.start()
    assert taken.wait(5)
    threading.Timer(0.1, release.set).start()
    started = time.monotonic()
    with provider_slot("p-wait", 1, wait_ms=5000) as slot:
        waited = time.monotonic() - started
        assert slot and provider_calls_in_flight("p-wait") == 1
    thread.join(5)
    assert 0.05 < waited < 4.0
    assert provider_calls_in_flight("p-wait") == 0


def test_a_provider_that_keeps_its_slots_refuses_after_the_wait_and_nothing_is_counted_twice():
    with provider_slot("p-full", 2, wait_ms=0) as first, provider_slot("p-full", 2, wait_ms=0) as second:
        assert first and second
        started = time.monotonic()
        with provider_slot("p-full", 2, wait_ms=150) as third:
            assert not third
            third.release()  # releasing a slot never taken changes nothing
        assert time.monotonic() - started >= 0.14
        assert provider_calls_in_flight("p-full") == 2
        first.release()
        first.release()  # once only
        assert provider_calls_in_flight("p-full") == 1
    assert provider_calls_in_flight("p-full") == 0
