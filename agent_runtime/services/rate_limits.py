"""Fixed-window rate limits in PostgreSQL: the client's shared bucket and the dispatch limits of tools
and providers.

* ``Client.rate_limit_per_min`` (0 = unlimited): one bucket per client for everything it calls on the
  business surfaces: the push API and tool invocations (knowledge search does not count). On the push
  API every request that authenticated counts, including ones later refused. Past the limit the push
  API answers 429 ``rate_limited``; a tool invocation answers ``rejected_before_dispatch`` with
  ``retry_after_ms`` (docs/protocol.md "Rate limits and throttles"). The window is fixed, where
  BailingHub's slides (docs/compatibility.md "Client rate limits").
* Tool dispatch: an ACC ``execution.rate_limit`` (``count`` per ``1s|1m|1h|1d``) per tool and the
  provider's ``rate_limit_per_min`` across all its tools (0 = unlimited), counted when a request is
  about to be sent.

Each check is one atomic ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` of the window's count, so a
limit holds across gunicorn workers and hosts and survives restarts. Windows are fixed (aligned to the
epoch), not sliding; old windows are deleted now and then by the request that opens a new one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from agent_runtime.models import Client, ClientRateWindow, RateBucket
from bailing.api.errors import RateLimited

WINDOW_SECONDS = 60
# Windows older than this are deleted now and then by the request that opens a new window.
_KEEP = timedelta(minutes=10)
ACC_WINDOWS = {"1s": 1, "1m": 60, "1h": 3600, "1d": 86400}


@dataclass(frozen=True)
class RateLimitHit:
    """A limit that was exceeded: which, how much, and how long until its window ends."""

    level: str  # client | tool | provider
    source: str  # client_rate_limit | declaration | provider_total
    count: int
    window_sec: int
    retry_after_ms: int

    def as_dict(self) -> dict:
        """The invocation result's ``rate_limit`` object."""
        scope = "client" if self.level == "client" else "tool_provider_shared"
        return {
            "level": self.level,
            "count": self.count,
            "window_sec": self.window_sec,
            "scope": scope,
            "source": self.source,
        }


def _window(now: datetime, seconds: int) -> tuple[datetime, datetime]:
    epoch = now.timestamp()
    start_epoch = math.floor(epoch) - math.floor(epoch) % seconds
    start = now.replace(microsecond=0) - timedelta(seconds=math.floor(epoch) - start_epoch)
    return start, start + timedelta(seconds=seconds)


def _retry_after_ms(now: datetime, end: datetime) -> int:
    return max(1, math.ceil((end - now).total_seconds() * 1000))


def _count_one(table: str, key_column: str, key: object, window_start: datetime) -> int:
    """Add one to the window's count in ``table`` (creating the row) and return the new count."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} ({key_column}, window_start, count)
            VALUES (%s, %s, 1)
            ON CONFLICT ({key_column}, window_start)
            DO UPDATE SET count = {table}.count + 1
            RETURNING count
            """,  # noqa: S608 - table and column are the models' constants; values are parameters
            [key, window_start],
        )
        (count,) = cursor.fetchone()
    return count


def client_rate_check(*, client: Client) -> RateLimitHit | None:
    """Count one request of ``client``; the hit when its minute is over the limit, else None."""
    limit = client.rate_limit_per_min
    if limit <= 0:
        return None
    now = timezone.now()
    window_start, window_end = _window(now, WINDOW_SECONDS)
    count = _count_one(ClientRateWindow._meta.db_table, "client_id", client.pk, window_start)
    if count == 1:
        ClientRateWindow.objects.filter(client=client, window_start__lt=window_start - _KEEP).delete()
    if count > limit:
        return RateLimitHit(
            "client", "client_rate_limit", limit, WINDOW_SECONDS, _retry_after_ms(now, window_end)
        )
    return None


def client_rate_consume(*, client: Client) -> None:
    """Count one request of ``client``; raise 429 ``rate_limited`` when its minute is over the limit."""
    hit = client_rate_check(client=client)
    if hit is not None:
        raise RateLimited(retry_after=max(1, math.ceil(hit.retry_after_ms / 1000)))


def _bucket_consume(key: str, window_seconds: int) -> tuple[int, datetime, datetime]:
    now = timezone.now()
    window_start, window_end = _window(now, window_seconds)
    count = _count_one(RateBucket._meta.db_table, "key", key, window_start)
    if count == 1:
        RateBucket.objects.filter(
            key=key, window_start__lt=window_start - max(_KEEP, 2 * (window_end - window_start))
        ).delete()
    return count, now, window_end


def dispatch_rate_check(
    *, provider: str, tool: str, tool_limit: dict | None, provider_per_min: int
) -> RateLimitHit | None:
    """Count one dispatch of ``tool``: its ACC limit first, then the provider's per-minute total."""
    if tool_limit:
        seconds = ACC_WINDOWS[tool_limit["window"]]
        count, now, end = _bucket_consume(f"tool:{provider}:{tool}:{tool_limit['window']}", seconds)
        if count > tool_limit["count"]:
            return RateLimitHit(
                "tool", "declaration", tool_limit["count"], seconds, _retry_after_ms(now, end)
            )
    if provider_per_min > 0:
        count, now, end = _bucket_consume(f"provider:{provider}", WINDOW_SECONDS)
        if count > provider_per_min:
            return RateLimitHit(
                "provider", "provider_total", provider_per_min, WINDOW_SECONDS, _retry_after_ms(now, end)
            )
    return None


def keyed_rate_consume(*, key: str, limit: int, window_seconds: int = WINDOW_SECONDS) -> None:
    """Count one event under ``key`` (a ``RateBucket`` key, e.g. ``cimd:<ip>``); raise 429
    ``rate_limited`` with ``retry_after`` when its fixed window already held ``limit`` of them."""
    count, now, end = _bucket_consume(key, window_seconds)
    if count > limit:
        raise RateLimited(retry_after=max(1, math.ceil((end - now).total_seconds())))
