"""What every tier store shares: a namespace it cannot leave, and a journal of its changes.

Isolation is enforced here, not by callers. A store reads and writes only items whose
``namespace`` and ``tier`` are its own: every filter it passes to the backend is ANDed with
its scope (a caller's filter naming another namespace simply matches nothing), an id that
belongs to another namespace is "not found", and an item built for another scope is refused.
Many stores can therefore share one physical backend (one SQLite file or PostgreSQL database
for every project) without seeing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import attrs

from agent_engine._log import get_logger
from agent_engine.errors import ItemNotFoundError, ValidationError
from agent_engine.filters import Filter, FilterInput, parse_filter
from agent_engine.memory.backend import DEFAULT_LIMIT, MemoryBackend, Query, SearchHit
from agent_engine.models import AuditAction, ContextItem, Status, Tier, new_id, utcnow
from agent_engine.tiers.audit import AuditLog
from agent_engine.tokens import DEFAULT_COUNTER

__all__ = ["TierStore"]


class TierStore:
    """A view of one namespace of one tier on a backend; the base of the three tier stores.

    ``audit`` defaults to an :class:`~agent_engine.tiers.audit.AuditLog` over the backend's own
    journal. ``clock`` supplies timestamps (tests pass a frozen one).
    """

    tier: ClassVar[Tier]

    def __init__(
        self,
        backend: MemoryBackend,
        namespace: str,
        *,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        if not isinstance(namespace, str) or not namespace.strip():
            raise ValidationError(
                f"namespace must be a non-empty string, got {namespace!r}",
                field="namespace",
                value=namespace,
            )
        self.backend = backend
        self.namespace = namespace
        self.audit = audit if audit is not None else AuditLog(backend.audit, clock=clock)
        self.clock = clock
        self.scope = Filter().and_(parse_filter({"namespace": namespace, "tier": self.tier.value}))
        self._log = get_logger(tier=self.tier.value, namespace=namespace)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, backend={self.backend!r})"

    # ------------------------------------------------------------------ building items

    def new_item(
        self,
        kind: str,
        text: str,
        *,
        importance: float = 0.5,
        tags: Iterable[str] = (),
        payload: Mapping[str, Any] | None = None,
        source: str | None = None,
        status: Status = Status.CONFIRMED,
        expires_at: datetime | None = None,
        **fields: Any,
    ) -> ContextItem:
        """Build an item in this store's scope (not yet stored): fresh id, now as timestamp.

        ``token_cost`` is filled with the default counter's count of the item's body, which the
        assembler reuses instead of counting on every build.
        """
        item = ContextItem(
            id=fields.pop("id", None) or new_id(),
            kind=kind,
            text=text,
            tier=self.tier,
            namespace=self.namespace,
            source=source if source is not None else self.namespace,
            timestamp=fields.pop("timestamp", None) or self.clock(),
            tags=tags,
            importance=importance,
            payload=dict(payload or {}),
            status=status,
            expires_at=expires_at,
            **fields,
        )
        if item.token_cost is not None:
            return item
        # Counting once at write time keeps it off the assembler's hot path.
        return attrs.evolve(item, token_cost=DEFAULT_COUNTER.count(item.body))

    def _in_scope(self, item: ContextItem) -> bool:
        return item.namespace == self.namespace and item.tier is self.tier

    def _check_scope(self, items: Sequence[ContextItem]) -> None:
        for item in items:
            if not isinstance(item, ContextItem):
                raise ValidationError(
                    f"expected ContextItem, got {type(item).__name__}", value=item
                )
            if not self._in_scope(item):
                raise ValidationError(
                    f"item {item.id!r} belongs to {item.tier.value}/{item.namespace!r}, not to "
                    f"this store's {self.tier.value}/{self.namespace!r}; build it with new_item()",
                    field="namespace",
                    value=item.namespace,
                )

    # ------------------------------------------------------------------ reads

    def get(self, item_id: str) -> ContextItem | None:
        """Return the item, or ``None`` if it does not exist *in this store*."""
        item = self.backend.get(item_id)
        return item if item is not None and self._in_scope(item) else None

    def require(self, item_id: str) -> ContextItem:
        """Return the item or raise :class:`~agent_engine.errors.ItemNotFoundError`."""
        item = self.get(item_id)
        if item is None:
            raise ItemNotFoundError(item_id, namespace=self.namespace)
        return item

    def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Return this store's items among ``item_ids``, in the order asked."""
        return [item for item in self.backend.get_many(item_ids) if self._in_scope(item)]

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: str = "timestamp",
    ) -> list[ContextItem]:
        """Query this store's items (the filter language of ``docs/filters.md``)."""
        return self.backend.query(self._scoped(filters), limit, order_by)

    def count(self, filters: FilterInput = None) -> int:
        """Count this store's matching items."""
        return self.backend.count(self._scoped(filters))

    def search(self, query: Query, k: int = 10, filters: FilterInput = None) -> list[SearchHit]:
        """Semantic search within this store."""
        return self.backend.search(query, k, self._scoped(filters))

    def list_all(self) -> list[ContextItem]:
        """Every item of this store, newest first."""
        return self.query(None, limit=None)

    def timeline(self) -> list[ContextItem]:
        """Every item in the order it happened (timestamp, then the time-ordered id)."""
        return self.query(None, limit=None, order_by="-timestamp")

    def _scoped(self, filters: FilterInput) -> Filter:
        return self.scope.and_(parse_filter(filters))

    # ------------------------------------------------------------------ writes

    def add(self, item: ContextItem) -> ContextItem:
        """Store a new item built for this scope; return it."""
        self.add_many([item])
        return item

    def add_many(self, items: Iterable[ContextItem]) -> list[ContextItem]:
        """Store new items of this scope, all or none, as one journaled write."""
        batch = list(items)
        self._check_scope(batch)
        if not batch:
            return batch
        # Items built elsewhere arrive without a cost; counting once here keeps the count off
        # every later build's hot path, as for items made by ``new``.
        batch = [
            item
            if item.token_cost is not None
            else attrs.evolve(item, token_cost=DEFAULT_COUNTER.count(item.body))
            for item in batch
        ]
        ids = tuple(item.id for item in batch)
        with self.audit.journal(AuditAction.ADD, self.tier, self.namespace, ids):
            self.backend.add_many(batch)
        self._log.debug("items_added", count=len(batch))
        self._after_add()
        return batch

    def update(self, item: ContextItem) -> ContextItem:
        """Replace one of this store's items; foreign or unknown ids are not found.

        An item whose body changed but that still carries the stored item's ``token_cost``
        (what ``attrs.evolve(item, text=...)`` gives) has its cost counted again, so the
        assembler never charges new text at an old price.
        """
        self._check_scope([item])
        current = self.require(item.id)
        if item.body != current.body and item.token_cost == current.token_cost:
            item = attrs.evolve(item, token_cost=DEFAULT_COUNTER.count(item.body))
        with self.audit.journal(AuditAction.UPDATE, self.tier, self.namespace, (item.id,)):
            self.backend.update(item)
        return item

    def delete(self, item_id: str) -> bool:
        """Delete one of this store's items; return whether it existed here."""
        if self.get(item_id) is None:
            return False
        with self.audit.journal(AuditAction.DELETE, self.tier, self.namespace, (item_id,)):
            return self.backend.delete(item_id)

    def delete_many(
        self, item_ids: Iterable[str], *, action: AuditAction = AuditAction.DELETE
    ) -> int:
        """Delete several of this store's items in one backend call; foreign ids are skipped."""
        mine = tuple(item.id for item in self.get_many(item_ids))
        if not mine:
            return 0
        with self.audit.journal(action, self.tier, self.namespace, mine):
            return self.backend.delete_many(mine)

    def forget(self, *item_ids: str, erase: bool = True) -> int:
        """Remove this store's items among ``item_ids``; return how many were here.

        With ``erase`` (the default) no trace of them is left: the backend's ``erase`` removes
        their text, vectors and ids from every file it writes before this returns, and the
        journal keeps one ``erase`` event naming each item by a token (a salted digest whose
        salt is discarded), which also replaces the id in the items' earlier events.
        ``erase=False`` is :meth:`delete_many`: cheaper, and it leaves what
        ``docs/backends.md`` lists. Foreign and unknown ids are skipped, never erased.
        """
        if not erase:
            return self.delete_many(item_ids)
        mine = tuple(item.id for item in self.get_many(item_ids))
        if not mine:
            return 0
        with self.audit.erasing(self.tier, self.namespace, mine) as tokens:
            return self.backend.erase(mine, tokens=tokens)

    def clear(self) -> int:
        """Remove every item of this store (and nothing of anyone else's)."""
        with self.audit.journal(AuditAction.CLEAR, self.tier, self.namespace):
            removed = self.backend.clear(self.scope)
        self._log.info("store_cleared", removed=removed)
        return removed

    def pin(self, item_id: str) -> ContextItem:
        """Pin an item: always offered to the prompt first and never evicted."""
        return self._set_status(item_id, Status.PINNED, AuditAction.PIN)

    def unpin(self, item_id: str) -> ContextItem:
        """Return a pinned item to confirmed status."""
        return self._set_status(item_id, Status.CONFIRMED, AuditAction.UNPIN)

    def _set_status(self, item_id: str, status: Status, action: AuditAction) -> ContextItem:
        item = attrs.evolve(self.require(item_id), status=status)
        with self.audit.journal(action, self.tier, self.namespace, (item_id,)):
            self.backend.update(item)
        return item

    def _after_add(self) -> None:
        """Hook run after every successful add (project memory evicts here)."""
