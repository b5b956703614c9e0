"""The storage contract under every tier, and the base class that fulfils most of it.

:class:`MemoryBackend` is what tiers and the assembler depend on. :class:`BaseBackend` derives
the public methods (argument checks, the conveniences ``add``/``get``/``update``/``delete``/
``list_all``) from a handful of storage primitives, so every backend validates the same way,
raises the same errors and differs only in how it stores. The conformance suite in
:mod:`agent_engine.testing.conformance` is the executable form of these docstrings.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import attrs

from agent_engine.errors import DuplicateItemError, ValidationError
from agent_engine.filters import Filter, FilterInput, Order, parse_filter, parse_order
from agent_engine.models import ContextItem

__all__ = ["BaseBackend", "Capabilities", "MemoryBackend"]

DEFAULT_LIMIT = 100


@attrs.frozen
class Capabilities:
    """What a backend can do beyond the core contract; callers branch on these, not on names.

    ``vector_search``: :meth:`search` is available. ``persistent``: items survive the process.
    ``atomic_batches``: a failed ``add_many`` (or a crash during one) leaves all of the batch
    or none of it.
    """

    vector_search: bool = False
    persistent: bool = False
    atomic_batches: bool = True


@runtime_checkable
class MemoryBackend(Protocol):
    """**Protocol:** a store of :class:`~agent_engine.models.ContextItem` values keyed by id.

    Semantics every implementation keeps (checked by the conformance suite):

    * ``add``/``add_many`` never overwrite: an id that is stored, or that appears twice in one
      batch, raises :class:`~agent_engine.errors.DuplicateItemError` and nothing of the batch
      is stored. ``update`` is the way to change an item.
    * ``update``/``update_many`` replace whole items by id; an unknown id raises
      :class:`~agent_engine.errors.ItemNotFoundError` and nothing of the batch changes.
    * ``get`` returns ``None`` for an unknown id; ``delete`` returns whether it removed
      something (deleting a missing id is not an error).
    * ``query`` takes a filter document (``docs/filters.md``), a ``limit`` (``None`` for no
      limit) and ``order_by``: ``"field"`` sorts descending (newest first for the default
      ``"timestamp"``), ``"-field"`` ascending; nulls sort last and ties break by id.
    * ``count``/``clear`` take the same filters; ``clear`` returns how many items it removed.
    * Malformed input raises a :class:`~agent_engine.errors.ValidationError` subclass and
      changes nothing.
    """

    @property
    def capabilities(self) -> Capabilities:
        """What this backend supports beyond the core contract."""
        ...

    def add(self, item: ContextItem) -> None:
        """Store a new item."""
        ...

    def add_many(self, items: Iterable[ContextItem]) -> None:
        """Store new items, all or none."""
        ...

    def get(self, item_id: str) -> ContextItem | None:
        """Return the item with this id, or ``None``."""
        ...

    def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Return the stored items among ``item_ids``, in the order asked, skipping unknown ids."""
        ...

    def update(self, item: ContextItem) -> None:
        """Replace the stored item that has ``item.id``."""
        ...

    def update_many(self, items: Iterable[ContextItem]) -> None:
        """Replace several stored items, all or none."""
        ...

    def delete(self, item_id: str) -> bool:
        """Remove an item; return whether it existed."""
        ...

    def delete_many(self, item_ids: Iterable[str]) -> int:
        """Remove items in one operation; return how many existed."""
        ...

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: str = "timestamp",
    ) -> list[ContextItem]:
        """Return matching items, ordered and limited."""
        ...

    def list_all(self) -> list[ContextItem]:
        """Return every item, newest first."""
        ...

    def count(self, filters: FilterInput = None) -> int:
        """Count matching items."""
        ...

    def clear(self, filters: FilterInput = None) -> int:
        """Remove matching items (all without filters); return how many."""
        ...

    def close(self) -> None:
        """Release connections and files; the backend is unusable afterwards."""
        ...


