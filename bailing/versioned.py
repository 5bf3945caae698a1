"""Per-process caches keyed by row versions (the hot path of every agent request).

Plumbing for the apps above: routes, tool providers and knowledge bases carry a ``version`` that a
PostgreSQL trigger sets on every write from one shared sequence (agent_runtime migration 0008): any
change, even by raw SQL, gives the row a version no earlier state of any row ever had. A value built from rows
is cached under the versions of exactly the rows it was built from (plus a digest of the full
effective configuration it used), so a cached value is reused only while every row it depends on is
unchanged, and what it contains is byte-for-byte what a rebuild would give.

The caches are bounded LRUs behind a lock (gunicorn threads share them); builders run outside the
lock. ``builds`` counts misses per cache, so tests can tell a reuse from a rebuild without timing.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

CACHE_MAX_ENTRIES = 512


class VersionedCache(Generic[T]):
    """A bounded, thread-safe LRU of values keyed by their rows' versions."""

    def __init__(self, name: str, max_entries: int = CACHE_MAX_ENTRIES):
        self.name = name
        self.max_entries = max_entries
        self.builds = 0
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> T | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: T) -> T:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        value = self.get(key)
        if value is None:
            with self._lock:
                self.builds += 1
            value = self.put(key, build())
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def config_digest(value: Any) -> str:
    """A digest of a decoded-JSON configuration (key order does not matter)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
