"""A per-process LRU of query vectors, keyed by embedding provider settings and the exact query text.

Agents repeat themselves: the same question comes back in the next turn, from another agent of the
team, or as a retry. Embedding it again costs the local model 7–10 ms of CPU (an OpenAI-compatible
endpoint: a network call), so the vector of a query is kept, by the knowledge base's provider, model,
dimension and provider config (two providers' vectors never meet) and the query text as given, byte
for byte. Only successful embeddings are kept; vectors are read-only. ``BAILING_QUERY_VECTOR_CACHE``
sets the number of entries (0 turns the cache off). The text stays in this process's memory only.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

import numpy as np

from bailing.versioned import VersionedCache


class QueryVectorCache(VersionedCache[np.ndarray]):
    """The plumbing's bounded LRU, with read-only copies, hit counts and a capacity of 0 meaning off."""

    def __init__(self, capacity: int) -> None:
        super().__init__("query_vectors", max(0, capacity))
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self.max_entries

    def get(self, key: Hashable) -> np.ndarray | None:
        if not self.capacity:
            return None
        vector = super().get(key)
        with self._lock:
            if vector is None:
                self.misses += 1
            else:
                self.hits += 1
        return vector

    def put(self, key: Hashable, vector: np.ndarray) -> np.ndarray:
        vector = np.array(vector, dtype=np.float32, copy=True)
        vector.setflags(write=False)
        return super().put(key, vector) if self.capacity else vector

    def clear(self) -> None:
        super().clear()
        with self._lock:
            self.hits = self.misses = 0


_CACHE: QueryVectorCache | None = None
_CACHE_LOCK = threading.Lock()


def query_vector_cache() -> QueryVectorCache:
    """The process's cache, sized by ``BAILING_QUERY_VECTOR_CACHE`` when first used."""
    global _CACHE
    if _CACHE is None:
        from django.conf import settings

        with _CACHE_LOCK:
            if _CACHE is None:
                _CACHE = QueryVectorCache(settings.BAILING_QUERY_VECTOR_CACHE)
    return _CACHE
