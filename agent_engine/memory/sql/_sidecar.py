"""The index files of an embedded store: its vectors and full text, kept beside the database.

A SQLite store searches through two kinds of index held in the process, each saved in a file
in a folder beside the database (``<file>.indexes``) so the next process loads it instead of
rebuilding it:

- ``vectors.npz``: every stored vector, normalized, by row, with its id and namespace (a
  numpy :class:`~agent_engine.memory._vector_rows.RowIndex`), searched exactly at memory
  bandwidth (:mod:`agent_engine.memory._vector_search`). numpy rather than FAISS or
  ``sqlite-vec``: the default install needs no optional package, and Python's ``sqlite3``
  often cannot load extensions;
- ``lexical/<scope>.npz``: the BM25 index of one namespace/tier scope
  (:meth:`~agent_engine.retrieval.bm25.LexicalIndex.snapshot`), the same index every backend
  ranks with. SQLite's FTS5 was the alternative; it cannot lend a session's neighbours their
  terms, which our ranking measured as worth its keep (:mod:`agent_engine.retrieval.bm25`).

**Kept in step.** The database's change log (:mod:`._changes`) names every item that changed,
in the writing transaction, whoever wrote. Each index remembers the log
position it reflects; before every use it reads the log's position (one query) and, if it
moved, the entries after its own, re-reads those items and applies them (skipping what
changed nothing it holds). Another process's writes therefore show in this process's next
search, and this process's own writes reach its indexes the same way, so there is one path to
test. The items the process read are cached and followed the same way (:meth:`IndexFiles.fetch`).

**Files are caches.** A file is trusted only when its stamp names this store (the log's
``store_id``) and a log position the database has reached, its vectors the store's embedder
and size, and, once caught up, it holds as many entries as the database does; otherwise it
is rebuilt from the records, with a warning: a missing, truncated, foreign, stale or
future file costs a rebuild, never an answer. Files are written whole to a temporary file,
synced and renamed, after a rebuild and on :meth:`IndexFiles.close`; a crash at any point
leaves the previous file, which the log catches up. An erase removes the erased items' rows
from memory and rewrites every file at once, so no file keeps anything of them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np
import sqlalchemy as sa

from agent_engine._log import get_logger
from agent_engine.embeddings import EmbedderIdentity, normalize_rows
from agent_engine.errors import IndexCorruptError
from agent_engine.memory._vector_rows import RowIndex, remove_stale_temps, save_npz
from agent_engine.memory.sql._changes import Position, changed_since, position
from agent_engine.memory.sql._schema import items
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.bm25 import LexicalIndex

__all__ = ["IndexFiles", "ScopeKey"]

T = TypeVar("T")
ScopeKey = tuple[str | None, Tier | None]
Read = Callable[[Callable[[sa.Connection], T]], T]

_SCAN_CHUNK = 5000
_IDS_CHUNK = 5000
_CACHED_ITEMS = 20_000
"""Items a process keeps from its reads (a few hundred builds' candidates)."""


@attrs.define
class _Followed:
    """An index and the log position it reflects (``saved``: the one its file holds)."""

    index: Any
    seq: int
    saved: int
    erasures: int
    """The store's erasure count when the index last dropped the rows of erased items."""


class IndexFiles:
    """The vector and BM25 indexes of one SQLite store, followed from its change log.

    ``folder`` holds the files (``None``: indexes in memory only, for ``sqlite://``);
    ``read_only`` never writes them. ``read`` runs a read transaction, ``read_one`` a
    one-statement read; ``fetch`` reads items by id, ``scope_items`` every item
    of a scope, ``scope_count`` how many of them are current (not superseded: what a BM25
    index holds), ``in_scope`` tells whether an item belongs to a scope, and ``identity`` is
    the store's embedder: the backend's own reads, so an index holds what a search sees.
    """

    def __init__(
        self,
        folder: Path | None,
        *,
        read: Read[Any],
        read_one: Read[Any],
        fetch: Callable[[list[str]], dict[str, ContextItem]],
        scope_items: Callable[[ScopeKey], list[ContextItem]],
        scope_count: Callable[[ScopeKey], int],
        in_scope: Callable[[ScopeKey, ContextItem], bool],
        identity: Callable[[], EmbedderIdentity | None],
        read_only: bool = False,
    ) -> None:
        self.folder = folder
        self.read_only = read_only
        self._read = read
        self._read_one = read_one
        self._fetch = fetch
        self._scope_items = scope_items
        self._scope_count = scope_count
        self._in_scope = in_scope
        self._identity = identity
        self.lock = threading.RLock()
        """Held while the indexes change; a search holds it while it walks the rows."""
        self._vectors: _Followed | None = None
        self._lexical: dict[ScopeKey, _Followed] = {}
        self._items = _Followed(_ItemCache(), -1, -1, -1)
        self._log = get_logger(component="index_files", folder=str(folder))
        if folder is not None and not read_only:
            remove_stale_temps(folder, "vectors.npz")
            remove_stale_temps(folder / "lexical", "*.npz")

    # ------------------------------------------------------------------ what searches use

    def vectors(self) -> RowIndex | None:
        """The vector rows, caught up with the store (``None``: no vector stored yet)."""
        with self.lock:
            current = self._follow()
            if self._vectors is None:
                self._vectors = self._open_vectors(current)
            rows: RowIndex | None = self._vectors.index
            return rows

    def lexical(self, key: ScopeKey) -> LexicalIndex:
        """The BM25 index of a scope, caught up with the store."""
        with self.lock:
            current = self._follow()
            followed = self._lexical.get(key)
            if followed is None:
                followed = self._lexical[key] = self._open_lexical(key, current)
            index: LexicalIndex = followed.index
            return index

    # ------------------------------------------------------------------ following the log

    def _follow(self) -> Position:
        """Apply the log's entries since the oldest position held; return the log's position."""
        current: Position = self._read_one(position)
        cache: _ItemCache = self._items.index
        if not len(cache):  # nothing cached is stale: the cache starts where the log is
            self._items.seq, self._items.erasures = current.seq, current.erasures
        followers = self._followers()
        for key, entry in followers:
            if entry.erasures != current.erasures:
                self._prune(key, entry)
                entry.erasures = current.erasures
        behind = [entry for _, entry in followers if entry.seq < current.seq]
        if not behind:
            return current
        since = min(entry.seq for entry in behind)
        entries = self._read(lambda connection: changed_since(connection, since))
        last = max([current.seq, *(seq for seq, _ in entries)])
        changes = {
            id(entry): list(dict.fromkeys(i for seq, i in entries if seq > entry.seq))
            for _, entry in followers
            if entry.seq < last
        }
        # The cache wants only the changed items it holds; the indexes want every one.
        wanted = {
            item_id
            for key, entry in followers
            for item_id in changes.get(id(entry), ())
            if key != "items" or item_id in cache
        }
        found = self._fetch(list(wanted)) if wanted else {}
        for key, entry in followers:
            if entry.seq >= last:
                continue
            changed = changes[id(entry)]
            if key == "items":
                cache.refresh(changed, found)
            elif key is None:
                self._apply_vectors(entry, changed, found)
            else:
                self._apply_lexical(key, entry, changed, found)
            entry.seq = last
        return attrs.evolve(current, seq=last)

    def _followers(self) -> list[tuple[Any, _Followed]]:
        """Each index held, by key: a scope, ``None`` for the vectors, ``"items"``."""
        held: list[tuple[Any, _Followed]] = [("items", self._items), *self._lexical.items()]
        if self._vectors is not None:
            held.append((None, self._vectors))
        return held

    def _followed(self) -> list[_Followed]:
        return [e for e in (self._vectors, *self._lexical.values()) if e is not None]

    def _apply_vectors(
        self, entry: _Followed, changed: list[str], found: dict[str, ContextItem]
    ) -> None:
        rows: RowIndex | None = entry.index
        fresh = [found[i] for i in dict.fromkeys(changed) if i in found]
        with_vectors = [item for item in fresh if item.embedding is not None]
        if rows is not None and any(len(i.embedding) != rows.dim for i in with_vectors):  # type: ignore[arg-type]
            # Re-embedded to another size: the rows are rebuilt at the next search.
            self._vectors = None
            return
        if rows is None:
            entry.index = _build_rows(_entries(with_vectors), self._identity())
            return
        for item_id in changed:
            if item_id not in found or found[item_id].embedding is None:
                rows.remove(item_id)
        moved = [item for item in with_vectors if not _same_row(rows, item)]
        rows.add(_entries(moved))
        if rows.needs_compaction():
            entry.index = rows.compacted()

    def _apply_lexical(
        self, key: ScopeKey, entry: _Followed, changed: list[str], found: dict[str, ContextItem]
    ) -> None:
        index: LexicalIndex = entry.index
        inside = [found[i] for i in dict.fromkeys(changed) if i in found]
        inside = [item for item in inside if self._in_scope(key, item)]
        kept = {item.id for item in inside}
        index.remove(item_id for item_id in changed if item_id not in kept and item_id in index)
        index.upsert(item for item in inside if not index.holds(item))

    def _prune(self, key: Any, entry: _Followed) -> None:
        """Drop the rows of items no longer stored (an erase removed their log entries)."""
        if key == "items":
            entry.index.clear()
            return
        if entry.index is None:
            return
        held = list(entry.index.row_of) if key is None else entry.index.item_ids()
        stored = self._existing(held)
        gone = [item_id for item_id in held if item_id not in stored]
        if key is None:
            for item_id in gone:
                entry.index.remove(item_id)
            entry.index.zero_dead_vectors()
        elif gone:
            entry.index.remove(gone)

    def _existing(self, item_ids: list[str]) -> set[str]:
        def work(connection: sa.Connection) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(item_ids), _IDS_CHUNK):
                chunk = item_ids[start : start + _IDS_CHUNK]
                query = sa.select(items.c.id).where(items.c.id.in_(chunk))
                found.update(connection.execute(query).scalars())
            return found

        return self._read(work) if item_ids else set()

    # ------------------------------------------------------------------ vectors

    def _vector_path(self) -> Path | None:
        return None if self.folder is None else self.folder / "vectors.npz"

    def _open_vectors(self, current: Position) -> _Followed:
        """The saved rows, caught up, when they are this store's; else rows built afresh."""
        path = self._vector_path()
        loaded = self._load_vectors(path, current) if path is not None else None
        if loaded is not None:
            self._vectors = loaded
            self._follow()  # may drop the rows (vectors of another size arrived)
            stored = self._read(_count_vectors)
            rows: RowIndex | None = loaded.index
            if self._vectors is loaded and (rows.live if rows is not None else 0) == stored:
                return loaded
            self._log.warning("index_file_out_of_step_rebuilding", file="vectors", stored=stored)
            self._vectors = None
        return self._build_vectors()

    def _load_vectors(self, path: Path, current: Position) -> _Followed | None:
        if not path.exists():
            return None
        try:
            rows = RowIndex.load(path, "numpy", 0, 0)
        except IndexCorruptError as error:
            self._log.warning("index_file_unreadable_rebuilding", file="vectors", error=str(error))
            return None
        stamp = _Stamp.of(rows.stamp)
        identity = self._identity()
        problem = stamp.problem(current)
        if problem is None and identity is not None and rows.dim != identity.dim:
            problem = f"vectors of {rows.dim} dimensions, the store's have {identity.dim}"
        if problem is None and identity is not None and rows.embedder != identity.name:
            problem = f"vectors of embedder {rows.embedder!r}, the store's are {identity.name!r}"
        if problem is not None:
            self._log.warning("index_file_rejected_rebuilding", file="vectors", reason=problem)
            return None
        return _Followed(rows, stamp.seq, stamp.seq, stamp.erasures)

    def _build_vectors(self) -> _Followed:
        """Rows of every stored vector, read in chunks after noting the log's position.

        Noting it first makes the rows at least as new as their stamp: an item written during
        the scan is applied again by the next catch-up, which changes nothing.
        """
        current: Position = self._read(position)
        entries: list[tuple[str, str, Any]] = []
        after = ""
        while True:
            chunk: list[tuple[str, str, Any]] = self._read(
                functools.partial(_vector_chunk, after=after)
            )
            entries.extend(chunk)
            if len(chunk) < _SCAN_CHUNK:
                break
            after = chunk[-1][0]
        rows = _build_rows(entries, self._identity())
        followed = _Followed(rows, current.seq, -1, current.erasures)
        self._vectors = followed
        self._save_vectors(followed, current)
        return followed

    def _save_vectors(self, followed: _Followed, current: Position) -> None:
        path = self._vector_path()
        rows: RowIndex | None = followed.index
        if path is None or self.read_only or rows is None:
            return
        identity = self._identity()
        rows.embedder = identity.name if identity is not None else rows.embedder
        rows.stamp = _Stamp(current.store_id, followed.seq, followed.erasures).data()
        rows.save(path)
        followed.saved = followed.seq

    # ------------------------------------------------------------------ lexical

    def _lexical_path(self, key: ScopeKey) -> Path | None:
        if self.folder is None:
            return None
        return self.folder / "lexical" / f"{_scope_name(key)}.npz"

    def _open_lexical(self, key: ScopeKey, current: Position) -> _Followed:
        """The saved index, caught up, when it is this store's; else one built afresh."""
        path = self._lexical_path(key)
        loaded = self._load_lexical(key, path, current) if path is not None else None
        if loaded is not None:
            self._lexical[key] = loaded
            self._follow()
            stored = self._scope_count(key)
            if len(loaded.index) == stored:
                return loaded
            self._log.warning("index_file_out_of_step_rebuilding", file="lexical", stored=stored)
            del self._lexical[key]
        return self._build_lexical(key)

    def _load_lexical(self, key: ScopeKey, path: Path, current: Position) -> _Followed | None:
        if not path.exists():
            return None
        try:
            with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            stamp = _Stamp.of(json.loads(bytes(arrays.pop("stamp")).decode()))
            index = LexicalIndex.restore(arrays)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            self._log.warning("index_file_unreadable_rebuilding", file=path.name, error=str(error))
            return None
        problem = stamp.problem(current)
        if problem is None and stamp.scope != _scope_data(key):
            problem = f"the index of scope {stamp.scope}"
        if problem is not None:
            self._log.warning("index_file_rejected_rebuilding", file=path.name, reason=problem)
            return None
        return _Followed(index, stamp.seq, stamp.seq, stamp.erasures)

    def _build_lexical(self, key: ScopeKey) -> _Followed:
        current: Position = self._read(position)
        index = LexicalIndex()
        index.upsert(self._scope_items(key))
        followed = self._lexical[key] = _Followed(index, current.seq, -1, current.erasures)
        self._save_lexical(key, followed, current)
        return followed

    def _save_lexical(self, key: ScopeKey, followed: _Followed, current: Position) -> None:
        path = self._lexical_path(key)
        if path is None or self.read_only:
            return
        index: LexicalIndex = followed.index
        if not len(index):
            # An empty scope (a finished task's, say) costs nothing to build: no file, so
            # scopes that come and go leave none behind.
            path.unlink(missing_ok=True)
            followed.saved = followed.seq
            return
        arrays: dict[str, Any] = dict(index.snapshot())
        stamp = _Stamp(current.store_id, followed.seq, followed.erasures, _scope_data(key))
        arrays["stamp"] = np.frombuffer(json.dumps(stamp.data()).encode(), dtype=np.uint8)
        save_npz(path, arrays)
        followed.saved = followed.seq

    # ------------------------------------------------------------------ items

    def fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        """Items by id, those read before served from memory once the log says unchanged.

        A build fetches its few hundred candidates, most of them read by the builds before;
        a read of the log's position costs less than reading and decoding them again.
        """
        with self.lock:
            self._follow()
            cache: _ItemCache = self._items.index
            found, missing = cache.lookup(item_ids)
            if missing:
                fresh = self._fetch(missing)
                cache.remember(fresh.values())
                found.update(fresh)
            return found

    # ------------------------------------------------------------------ saving

    def save(self) -> None:
        """Write every index that moved since its file was written (after catching up)."""
        with self.lock:
            if self.folder is None or self.read_only or not self._followed():
                return
            current = self._follow()
            if self._vectors is not None and self._vectors.saved != self._vectors.seq:
                self._save_vectors(self._vectors, current)
            for key, followed in self._lexical.items():
                if followed.saved != followed.seq:
                    self._save_lexical(key, followed, current)

    def erased(self) -> None:
        """After an erase: every file rewritten without the erased items, loaded or not."""
        with self.lock:
            if self.folder is None or self.read_only:
                return
            for path in sorted((self.folder / "lexical").glob("*.npz")):
                key = _scope_of_file(path)
                if key is None:
                    path.unlink(missing_ok=True)  # unreadable: useless, and may hold them
                elif key not in self._lexical:
                    self.lexical(key)
            self.vectors()
            current = self._follow()
            if self._vectors is not None:
                self._save_vectors(self._vectors, current)
            for key, followed in self._lexical.items():
                self._save_lexical(key, followed, current)

    def close(self) -> None:
        """Save what moved; the indexes stay usable."""
        self.save()