class BaseBackend(abc.ABC):
    """Checks arguments and derives conveniences; subclasses implement the storage primitives.

    Primitives receive validated input: a non-empty list of items with unique ids, a parsed
    :class:`~agent_engine.filters.Filter` and :class:`~agent_engine.filters.Order`.
    Each primitive must be atomic with respect to other threads (and processes, for shared
    stores).
    """

    capabilities: Capabilities = Capabilities()

    # ------------------------------------------------------------------ primitives

    @abc.abstractmethod
    def _insert(self, items: list[ContextItem]) -> None:
        """Insert new items; raise DuplicateItemError (storing none) if any id exists."""

    @abc.abstractmethod
    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        """Return the stored items among ``item_ids`` by id."""

    @abc.abstractmethod
    def _replace(self, items: list[ContextItem]) -> None:
        """Replace stored items; raise ItemNotFoundError (changing none) if any id is unknown."""

    @abc.abstractmethod
    def _remove(self, item_ids: list[str]) -> int:
        """Remove items by id; return how many existed."""

    @abc.abstractmethod
    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        """Return matching items in ``order``, at most ``limit`` (``None``: all)."""

    @abc.abstractmethod
    def _count(self, where: Filter) -> int:
        """Count matching items."""

    @abc.abstractmethod
    def _delete_where(self, where: Filter) -> int:
        """Remove matching items; return how many."""

    # ------------------------------------------------------------------ public API

    def add(self, item: ContextItem) -> None:
        """Store a new item (see :class:`MemoryBackend`)."""
        self.add_many([item])

    def add_many(self, items: Iterable[ContextItem]) -> None:
        """Store new items, all or none (see :class:`MemoryBackend`)."""
        batch = _check_items(items, adding=True)
        if batch:
            self._insert(batch)

    def get(self, item_id: str) -> ContextItem | None:
        """Return the item with this id, or ``None``."""
        _check_id(item_id)
        return self._fetch([item_id]).get(item_id)

    def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Return the stored items among ``item_ids``, in the order asked."""
        ids = _check_ids(item_ids)
        if not ids:
            return []
        found = self._fetch(list(dict.fromkeys(ids)))
        return [found[item_id] for item_id in dict.fromkeys(ids) if item_id in found]

    def update(self, item: ContextItem) -> None:
        """Replace the stored item that has ``item.id``."""
        self.update_many([item])

    def update_many(self, items: Iterable[ContextItem]) -> None:
        """Replace several stored items, all or none."""
        batch = _check_items(items, adding=False)
        if batch:
            self._replace(batch)

    def delete(self, item_id: str) -> bool:
        """Remove an item; return whether it existed."""
        _check_id(item_id)
        return self._remove([item_id]) == 1

    def delete_many(self, item_ids: Iterable[str]) -> int:
        """Remove items in one operation; return how many existed."""
        ids = list(dict.fromkeys(_check_ids(item_ids)))
        return self._remove(ids) if ids else 0

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: str = "timestamp",
    ) -> list[ContextItem]:
        """Return matching items, ordered and limited (see :class:`MemoryBackend`)."""
        where = parse_filter(filters)
        order = parse_order(order_by)
        _check_limit(limit)
        if limit == 0:
            return []
        return self._select(where, order, limit)

    def list_all(self) -> list[ContextItem]:
        """Return every item, newest first."""
        return self.query(None, limit=None)

    def count(self, filters: FilterInput = None) -> int:
        """Count matching items."""
        return self._count(parse_filter(filters))

    def clear(self, filters: FilterInput = None) -> int:
        """Remove matching items (all without filters); return how many."""
        return self._delete_where(parse_filter(filters))

    def close(self) -> None:  # noqa: B027 - a no-op default that backends with resources override.
        """Release resources; the default backend holds none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ----------------------------------------------------------------------------- checks


def _check_id(item_id: object) -> None:
    if not isinstance(item_id, str):
        raise ValidationError(
            f"item id must be a string, got {item_id!r}", field="id", value=item_id
        )


def _check_ids(item_ids: Iterable[str]) -> list[str]:
    if isinstance(item_ids, str | bytes):
        raise ValidationError(
            "item ids must be a list of strings, not one string", field="id", value=item_ids
        )
    ids = list(item_ids)
    for item_id in ids:
        _check_id(item_id)
    return ids


def _check_items(items: Iterable[ContextItem], *, adding: bool) -> list[ContextItem]:
    if isinstance(items, ContextItem):
        raise ValidationError(
            "expected an iterable of ContextItem; wrap a single item in a list", value=items
        )
    batch = list(items)
    seen: set[str] = set()
    for item in batch:
        if not isinstance(item, ContextItem):
            raise ValidationError(f"expected ContextItem, got {type(item).__name__}", value=item)
        if item.id in seen:
            if adding:
                raise DuplicateItemError(item.id)
            raise ValidationError(
                f"id {item.id!r} appears twice in one update batch", field="id", value=item.id
            )
        seen.add(item.id)
    return batch


def _check_limit(limit: object) -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError(
            f"limit must be a non-negative integer or None, got {limit!r}",
            field="limit",
            value=limit,
        )
