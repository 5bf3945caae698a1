"""A client's shared per-minute request bucket (``Client.rate_limit_per_min``; 0 = unlimited).

BailingHub counts a client's calls on its business surfaces — knowledge search, the push API — in
one bucket per client. Here the bucket is a fixed one-minute window in PostgreSQL
(``ClientRateWindow``; docs/compatibility.md "Client rate limits"): one atomic upsert per request
returns the new count, so the limit holds across gunicorn workers and hosts and survives restarts.
Every request that authenticated counts, including ones later refused (as in BailingHub). Past the
limit: 429 ``rate_limited`` with ``Retry-After`` = seconds until the window ends.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from agent_runtime.models import Client, ClientRateWindow
from bailing.api.errors import RateLimited

WINDOW_SECONDS = 60
# Windows older than this are deleted now and then by the request that opens a new window.
_KEEP = timedelta(minutes=10)


def client_rate_consume(*, client: Client) -> None:
    """Count one request of ``client``; raise 429 ``rate_limited`` when its minute is over the limit."""
    limit = client.rate_limit_per_min
    if limit <= 0:
        return
    now = timezone.now()
    epoch = int(now.timestamp())
    start = epoch - epoch % WINDOW_SECONDS
    window_start = now.replace(microsecond=0) - timedelta(seconds=epoch - start)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {ClientRateWindow._meta.db_table} (client_id, window_start, count)
            VALUES (%s, %s, 1)
            ON CONFLICT (client_id, window_start)
            DO UPDATE SET count = {ClientRateWindow._meta.db_table}.count + 1
            RETURNING count
            """,  # noqa: S608 - the table name is the model's constant; values are parameters
            [client.pk, window_start],
        )
        (count,) = cursor.fetchone()
    if count == 1:
        ClientRateWindow.objects.filter(client=client, window_start__lt=window_start - _KEEP).delete()
    if count > limit:
        retry_after = math.ceil((window_start + timedelta(seconds=WINDOW_SECONDS) - now).total_seconds())
        raise RateLimited(retry_after=max(1, retry_after))
