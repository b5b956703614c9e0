"""Vector rows: ids, namespaces, tombstones, exact scores and the file, over one storage.

The vector side of :class:`~agent_engine.memory.faiss.FaissBackend` and of the SQLite
store's index file (:mod:`agent_engine.memory.sql._sidecar`). Rows are append-only. The
vectors live in a FAISS index (``"flat"``: ``IndexFlatIP``, ``"hnsw"``: ``IndexHNSWFlat``,
inner product) or, for ``"numpy"``, in a numpy matrix that grows by doubling, which needs
no optional package: the embedded default store searches with it. Deleting or re-embedding
an item marks its row dead (a tombstone), and the rows are rebuilt from the live ones once
the dead ones outnumber them. Append-only rows are what HNSW needs (it cannot remove a node)
and let every kind share one code path.

A dead row forgets its id and namespace at once. A flat or numpy row's vector is zeroed at
once too (nothing reads it again); an HNSW row's vector stays, because the graph still
routes searches through the node, until :meth:`RowIndex.zero_dead_vectors` (which an erase
calls) zeroes it in place. Zeroing costs the removed rows, not the store: a rebuild took as
long as building the graph. The node keeps its place in the graph's neighbour lists (row
numbers, nothing of the item) until the next rebuild; a zero vector scores 0 against every
query, so a search seldom expands it and rarely needs it to reach another node (recall@10 on
20k 128-d vectors went from 0.98 to 0.96 with half the rows zeroed, the most before
compaction).

Exact scores come from numpy on a zero-copy view of the vectors: numpy's BLAS ``X @ q`` runs
at memory bandwidth for one query, where ``IndexFlatIP.search`` falls back to a scalar loop
below twenty queries (measured 2.5x slower, see ``docs/benchmarks.md``).

The saved file is an ``.npz`` (zip, so every member is CRC-checked on read) holding a JSON
header, the row ids, the live-row mask and the vectors (the serialized FAISS index, or the
matrix, which a load maps copy-on-write rather than reading: :func:`_mapped_member`). The
header carries a digest of the ``(id, vector)`` pairs indexed, so an owner can
tell an index that is out of step with its records from one that matches them without
trusting file dates, the name of the embedder that made the vectors (``null`` when
unknown), and the owner's own ``stamp`` (what the SQLite store's file was caught up to).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from agent_engine.embeddings import Matrix
from agent_engine.errors import BackendUnavailableError, IndexCorruptError
from agent_engine.models import Vector

FORMAT_VERSION = 1
_GATHER_CHUNK = 1024
"""Rows of a scope gathered and scored per step (1024 x 384 floats: 1.5 MB, cache-resident)."""
_RUN_ROWS = 256
"""A scope whose contiguous runs average this many rows or more is scored run by run."""
_MASK64 = (1 << 64) - 1
_LOCAL_HEADER = 30
"""Bytes of a ZIP member's local header before its name and extra field."""
_INSTALL_HINT = (
    "the FAISS backend needs the faiss-cpu package: pip install 'agent-engine[faiss]' "
    "(or pip install faiss-cpu)"
)


def load_faiss() -> Any:
    """Import faiss on first use, so the core package works without it."""
    try:
        import faiss  # noqa: PLC0415 - optional dependency, imported lazily on purpose.
    except ImportError as exc:
        raise BackendUnavailableError(_INSTALL_HINT, backend="FaissBackend") from exc
    return faiss


def item_digest(item_id: str, vector: Vector) -> int:
    """A 64-bit hash of one indexed pair; the index digest is their sum modulo 2**64."""
    hasher = hashlib.blake2b(digest_size=8)
    hasher.update(item_id.encode("utf-8", "surrogatepass"))
    hasher.update(b"\0")
    hasher.update(np.ascontiguousarray(vector, dtype=np.float32).tobytes())
    return int.from_bytes(hasher.digest(), "little")


