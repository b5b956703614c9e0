"""The in-memory backend: the reference implementation and the oracle other backends match.

A dict keyed by id gives O(1) ``get``/``update``/``delete``; one re-entrant lock makes every
primitive atomic for threads. Queries scan, which is right for task memory (tens to
thousands of items) and for tests; persistent tiers belong on the SQL or FAISS backends.

Vectors live in one contiguous, normalized float32 matrix beside the dict, so an exact search
is a single matrix-vector product at memory bandwidth (numpy's BLAS beats FAISS's flat index
for one query), followed by a walk down the ranking that applies the filter until ``k``
matching items are found.
"""

from __future__ import annotations

import enum
import heapq
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from agent_engine.embeddings import Embedder, EmbedderIdentity, Matrix, normalize_rows
from agent_engine.errors import BackendUnavailableError, DuplicateItemError, ItemNotFoundError
from agent_engine.filters import Condition, Filter, Op, Order
from agent_engine.memory.aliases import InMemoryAliasStore
from agent_engine.memory.audit import InMemoryAuditStore
from agent_engine.memory.backend import (
    REEMBED_BATCH,
    BaseBackend,
    Progress,
    SearchHit,
    Written,
    check_vectors,
)
from agent_engine.memory.checkpoints import InMemoryCheckpointStore
from agent_engine.memory.conflicts import InMemoryConflictStore
from agent_engine.memory.grants import InMemoryGrantStore
from agent_engine.memory.lineage import InMemoryLineageStore
from agent_engine.models import ArchiveReason, ContextItem, Vector, with_archive_mark

if TYPE_CHECKING:
    from agent_engine.memory.registry import OpenOptions

__all__ = ["InMemoryBackend", "empty", "open_url"]


