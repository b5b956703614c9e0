"""Bounded caches of token costs that several threads, and every build of an assembler, share."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from datetime import date
from typing import Generic, TypeVar

import attrs
from cachetools import FIFOCache

__all__ = ["BodyKey", "CostCache", "CostCaches"]

K = TypeVar("K", bound=Hashable)

BodyKey = tuple[str, str, str]
"""A body count's cache key: item id, what was counted (fingerprint or shown text), format."""


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


@attrs.frozen
class CostCaches:
    """The counts an assembler keeps across builds, for one counter and one layout.

    ``bodies``: body counts by item version. ``headers``: section and session header
    strings, which recur in every build. ``groups``: a session group header's units by
    session and day.
    """

    bodies: CostCache[BodyKey] = attrs.field(factory=lambda: CostCache(maxsize=100_000))
    headers: CostCache[str] = attrs.field(factory=lambda: CostCache(maxsize=10_000))
    groups: CostCache[tuple[str, date]] = attrs.field(factory=lambda: CostCache(maxsize=10_000))
