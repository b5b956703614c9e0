"""The FAISS index file: reused when in step, rebuilt (never trusted) when it is not.

A saved index is a cache of the record store's vectors. These tests damage it the ways real
files get damaged (a writer killed mid-save, a truncated copy, flipped bytes, a store that
moved on) and check that the backend notices, says so in a warning, rebuilds from the store
and loses nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import attrs
import numpy as np
import pytest
from structlog.testing import capture_logs

from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import DimensionMismatchError, EmbedderMismatchError
from agent_engine.memory._vector_rows import RowIndex
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.testing.conformance import make_item

DIM = 32


def _items(start: int, stop: int):
    return [
        make_item(n, text=f"durable memory {n} about topic {n % 17}") for n in range(start, stop)
    ]


def _store(items) -> InMemoryBackend:
    store = InMemoryBackend(embedder=HashingEmbedder(dim=DIM))
    store.add_many(items)
    return store


def _open(store, path: Path, **options) -> tuple[FaissBackend, list[str]]:
    with capture_logs() as logs:
        backend = FaissBackend(store, embedder=HashingEmbedder(dim=DIM), index_path=path, **options)
    return backend, [entry["event"] for entry in logs if entry["log_level"] == "warning"]


def _assert_complete(backend: FaissBackend, items) -> None:
    """Every stored item is found by its own vector, and nothing else is indexed."""
    assert backend._rows is not None
    assert backend._rows.live == len(items)
    for item in items[:: max(1, len(items) // 25)]:
        stored = backend.get(item.id)
        assert stored is not None
        assert stored.embedding is not None
        hits = backend.search(stored.embedding, k=1, filters={"namespace": stored.namespace})
        assert hits[0].item.id == item.id
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)


@pytest.fixture
def saved(tmp_path):
    """An index file saved for a store holding 200 items."""
    items = _items(0, 200)
    store = _store(items)
    path = tmp_path / "vectors.faiss"
    backend, _ = _open(store, path)
    backend.close()
    return store, path, items


class TestIndexFile:
    def test_in_step_file_is_loaded_without_rebuild(self, saved):
        """A file matching the store is used as is: no warning, same rows."""
        store, path, items = saved
        backend, warnings = _open(store, path)
        assert warnings == []
        _assert_complete(backend, items)

    def test_missing_file_is_rebuilt_from_the_store(self, saved):
        """Deleting the file costs a rebuild, not an item."""
        store, path, items = saved
        path.unlink()
        backend, warnings = _open(store, path)
        assert warnings == ["faiss_index_missing_rebuilding"]
        _assert_complete(backend, items)
        assert path.exists()

    @pytest.mark.parametrize("damage", ["truncated", "flipped-bytes", "garbage", "empty"])
    def test_corrupt_file_is_rebuilt(self, saved, damage):
        """A torn or overwritten file is detected (zip CRCs, header checks) and rebuilt."""
        store, path, items = saved
        data = bytearray(path.read_bytes())
        if damage == "truncated":
            data = data[: len(data) // 2]
        elif damage == "flipped-bytes":
            middle = len(data) // 2
            data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
        elif damage == "garbage":
            data = bytearray(os.urandom(len(data)))
        else:
            data = bytearray()
        path.write_bytes(bytes(data))
        backend, warnings = _open(store, path)
        assert warnings == ["faiss_index_corrupt_rebuilding"]
        _assert_complete(backend, items)
        RowIndex.load(path, "flat", 32, 80)  # the rebuilt file is whole again

    def test_stale_file_is_rebuilt(self, saved):
        """Items written to the store behind the index's back make it out of step."""
        store, path, items = saved
        extra = _items(200, 210)
        store.add_many(extra)
        store.delete("item-00003")
        changed = store.get("item-00004")
        assert changed is not None
        store.update(attrs.evolve(changed, text="rewritten entirely"))
        backend, warnings = _open(store, path)
        assert warnings == ["faiss_index_out_of_step_rebuilding"]
        expected = [i for i in items + extra if i.id != "item-00003"]
        _assert_complete(backend, expected)
        hits = backend.search("rewritten entirely", k=1)
        assert hits[0].item.id == "item-00004"

    def test_file_of_another_kind_is_rebuilt(self, saved):
        """A flat index file opened as HNSW is not misread: it is rebuilt as HNSW."""
        store, path, items = saved
        backend, warnings = _open(store, path, index="hnsw")
        assert warnings == ["faiss_index_corrupt_rebuilding"]
        _assert_complete(backend, items)


