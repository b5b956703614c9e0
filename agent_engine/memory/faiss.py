"""The FAISS backend: a vector index over any record store.

:class:`FaissBackend` keeps vectors in a FAISS index and delegates every payload to another
:class:`~agent_engine.memory.backend.MemoryBackend` (an in-memory store by default, or a
SQL store), so items are stored, filtered and counted by the record store and ranked by
the index. Every write goes to the record store first and reaches the index under the same
lock, only once the store accepted it: a refused batch changes neither, a delete or update
shows in the next search, and search re-reads ranked items from the store, so a hit always
carries the stored payload.

**Exact or approximate.** ``index="flat"`` (the default) is exact: numpy scores a zero-copy
view of the index's vectors (one BLAS pass at memory bandwidth, faster than FAISS's own flat
search for one query). ``index="hnsw"`` builds an ``IndexHNSWFlat`` graph (inner product)
for stores of hundreds of thousands of items and more; it is approximate (recall set by
``ef_search``), and scopes of at most ``exact_below`` rows are still scored exactly.

**Filtered search.** Filters apply before the top-k cut, exactly: a namespace equality
scores only that namespace's rows, and other conditions are checked on the stored items
while walking the ranking (:mod:`agent_engine.memory._vector_search`).

**Persistence.** With ``index_path`` the index is loaded on open when it matches the record
store (same digest of ``(id, vector)`` pairs) and otherwise rebuilt from the store's vectors,
with a warning: a missing, corrupt, truncated or stale file (a writer killed after its last
save, another program writing the store) costs a rebuild, never an item; so does a file
built for another embedder. ``save()`` writes it atomically (temp file, fsync, rename);
``close()`` saves. The index reflects this backend's own writes; when other processes write
the same store, call :meth:`FaissBackend.rebuild`.

**Delete and erase.** A delete blanks the item's row at once (its id and namespace, and a
flat index's vector); an HNSW graph keeps the vector until it is rebuilt. ``erase`` erases in
the record store, zeroes in place every vector the HNSW graph still holds for a dead row (the
node's links stay until the next rebuild), and saves the file before it returns.

**Embedder.** The backend refuses a record store whose vectors another embedder made, as
every backend does, and :meth:`FaissBackend.reembed` re-embeds the record store and then
rebuilds the index from it, so the index never holds vectors of two embedders. Lexical
search is the record store's own (it sees every write that reaches the store).

**No other backend imported.** The backends are independent of one another (``lint-imports``
checks it): the default record store is made by a :class:`StoreFactory` that
:mod:`agent_engine.memory`, the package holding every backend, sets through
:func:`set_default_store` (to :class:`~agent_engine.memory.inmemory.InMemoryBackend`).
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from agent_engine._log import get_logger
from agent_engine.embeddings import Embedder, EmbedderIdentity, Matrix, normalize_rows
from agent_engine.errors import IndexCorruptError, ValidationError
from agent_engine.filters import Filter, FilterInput, Order
from agent_engine.memory._vector_rows import (
    RowIndex,
    item_digest,
    load_faiss,
    remove_stale_temps,
)
from agent_engine.memory._vector_search import Approximate, search_rows
from agent_engine.memory.aliases import AliasStore
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import (
    REEMBED_BATCH,
    BaseBackend,
    MemoryBackend,
    Progress,
    SearchHit,
    Written,
    check_identity,
    check_vectors,
)
from agent_engine.memory.checkpoints import CheckpointStore
from agent_engine.memory.conflicts import ConflictStore
from agent_engine.memory.grants import GrantStore
from agent_engine.memory.lineage import LineageStore
from agent_engine.models import ArchiveReason, ContextItem, Vector
from agent_engine.retrieval.lexical import LexicalScope

__all__ = [
    "FaissBackend",
    "StoreFactory",
    "flat_in_memory",
    "flat_over_sqlite",
    "hnsw_in_memory",
    "set_default_store",
]

IndexKind = Literal["flat", "hnsw"]
_MASK64 = (1 << 64) - 1


class StoreFactory(Protocol):
    """Makes the record store of a :class:`FaissBackend` given none (a backend class fits)."""

    def __call__(self, *, embedder: Embedder | None, dim: int | None) -> MemoryBackend:
        """A new, empty record store with this embedder and vector size."""
        ...


_default_store: StoreFactory | None = None


def set_default_store(factory: StoreFactory) -> None:
    """Make ``factory`` the record store of every later ``FaissBackend()`` given no ``store``.

    :mod:`agent_engine.memory` sets it when imported (which Python does before this module
    runs), so this module never imports another backend.
    """
    global _default_store  # noqa: PLW0603 - one setting, made once by the memory package
    _default_store = factory


class FaissBackend(BaseBackend):
    """A FAISS vector index in front of a record store (see the module docstring).

    ``store`` holds the items (default: a new in-memory store with the same embedder and
    ``dim``, from the factory :func:`set_default_store` set); give the backend the only
    handle you use to write it, and build the store with the same embedder, so a persistent
    store records it by name. ``index`` is
    ``"flat"`` (exact) or ``"hnsw"``; ``hnsw_m``, ``ef_construction`` and ``ef_search`` tune
    the graph; their defaults (48, 200, 128) are the smallest measured to keep recall@10 at or
    above 0.95 with 1M items (M 32 and efConstruction 80 stopped at 0.89 even with ef 256).
    ``index_path`` keeps the index in a file, loaded or rebuilt on open and saved by
    :meth:`save` and :meth:`close`.
    """

    def __init__(
        self,
        store: MemoryBackend | None = None,
        *,
        embedder: Embedder | None = None,
        dim: int | None = None,
        index: IndexKind = "flat",
        index_path: str | Path | None = None,
        hnsw_m: int = 48,
        ef_construction: int = 200,
        ef_search: int = 128,
        exact_below: int = 20_000,
        walk_limit: int = 16_384,
    ) -> None:
        load_faiss()
        if index not in ("flat", "hnsw"):
            raise ValidationError(
                f"index must be 'flat' or 'hnsw', got {index!r}", field="index", value=index
            )
        for name, value in (
            ("hnsw_m", hnsw_m),
            ("ef_construction", ef_construction),
            ("ef_search", ef_search),
            ("exact_below", exact_below),
            ("walk_limit", walk_limit),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(
                    f"{name} must be a positive integer, got {value!r}", field=name, value=value
                )
        self.embedder = embedder
        self.dim = embedder.dim if embedder is not None else dim
        self.store: MemoryBackend = store if store is not None else _new_store(embedder, self.dim)
        self.kind: IndexKind = index
        self.index_path = Path(index_path) if index_path is not None else None
        self.ef_search = ef_search
        self.exact_below = exact_below
        self.walk_limit = walk_limit
        self._hnsw_m = hnsw_m
        self._ef_construction = ef_construction
        self._lock = threading.RLock()
        self._rows: RowIndex | None = None
        self._log = get_logger(backend="FaissBackend", index=index, path=str(self.index_path))
        check_identity(self.store.stored_identity(), self._identity())
        self._open()

    def __repr__(self) -> str:
        live = self._rows.live if self._rows is not None else 0
        return f"FaissBackend(index={self.kind!r}, vectors={live}, store={self.store!r})"

    @property
    def audit(self) -> AuditStore:
        """The record store's journal: mutations are recorded where the items live."""
        return self.store.audit

    @property
    def conflicts(self) -> ConflictStore:
        """The record store's conflicts: kept, and removed, with the items they name."""
        return self.store.conflicts

    @property
    def aliases(self) -> AliasStore:
        """The record store's aliases: they persist where the items do."""
        return self.store.aliases

    @property
    def checkpoints(self) -> CheckpointStore:
        """The record store's checkpoints: they persist where the items do."""
        return self.store.checkpoints

    @property
    def grants(self) -> GrantStore:
        """The record store's agents and grants: they persist where the items do."""
        return self.store.grants

    @property
    def lineage(self) -> LineageStore:
        """The record store's forks: they persist where the items do."""
        return self.store.lineage

    # ------------------------------------------------------------------ opening & saving

    def _open(self) -> None:
        """Load the saved index if it matches the store, else rebuild it from the store."""
        with self._lock:
            items = self.store.query(None, limit=None, order_by="+id")
            entries = self._entries(items)
            if self.index_path is not None:
                remove_stale_temps(self.index_path.parent, self.index_path.name)
                loaded = self._load_matching(self.index_path, entries)
                if loaded is not None:
                    _follow_namespaces(loaded, items)
                    self._rows = loaded
                    return
            self._rows = self._build(entries)
            self.save()

    def _load_matching(self, path: Path, entries: list[tuple[str, str, Vector]]) -> RowIndex | None:
        if not path.exists():
            if entries:
                self._log.warning("faiss_index_missing_rebuilding", items=len(entries))
            return None
        try:
            loaded = RowIndex.load(path, self.kind, self._hnsw_m, self._ef_construction)
        except IndexCorruptError as exc:
            self._log.warning("faiss_index_corrupt_rebuilding", error=str(exc))
            return None
        digest = sum(item_digest(i, v) for i, _, v in entries) & _MASK64
        if loaded.live != len(entries) or loaded.digest != digest:
            self._log.warning(
                "faiss_index_out_of_step_rebuilding",
                indexed=loaded.live,
                stored=len(entries),
            )
            return None
        if self.dim is not None and loaded.dim != self.dim:
            self._log.warning("faiss_index_dimension_changed_rebuilding", saved=loaded.dim)
            return None
        own = self._identity()
        name = own.name if own is not None else None
        if loaded.embedder is not None and name is not None and loaded.embedder != name:
            self._log.warning("faiss_index_embedder_changed_rebuilding", saved=loaded.embedder)
            return None
        if loaded.embedder is None:
            loaded.embedder = name
        return loaded

    def _entries(self, items: list[ContextItem]) -> list[tuple[str, str, Vector]]:
        """``(id, namespace, normalized vector)`` of the items that carry a vector."""
        with_vectors = [item for item in items if item.embedding is not None]
        if not with_vectors:
            return []
        matrix = normalize_rows(np.vstack([item.embedding for item in with_vectors]))  # type: ignore[misc]
        return [(item.id, item.namespace, matrix[n]) for n, item in enumerate(with_vectors)]

    def _build(self, entries: list[tuple[str, str, Vector]]) -> RowIndex | None:
        dim = self.dim if self.dim is not None else (entries[0][2].shape[0] if entries else None)
        if dim is None:
            return None
        own = self._identity()
        rows = RowIndex(
            self.kind,
            dim,
            hnsw_m=self._hnsw_m,
            ef_construction=self._ef_construction,
            embedder=own.name if own is not None else None,
        )
        rows.add(entries)
        return rows

    def rebuild(self) -> None:
        """Rebuild the index from the record store (after other programs wrote to it)."""
        with self._lock:
            self._rows = self._build(self._entries(self.store.query(None, limit=None)))
            if self.index_path is not None and self._rows is not None:
                self._rows.save(self.index_path)

    def save(self) -> None:
        """Write the index to ``index_path`` atomically (a no-op without a path)."""
        with self._lock:
            if self.index_path is not None and self._rows is not None:
                self._rows.save(self.index_path)

    @property
    def remote(self) -> bool:
        """As remote as the record store: the vectors are searched in the process."""
        return isinstance(self.store, BaseBackend) and self.store.remote

    def close(self) -> None:
        """Save the index (with ``index_path``) and close the record store."""
        with self._lock:
            self.save()
            self.store.close()

    # ------------------------------------------------------------------ embedder identity

    def _stored_identity(self) -> EmbedderIdentity | None:
        return self.store.stored_identity()

    def _search_identity(self) -> EmbedderIdentity | None:
        """The index's own: queries are scored against it, not the store's vectors."""
        own = self._identity()
        if own is not None:
            return own
        rows = self._rows
        return EmbedderIdentity(rows.embedder, rows.dim) if rows is not None else None

    def reembed(
        self,
        embedder: Embedder,
        *,
        batch_size: int = REEMBED_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Re-embed the record store with ``embedder``, then rebuild the index from it.

        The record store's own re-embedding is what a crash must not break (see
        :meth:`BaseBackend.reembed`); the index is a cache of the store, rebuilt whole.
        """
        with self._lock:
            done = self.store.reembed(embedder, batch_size=batch_size, progress=progress)
            self.embedder = embedder
            self.dim = embedder.dim
            self.rebuild()
            return done

    # ------------------------------------------------------------------ lexical search

    def lexical_search(
        self, query: str, k: int = 10, filters: FilterInput = None
    ) -> list[SearchHit]:
        """The record store's BM25 search (it sees every write, this backend's and others')."""
        return self.store.lexical_search(query, k, filters)

    def lexical_index(self, filters: FilterInput = None) -> LexicalScope:
        """The record store's full-text index of a scope."""
        return self.store.lexical_index(filters)

    # ------------------------------------------------------------------ primitives

    def _insert(self, items: list[ContextItem]) -> Written:
        with self._lock:
            check_vectors(items, self._search_identity())
            self.store.add_many(items)
            self._index(self._as_stored(items, [item for item in items if item.embedding is None]))
            return Written(len(items))

    def _insert_and_replace(
        self, inserts: list[ContextItem], replaces: list[ContextItem]
    ) -> Written:
        """One write of the record store, then the index rows of both."""
        with self._lock:
            check_vectors([*inserts, *replaces], self._search_identity())
            self.store.write(add=inserts, update=replaces)
            fresh = [item for item in inserts if item.embedding is None]
            self._index(self._as_stored([*inserts, *replaces], [*fresh, *replaces]))
            return Written(len(inserts) + len(replaces))

    def _as_stored(self, items: list[ContextItem], unsure: list[ContextItem]) -> list[ContextItem]:
        """``items`` as the store keeps them, re-reading those whose vector it may have set.

        A store with an embedder of its own embeds items that arrive without a vector, and
        re-embeds an update that changed the text but kept the old vector; the index must
        hold the vector the store holds.
        """
        if not unsure:
            return items
        stored = self._fetch([item.id for item in unsure])
        return [stored.get(item.id, item) for item in items]

    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        return {item.id: item for item in self.store.get_many(item_ids)}

    def _replace(self, items: list[ContextItem]) -> Written:
        with self._lock:
            check_vectors(items, self._search_identity())
            self.store.update_many(items)
            self._index(self._as_stored(items, items))
            return Written(len(items))

    def _remove(self, item_ids: list[str]) -> Written:
        with self._lock:
            removed = self.store.delete_many(item_ids)
            self._unindex(item_ids)
            return Written(removed)

    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> Written:
        """Erase in the record store, drop the rows, zero HNSW's dead vectors, save the file.

        The record store may raise after its erase committed (its own flush failed): the
        rows of whatever it no longer holds are dropped and the file saved all the same.
        """
        with self._lock:
            try:
                removed = self.store.erase(item_ids, tokens=tokens)
            except BaseException:
                stored = {item.id for item in self.store.get_many(item_ids)}
                self._drop_rows([i for i in item_ids if i not in stored])
                raise
            self._drop_rows(item_ids)
            return Written(removed)

    def _drop_rows(self, item_ids: list[str]) -> None:
        """Forget erased items' rows and leave no vector of a dead row in the index file."""
        self._unindex(item_ids)
        if self._rows is not None:
            self._rows.zero_dead_vectors()
        self.save()

    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        return self.store.query(where, limit=limit, order_by=order)

    def _count(self, where: Filter) -> int:
        return self.store.count(where)

    def _delete_where(self, where: Filter) -> Written:
        with self._lock:
            doomed = [item.id for item in self.store.query(where, limit=None, order_by="+id")]
            removed = self.store.delete_many(doomed) if doomed else 0
            self._unindex(doomed)
            return Written(removed)

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        # Access counts live in the record store and never move a vector.
        return self.store.touch(item_ids, at)

    def _set_archived(
        self, item_ids: list[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        # The archive mark lives in the record store; archived items keep their rows here
        # (the archive is searched like the working set).
        return self.store.set_archived(item_ids, at, reason)

    # ------------------------------------------------------------------ index upkeep

    def _index(self, items: list[ContextItem]) -> None:
        """Bring the rows of ``items`` in line with them (called with the lock held)."""
        changed: list[ContextItem] = []
        for item in items:
            rows = self._rows
            row = rows.row_of.get(item.id) if rows is not None else None
            if item.embedding is None:
                if rows is not None:
                    rows.remove(item.id)
            elif row is not None and rows is not None and _same_vector(rows, row, item.embedding):
                rows.move(item.id, item.namespace)
            else:
                changed.append(item)
        entries = self._entries(changed)
        if not entries:
            return
        if self._rows is None:
            self._rows = self._build(entries)
        else:
            self._rows.add(entries)
        self._compact_if_needed()

    def _unindex(self, item_ids: list[str]) -> None:
        if self._rows is None:
            return
        for item_id in item_ids:
            self._rows.remove(item_id)
        self._compact_if_needed()

    def _compact_if_needed(self) -> None:
        if self._rows is not None and self._rows.needs_compaction():
            self._rows = self._rows.compacted()

    # ------------------------------------------------------------------ search

    def _search(self, query: Vector, k: int, where: Filter) -> list[SearchHit]:
        return self._search_many(query.reshape(1, -1), k, where)[0]

    def _search_many(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """Each query ranked exactly or by the graph (:func:`search_rows`)."""
        with self._lock:
            return search_rows(
                self._rows,
                queries,
                k,
                where,
                fetch=self._fetch,
                matching=lambda w: self.store.query(w, limit=None, order_by="+id"),
                walk_limit=self.walk_limit,
                approximate=(
                    Approximate(self.exact_below, self.ef_search) if self.kind == "hnsw" else None
                ),
            )


# ----------------------------------------------------------------------- configurations
# The named configurations agent_engine.memory.registry lists (the benchmark's choices).


def flat_in_memory(work: Path, embedder: Embedder) -> FaissBackend:
    """``faiss``: an exact index saved in ``work``, over an in-memory record store."""
    return FaissBackend(embedder=embedder, index_path=work / "vectors.faiss")


def hnsw_in_memory(work: Path, embedder: Embedder) -> FaissBackend:
    """``faiss-hnsw``: an HNSW graph (default tuning) saved in ``work``, records in memory."""
    return FaissBackend(embedder=embedder, index="hnsw", index_path=work / "vectors.faiss")


def flat_over_sqlite(work: Path, embedder: Embedder) -> FaissBackend:
    """``faiss-sqlite``: an exact index over a SQLite record store, the persistent pairing.

    The record store is the registry's ``sqlite`` configuration, so this module never
    imports the SQL backend.
    """
    from agent_engine.memory.registry import configuration  # noqa: PLC0415 - see above

    records = configuration("sqlite").build(work, embedder)
    return FaissBackend(records, embedder=embedder, index_path=work / "vectors.faiss")


# ----------------------------------------------------------------------------- helpers


def _new_store(embedder: Embedder | None, dim: int | None) -> MemoryBackend:
    """A default record store from the factory :mod:`agent_engine.memory` set."""
    if _default_store is None:  # pragma: no cover - agent_engine.memory sets it on import
        raise ValidationError(
            "store is required: no default record store is set", field="store", value=None
        )
    return _default_store(embedder=embedder, dim=dim)


def _same_vector(rows: RowIndex, row: int, embedding: Vector) -> bool:
    vector = normalize_rows(embedding)[0]
    return bool(np.array_equal(rows.vectors()[row], vector))


def _follow_namespaces(rows: RowIndex, items: list[ContextItem]) -> None:
    """Follow namespace moves made while the index was closed (they keep the vector)."""
    for item in items:
        if item.id in rows.row_of:
            rows.move(item.id, item.namespace)