# ----------------------------------------------------------------------------- helpers


@attrs.frozen
class _Stamp:
    """What a file says it reflects: a store, a log position, and a scope (BM25 files)."""

    store: str
    seq: int
    erasures: int
    scope: list[str | None] | None = None

    @classmethod
    def of(cls, data: Any) -> _Stamp:
        if not isinstance(data, dict):
            return cls("", -1, -1)
        return cls(
            str(data.get("store", "")),
            int(data.get("seq", -1)),
            int(data.get("erasures", -1)),
            data.get("scope"),
        )

    def data(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "seq": self.seq,
            "erasures": self.erasures,
            "scope": self.scope,
        }

    def problem(self, current: Position) -> str | None:
        """Why a file with this stamp cannot be caught up from ``current`` (``None``: it can)."""
        if self.store != current.store_id:
            return "a file of another store"
        if self.seq < 0:
            return "a file without a log position"
        if self.seq > current.seq:
            return f"a file of log position {self.seq}, past the store's {current.seq}"
        return None


class _ItemCache:
    """Items read before, by id, the least recently read dropped past ``limit``."""

    def __init__(self, limit: int = _CACHED_ITEMS) -> None:
        self.limit = limit
        self._items: OrderedDict[str, ContextItem] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def lookup(self, item_ids: Iterable[str]) -> tuple[dict[str, ContextItem], list[str]]:
        """The cached items of ``item_ids``, and the ids to read."""
        found: dict[str, ContextItem] = {}
        missing: list[str] = []
        items = self._items
        for item_id in item_ids:
            item = items.get(item_id)
            if item is None:
                missing.append(item_id)
            else:
                found[item_id] = item
                items.move_to_end(item_id)
        return found, missing

    def remember(self, found: Iterable[ContextItem]) -> None:
        for item in found:
            self._items[item.id] = item
            self._items.move_to_end(item.id)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def refresh(self, changed: list[str], found: dict[str, ContextItem]) -> None:
        """Take the changed items as they now are (drop those gone); others stay out."""
        for item_id in changed:
            if item_id in self._items:
                item = found.get(item_id)
                if item is None:
                    del self._items[item_id]
                else:
                    self._items[item_id] = item

    def clear(self) -> None:
        self._items.clear()