class TestEmbedder:
    def test_file_of_another_embedder_is_rebuilt(self, tmp_path):
        """An index saved for one embedder is rebuilt for another, even with equal vectors."""
        made_by, other = HashingEmbedder(dim=DIM), HashingEmbedder(dim=DIM, bigrams=False)
        items = [
            attrs.evolve(item, embedding=made_by.embed([item.text])[0]) for item in _items(0, 50)
        ]
        store = InMemoryBackend(dim=DIM)  # vectors given by the caller: no name to check
        store.add_many(items)
        path = tmp_path / "vectors.faiss"
        FaissBackend(store, embedder=made_by, index_path=path).close()
        assert RowIndex.load(path, "flat", 32, 80).embedder == made_by.name
        with capture_logs() as logs:
            backend = FaissBackend(store, embedder=other, index_path=path)
        warnings = [entry["event"] for entry in logs if entry["log_level"] == "warning"]
        assert warnings == ["faiss_index_embedder_changed_rebuilding"]
        backend.close()
        assert RowIndex.load(path, "flat", 32, 80).embedder == other.name

    def test_store_of_another_embedder_is_refused(self, saved):
        """A record store whose vectors another embedder made is refused, its file untouched."""
        store, path, _ = saved
        before = path.read_bytes()
        with pytest.raises(DimensionMismatchError, match="hashing-32-bigrams"):
            FaissBackend(store, embedder=HashingEmbedder(dim=16), index_path=path)
        with pytest.raises(EmbedderMismatchError):
            FaissBackend(store, embedder=HashingEmbedder(dim=DIM, bigrams=False))
        assert path.read_bytes() == before

    def test_reembed_rebuilds_the_index_for_the_new_embedder(self, saved):
        """After reembed the index holds only new vectors, and the saved file says so."""
        store, path, items = saved
        backend, _ = _open(store, path)
        new = HashingEmbedder(dim=16)
        assert backend.reembed(new, batch_size=64) == len(items)
        assert backend._rows is not None
        assert (backend._rows.dim, backend._rows.live) == (16, len(items))
        target = store.get("item-00042")
        assert target is not None
        hits = backend.search(target.text, k=1, filters={"namespace": target.namespace})
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        backend.save()
        with capture_logs() as logs:
            FaissBackend(store, embedder=new, index_path=path)
        assert [entry for entry in logs if entry["log_level"] == "warning"] == []
        with pytest.raises(DimensionMismatchError):
            FaissBackend(store, embedder=HashingEmbedder(dim=DIM), index_path=path)


WRITER = textwrap.dedent(
    """
    import sys
    from agent_engine.embeddings import HashingEmbedder
    from agent_engine.memory.faiss import FaissBackend
    from agent_engine.testing.conformance import make_item

    path = sys.argv[1]
    backend = FaissBackend(embedder=HashingEmbedder(dim=32), index_path=path)
    batch = 0
    while True:
        items = [make_item(n, text=f"durable memory {n} about topic {n % 17}")
                 for n in range(batch * 500, (batch + 1) * 500)]
        backend.add_many(items)
        backend.save()
        print(batch, flush=True)
        batch += 1
    """
)


def test_index_survives_a_killed_writer(tmp_path):
    """SIGKILL while a writer saves over and over: the file is whole, and a reopen is exact.

    The file holds either the last batch the writer reported or the one after (saved but not
    yet reported); against a store holding the reported batches, the first loads and the
    second is rebuilt as out of step. Either way no item is lost and no temp file remains.
    """
    path = tmp_path / "vectors.faiss"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen(  # noqa: S603 - our own interpreter and script.
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert writer.stdout is not None
    last = -1
    for line in writer.stdout:
        last = int(line)
        if last >= 3:
            break
    time.sleep(np.random.default_rng().uniform(0.0, 0.05))
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    RowIndex.load(path, "flat", 32, 80)  # never torn, whenever the kill landed
    items = _items(0, (last + 1) * 500)
    backend, warnings = _open(_store(items), path)
    assert warnings in ([], ["faiss_index_out_of_step_rebuilding"])
    _assert_complete(backend, items)
    assert list(tmp_path.glob("*.tmp")) == []