class RowIndex:
    """Vectors by row in a FAISS index, with the row <-> id map, tombstones and namespaces."""

    def __init__(
        self,
        kind: str,
        dim: int,
        *,
        hnsw_m: int,
        ef_construction: int,
        embedder: str | None = None,
    ) -> None:
        self.faiss: Any = load_faiss() if kind != "numpy" else None
        self.kind = kind
        self.dim = dim
        self.embedder = embedder
        """The name of the embedder that made the vectors (``None``: unknown)."""
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.index = self._new_index()
        self.ids: list[str] = []
        self.row_of: dict[str, int] = {}
        self.namespace_of_row: list[str] = []
        self.ns_rows: dict[str, set[int]] = {}
        self.alive = np.zeros(0, dtype=bool)
        self.dead = 0
        self.digest = 0
        self.stamp: dict[str, Any] = {}
        """What the owner records with the rows (saved in the file's header)."""
        self._view: npt.NDArray[np.float32] | None = None
        # Per namespace: its live rows as a sorted array, with the rows written since (an agent
        # writes between steps: re-sorting a large namespace per write cost more than the
        # search), and a bitmap of its rows that HNSW's selector reads, updated in place.
        self._ns_cache: dict[str, npt.NDArray[np.int64]] = {}
        self._ns_added: dict[str, list[int]] = {}
        self._ns_removed: dict[str, list[int]] = {}
        self._bitmaps: dict[str, tuple[npt.NDArray[np.uint8], Any]] = {}
        self._live_selector: tuple[npt.NDArray[np.int64], Any, Any] | None = None
        self._dead_cache: npt.NDArray[np.int64] | None = None
        # Dead HNSW rows whose vector the graph still holds (flat rows are zeroed at once).
        self._kept_vectors: list[int] = []

    def _new_index(self) -> Any:
        if self.kind == "numpy":
            return _Matrix(self.dim)
        if self.kind == "hnsw":
            index = self.faiss.IndexHNSWFlat(self.dim, self.hnsw_m, self.faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            return index
        return self.faiss.IndexFlatIP(self.dim)

    # ------------------------------------------------------------------ state

    @property
    def size(self) -> int:
        """Rows in the index, dead ones included."""
        return len(self.ids)

    @property
    def live(self) -> int:
        """Rows that belong to a stored item."""
        return len(self.row_of)

    def vectors(self) -> npt.NDArray[np.float32]:
        """A zero-copy ``(rows, dim)`` view of the index's storage (valid until the next add)."""
        if self._view is None and self.kind == "numpy":
            self._view = self.index.view()
        if self._view is None:
            storage = self.index if self.kind == "flat" else self.index.storage
            flat = self.faiss.downcast_index(storage)
            n = self.index.ntotal
            if n == 0:
                self._view = np.zeros((0, self.dim), dtype=np.float32)
            else:
                self._view = self.faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(
                    n, self.dim
                )
        return self._view

    def namespace_rows(self, namespace: str) -> npt.NDArray[np.int64]:
        """Live rows of one namespace, sorted.

        Kept between searches and brought up to date with the rows written since: rows are
        appended in increasing order, so new ones extend the sorted array as they are.
        """
        rows = self._ns_cache.get(namespace)
        if rows is None:
            rows = np.fromiter(self.ns_rows.get(namespace, ()), dtype=np.int64)
            rows.sort()
        else:
            added = self._ns_added.pop(namespace, None)
            removed = self._ns_removed.pop(namespace, None)
            if added:
                rows = np.concatenate((rows, np.asarray(added, dtype=np.int64)))
            if removed:
                rows = rows[~np.isin(rows, np.asarray(removed, dtype=np.int64))]
        self._ns_cache[namespace] = rows
        return rows

    def namespace_selector(self, namespace: str) -> Any:
        """A FAISS ID selector of one namespace's live rows.

        A bitmap over every row, which writes update in place; it is built again only when
        the index outgrows it (with room for as many rows again).
        """
        cached = self._bitmaps.get(namespace)
        if cached is not None and len(cached[0]) * 8 >= self.size:
            return cached[1]
        capacity = max(2 * self.size, 8192)
        mask = np.zeros(capacity, dtype=bool)
        mask[self.namespace_rows(namespace)] = True
        bits = np.packbits(mask, bitorder="little")
        selector = self.faiss.IDSelectorBitmap(len(bits), self.faiss.swig_ptr(bits))
        self._bitmaps[namespace] = (bits, selector)  # the selector reads ``bits``: keep both
        return selector

    def _forget_rows(self, namespace: str) -> None:
        self._ns_cache.pop(namespace, None)
        self._ns_added.pop(namespace, None)
        self._ns_removed.pop(namespace, None)
        self._bitmaps.pop(namespace, None)

    def _mark(self, namespace: str, row: int, *, member: bool) -> None:
        """Record that ``row`` joined or left ``namespace`` in its kept rows and bitmap."""
        if namespace in self._ns_cache:
            changes = self._ns_added if member else self._ns_removed
            changes.setdefault(namespace, []).append(row)
        cached = self._bitmaps.get(namespace)
        if cached is not None:
            bits = cached[0]
            if row >= len(bits) * 8:
                del self._bitmaps[namespace]  # outgrown: rebuilt, larger, at the next search
            elif member:
                bits[row >> 3] |= 1 << (row & 7)
            else:
                bits[row >> 3] &= ~(1 << (row & 7)) & 0xFF

    def dead_rows(self) -> npt.NDArray[np.int64]:
        """Rows marked dead (cached until the next change)."""
        if self._dead_cache is None:
            self._dead_cache = np.flatnonzero(~self.alive).astype(np.int64)
        return self._dead_cache

    def live_selector(self) -> Any:
        """A FAISS selector that skips dead rows (kept until the dead rows change)."""
        dead = self.dead_rows()
        if self._live_selector is None or self._live_selector[0] is not dead:
            # The inner selector is kept too: the outer one only points at it.
            inner = self.faiss.IDSelectorBatch(dead)
            self._live_selector = (dead, inner, self.faiss.IDSelectorNot(inner))
        return self._live_selector[2]

    # ------------------------------------------------------------------ writes

    def add(self, entries: list[tuple[str, str, Vector]]) -> None:
        """Append ``(id, namespace, normalized vector)`` rows; earlier rows of those ids die."""
        if not entries:
            return
        for item_id, _, _ in entries:
            self.remove(item_id)
        matrix = np.ascontiguousarray(np.vstack([vector for _, _, vector in entries]))
        first = self.size
        self.index.add(matrix.astype(np.float32, copy=False))
        self._view = None
        self.alive = np.concatenate([self.alive, np.ones(len(entries), dtype=bool)])
        self._dead_cache = None
        for offset, (item_id, namespace, vector) in enumerate(entries):
            row = first + offset
            self.ids.append(item_id)
            self.namespace_of_row.append(namespace)
            self.row_of[item_id] = row
            self.ns_rows.setdefault(namespace, set()).add(row)
            self._mark(namespace, row, member=True)
            self.digest = (self.digest + item_digest(item_id, vector)) & _MASK64

    def remove(self, item_id: str) -> bool:
        """Mark the row of ``item_id`` dead and blank it; return whether it had one."""
        row = self.row_of.pop(item_id, None)
        if row is None:
            return False
        self.alive[row] = False
        self.dead += 1
        self._dead_cache = None
        namespace = self.namespace_of_row[row]
        members = self.ns_rows[namespace]
        members.discard(row)
        if not members:
            del self.ns_rows[namespace]
        self._mark(namespace, row, member=False)
        self.digest = (self.digest - item_digest(item_id, self.vectors()[row])) & _MASK64
        self._blank(row)
        return True

    def _blank(self, row: int) -> None:
        """Drop a dead row's id and namespace, and its vector where nothing reads it (flat)."""
        self.ids[row] = ""
        self.namespace_of_row[row] = ""
        if self.kind != "hnsw":
            self.vectors()[row] = 0.0
        else:
            self._kept_vectors.append(row)

    def zero_dead_vectors(self) -> None:
        """Zero, in place, the vectors an HNSW graph still holds for dead rows.

        Afterwards no dead row keeps anything of its item in memory or in the next saved
        file; only its links stay in the graph (see the module docstring). Costs the rows
        removed since the last call, whatever the size of the index.
        """
        if self._kept_vectors:
            self.vectors()[np.asarray(self._kept_vectors, dtype=np.int64)] = 0.0
            self._kept_vectors = []

    def move(self, item_id: str, namespace: str) -> None:
        """Record that a live item changed namespace (its vector stays)."""
        row = self.row_of[item_id]
        old = self.namespace_of_row[row]
        if old == namespace:
            return
        self.ns_rows[old].discard(row)
        if not self.ns_rows[old]:
            del self.ns_rows[old]
        self.ns_rows.setdefault(namespace, set()).add(row)
        self.namespace_of_row[row] = namespace
        self._forget_rows(old)  # an old row joins the other: its sorted rows are built anew
        self._forget_rows(namespace)

    def needs_compaction(self) -> bool:
        """Whether dead rows outnumber live ones (and are worth a rebuild)."""
        return self.dead > max(1024, self.live)

    def compacted(self) -> RowIndex:
        """A fresh index holding only the live rows, in row order."""
        fresh = RowIndex(
            self.kind,
            self.dim,
            hnsw_m=self.hnsw_m,
            ef_construction=self.ef_construction,
            embedder=self.embedder,
        )
        fresh.stamp = dict(self.stamp)
        rows = np.flatnonzero(self.alive)
        vectors = self.vectors()
        fresh.add([(self.ids[r], self.namespace_of_row[r], vectors[r]) for r in rows])
        return fresh

    # ------------------------------------------------------------------ search

    def exact_scores(
        self, query: Vector, rows: npt.NDArray[np.int64] | None
    ) -> npt.NDArray[np.float32]:
        """Scores of ``rows`` (all rows when ``None``, dead ones at -inf)."""
        vectors = self.vectors()
        if rows is not None and len(rows):
            breaks = np.flatnonzero(np.diff(rows) != 1) + 1
            if len(breaks) * _RUN_ROWS < len(rows):
                # Few long runs (a namespace written in batches, or one namespace holding the
                # whole store): each run is a slice of the storage, scored where it lies
                # without the gather's copy.
                scores = np.empty(len(rows), dtype=np.float32)
                starts = [0, *breaks.tolist()]
                for start, end in zip(starts, [*starts[1:], len(rows)], strict=True):
                    first = int(rows[start])
                    np.dot(vectors[first : first + end - start], query, out=scores[start:end])
                return scores
            # Gathered in cache-sized chunks: no copy of the whole scope per search, and
            # each chunk is scored while it is still in cache.
            scores = np.empty(len(rows), dtype=np.float32)
            for start in range(0, len(rows), _GATHER_CHUNK):
                chunk = rows[start : start + _GATHER_CHUNK]
                np.dot(vectors[chunk], query, out=scores[start : start + len(chunk)])
            return scores
        scores = vectors @ query
        if self.dead:
            scores[self.dead_rows()] = -np.inf
        return scores

    def exact_scores_many(
        self, queries: Matrix, rows: npt.NDArray[np.int64] | None
    ) -> npt.NDArray[np.float32]:
        """:meth:`exact_scores` of each query, one row per query, in one pass over ``rows``.

        Each cache-sized chunk of stored vectors is read once for all the queries.
        """
        vectors = self.vectors()
        if rows is None:
            scores: npt.NDArray[np.float32] = queries @ vectors.T
            if self.dead:
                scores[:, self.dead_rows()] = -np.inf
            return scores
        scores = np.empty((len(queries), len(rows)), dtype=np.float32)
        for start in range(0, len(rows), _GATHER_CHUNK):
            chunk = rows[start : start + _GATHER_CHUNK]
            scores[:, start : start + len(chunk)] = queries @ vectors[chunk].T
        return scores

    def approximate(
        self, query: Vector, k: int, ef_search: int, namespace: str | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """HNSW's ``k`` best live rows (of ``namespace`` when given), best first."""
        faiss = self.faiss
        selector = None
        if namespace is not None:
            selector = self.namespace_selector(namespace)
        elif self.dead:
            selector = self.live_selector()
        params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(ef_search, k))
        scores, labels = self.index.search(query.reshape(1, -1), k, params=params)
        keep = labels[0] >= 0
        return labels[0][keep].astype(np.int64), scores[0][keep]

    # ------------------------------------------------------------------ file

    def _serialized(self) -> npt.NDArray[Any]:
        if self.kind == "numpy":
            return self.vectors()
        blob: npt.NDArray[Any] = self.faiss.serialize_index(self.index)
        return blob

    def _deserialized(self, blob: npt.NDArray[Any]) -> Any:
        if self.kind == "numpy":
            if blob.dtype != np.float32 or blob.ndim != 2 or blob.shape[1] != self.dim:  # noqa: PLR2004
                raise ValueError(f"vectors of shape {blob.shape} and type {blob.dtype}")
            # Mapped or freshly read, the array is ours: copying 150 MB at 100k rows doubled
            # the load of a new process.
            return _Matrix(self.dim, blob)
        return self.faiss.deserialize_index(blob.astype(np.uint8, copy=False))

    def save(self, path: Path) -> None:
        """Write the index to ``path`` atomically: a temp file in the same folder, then rename."""
        header = {
            "format": FORMAT_VERSION,
            "kind": self.kind,
            "dim": self.dim,
            "embedder": self.embedder,
            "hnsw_m": self.hnsw_m,
            "live": self.live,
            "digest": str(self.digest),
            "stamp": self.stamp,
        }
        save_npz(
            path,
            {
                "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                "ids": np.array(self.ids, dtype=np.str_),
                "namespaces": np.array(self.namespace_of_row, dtype=np.str_),
                "alive": self.alive,
                "index": self._serialized(),
            },
        )

    @classmethod
    def load(cls, path: Path, kind: str, hnsw_m: int, ef_construction: int) -> RowIndex:
        """Read a saved index; raise IndexCorruptError if it is unreadable or not of this kind."""
        try:
            # Our own handle: np.load leaves its file open when the zip directory is torn.
            with path.open("rb") as handle, np.load(handle, allow_pickle=False) as data:
                header = json.loads(bytes(data["header"]).decode())
                ids = data["ids"].tolist()  # C-level: a file of 100k rows loads in milliseconds
                namespaces = data["namespaces"].tolist()
                alive = np.asarray(data["alive"], dtype=bool)
                mapped = _mapped_member(handle, "index.npy") if kind == "numpy" else None
                blob = np.asarray(data["index"]) if mapped is None else mapped
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise IndexCorruptError(f"cannot read {path}: {exc}", backend="FaissBackend") from exc
        if (
            header.get("format") != FORMAT_VERSION
            or header.get("kind") != kind
            or (kind == "hnsw" and header.get("hnsw_m") != hnsw_m)
            or not (len(ids) == len(namespaces) == len(alive))
        ):
            raise IndexCorruptError(
                f"{path} holds another kind or version of index", backend="FaissBackend"
            )
        embedder = header.get("embedder")
        loaded = cls(
            kind,
            int(header["dim"]),
            hnsw_m=hnsw_m,
            ef_construction=ef_construction,
            embedder=embedder if isinstance(embedder, str) else None,
        )
        try:
            loaded.index = loaded._deserialized(blob)
        except (RuntimeError, ValueError) as exc:
            raise IndexCorruptError(f"cannot read {path}: {exc}", backend="FaissBackend") from exc
        if loaded.index.ntotal != len(ids) or loaded.index.d != loaded.dim:
            raise IndexCorruptError(f"{path} is inconsistent", backend="FaissBackend")
        loaded.ids = ids
        loaded.namespace_of_row = namespaces
        loaded.alive = alive
        loaded.dead = int((~alive).sum())
        for row in np.flatnonzero(~alive):
            loaded._blank(int(row))  # a file written before dead rows were blanked
        live = np.flatnonzero(alive)
        live_rows = live.tolist()
        loaded.row_of = dict(zip([ids[row] for row in live_rows], live_rows, strict=True))
        names, members = np.unique(np.asarray(namespaces)[live], return_inverse=True)
        order = np.argsort(members, kind="stable")
        bounds = np.searchsorted(members[order], np.arange(len(names) + 1))
        for code, name in enumerate(names.tolist()):
            loaded.ns_rows[name] = set(live[order[bounds[code] : bounds[code + 1]]].tolist())
        loaded.digest = int(header["digest"])
        stamp = header.get("stamp")
        loaded.stamp = stamp if isinstance(stamp, dict) else {}
        if loaded.live != header.get("live") or len(loaded.row_of) + loaded.dead != len(ids):
            raise IndexCorruptError(f"{path} is inconsistent", backend="FaissBackend")
        return loaded


class _Matrix:
    """Vectors in a numpy matrix that grows by doubling: the storage of ``"numpy"`` rows."""

    def __init__(self, dim: int, rows: npt.NDArray[np.float32] | None = None) -> None:
        self.d = dim
        self._data = rows if rows is not None else np.zeros((0, dim), dtype=np.float32)
        self.ntotal = len(self._data)

    def add(self, matrix: npt.NDArray[np.float32]) -> None:
        needed = self.ntotal + len(matrix)
        if needed > len(self._data):
            grown = np.zeros((max(needed, 2 * len(self._data), 1024), self.d), dtype=np.float32)
            grown[: self.ntotal] = self._data[: self.ntotal]
            self._data = grown
        self._data[self.ntotal : needed] = matrix
        self.ntotal = needed

    def view(self) -> npt.NDArray[np.float32]:
        return self._data[: self.ntotal]


def _mapped_member(handle: BinaryIO, name: str) -> npt.NDArray[Any] | None:
    """The array of member ``name`` of an open ``.npz``, mapped copy-on-write, CRC-checked.

    A new process would otherwise allocate and fill the whole matrix (150 MB at 100k rows of
    384 floats) before its first search; mapped, the file's pages come from the page cache
    and are shared by every process that maps them, and a write (a dead row zeroed) copies
    only the page it touches. The CRC is checked over the mapping, as a read would check it
    (a damaged file is rejected, not searched). ``None`` where the member cannot be mapped
    (compressed, or not a plain C-ordered array, or no ``mmap`` here): the caller reads it.
    The file is never written in place (:func:`save_npz` renames a new one over it), so the
    mapping stays valid for as long as the rows live; another program truncating the file in
    place would make a later read of a lost page fail with ``SIGBUS``.
    """
    if os.name != "posix":  # a mapped file cannot be renamed over on Windows
        return None
    archive = zipfile.ZipFile(handle)
    info = archive.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    # Where the member's bytes start: after its local header (ZIP's APPNOTE 4.3.7: 30 bytes,
    # then the name and the extra field, whose lengths are its last four bytes).
    handle.seek(info.header_offset)
    local = handle.read(_LOCAL_HEADER)
    if len(local) != _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for file {name!r}")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    start = info.header_offset + _LOCAL_HEADER + name_length + extra_length
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version != (1, 0):
            return None
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
        offset = start + member.tell()
    if fortran or dtype.hasobject:
        return None
    mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    if zlib.crc32(memoryview(mapping)[start : start + info.file_size]) != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC-32 for file {name!r}")
    count = int(np.prod(shape))
    return np.frombuffer(mapping, dtype=dtype, count=count, offset=offset).reshape(shape)


def save_npz(path: Path, arrays: dict[str, npt.NDArray[Any]]) -> None:
    """Write ``arrays`` to ``path`` atomically: a synced temp file beside it, then a rename.

    A crash at any point leaves either the previous file or the new one, never a torn one
    under the name (a torn temp file is removed by :func:`remove_stale_temps`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)  # type: ignore[arg-type]
            handle.flush()
            os.fsync(handle.fileno())
        Path(temp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(temp).unlink()
        raise
    _fsync_dir(path.parent)


def remove_stale_temps(folder: Path, pattern: str) -> None:
    """Delete the temp files a killed writer left beside the files matching ``pattern``."""
    for temp in folder.glob(f".{pattern}.*.tmp"):
        temp.unlink(missing_ok=True)


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
