"""A bounded cache of token costs that several threads may share."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)


class CostCache(Generic[K]):
    """Token costs kept across the builds of one assembler, least recently used evicted.

    An executor may step several tasks at once on threads that share an assembler, and an
    LRU cache reorders itself on every read: unguarded, two readers can corrupt it. A lock
    around each access costs far less than the counting it saves.
    """

    def __init__(self, maxsize: int) -> None:
        self._cache: LRUCache[K, int] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def get(self, key: K) -> int | None:
        """The cached cost of ``key``, or ``None``."""
        with self._lock:
            return self._cache.get(key)

    def __setitem__(self, key: K, cost: int) -> None:
        with self._lock:
            self._cache[key] = cost

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)