def _same_row(rows: RowIndex, item: ContextItem) -> bool:
    """Whether ``item``'s row already holds its vector in its namespace (nothing to redo)."""
    row = rows.row_of.get(item.id)
    if row is None or rows.namespace_of_row[row] != item.namespace or item.embedding is None:
        return False
    return bool(np.array_equal(rows.vectors()[row], normalize_rows(item.embedding)[0]))


def _scope_data(key: ScopeKey) -> list[str | None]:
    namespace, tier = key
    return [namespace, None if tier is None else tier.value]


def _scope_name(key: ScopeKey) -> str:
    """A file name for a scope: a digest, since namespaces may hold any character."""
    data = json.dumps(_scope_data(key)).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _scope_of_file(path: Path) -> ScopeKey | None:
    """The scope a BM25 file's stamp names (``None``: unreadable)."""
    try:
        with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
            stamp = _Stamp.of(json.loads(bytes(data["stamp"]).decode()))
        namespace, tier = stamp.scope or (None, None)
        return (namespace, None if tier is None else Tier(tier))
    except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile):
        return None


def _entries(found: Iterable[ContextItem]) -> list[tuple[str, str, Any]]:
    """``(id, namespace, normalized vector)`` of items that carry a vector."""
    with_vectors = [item for item in found if item.embedding is not None]
    if not with_vectors:
        return []
    matrix = normalize_rows(np.vstack([item.embedding for item in with_vectors]))  # type: ignore[misc]
    return [(item.id, item.namespace, matrix[n]) for n, item in enumerate(with_vectors)]


