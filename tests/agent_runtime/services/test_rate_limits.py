"""The client's shared per-minute bucket in PostgreSQL: exact under parallel requests."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from agent_runtime.models import ClientRateWindow
from agent_runtime.services.rate_limits import WINDOW_SECONDS, client_rate_consume
from bailing.api.errors import RateLimited
from tests.factories import ClientFactory


def wait_for_a_fresh_minute(margin: float = 5.0) -> None:
    """Sleep into the next window when fewer than ``margin`` seconds of this one remain, so a test's
    requests all land in one window."""
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < margin:
        time.sleep(left + 0.05)


@pytest.mark.django_db
def test_limit_then_429_with_retry_after_and_unlimited_zero():
    client = ClientFactory(rate_limit_per_min=3)
    wait_for_a_fresh_minute()
    for _ in range(3):
        client_rate_consume(client=client)
    with pytest.raises(RateLimited) as exc:
        client_rate_consume(client=client)
    assert 1 <= exc.value.extra["retry_after_seconds"] <= WINDOW_SECONDS
    assert exc.value.headers["Retry-After"] == str(exc.value.extra["retry_after_seconds"])
    assert ClientRateWindow.objects.get(client=client).count == 4
    unlimited = ClientFactory(rate_limit_per_min=0)
    for _ in range(10):
        client_rate_consume(client=unlimited)
    assert not ClientRateWindow.objects.filter(client=unlimited).exists()


@pytest.mark.django_db(transaction=True)
def test_parallel_requests_share_one_exact_count():
    client = ClientFactory(rate_limit_per_min=10)
    wait_for_a_fresh_minute()
    allowed, refused = [], []
    barrier = threading.Barrier(20)

    def request() -> None:
        try:
            barrier.wait()
            try:
                client_rate_consume(client=client)
                allowed.append(1)
            except RateLimited:
                refused.append(1)
        finally:
            connection.close()

    threads = [threading.Thread(target=request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(allowed), len(refused)) == (10, 10)
