"""The storage contract under every tier, and the base class that fulfils most of it.

:class:`MemoryBackend` is what tiers and the assembler depend on. :class:`BaseBackend` derives
the public methods (argument checks, the conveniences ``add``/``get``/``update``/``delete``/
``list_all``) from a handful of storage primitives, so every backend validates the same way,
raises the same errors and differs only in how it stores. The conformance suite in
:mod:`agent_engine.testing.conformance` is the executable form of these docstrings.

Two rules hold whatever the backend. **One embedder per store:** every vector of a store has
the dimension of the embedder that made it, whose
:class:`~agent_engine.embeddings.EmbedderIdentity` the store reports (a persistent store
records it); a vector of another size, or a backend used with another embedder, is refused,
and :meth:`BaseBackend.reembed` moves a store to a new embedder. **Lexical indexes are never
stale:** a store that others may write keeps a change counter per (namespace, tier) scope,
bumped in the same transaction as every write, and a cached BM25 index is rebuilt when the
counter it was built at is no longer the store's; a backend that asks its database instead
(:meth:`BaseBackend._lexical_scope`) has no cache to go stale.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Final, Protocol, Self, TypeVar, cast, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine import _validate
from agent_engine.embeddings import Embedder, EmbedderIdentity, Matrix, normalize_rows
from agent_engine.errors import (
    BackendError,
    DimensionMismatchError,
    DuplicateItemError,
    EmbedderMismatchError,
    EmbeddingError,
    ItemNotFoundError,
    ReembedRequiredError,
    ValidationError,
)
from agent_engine.filters import (
    Condition,
    Filter,
    FilterInput,
    Op,
    Order,
    OrderInput,
    parse_filter,
    parse_order,
)
from agent_engine.memory.aliases import NO_ALIAS_STORE, AliasStore
from agent_engine.memory.audit import (
    ERASED_PREFIX,
    AuditStore,
    erasure_token,
    redact_value,
)
from agent_engine.memory.checkpoints import NO_CHECKPOINT_STORE, CheckpointStore
from agent_engine.memory.conflicts import ConflictStore
from agent_engine.memory.grants import NO_GRANT_STORE, GrantStore
from agent_engine.memory.lineage import NO_LINEAGE_STORE, LineageStore
from agent_engine.models import (
    ArchiveReason,
    ContextItem,
    Origin,
    Provenance,
    Tier,
    Vector,
    bump_count,
    with_archive_mark,
)
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.lexical import LexicalScope
from agent_engine.serde import from_dict, to_dict

__all__ = [
    "DEFAULT_ORDER",
    "REEMBED_BATCH",
    "REEMBED_COMMAND",
    "AsyncReads",
    "BaseBackend",
    "MemoryBackend",
    "Progress",
    "Query",
    "ScopeVersions",
    "SearchHit",
    "Written",
    "binding_identity",
    "check_id",
    "check_identity",
    "check_vectors",
    "distinct_ids",
    "item_batch",
    "mixed_sizes",
    "selection",
]

DEFAULT_LIMIT = 100
DEFAULT_ORDER: Final = Order.desc("timestamp")
"""What ``query`` sorts by when not told: newest first."""
SCAN_CHUNK = 4096
"""Rows scored per step by the default exact search: bounded memory whatever the store size."""
REEMBED_BATCH = 256
"""Items embedded and written per step of :meth:`BaseBackend.reembed`."""
REEMBED_COMMAND = "agent-engine db reembed"
"""The command errors name as the way to move a store to another embedder."""

Query = str | Vector | npt.ArrayLike
"""A search query: text (embedded by the backend's embedder) or a vector."""

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while a long operation (a re-embedding) advances."""

ScopeVersions = Mapping[tuple[str, Tier], int]
"""A store's change counter of each ``(namespace, tier)`` scope: bumped by every write to it."""


@attrs.frozen
class Written:
    """What a write primitive did: ``count`` items written or removed, and ``versions``.

    ``versions`` holds the change counter of every scope the write changed, as committed with
    it (see :meth:`BaseBackend._scope_versions`); ``None`` for a backend whose store no one
    else writes, so its own writes are all there is to follow.
    """

    count: int
    versions: ScopeVersions | None = None


@attrs.frozen
class SearchHit:
    """One search result: the item and its cosine similarity to the query."""

    item: ContextItem
    score: float


@runtime_checkable
class MemoryBackend(Protocol):
    """**Protocol:** a store of :class:`~agent_engine.models.ContextItem` values keyed by id.

    Semantics every implementation keeps (checked by the conformance suite):

    * ``add``/``add_many`` never overwrite: an id that is stored, or that appears twice in one
      batch, raises :class:`~agent_engine.errors.DuplicateItemError` and nothing of the batch
      is stored. ``update`` is the way to change an item.
    * ``update``/``update_many`` replace whole items by id; an unknown id raises
      :class:`~agent_engine.errors.ItemNotFoundError` and nothing of the batch changes.
    * ``write`` does both at once (how a tier store keeps an item's previous version while it
      replaces it): all of it is stored, or, whatever went wrong, none of it.
    * ``get`` returns ``None`` for an unknown id; ``delete`` returns whether it removed
      something (deleting a missing id is not an error).
    * ``delete`` removes an item from every read; ``erase`` also removes every trace of it
      that the backend keeps, in memory and in the files it writes (see ``erase``).
    * ``query`` takes a filter document (``docs/filters.md``), a ``limit`` (``None`` for no
      limit) and ``order_by``: ``"-field"`` (descending), ``"+field"`` (ascending), an
      :class:`~agent_engine.filters.Order`, or a bare ``"field"`` (descending, deprecated: it
      warns, and sorts ascending from 0.2.0), all read by
      :func:`~agent_engine.filters.parse_order`; newest first by default; nulls
      sort last and ties break by id ascending in either direction.
    * ``count``/``clear`` take the same filters; ``clear`` returns how many items it removed.
    * Malformed input raises a :class:`~agent_engine.errors.ValidationError` subclass and
      changes nothing.
    * Every stored vector was made by one embedder, which ``stored_identity`` names: a vector
      of another size raises :class:`~agent_engine.errors.DimensionMismatchError` naming both
      and nothing of the batch is stored; ``reembed`` moves the store to another embedder.
    """

    @property
    def audit(self) -> AuditStore:
        """The journal of mutations made through tier stores on this backend."""
        ...

    @property
    def conflicts(self) -> ConflictStore:
        """The conflicts recorded between this backend's items (removed with the items)."""
        ...

    @property
    def aliases(self) -> AliasStore:
        """Each namespace's aliases, which the user edits (kept with the items)."""
        ...

    @property
    def checkpoints(self) -> CheckpointStore:
        """The scopes' saved states, to roll back to (kept with the items)."""
        ...

    @property
    def grants(self) -> GrantStore:
        """The agents of each project and their grants on its shared pools (kept with the items)."""
        ...

    @property
    def lineage(self) -> LineageStore:
        """The forks of its scopes and what each no longer sees (kept with the items)."""
        ...

    @property
    def embedder(self) -> Embedder | None:
        """What embeds items stored without a vector, and text queries (``None``: vectors only)."""
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

    def write(self, *, add: Iterable[ContextItem] = (), update: Iterable[ContextItem] = ()) -> None:
        """Store new items and replace stored ones, all or none, as one write."""
        ...

    def delete(self, item_id: str) -> bool:
        """Remove an item; return whether it existed."""
        ...

    def delete_many(self, item_ids: Iterable[str]) -> int:
        """Remove items in one operation; return how many existed."""
        ...

    def erase(self, item_ids: Iterable[str], *, tokens: Mapping[str, str] | None = None) -> int:
        """Remove items and every trace of them; return how many existed.

        When ``erase`` returns, no file the backend writes holds the items' text, vectors or
        ids (``docs/backends.md`` says what each backend's server or file system may keep).
        Each id is replaced wherever the backend still names it (its audit journal, the
        provenance of items promoted from it) by its token: ``tokens[id]``, or a fresh
        :func:`~agent_engine.memory.audit.erasure_token`. The checkpoints that hold the items
        are deleted, and no fork keeps their ids hidden (an erased item no longer exists).
        Erasing an unknown id is not an error, and still redacts it.
        """
        ...

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: OrderInput = DEFAULT_ORDER,
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

    def search(self, query: Query, k: int = 10, filters: FilterInput = None) -> list[SearchHit]:
        """Return the ``k`` matching items most similar to ``query``, best first.

        Filters apply *before* the top-k cut: a search scoped to one namespace returns only
        that namespace's items, and ``k`` of them whenever ``k`` matching items have vectors.
        Scores are cosine similarities; ties break by id.
        """
        ...

    def search_many(
        self, queries: Sequence[Query], k: int = 10, filters: FilterInput = None
    ) -> list[list[SearchHit]]:
        """:meth:`search` for each of ``queries`` under one filter, in the order given.

        Each list is what ``search(query, k, filters)`` returns; a backend answers them
        together where it can (one pass over its vectors for the lot).
        """
        ...

    def lexical_search(
        self, query: str, k: int = 10, filters: FilterInput = None
    ) -> list[SearchHit]:
        """Return the ``k`` matching items with the best lexical score for ``query``, best first.

        The score is the one ``lexical_index`` ranks by: BM25, in the process or (PostgreSQL)
        in the database.
        """
        ...

    def lexical_index(self, filters: FilterInput = None) -> LexicalScope:
        """The up-to-date full-text index of the items in a namespace/tier scope.

        ``filters`` holds namespace and tier equalities only (anything else is a
        :class:`~agent_engine.errors.ValidationError`). The index answers for the scope as
        it stands when this is called; a caller that asks it several questions about one
        state (a context build) looks it up once.
        """
        ...

    def embed_query(self, text: str) -> Vector:
        """``text`` embedded by ``embedder`` as ``search`` embeds a text query: L2-normalized.

        Raises :class:`~agent_engine.errors.EmbeddingError` for a backend without embedder.
        Searching with the returned vector finds what searching with ``text`` finds.
        """
        ...

    def touch(self, item_ids: Iterable[str], at: datetime) -> int:
        """Record one access of each item at ``at`` in one write; return how many exist."""
        ...

    def set_archived(
        self, item_ids: Iterable[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        """Set each item's archive mark in one write; return how many exist.

        ``at`` and ``reason`` go together (both ``None`` lifts the mark). Nothing else about
        the items changes: not their text, vectors or counts, nor any full-text index (the
        archive is searched like the working set). Unknown ids are skipped.
        """
        ...

    def stored_identity(self) -> EmbedderIdentity | None:
        """The embedder that made the stored vectors (``None`` while no vector is stored)."""
        ...

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int = REEMBED_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Replace every item's vector with ``embedder``'s; return how many items it embedded."""
        ...

    def close(self) -> None:
        """Release connections and files; the backend is unusable afterwards."""
        ...


class AsyncReads(Protocol):
    """**Protocol:** a backend's read primitives on its driver's asyncio API.

    Made by :meth:`BaseBackend.async_reads` and bound to the event loop that made them. Each
    takes what the synchronous primitive of the same name takes, already checked, and
    answers what it answers: the same items, from the same store.
    """

    async def fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        """The stored items among ``item_ids`` (distinct), by id."""
        ...

    async def select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        """The items ``where`` matches, in ``order``, at most ``limit``."""
        ...

    async def count(self, where: Filter) -> int:
        """How many items ``where`` matches."""
        ...

    async def aclose(self) -> None:
        """Close the connections (the synchronous backend stays open)."""
        ...


_S = TypeVar("_S")


def _kept(backend: object, store: _S | None, what: str, attribute: str, in_memory: str) -> _S:
    """A store a backend keeps beside its items, or the error saying the backend set none."""
    if store is None:
        name = type(backend).__name__
        raise BackendError(
            f"{name} keeps no {what}: a backend must set {attribute} to the {what} kept with "
            f"its items ({in_memory} for items that live only in the process)",
            backend=name,
        )
    return store


class BaseBackend(abc.ABC):
    """Checks arguments and derives conveniences; subclasses implement the storage primitives.

    Primitives receive validated input: a non-empty list of items with unique ids, a parsed
    :class:`~agent_engine.filters.Filter` and :class:`~agent_engine.filters.Order`.
    Each primitive must be atomic with respect to other threads (and processes, for shared
    stores). Write primitives report what they did as :class:`Written`; a store that other
    processes may write also keeps change counters (:meth:`_scope_versions`) and returns the
    ones each write committed. The constructor sets ``_audit_store``, the journal kept with
    the items (see :attr:`audit`), ``_conflict_store``, the conflicts recorded between
    them (see :attr:`conflicts`), and may set ``_alias_store``, ``_checkpoint_store`` and
    ``_grant_store`` and ``_lineage_store``, the aliases, checkpoints, pool grants and forks
    (see :attr:`aliases`, :attr:`checkpoints`, :attr:`grants` and :attr:`lineage`; without
    them a backend has none and keeps none).
    :meth:`reembed` needs three more steps (``_reembed_begin``, ``_reembed_write``,
    ``_reembed_finish``), which a backend implements to support it.
    """

    embedder: Embedder | None = None
    """Embeds items that arrive without a vector, and text queries. ``None``: vectors only."""
    dim: int | None = None
    """The vector dimension when there is no embedder (``None``: not fixed)."""
    _audit_store: AuditStore | None = None
    _conflict_store: ConflictStore | None = None
    _alias_store: AliasStore | None = None
    _checkpoint_store: CheckpointStore | None = None
    _grant_store: GrantStore | None = None
    _lineage_store: LineageStore | None = None

    @property
    def audit(self) -> AuditStore:
        """The journal kept with this backend, which its constructor sets as ``_audit_store``.

        Where the journal lives is each backend's decision, never a silent default: a journal
        kept in memory beside items that persist would lose the record of their changes with
        the process. A backend whose items live only in the process sets an
        :class:`~agent_engine.memory.audit.InMemoryAuditStore`; a persistent one, a journal it
        persists with its items. A backend that set none raises
        :class:`~agent_engine.errors.BackendError`.
        """
        return _kept(self, self._audit_store, "journal", "_audit_store", "InMemoryAuditStore")

    @property
    def conflicts(self) -> ConflictStore:
        """The conflicts recorded between this backend's items (``_conflict_store``).

        Kept where the items are, as the journal is: a backend whose items live only in the
        process sets an :class:`~agent_engine.memory.conflicts.InMemoryConflictStore`; a
        persistent one, a store it persists with its items. Either way, deleting, clearing or
        erasing an item removes the conflicts naming it in the same write. A backend that set
        none raises :class:`~agent_engine.errors.BackendError`.
        """
        return _kept(
            self, self._conflict_store, "conflict store", "_conflict_store", "InMemoryConflictStore"
        )

    @property
    def aliases(self) -> AliasStore:
        """Each namespace's aliases (``_alias_store``), kept where the items are.

        A backend whose items live only in the process sets an
        :class:`~agent_engine.memory.aliases.InMemoryAliasStore`; a persistent one, a store
        it persists with its items. Unlike the journal, aliases are optional: a backend that
        set none has :data:`~agent_engine.memory.aliases.NO_ALIAS_STORE`, which reads as
        empty and refuses to keep any (so nothing a user adds is silently lost).
        """
        return self._alias_store if self._alias_store is not None else NO_ALIAS_STORE

    @property
    def checkpoints(self) -> CheckpointStore:
        """The scopes' checkpoints (``_checkpoint_store``), kept where the items are.

        Set as the alias store is, and as optional: a backend that set none has
        :data:`~agent_engine.memory.checkpoints.NO_CHECKPOINT_STORE` (no checkpoints, and
        taking one raises :class:`~agent_engine.errors.BackendError`).
        """
        return self._checkpoint_store if self._checkpoint_store is not None else NO_CHECKPOINT_STORE

    @property
    def grants(self) -> GrantStore:
        """Each project's agents and their grants on its pools (``_grant_store``).

        Set as the alias store is, and as optional: a backend that set none has
        :data:`~agent_engine.memory.grants.NO_GRANT_STORE` (no agents, no grants, and
        registering or granting raises :class:`~agent_engine.errors.BackendError`).
        """
        return self._grant_store if self._grant_store is not None else NO_GRANT_STORE

    @property
    def lineage(self) -> LineageStore:
        """The forks of the scopes (``_lineage_store``): see :mod:`agent_engine.memory.lineage`.

        Set as the alias store is, and as optional: a backend that set none has
        :data:`~agent_engine.memory.lineage.NO_LINEAGE_STORE` (no forks, and forking raises
        :class:`~agent_engine.errors.BackendError`).
        """
        return self._lineage_store if self._lineage_store is not None else NO_LINEAGE_STORE

    @property
    def remote(self) -> bool:
        """Whether calls wait on a server (PostgreSQL, Redis) rather than work in the process.

        What sizes an async twin's thread pool (:mod:`agent_engine.aio`): threads overlap the
        waits on a server, while work in the process holds the GIL, so a second thread only
        takes turns with the first and stalls the event loop longer (``docs/async.md``).
        """
        return False

    # ------------------------------------------------------------------ primitives

    @abc.abstractmethod
    def _insert(self, items: list[ContextItem]) -> Written:
        """Insert new items; raise DuplicateItemError (storing none) if any id exists."""

    @abc.abstractmethod
    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        """Return the stored items among ``item_ids`` by id."""

    @abc.abstractmethod
    def _replace(self, items: list[ContextItem]) -> Written:
        """Replace stored items; raise ItemNotFoundError (changing none) if any id is unknown."""

    def _insert_and_replace(
        self, inserts: list[ContextItem], replaces: list[ContextItem]
    ) -> Written:
        """Insert new items and replace stored ones, all or none.

        This default inserts, then replaces, and removes what it inserted if the replacement
        fails; a backend with transactions overrides it to do both in one.
        """
        first = self._insert(inserts)
        try:
            second = self._replace(replaces)
        except BaseException:
            self._remove([item.id for item in inserts])
            raise
        versions = (
            None
            if first.versions is None or second.versions is None
            else {**first.versions, **second.versions}
        )
        return Written(first.count + second.count, versions)

    @abc.abstractmethod
    def _remove(self, item_ids: list[str]) -> Written:
        """Remove items by id; report how many existed."""

    @abc.abstractmethod
    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> Written:
        """Remove items and every trace of them this backend keeps; return how many existed.

        Besides removing the items, replace each id by ``tokens[id]`` in the journal and in the
        provenance of other items (:meth:`_redact_provenance` helps). What the files still
        hold of them is pushed out afterwards by :meth:`_flush_erased`.
        """

    @abc.abstractmethod
    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        """Return matching items in ``order``, at most ``limit`` (``None``: all)."""

    @abc.abstractmethod
    def _count(self, where: Filter) -> int:
        """Count matching items."""

    @abc.abstractmethod
    def _delete_where(self, where: Filter) -> Written:
        """Remove matching items; report how many."""

    @abc.abstractmethod
    def _stored_identity(self) -> EmbedderIdentity | None:
        """The identity of the stored vectors; ``None`` when no vector is stored."""

    def _scope_versions(self, key: _ScopeKey) -> ScopeVersions | None:
        """The change counters of the scopes inside ``key`` (``None``: only this object writes).

        A store that other processes (or other backend objects) may write keeps one counter
        per ``(namespace, tier)``, bumped in the same transaction as every write that adds,
        changes or removes an item of that scope, and never reset. Reading it must be cheap:
        it is read on every lexical search and every context build.
        """
        del key
        return None

    def _scope_changes(self, key: _ScopeKey, held: ScopeVersions) -> list[str] | None:
        """The ids of the items written to ``key`` since the counters ``held`` (``None``: unknown).

        A store that logs which items each write changed, beside the counters it moved, lets a
        BM25 index of the scope catch up by re-reading those items instead of rebuilding from
        a full scan (seconds at 100k items) whenever another writer moved a counter. ``None``
        when the store keeps no such log, or cannot say (an erase passed): the index is rebuilt.
        """
        del key, held
        return None

    # ------------------------------------------------------------------ public API

    def add(self, item: ContextItem) -> None:
        """Store a new item (see :class:`MemoryBackend`)."""
        self.add_many([item])

    def add_many(self, items: Iterable[ContextItem]) -> None:
        """Store new items, all or none, embedding those without a vector in one batch."""
        batch = _check_items(items, adding=True)
        if batch:
            missing = [i for i, item in enumerate(batch) if item.embedding is None]
            stored = self._embed(batch, missing)
            written = self._insert(stored)
            self._lexical_changed(stored, written)

    def get(self, item_id: str) -> ContextItem | None:
        """Return the item with this id, or ``None``."""
        check_id(item_id)
        return self._fetch([item_id]).get(item_id)

    def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Return the stored items among ``item_ids``, in the order asked."""
        ids = distinct_ids(item_ids)
        if not ids:
            return []
        found = self._fetch(ids)
        return [found[item_id] for item_id in ids if item_id in found]

    def update(self, item: ContextItem) -> None:
        """Replace the stored item that has ``item.id``."""
        self.update_many([item])

    def update_many(self, items: Iterable[ContextItem]) -> None:
        """Replace several stored items, all or none.

        An item whose text changed but that still carries the stored item's vector (what
        ``attrs.evolve(item, text=...)`` gives) is re-embedded, so search never ranks new
        text by an old vector.
        """
        batch = _check_items(items, adding=False)
        if not batch:
            return
        replaced = self._prepare_updates(batch)
        written = self._replace(replaced)
        self._lexical_changed(replaced, written)

    def write(self, *, add: Iterable[ContextItem] = (), update: Iterable[ContextItem] = ()) -> None:
        """Store new items and replace stored ones, all or none (see :class:`MemoryBackend`)."""
        added = _check_items(add, adding=True)
        updated = _check_items(update, adding=False)
        both = {item.id for item in added} & {item.id for item in updated}
        if both:
            item_id = min(both)
            raise ValidationError(
                f"id {item_id!r} is both added and updated in one write", field="id", value=item_id
            )
        if not added or not updated:
            self.add_many(added)
            self.update_many(updated)
            return
        replaced = self._prepare_updates(updated)
        missing = [i for i, item in enumerate(added) if item.embedding is None]
        stored = self._embed(added, missing)
        written = self._insert_and_replace(stored, replaced)
        self._lexical_changed([*stored, *replaced], written)

    def _prepare_updates(self, batch: list[ContextItem]) -> list[ContextItem]:
        """``batch`` as it will be stored: every id must exist; stale vectors are remade.

        An item whose text changed but that still carries the stored item's vector (what
        ``attrs.evolve(item, text=...)`` gives) is re-embedded.
        """
        stored = self._fetch([item.id for item in batch])
        for item in batch:
            if item.id not in stored:
                raise ItemNotFoundError(item.id)
        stale = [i for i, item in enumerate(batch) if _needs_embedding(item, stored[item.id])]
        return self._embed(batch, stale)

    def delete(self, item_id: str) -> bool:
        """Remove an item; return whether it existed."""
        check_id(item_id)
        return self.delete_many([item_id]) == 1

    def delete_many(self, item_ids: Iterable[str]) -> int:
        """Remove items in one operation; return how many existed."""
        ids = list(dict.fromkeys(_check_ids(item_ids)))
        if not ids:
            return 0
        written = self._remove(ids)
        self._lexical_removed(ids, written)
        return written.count

    def erase(self, item_ids: Iterable[str], *, tokens: Mapping[str, str] | None = None) -> int:
        """Remove items and every trace of them (see :class:`MemoryBackend`)."""
        ids = list(dict.fromkeys(_check_ids(item_ids)))
        if tokens is not None and not isinstance(tokens, Mapping):
            raise ValidationError(
                f"tokens must be a mapping of id to token, got {type(tokens).__name__}",
                field="tokens",
                value=tokens,
            )
        given = dict(tokens or {})
        for item_id, token in given.items():
            if not isinstance(token, str) or not token.startswith(ERASED_PREFIX):
                raise ValidationError(
                    f"the token for {item_id!r} must come from "
                    "agent_engine.memory.audit.erasure_token()",
                    field="tokens",
                    value=token,
                )
        if not ids:
            return 0
        written = self._erase(ids, {i: given.get(i) or erasure_token(i) for i in ids})
        self._lexical_removed(ids, written)
        # A saved state naming an erased memory would keep its text: it goes too. A fork's
        # hidden ids would keep the id, and no fork needs hidden what no longer exists.
        self.checkpoints.drop_holding(ids)
        self.lineage.unhide(ids)
        self._flush_erased()
        return written.count

    def _flush_erased(self) -> None:  # noqa: B027 - a no-op default that file-backed backends override.
        """Push what a committed erase removed out of the files the backend writes.

        Runs after the erase committed and this backend forgot the items, so a failure here
        (a reader holding a log file, say) leaves nothing of them readable, only bytes the
        next flush removes.
        """

    @staticmethod
    def _redact_provenance(item: ContextItem, tokens: Mapping[str, str]) -> ContextItem | None:
        """``item`` with erased ids replaced where it names them, or ``None`` if it names none.

        An item names other items in its provenance (what it was promoted from) and in
        ``merged_from`` (the duplicates merged into it).
        """
        if item.provenance is None and not item.merged_from:
            return None
        before = {
            "provenance": None if item.provenance is None else to_dict(item.provenance),
            "merged_from": [to_dict(origin) for origin in item.merged_from],
        }
        after = redact_value(before, tokens)
        if after == before:
            return None
        provenance = after["provenance"]
        return attrs.evolve(
            item,
            provenance=None if provenance is None else from_dict(Provenance, provenance),
            merged_from=tuple(from_dict(Origin, origin) for origin in after["merged_from"]),
        )

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: OrderInput = DEFAULT_ORDER,
    ) -> list[ContextItem]:
        """Return matching items, ordered and limited (see :class:`MemoryBackend`)."""
        selected = selection(filters, limit, order_by)
        return [] if selected is None else self._select(*selected)

    def list_all(self) -> list[ContextItem]:
        """Return every item, newest first."""
        return self.query(None, limit=None)

    def count(self, filters: FilterInput = None) -> int:
        """Count matching items."""
        return self._count(parse_filter(filters))

    def clear(self, filters: FilterInput = None) -> int:
        """Remove matching items (all without filters); return how many."""
        where = parse_filter(filters)
        written = self._delete_where(where)
        self._lexical_cleared(where, written)
        return written.count

    def touch(self, item_ids: Iterable[str], at: datetime) -> int:
        """Count one access of each item at ``at`` (one write); return how many exist.

        This is the assembler's access tracking: one call per backend per context build,
        never one write per item. Backends make it an atomic increment where they can, so
        concurrent readers do not lose each other's counts.
        """
        ids = list(dict.fromkeys(_check_ids(item_ids)))
        when = _validate.aware("at", at)
        return self._touch(ids, when) if ids else 0

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        """Default access tracking: read, bump and replace (backends override atomically)."""
        found = self._fetch(item_ids)
        bumped = [
            attrs.evolve(item, access_count=bump_count(item.access_count), last_accessed_at=at)
            for item in found.values()
        ]
        if bumped:
            self._replace(bumped)
        return len(bumped)

    def set_archived(
        self, item_ids: Iterable[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        """Set (or, with ``None`` and ``None``, lift) the items' archive mark in one write.

        The transition a tier store's archive makes for many items at once (eviction,
        compaction): one statement, not a rewrite of every row. Returns how many exist.
        """
        ids = list(dict.fromkeys(_check_ids(item_ids)))
        when = None if at is None else _validate.aware("at", at)
        why = _archive_reason(reason)
        if (when is None) != (why is None):
            raise ValidationError(
                "at and reason are given together (None and None lift the mark)",
                field="reason" if when is not None else "at",
                value=reason if when is not None else at,
            )
        return self._set_archived(ids, when, why) if ids else 0

    def _set_archived(
        self, item_ids: list[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        """Default archive marking: read, mark and replace (backends override in one statement)."""
        marked = with_archive_mark(self._fetch(item_ids).values(), at, reason)
        if marked:
            self._replace(marked)
        return len(marked)

    # ------------------------------------------------------------------ lexical search

    def lexical_search(
        self, query: str, k: int = 10, filters: FilterInput = None
    ) -> list[SearchHit]:
        """The ``k`` matching items with the best lexical score for ``query``, best first.

        The lexical index (:meth:`_lexical_scope`) covers the namespace/tier scope named in
        ``filters`` (tier stores always name theirs); any further conditions are applied to
        the ranked items, widening the window until ``k`` match, so the result is exact.
        """
        _validate.text("query", query)
        _check_k(k)
        where = parse_filter(filters)
        key, rest = _split_scope(where)
        matches = self._lexical_scope(key).hits(query)
        hits: list[SearchHit] = []
        window = 4 * k
        start = 0
        while len(hits) < k:
            chunk = matches.best(start + window)[start:]
            if not chunk:
                break
            scores = matches.of(chunk)
            found = self._fetch(chunk)
            for item_id in chunk:
                item = found.get(item_id)
                if item is not None and rest.matches(item):
                    hits.append(SearchHit(item, scores[item_id]))
            start += window
            window *= 4
        return hits[:k]

    def lexical_index(self, filters: FilterInput = None) -> LexicalScope:
        """The lexical index of the scope (namespace and tier equalities) of ``filters``.

        What :meth:`_lexical_scope` hands out for the scope; only namespace and tier
        conditions may appear.
        """
        key, rest = _split_scope(parse_filter(filters))
        if rest.conditions:
            raise ValidationError(
                "lexical_index takes namespace and tier equalities only",
                field="filters",
                value=sorted(rest.fields()),
            )
        return self._lexical_scope(key)

    def _lexical_scope(self, key: _ScopeKey) -> LexicalScope:
        """The full-text index of a scope: by default, an in-process BM25 index.

        Built from the store on first use, then kept current by this backend's own writes;
        a store that others may write is asked for its scope's change counter on every call,
        and the index is rebuilt when another writer moved it (by any write: an add, an edit,
        a delete, a clear). A backend whose database searches text itself answers from it
        instead (the SQL backend on PostgreSQL).
        """
        return self._scope_index(key)

    def _lexical(self) -> _LexicalCache:
        cache: _LexicalCache | None = self.__dict__.get("_lexical_cache")
        if cache is None:
            cache = self.__dict__.setdefault("_lexical_cache", _LexicalCache())
        return cache

    def _scope_index(self, key: _ScopeKey) -> LexicalIndex:
        cache = self._lexical()
        with cache.lock:
            entry = cache.indexes.get(key)
            # The counters are read before the items: a write landing in between makes the
            # index newer than its counters (applied again later, to the same effect), never
            # older.
            current = self._scope_versions(key)
            if entry is not None and current is not None and entry.versions != current:
                if self._catch_up(key, entry):
                    entry.versions = dict(current)
                else:
                    entry = None
            if entry is None and current is not None:
                entry = self._restored(key, current)
            if entry is None:
                index = LexicalIndex()
                index.upsert(self._select(scope_filter(key), Order("id", descending=False), None))
                entry = _ScopeIndex(index, None if current is None else dict(current))
                if current is not None and self._save_scope_index(key, index, current):
                    entry.saved = dict(current)
            cache.indexes[key] = entry
            return entry.index

    def _restored(self, key: _ScopeKey, current: ScopeVersions) -> _ScopeIndex | None:
        """The scope's saved index caught up to ``current``; ``None``: none, or not usable.

        A saved index stamped ahead of the store's counters (a database restored from an
        older backup) is not used.
        """
        loaded = self._load_scope_index(key)
        if loaded is None:
            return None
        index, held = loaded
        if any(version > current.get(scope, 0) for scope, version in held.items()):
            return None
        entry = _ScopeIndex(index, dict(held), saved=dict(held))
        if entry.versions != current:
            if not self._catch_up(key, entry):
                return None
            entry.versions = dict(current)
        return entry

    def _load_scope_index(self, key: _ScopeKey) -> tuple[LexicalIndex, ScopeVersions] | None:
        """A saved BM25 index of ``key`` and the counters it reflects (``None``: none saved).

        A store that several processes open saves the index one of them built, so the next
        restores it and catches up (:meth:`_scope_changes`) instead of analysing every item.
        """
        del key
        return None

    def _save_scope_index(
        self, key: _ScopeKey, index: LexicalIndex, versions: ScopeVersions
    ) -> bool:
        """Save ``index`` as the scope's at ``versions``; whether it was saved."""
        del key, index, versions
        return False

    def _save_scope_indexes(self) -> None:
        """Save every held scope index that moved since it was saved (a store's ``close``)."""
        cache = self._lexical()
        with cache.lock:
            for key, entry in cache.indexes.items():
                versions = entry.versions
                if versions is None or versions == entry.saved:
                    continue
                if self._save_scope_index(key, entry.index, versions):
                    entry.saved = dict(versions)

    def _catch_up(self, key: _ScopeKey, entry: _ScopeIndex) -> bool:
        """Apply to ``entry`` what other writers changed in its scope; ``False``: cannot say.

        The counters were read before the log, and the items are read after it: an entry
        logged since is applied early (and again next time, to the same effect), never missed.
        """
        changed = self._scope_changes(key, entry.versions or {})
        if changed is None:
            return False
        found = self._fetch(changed) if changed else {}
        inside = [item for item in found.values() if in_scope(key, item)]
        kept = {item.id for item in inside}
        entry.index.remove(item_id for item_id in changed if item_id not in kept)
        entry.index.upsert(inside)
        return True

    def _lexical_changed(self, items: list[ContextItem], written: Written) -> None:
        cache = self._lexical()
        with cache.lock:
            for key, entry in cache.indexes.items():
                inside = [item for item in items if in_scope(key, item)]
                entry.index.remove(item.id for item in items if not in_scope(key, item))
                entry.index.upsert(inside)
                entry.follow(key, written)

    def _lexical_removed(self, item_ids: list[str], written: Written) -> None:
        cache = self._lexical()
        with cache.lock:
            for key, entry in cache.indexes.items():
                entry.index.remove(item_ids)
                entry.follow(key, written)

    def _lexical_cleared(self, where: Filter, written: Written) -> None:
        cleared, rest = _split_scope(where)
        cache = self._lexical()
        with cache.lock:
            for key in list(cache.indexes):
                if not _scopes_overlap(key, cleared):
                    continue
                if not rest.conditions and _covers(cleared, key):
                    entry = cache.indexes[key]
                    entry.index = LexicalIndex()
                    entry.follow(key, written)
                else:
                    del cache.indexes[key]

    def search(self, query: Query, k: int = 10, filters: FilterInput = None) -> list[SearchHit]:
        """Return the ``k`` matching items most like ``query`` (see :class:`MemoryBackend`).

        A query vector of another size than the stored vectors raises
        :class:`~agent_engine.errors.DimensionMismatchError`, as does a store whose vectors
        another embedder made (a re-embedding by another process, say) since it was opened.
        """
        where = parse_filter(filters)
        _check_k(k)
        expected = self._search_identity()
        return self._search(self._query_vector(query, expected), k, where)

    def search_many(
        self, queries: Sequence[Query], k: int = 10, filters: FilterInput = None
    ) -> list[list[SearchHit]]:
        """:meth:`search` for each query, answered together (see :class:`MemoryBackend`)."""
        where = parse_filter(filters)
        _check_k(k)
        asked = _validate.sequence("queries", queries)
        if not asked:
            return []
        expected = self._search_identity()
        vectors = [self._query_vector(query, expected) for query in asked]
        if len({vector.shape[0] for vector in vectors}) > 1:
            raise mixed_sizes(vector.shape[0] for vector in vectors)
        return self._search_many(np.vstack(vectors), k, where)

    # ------------------------------------------------------------------ embedder identity

    def _identity(self) -> EmbedderIdentity | None:
        """What this backend embeds with: its embedder, else (unnamed) ``dim``, else nothing."""
        if self.embedder is not None:
            return EmbedderIdentity.of(self.embedder)
        if self.dim is not None:
            return EmbedderIdentity(None, self.dim)
        return None

    def stored_identity(self) -> EmbedderIdentity | None:
        """The embedder that made the stored vectors; ``None`` while no vector is stored.

        A persistent store records it with its first vector (unnamed when the vectors came
        from a caller rather than an embedder); a store that holds no vector accepts any.
        """
        return self._stored_identity()

    def _search_identity(self) -> EmbedderIdentity | None:
        """The identity query vectors must have; refuses a store made by another embedder."""
        stored = self._stored_identity()
        own = self._identity()
        check_identity(stored, own)
        return stored if stored is not None else own

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int = REEMBED_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Re-embed every item with ``embedder``, record it as the store's embedder, use it.

        Items are read in id order and written back ``batch_size`` at a time, each batch in
        one write; ``progress(done, total)`` is called before the first and after each. While
        it runs, vector search and writes that carry vectors are refused
        (:class:`~agent_engine.errors.ReembedRequiredError`); everything else keeps working.
        A persistent store marks the re-embedding in the database before the first batch and
        records the new identity only with the last: after a crash half-way the mark stays,
        the store keeps refusing vector search, and the next ``reembed`` with the same
        embedder resumes after the last batch written (with another, it starts over).
        Returns how many items this call embedded.
        """
        target = _reembed_target(embedder)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(
                f"batch_size must be a positive integer, got {batch_size!r}",
                field="batch_size",
                value=batch_size,
            )
        after = self._reembed_begin(target)
        total = self._count(Filter())
        done = 0 if after is None else self._count(_ids_from(after, Op.LTE))
        if progress is not None:
            progress(done, total)
        embedded = 0
        while True:
            rest = Filter() if after is None else _ids_from(after, Op.GT)
            batch = self._select(rest, Order("id", descending=False), batch_size)
            if not batch:
                break
            vectors = embedder.embed([embedding_text(item) for item in batch])
            if vectors.shape != (len(batch), target.dim):
                raise EmbeddingError(
                    f"{target.name} returned vectors of shape {vectors.shape} for "
                    f"{len(batch)} texts, but its dim is {target.dim}"
                )
            self._reembed_write(
                [
                    attrs.evolve(item, embedding=vector)
                    for item, vector in zip(batch, vectors, strict=True)
                ],
                target,
            )
            after = batch[-1].id
            embedded += len(batch)
            done += len(batch)
            if progress is not None:
                progress(done, max(total, done))
        self._reembed_finish(target)
        self.embedder = embedder
        self.dim = target.dim
        return embedded

    def _reembed_begin(self, target: EmbedderIdentity) -> str | None:
        """Mark the store as moving to ``target``; return the id to resume after, if any."""
        raise NotImplementedError(f"{type(self).__name__} cannot re-embed ({target.name})")

    def _reembed_write(self, items: list[ContextItem], target: EmbedderIdentity) -> None:
        """Store these items' new vectors (and the progress made) in one write."""
        raise NotImplementedError(f"{type(self).__name__} cannot re-embed ({len(items)} items)")

    def _reembed_finish(self, target: EmbedderIdentity) -> None:
        """Record ``target`` as the store's identity and lift the mark, in one write."""
        raise NotImplementedError(f"{type(self).__name__} cannot re-embed ({target.name})")

    # ------------------------------------------------------------------ embedding & search

    def _embed(self, items: list[ContextItem], indexes: list[int]) -> list[ContextItem]:
        """Embed ``items[i]`` for ``i`` in ``indexes`` in one call; check every vector's size.

        This is the early check, against the backend's own embedder; each store checks again
        where it writes, against the identity it holds.
        """
        todo = set(indexes) if self.embedder is not None else set()
        check_vectors([item for i, item in enumerate(items) if i not in todo], self._identity())
        if not todo or self.embedder is None:
            return items
        order = sorted(todo)
        vectors = self.embedder.embed([embedding_text(items[i]) for i in order])
        result = list(items)
        for index, vector in zip(order, vectors, strict=True):
            result[index] = attrs.evolve(items[index], embedding=vector)
        return result

    def embed_query(self, text: str) -> Vector:
        """``text`` as a query vector of this backend's embedder (see :class:`MemoryBackend`).

        The one place a text query is embedded: :meth:`search` calls it too. Normalizing
        makes scores cosines whatever the embedder returns (a conforming one normalizes
        already).
        """
        _validate.text("query", text)
        if self.embedder is None:
            raise EmbeddingError(
                f"{type(self).__name__} has no embedder to embed a text query; pass a "
                "vector, or construct the backend with embedder=..."
            )
        vector: Vector = normalize_rows(self.embedder.embed([text]))[0]
        return vector

    def _query_vector(self, query: Query, expected: EmbedderIdentity | None) -> Vector:
        if isinstance(query, str):
            return self.embed_query(query)
        vector = _validate.vector("query", query)
        if expected is not None and vector.shape[0] != expected.dim:
            raise DimensionMismatchError(
                f"the query vector has {vector.shape[0]} dimensions; this store's vectors "
                f"are made by {expected.describe()}",
                field="query",
                value=vector.shape[0],
            )
        normalized: Vector = normalize_rows(vector)[0]
        return normalized

    def _search(self, query: Vector, k: int, where: Filter) -> list[SearchHit]:
        """Exact search by scanning matching vectors in bounded chunks (backends may override)."""
        return self._scan_search(query.reshape(1, -1), k, where)[0]

    def _search_many(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """One :meth:`_search` per row of ``queries`` (backends answer them together)."""
        return [self._search(query, k, where) for query in queries]

    def _scan_search(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """Exact search for every row of ``queries`` in one scan of the matching vectors.

        Each chunk of stored vectors is read once and scored against all the queries with
        one matrix product: a batch costs about what one query does.
        """
        best: list[tuple[list[str], npt.NDArray[np.float32]]] = [
            ([], np.empty(0, dtype=np.float32)) for _ in queries
        ]
        for ids, matrix in self._scan_vectors(where, SCAN_CHUNK):
            if matrix.shape[1] != queries.shape[1]:
                raise mixed_sizes((matrix.shape[1], queries.shape[1]))
            scores = queries @ normalize_rows(matrix).T
            best = [
                _merge_top(kept_ids, kept, ids, row, k)
                for (kept_ids, kept), row in zip(best, scores, strict=True)
            ]
        wanted = list(dict.fromkeys(i for ids, _ in best for i in ids))
        found = self._fetch(wanted) if wanted else {}
        return [self._hits(ids, scores, found)[:k] for ids, scores in best]

    def _scan_vectors(self, where: Filter, chunk: int) -> Iterator[tuple[list[str], Matrix]]:
        """Yield ``(ids, vectors)`` of matching items with vectors, ``chunk`` rows at a time."""
        ids: list[str] = []
        rows: list[Vector] = []
        for item in self._select(where, Order("id", descending=False), None):
            if item.embedding is None:
                continue
            ids.append(item.id)
            rows.append(item.embedding)
            if len(ids) == chunk:
                yield ids, np.vstack(rows)
                ids, rows = [], []
        if ids:
            yield ids, np.vstack(rows)

    def _hits(
        self,
        ids: list[str],
        scores: npt.NDArray[np.float32],
        found: Mapping[str, ContextItem] | None = None,
    ) -> list[SearchHit]:
        """The items behind ranked ids (fetched unless ``found``), by score, then id."""
        if found is None:
            found = self._fetch(ids) if ids else {}
        hits = [
            SearchHit(found[item_id], float(score))
            for item_id, score in zip(ids, scores, strict=True)
            if item_id in found
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.item.id))
        return hits

    def async_reads(self) -> AsyncReads | None:
        """The read primitives on the driver's own asyncio API, for the running event loop.

        The async twin (:class:`~agent_engine.aio.AsyncMemoryBackend`) derives ``get``,
        ``get_many``, ``query``, ``list_all`` and ``count`` from them, as this class derives
        the synchronous ones, so a coroutine's read waits on the server without a thread.
        ``None`` (the default) where the driver has no asyncio API, or the store answers
        from memory: the twin then runs the synchronous read on a worker thread.
        """
        return None

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


# ----------------------------------------------------------------------------- helpers

_ScopeKey = tuple[str | None, Tier | None]


@attrs.define
class _ScopeIndex:
    """A scope's BM25 index and the change counters of the store it reflects.

    ``versions`` is ``None`` for a backend without counters (its own writes are all there
    is); ``saved`` the counters of the index last saved (:meth:`BaseBackend._save_scope_index`).
    """

    index: LexicalIndex
    versions: dict[tuple[str, Tier], int] | None
    saved: dict[tuple[str, Tier], int] | None = None

    def follow(self, key: _ScopeKey, written: Written) -> None:
        """Take on the counters of this object's own write, already applied to the index.

        A counter moves only from the value just before the write: if it stood elsewhere,
        another writer changed the scope too, the counters stay apart from the store's, and
        the next use catches up with the other writer's changes (or rebuilds the index).
        """
        if self.versions is None or written.versions is None:
            return
        for scope, version in written.versions.items():
            if _in_key(key, scope) and self.versions.get(scope, 0) == version - 1:
                self.versions[scope] = version


@attrs.define
class _LexicalCache:
    indexes: dict[_ScopeKey, _ScopeIndex] = attrs.Factory(dict)
    lock: threading.RLock = attrs.Factory(threading.RLock)


def _in_key(key: _ScopeKey, scope: tuple[str, Tier]) -> bool:
    namespace, tier = key
    return (namespace is None or namespace == scope[0]) and (tier is None or tier is scope[1])


def binding_identity(
    recorded: EmbedderIdentity | None,
    holds_vectors: Callable[[], bool],
    fits: Callable[[EmbedderIdentity], bool] | None = None,
) -> EmbedderIdentity | None:
    """A store's recorded identity while it binds: only while the store holds vectors.

    A store whose vectors were all deleted keeps its record but takes any embedder, and its
    next vector records the new one. ``holds_vectors`` asks the store (a read), so it is
    asked only when the answer matters: not when ``fits`` finds the recorded identity
    agreeing with what the caller brings, as it is kept either way then.
    """
    if recorded is None:
        return None
    if (fits is not None and fits(recorded)) or holds_vectors():
        return recorded
    return None


def check_identity(stored: EmbedderIdentity | None, given: EmbedderIdentity | None) -> None:
    """Refuse to use a store's vectors with another embedder's.

    Raises :class:`~agent_engine.errors.DimensionMismatchError` when the dimensions differ
    and :class:`~agent_engine.errors.EmbedderMismatchError` when only the names do; either
    names both identities and the way out.
    """
    if stored is None or given is None or stored.matches(given):
        return
    message = (
        f"this store's vectors were made by {stored.describe()}, but it is used with "
        f"{given.describe()}: re-embed the store with the new embedder (`{REEMBED_COMMAND}`, "
        "or backend.reembed(embedder)), or use it with the embedder that made it"
    )
    if stored.dim != given.dim:
        raise DimensionMismatchError(message, field="embedder", value=given)
    raise EmbedderMismatchError(message, stored=stored, given=given)


def check_vectors(items: Iterable[ContextItem], expected: EmbedderIdentity | None) -> None:
    """Refuse any vector whose size is not ``expected.dim`` (without one: the first vector's).

    The one size check of every backend: called before embedding, against the backend's own
    embedder, and again where each store writes, against the identity it holds.
    """
    for item in items:
        if item.embedding is None:
            continue
        size = item.embedding.shape[0]
        if expected is None:
            expected = EmbedderIdentity(None, size)
        elif size != expected.dim:
            raise DimensionMismatchError(
                f"item {item.id!r} has a {size}-dimensional vector; this store's vectors "
                f"are made by {expected.describe()}",
                field="embedding",
                value=item.id,
            )


def mixed_sizes(sizes: Iterable[int]) -> ReembedRequiredError:
    """The error of a store found holding vectors of several sizes (mid-way through a move)."""
    shown = ", ".join(str(size) for size in sorted(set(sizes)))
    return ReembedRequiredError(
        f"this store holds vectors of several sizes ({shown} dimensions): a re-embedding "
        f"is under way or was interrupted; run `{REEMBED_COMMAND}` to finish it"
    )


def _ids_from(item_id: str, op: Op) -> Filter:
    """Items whose id compares to ``item_id`` by ``op``: keyset paging in id order.

    The filter language keeps ``$gt`` and friends for numbers and times (a caller comparing
    texts is usually mistaken), but both of its evaluators compare text by code point, as
    ``Order.asc("id")`` sorts it, which is exactly what paging through a store by id needs.
    """
    return Filter((Condition("id", op, item_id),))


def _reembed_target(embedder: object) -> EmbedderIdentity:
    if not isinstance(embedder, Embedder):
        raise ValidationError(
            "reembed() takes an embedder (an object with name, dim and embed())",
            field="embedder",
            value=embedder,
        )
    return EmbedderIdentity.of(embedder)


def _split_scope(where: Filter) -> tuple[_ScopeKey, Filter]:
    """Separate the first namespace and tier equalities (the index scope) from the rest."""
    namespace: str | None = None
    tier: Tier | None = None
    rest = []
    for condition in where.conditions:
        if condition.op is Op.EQ and condition.field == "namespace" and namespace is None:
            namespace = condition.value
        elif condition.op is Op.EQ and condition.field == "tier" and tier is None:
            tier = condition.value
        else:
            rest.append(condition)
    return (namespace, tier), Filter(tuple(rest))


def scope_filter(key: _ScopeKey) -> Filter:
    """The filter of a namespace/tier scope.

    For backends that keep a lexical index per scope, as :class:`BaseBackend` does.
    """
    namespace, tier = key
    document: dict[str, object] = {}
    if namespace is not None:
        document["namespace"] = namespace
    if tier is not None:
        document["tier"] = tier.value
    return parse_filter(document)


def in_scope(key: _ScopeKey, item: ContextItem) -> bool:
    """Whether ``item`` belongs to the namespace/tier scope ``key`` (``None``: any)."""
    return _in_key(key, (item.namespace, item.tier))


def _scopes_overlap(a: _ScopeKey, b: _ScopeKey) -> bool:
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def _covers(outer: _ScopeKey, inner: _ScopeKey) -> bool:
    """Whether every item of scope ``inner`` is inside scope ``outer``."""
    return all(x is None or x == y for x, y in zip(outer, inner, strict=True))


def embedding_text(item: ContextItem) -> str:
    """The text an item is embedded by: its text, or its kind and payload when it has none."""
    if item.text.strip():
        return item.text
    return f"{item.kind}: " + " ".join(f"{key} {value}" for key, value in item.payload.items())


def _needs_embedding(new: ContextItem, old: ContextItem) -> bool:
    """Whether an updated item lacks a vector or carries the old one for a new text."""
    if new.embedding is None:
        return True
    if new.text == old.text or old.embedding is None:
        return False
    return bool(np.array_equal(new.embedding, old.embedding))


def _merge_top(
    ids: list[str],
    scores: npt.NDArray[np.float32],
    new_ids: list[str],
    new_scores: npt.NDArray[np.float32],
    k: int,
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Keep the ``k`` best of two scored lists (ties on the boundary resolved by id later)."""
    all_ids = ids + new_ids
    all_scores = np.concatenate([scores, new_scores.astype(np.float32)])
    if len(all_ids) <= k:
        return all_ids, all_scores
    keep = np.argpartition(-all_scores, k - 1)[:k]
    boundary = all_scores[keep].min()
    # Keep every item tied with the boundary score so the final id tie-break is exact.
    keep = np.flatnonzero(all_scores >= boundary)
    if len(keep) > 4 * k:
        keep = keep[np.argsort(-all_scores[keep], kind="stable")[: 4 * k]]
    return [all_ids[i] for i in keep], all_scores[keep]


# ----------------------------------------------------------------------------- checks


def check_id(item_id: object) -> str:
    """An id to look up: any storable text (an id no item can have is still refused)."""
    return _validate.text("id", item_id)


def _check_ids(item_ids: object) -> list[str]:
    ids = _validate.sequence("item_ids", item_ids)
    for item_id in ids:
        check_id(item_id)
    return ids


def distinct_ids(item_ids: object) -> list[str]:
    """``get_many``'s ids, checked, each once, in the order asked."""
    return list(dict.fromkeys(_check_ids(item_ids)))


def selection(
    filters: FilterInput, limit: object, order_by: OrderInput
) -> tuple[Filter, Order, int | None] | None:
    """``query``'s arguments, parsed and checked; ``None`` when the limit asks for nothing."""
    where = parse_filter(filters)
    order = parse_order(order_by)
    _check_limit(limit)
    if limit == 0:
        return None
    return where, order, cast("int | None", limit)


def item_batch(items: object) -> list[ContextItem]:
    """``items`` as a list of items, or a ValidationError naming ``items``."""
    if isinstance(items, ContextItem):
        raise ValidationError(
            "expected an iterable of ContextItem; wrap a single item in a list",
            field="items",
            value=items,
        )
    batch = _validate.sequence("items", items)
    for item in batch:
        if not isinstance(item, ContextItem):
            raise ValidationError(
                f"expected ContextItem, got {type(item).__name__}", field="items", value=item
            )
    return batch


def _check_items(items: object, *, adding: bool) -> list[ContextItem]:
    batch = item_batch(items)
    seen: set[str] = set()
    for item in batch:
        if item.id in seen:
            if adding:
                raise DuplicateItemError(item.id)
            raise ValidationError(
                f"id {item.id!r} appears twice in one update batch", field="id", value=item.id
            )
        seen.add(item.id)
    return batch


def _archive_reason(value: object) -> ArchiveReason | None:
    return None if value is None else _validate.member("reason", ArchiveReason, value)


def _check_limit(limit: object) -> None:
    if limit is not None:
        _validate.integer("limit", limit)


def _check_k(k: object) -> int:
    return _validate.integer("k", k, minimum=1)