def _build_rows(
    entries: list[tuple[str, str, Any]], identity: EmbedderIdentity | None
) -> RowIndex | None:
    if not entries:
        return None
    rows = RowIndex(
        "numpy",
        int(entries[0][2].shape[0]),
        hnsw_m=0,
        ef_construction=0,
        embedder=identity.name if identity is not None else None,
    )
    rows.add(entries)
    return rows


def _vector_chunk(connection: sa.Connection, after: str) -> list[tuple[str, str, Any]]:
    """The next ``_SCAN_CHUNK`` stored vectors by id, normalized, after id ``after``."""
    query = (
        sa.select(items.c.id, items.c.namespace, items.c.embedding)
        .where(items.c.embedding.is_not(None), items.c.id > after)
        .order_by(items.c.id)
        .limit(_SCAN_CHUNK)
    )
    rows = connection.execute(query).all()
    if not rows:
        return []
    # Sizes differ only mid re-embedding, when searches are refused; the re-embedded items'
    # log entries bring the rows in line (rebuilt at the new size) once it is done.
    size = len(rows[0].embedding)
    matrix = np.vstack(
        [np.frombuffer(row.embedding, dtype="<f4") for row in rows if len(row.embedding) == size]
    )
    rows = [row for row in rows if len(row.embedding) == size]
    matrix = normalize_rows(matrix.astype(np.float32))
    return [(row.id, row.namespace, matrix[n]) for n, row in enumerate(rows)]


def _count_vectors(connection: sa.Connection) -> int:
    query = sa.select(sa.func.count()).select_from(items).where(items.c.embedding.is_not(None))
    return int(connection.execute(query).scalar_one())
