"""The in-memory backend: the reference implementation and the oracle other backends match.

A dict keyed by id gives O(1) ``get``/``update``/``delete``; one re-entrant lock makes every
primitive atomic for threads. Queries scan, which is right for task memory (tens to
thousands of items) and for tests; persistent tiers belong on the SQL or FAISS backends.
"""

from __future__ import annotations

import heapq
import threading

from agent_engine.errors import DuplicateItemError, ItemNotFoundError
from agent_engine.filters import Filter, Order
from agent_engine.memory.backend import BaseBackend, Capabilities
from agent_engine.models import ContextItem

__all__ = ["InMemoryBackend"]


class InMemoryBackend(BaseBackend):
    """Items in a dict, guarded by a lock; nothing survives the process."""

    capabilities = Capabilities(vector_search=False, persistent=False, atomic_batches=True)

    def __init__(self) -> None:
        self._items: dict[str, ContextItem] = {}
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"InMemoryBackend(items={len(self._items)})"

    def _insert(self, items: list[ContextItem]) -> None:
        with self._lock:
            for item in items:
                if item.id in self._items:
                    raise DuplicateItemError(item.id)
            for item in items:
                self._items[item.id] = item

    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        with self._lock:
            return {item_id: self._items[item_id] for item_id in item_ids if item_id in self._items}

    def _replace(self, items: list[ContextItem]) -> None:
        with self._lock:
            for item in items:
                if item.id not in self._items:
                    raise ItemNotFoundError(item.id)
            for item in items:
                self._items[item.id] = item

    def _remove(self, item_ids: list[str]) -> int:
        with self._lock:
            removed = 0
            for item_id in item_ids:
                if self._items.pop(item_id, None) is not None:
                    removed += 1
            return removed

    def _matching(self, where: Filter) -> list[ContextItem]:
        with self._lock:
            items = list(self._items.values())
        if not where.conditions:
            return items
        return [item for item in items if where.matches(item)]

    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        matching = self._matching(where)
        if limit is not None and limit * 4 < len(matching):
            # Partial selection keeps small-limit queries O(n log limit) instead of a full sort.
            candidates = _top(matching, order, limit)
            return order.sort(candidates)[:limit]
        return order.sort(matching)[:limit]

    def _count(self, where: Filter) -> int:
        if not where.conditions:
            with self._lock:
                return len(self._items)
        return len(self._matching(where))

    def _delete_where(self, where: Filter) -> int:
        with self._lock:
            doomed = [item.id for item in self._items.values() if where.matches(item)]
            for item_id in doomed:
                del self._items[item_id]
            return len(doomed)


def _top(items: list[ContextItem], order: Order, limit: int) -> list[ContextItem]:
    """Pick a superset of the first ``limit`` items of ``order.sort(items)`` without sorting all.

    Nulls sort last, so non-null values are taken first; ties on the boundary value are all
    kept so the final sort can break them by id.
    """
    present = [item for item in items if getattr(item, order.field) is not None]
    if len(present) < limit:
        return items
    pick = heapq.nlargest if order.descending else heapq.nsmallest
    chosen = pick(limit, present, key=lambda item: getattr(item, order.field))
    boundary = getattr(chosen[-1], order.field)
    chosen_ids = {item.id for item in chosen}
    ties = [
        item
        for item in present
        if getattr(item, order.field) == boundary and item.id not in chosen_ids
    ]
    return chosen + ties
