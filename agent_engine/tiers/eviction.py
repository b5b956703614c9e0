"""Another way to choose what project memory pages out when a write takes it past its limit.

By default a project store evicts by its aging policy's ranking, the one compaction uses
(lowest decayed importance first, :mod:`agent_engine.tiers.aging`). An :class:`EvictionPolicy`
given as ``eviction=`` chooses instead: it only *chooses* among the working set (a store's
default reads); the store moves the chosen ids to the archive in one backend call. Pinned
items are never moved. Global memory is never evicted on write.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

import attrs

from agent_engine.errors import ValidationError
from agent_engine.models import Status

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = ["EvictionPolicy", "LowestImportanceOldest"]


class EvictionPolicy(Protocol):
    """**Protocol:** pick ids of unpinned items to evict from ``store``.

    Called when the store holds ``count`` items and its limit is ``max_items``; return at
    least ``count - max_items`` ids when that many unpinned items exist.
    """

    def select(self, store: TierStore, count: int, max_items: int) -> list[str]:
        """Ids to evict."""
        ...


@attrs.frozen
class LowestImportanceOldest:
    """Evict the bottom ``fraction`` by stored importance, oldest first on ties.

    Cheaper than the default (two bounded queries instead of a read of the working set) and
    blind to time and reads: an item read every day ranks as one never read.

    Evicting a fraction rather than just the excess gives hysteresis: a store at its limit is
    not trimmed on every single add. Two bounded queries find the victims: the least important
    items, then, on the boundary importance, the oldest.
    """

    fraction: float = 0.1

    def __attrs_post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValidationError(
                "fraction must be in [0, 1]", field="fraction", value=self.fraction
            )

    def select(self, store: TierStore, count: int, max_items: int) -> list[str]:
        """Ids of the least important unpinned items, oldest first among equals."""
        wanted = max(count - max_items, math.floor(count * self.fraction))
        if wanted <= 0:
            return []
        unpinned = {"status": {"$ne": Status.PINNED.value}}
        lowest = store.query(unpinned, limit=wanted, order_by="+importance")
        if len(lowest) < wanted:
            return [item.id for item in lowest]
        boundary = lowest[-1].importance
        below = [item.id for item in lowest if item.importance < boundary]
        oldest_on_boundary = store.query(
            {**unpinned, "importance": boundary},
            limit=wanted - len(below),
            order_by="+timestamp",
        )
        return below + [item.id for item in oldest_on_boundary]