class InMemoryBackend(BaseBackend):
    """Items in a dict, guarded by a lock; nothing survives the process.

    ``embedder`` embeds items added without a vector and text queries; without one, search
    takes vector queries over items that carry vectors (``dim`` fixes their size, otherwise
    the first vector stored does, until the store holds no vector again).
    """

    def __init__(self, *, embedder: Embedder | None = None, dim: int | None = None) -> None:
        self.embedder = embedder
        self.dim = dim
        self._items: dict[str, ContextItem] = {}
        self._lock = threading.RLock()
        self._vectors = _VectorIndex()
        # The re-embedded items and their vectors while a re-embedding runs.
        self._staged: tuple[dict[str, ContextItem], _VectorIndex] | None = None
        self._audit_store = InMemoryAuditStore()
        self._conflict_store = self._conflicts = InMemoryConflictStore(self._held, self._lock)
        self._alias_store = InMemoryAliasStore(self._lock)
        self._checkpoint_store = InMemoryCheckpointStore(self._lock)
        self._grant_store = InMemoryGrantStore(self._lock)
        self._lineage_store = InMemoryLineageStore(self._lock)
        # Ids by value of the fields exact lookups name (see _INDEXED), so such a query
        # scans the few items of that value, not the store.
        self._indexes: dict[str, dict[str, dict[str, None]]] = {f: {} for f in _INDEXED}

    def __repr__(self) -> str:
        return f"InMemoryBackend(items={len(self._items)})"

    def _insert(self, items: list[ContextItem]) -> Written:
        with self._lock:
            for item in items:
                if item.id in self._items:
                    raise DuplicateItemError(item.id)
            check_vectors(items, self._expected_identity())
            for item in items:
                self._store(item)
            return Written(len(items))

    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        with self._lock:
            return {item_id: self._items[item_id] for item_id in item_ids if item_id in self._items}

    def _replace(self, items: list[ContextItem]) -> Written:
        with self._lock:
            for item in items:
                if item.id not in self._items:
                    raise ItemNotFoundError(item.id)
            check_vectors(items, self._expected_identity())
            for item in items:
                self._store(item)
            return Written(len(items))

    def _held(self, item_ids: list[str]) -> set[str]:
        """Which of ``item_ids`` are stored (what a conflict may name)."""
        with self._lock:
            return {item_id for item_id in item_ids if item_id in self._items}

    def _remove(self, item_ids: list[str]) -> Written:
        with self._lock:
            removed = 0
            for item_id in item_ids:
                if item_id in self._items:
                    self._drop(item_id)
                    removed += 1
            return Written(removed)

    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> Written:
        """Drop the items and redact their ids: this backend writes no files."""
        with self._lock:
            removed = self._remove(item_ids)
            for item in list(self._items.values()):
                redacted = self._redact_provenance(item, tokens)
                if redacted is not None:
                    self._store(redacted)
            self.audit.redact(tokens)
            return removed

    def _matching(self, where: Filter) -> list[ContextItem]:
        with self._lock:
            pools = [self._pool(c) for c in where.conditions if c.field in _INDEXED]
            candidates = [pool for pool in pools if pool is not None]
            if candidates:
                # Scan the smallest index (pinned items are few, one fingerprint's items
                # fewer; a namespace may be most of the store); the filter below still
                # checks every condition.
                items = [self._items[i] for i in min(candidates, key=len)]
            else:
                items = list(self._items.values())
        if not where.conditions:
            return items
        return [item for item in items if where.matches(item)]

    def _pool(self, condition: Condition) -> Collection[str] | None:
        """The ids an equality or ``$in`` test of an indexed field can match (else ``None``)."""
        index = self._indexes[condition.field]
        if condition.op is Op.EQ and condition.value is not None:
            return index.get(_indexed(condition.value), {})
        if condition.op is Op.IN and None not in condition.value:
            pools = [index.get(_indexed(value), {}) for value in condition.value]
            if len(pools) == 1:
                return pools[0]
            return {item_id: None for pool in pools for item_id in pool}
        return None

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

    def _delete_where(self, where: Filter) -> Written:
        with self._lock:
            doomed = [item.id for item in self._matching(where)]
            for item_id in doomed:
                self._drop(item_id)
            return Written(len(doomed))

    def _store(self, item: ContextItem) -> None:
        previous = self._items.get(item.id)
        if previous is not None:
            self._unindex(previous)
        self._items[item.id] = item
        for field, index in self._indexes.items():
            value = getattr(item, field)
            if value is not None:
                index.setdefault(_indexed(value), {})[item.id] = None
        self._vectors.put(item.id, item.embedding, item.namespace)

    def _drop(self, item_id: str) -> None:
        item = self._items.pop(item_id)
        self._conflicts.discard([item_id])
        self._unindex(item)
        self._vectors.put(item_id, None)

    def _unindex(self, item: ContextItem) -> None:
        for field, index in self._indexes.items():
            value = getattr(item, field)
            if value is None:
                continue
            members = index[_indexed(value)]
            members.pop(item.id, None)
            if not members:
                del index[_indexed(value)]

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        with self._lock:
            return super()._touch(item_ids, at)

    def _set_archived(
        self, item_ids: list[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        # The mark changes neither an item's namespace, status nor vector: no index moves.
        with self._lock:
            found = [self._items[item_id] for item_id in item_ids if item_id in self._items]
            for item in with_archive_mark(found, at, reason):
                self._items[item.id] = item
            return len(found)

    def _stored_identity(self) -> EmbedderIdentity | None:
        with self._lock:
            if not len(self._vectors):
                return None
            return self._expected_identity()

    def _expected_identity(self) -> EmbedderIdentity | None:
        """The embedder's (or ``dim``'s) identity, else that of the vectors held, if any."""
        own = self._identity()
        if own is not None or self._vectors.dim is None or not len(self._vectors):
            return own
        return EmbedderIdentity(None, self._vectors.dim)

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int = REEMBED_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Re-embed every item under the lock: other threads wait, then see only the result.

        New vectors are staged and swapped in at the end, so an embedder that fails half-way
        leaves the store as it was.
        """
        with self._lock:
            try:
                return super().reembed(embedder, batch_size=batch_size, progress=progress)
            finally:
                self._staged = None

    def _reembed_begin(self, target: EmbedderIdentity) -> str | None:
        del target
        self._staged = ({}, _VectorIndex())
        return None

    def _reembed_write(self, items: list[ContextItem], target: EmbedderIdentity) -> None:
        del target
        assert self._staged is not None  # noqa: S101 - _reembed_begin ran (reembed's order)
        staged_items, staged_vectors = self._staged
        for item in items:
            staged_items[item.id] = item
            staged_vectors.put(item.id, item.embedding, item.namespace)

    def _reembed_finish(self, target: EmbedderIdentity) -> None:
        del target
        assert self._staged is not None  # noqa: S101 - _reembed_begin ran (reembed's order)
        staged_items, staged_vectors = self._staged
        self._items.update(staged_items)
        self._vectors = staged_vectors

    def _search(self, query: Vector, k: int, where: Filter) -> list[SearchHit]:
        return self._search_many(query.reshape(1, -1), k, where)[0]

    def _search_many(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """All the queries scored in one matrix product, then ranked one by one."""
        with self._lock:
            if self._vectors.dim not in (None, queries.shape[1]):
                return [[] for _ in queries]

            def accept(item_id: str) -> bool:
                return where.matches(self._items[item_id])

            namespace = _namespace(where)
            every = self._vectors.scores(queries)
            found = []
            for query, scores in zip(queries, every, strict=True):
                ids, best = self._vectors.ranked(query, k, accept, namespace, scores)
                found.append([SearchHit(self._items[i], s) for i, s in zip(ids, best, strict=True)])
            return found


def open_url(url: str, options: OpenOptions) -> InMemoryBackend:
    """``memory://``: a new, empty store in this process (registry opener)."""
    if url.rstrip("/").lower() != "memory:":
        raise BackendUnavailableError(f"unsupported in-memory URL {url!r}; expected memory://")
    return InMemoryBackend(embedder=options.embedder)


def empty(work: Path, embedder: Embedder) -> InMemoryBackend:  # noqa: ARG001 - a Factory
    """The ``memory`` configuration: an empty store (it writes nothing to ``work``)."""
    return InMemoryBackend(embedder=embedder)


_INDEXED: Final = ("namespace", "status", "fingerprint", "key", "superseded_by")
"""Fields looked up by exact value on hot paths: a tier store's scope, its pinned items, the
duplicates of an add (fingerprint), the holders of a slot (key), an item's history."""


def _indexed(value: object) -> str:
    """How an indexed field's value is keyed (a status is an enum, the rest strings)."""
    return value.value if isinstance(value, enum.Enum) else str(value)


def _namespace(where: Filter) -> str | None:
    """The namespace an equality condition of ``where`` pins, if any."""
    return next(
        (c.value for c in where.conditions if c.field == "namespace" and c.op is Op.EQ), None
    )


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


class _VectorIndex:
    """Normalized vectors in one growable matrix; deletes swap the last row into the hole."""

    def __init__(self) -> None:
        self.dim: int | None = None
        self._matrix = np.empty((0, 0), dtype=np.float32)
        self._size = 0
        self._row_of: dict[str, int] = {}
        self._ids: list[str] = []
        self._ids_cache: npt.NDArray[np.str_] | None = None
        # Each row's namespace as a small integer, so a namespace-scoped search masks the other
        # namespaces in one vectorized comparison instead of testing their items one by one.
        self._codes: dict[str, int] = {}
        self._namespace = np.empty(0, dtype=np.int32)

    def __len__(self) -> int:
        return self._size

    def put(self, item_id: str, vector: Vector | None, namespace: str = "") -> None:
        """Set (or, with ``None``, drop) the vector of ``item_id``."""
        row = self._row_of.get(item_id)
        if vector is None:
            if row is not None:
                self._drop(row)
            return
        if self.dim is None or (self._size == 0 and vector.shape[0] != self.dim):
            self.dim = vector.shape[0]
            self._matrix = np.empty((64, self.dim), dtype=np.float32)
        if row is None:
            if self._size == len(self._matrix):
                grown = np.empty((2 * len(self._matrix), self.dim), dtype=np.float32)
                grown[: self._size] = self._matrix[: self._size]
                self._matrix = grown
            if self._size >= len(self._namespace):
                codes = np.empty(len(self._matrix), dtype=np.int32)
                codes[: self._size] = self._namespace[: self._size]
                self._namespace = codes
            row = self._size
            self._size += 1
            self._row_of[item_id] = row
            self._ids.append(item_id)
            self._ids_cache = None
        self._matrix[row] = normalize_rows(vector)[0]
        self._namespace[row] = self._codes.setdefault(namespace, len(self._codes))

    def _drop(self, row: int) -> None:
        last = self._size - 1
        removed, moved = self._ids[row], self._ids[last]
        self._matrix[row] = self._matrix[last]
        self._namespace[row] = self._namespace[last]
        self._ids[row] = moved
        self._row_of[moved] = row
        self._ids.pop()
        del self._row_of[removed]
        self._size = last
        self._ids_cache = None

    def scores(self, queries: Matrix) -> npt.NDArray[np.float32]:
        """Every row's score against each query: one row of scores per query."""
        if self._size == 0:
            return np.empty((len(queries), 0), dtype=np.float32)
        scored: npt.NDArray[np.float32] = queries @ self._matrix[: self._size].T
        return scored

    def ranked(
        self,
        query: Vector,
        k: int,
        accept: Callable[[str], bool],
        namespace: str | None = None,
        scores: npt.NDArray[np.float32] | None = None,
    ) -> tuple[list[str], list[float]]:
        """The ``k`` best accepted ids by score, ties by id, widening the window as needed.

        Rows are taken in score bands: the best ``4k`` remaining rows are split into those
        strictly above the band's lowest score (sorted, then filtered) and the rows tied at
        it (all of them, in id order, since an id tie-break must see every tied row). Most
        searches end in the first band; a selective filter or a sea of equal scores (a
        feature-hashing query sharing no word with most items) widens it without a Python
        loop over the whole store. With ``namespace``, rows of other namespaces are masked
        out up front (they could never be accepted), so a small namespace in a large store
        costs one matrix product, not a walk through everyone else's items. ``scores``: the
        rows' scores against ``query``, when a batch of queries was scored at once.
        """
        if self._size == 0:
            return [], []
        if scores is None:
            scores = self._matrix[: self._size] @ query
        if namespace is None:
            remaining = np.ones(self._size, dtype=bool)
        elif namespace in self._codes:
            remaining = self._namespace[: self._size] == self._codes[namespace]
        else:
            return [], []
        chosen: list[tuple[float, str]] = []
        window = 4 * k
        while len(chosen) < k and remaining.any():
            rows = np.flatnonzero(remaining)
            if len(rows) > window:
                rows = rows[np.argpartition(-scores[rows], window - 1)[:window]]
            floor = scores[rows].min()
            above = rows[scores[rows] > floor]
            above = above[np.lexsort((self._ids_of(above), -scores[above]))]
            self._take(above, scores, k, accept, chosen)
            remaining[above] = False
            if len(chosen) >= k:
                break
            tied = np.flatnonzero(remaining & (scores == floor))
            tied = tied[np.argsort(self._ids_of(tied), kind="stable")]
            self._take(tied, scores, k, accept, chosen)
            remaining[tied] = False
            window *= 4
        return [item_id for _, item_id in chosen], [score for score, _ in chosen]

    def _take(
        self,
        rows: npt.NDArray[np.intp],
        scores: npt.NDArray[np.float32],
        k: int,
        accept: Callable[[str], bool],
        chosen: list[tuple[float, str]],
    ) -> None:
        """Append accepted rows, in the given order, until ``k`` are chosen."""
        for row in rows:
            if len(chosen) >= k:
                return
            item_id = self._ids[row]
            if accept(item_id):
                chosen.append((float(scores[row]), item_id))

    def _ids_of(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.str_]:
        """The ids of ``rows`` as an array, for tie-breaking by id.

        An agent writes between builds, and re-making the array of every id after each write
        costs tens of milliseconds in a large store; a band of a few hundred rows is converted
        on its own instead, and the whole array only when a band covers much of the store.
        """
        if self._ids_cache is None and len(rows) * 4 < self._size:
            return np.array([self._ids[row] for row in rows.tolist()], dtype=np.str_)
        return self._id_array()[rows]

    def _id_array(self) -> npt.NDArray[np.str_]:
        """The ids as a numpy array aligned with rows (rebuilt only after a change)."""
        if self._ids_cache is None:
            self._ids_cache = np.array(self._ids, dtype=np.str_)
        return self._ids_cache
