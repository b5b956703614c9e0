"""A bounded cache of token costs that several threads may share."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import FIFOCache

K = TypeVar("K", bound=Hashable)


class CostCache(Generic[K]):
    """Token costs kept across the builds of one assembler, oldest evicted first.

    An executor may step several tasks at once on threads that share an assembler. A FIFO
    cache, unlike an LRU one, does not reorder itself on a read, so reads (hundreds per build)
    need no lock; writes, which may evict, take one. A read racing an eviction at worst misses
    and the cost is counted again.
    """

    def __init__(self, maxsize: int) -> None:
        self._cache: FIFOCache[K, int] = FIFOCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def get(self, key: K) -> int | None:
        """The cached cost of ``key``, or ``None``."""
        try:
            return self._cache[key]  # one dict read; Cache.get tests then reads, which can race
        except KeyError:
            return None

    def __setitem__(self, key: K, cost: int) -> None:
        with self._lock:
            self._cache[key] = cost

    def __len__(self) -> int:
        return len(self._cache)
