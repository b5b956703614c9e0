"""The SQLite store's index files: loaded when in step, caught up from the log, never trusted.

The files beside the database are caches of it. These tests write the store from several
backend objects (as several processes do), damage the files the ways real files get damaged
(a truncated copy, a file of another store or embedder, a database restored from an older
copy, a writer killed between its commit and its save) and check that every search answers
from what the database holds, with a warning and a rebuild where a file cannot be trusted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import attrs
import numpy as np
import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import IndexCorruptError
from agent_engine.memory._vector_rows import RowIndex
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.memory.sql._changes import position
from agent_engine.models import ArchiveReason, ContextItem, Tier
from tests.integration.conftest import DAMAGES, damage_file

DIM = 32
SCOPE = {"namespace": "project:files", "tier": "project"}


def _items(start: int, stop: int, *, word: str = "topic") -> list[ContextItem]:
    return [
        ContextItem(
            id=f"item-{n:05d}",
            kind="note",
            text=f"durable memory {n} about {word} {n % 17}",
            namespace="project:files",
            tier=Tier.PROJECT,
            session=f"s{n // 10}",
        )
        for n in range(start, stop)
    ]


def _open(path: Path, **options) -> tuple[SQLAlchemyBackend, list[str]]:
    with capture_logs() as logs:
        backend = SQLAlchemyBackend(
            f"sqlite:///{path}", embedder=HashingEmbedder(dim=DIM), **options
        )
    return backend, [entry["event"] for entry in logs if entry["log_level"] == "warning"]


def _searched(backend: SQLAlchemyBackend) -> tuple[list[str], list[str]]:
    """A search by meaning and a full-text search, with the warnings they logged."""
    with capture_logs() as logs:
        dense = [hit.item.id for hit in backend.search("durable memory about topic 3", k=5)]
        lexical = [hit.item.id for hit in backend.lexical_search("topic", k=5, filters=SCOPE)]
    warnings = [entry["event"] for entry in logs if entry["log_level"] == "warning"]
    return [*dense, *lexical], warnings


def _assert_complete(backend: SQLAlchemyBackend, items: list[ContextItem]) -> None:
    """Every stored item is found by its own text, by meaning and by its words."""
    for item in items[:: max(1, len(items) // 20)]:
        stored = backend.get(item.id)
        assert stored is not None
        hits = backend.search(stored.text, k=1, filters=SCOPE)
        assert hits[0].item.id == item.id
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        found = backend.lexical_index(SCOPE).hits(stored.text).best(len(items))
        assert item.id in found
    assert len(backend.lexical_index(SCOPE)) == backend.count({**SCOPE, "valid_to": None})


@pytest.fixture
def saved(tmp_path):
    """A store of 200 items whose index files were written by a closed backend."""
    path = tmp_path / "store.db"
    items = _items(0, 200)
    backend, _ = _open(path)
    backend.add_many(items)
    _searched(backend)
    backend.close()
    return path, items


@contextlib.contextmanager
def _statements(backend: SQLAlchemyBackend) -> Iterator[list[str]]:
    """The SQL statements ``backend`` runs inside the block."""
    seen: list[str] = []

    def record(_connection, _cursor, statement, *_args) -> None:
        seen.append(statement)

    sa.event.listen(backend.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(backend.engine, "before_cursor_execute", record)


def _vector_file(path: Path) -> Path:
    return Path(f"{path}.indexes") / "vectors.npz"


def _lexical_files(path: Path) -> list[Path]:
    return sorted((Path(f"{path}.indexes") / "lexical").glob("*.npz"))


class TestFiles:
    def test_files_are_written_beside_the_database(self, saved):
        path, _ = saved
        assert _vector_file(path).exists()
        assert len(_lexical_files(path)) == 1

    def test_in_step_files_are_loaded_without_rebuild(self, saved):
        path, items = saved
        backend, warnings = _open(path)
        with backend:
            found, searched = _searched(backend)
            assert warnings == searched == []
            _assert_complete(backend, items)
            assert found

    def test_index_path_puts_the_files_elsewhere(self, tmp_path):
        elsewhere = tmp_path / "cache"
        backend, _ = _open(tmp_path / "store.db", index_path=elsewhere)
        with backend:
            backend.add_many(_items(0, 20))
            _searched(backend)
        assert (elsewhere / "vectors.npz").exists()
        assert not Path(f"{tmp_path / 'store.db'}.indexes").exists()

    def test_unindexed_store_scans_and_agrees(self, saved):
        path, _ = saved
        indexed, _ = _open(path)
        scanning, _ = _open(path, indexed=False)
        with indexed, scanning:
            assert _searched(indexed)[0] == _searched(scanning)[0]
            query = "durable memory 7 about topic 7"
            assert [(h.item.id, round(h.score, 5)) for h in indexed.search(query, k=10)] == [
                (h.item.id, round(h.score, 5)) for h in scanning.search(query, k=10)
            ]

    def test_an_emptied_scope_leaves_no_file(self, saved):
        """Scopes come and go (a task's, say): one emptied has its file removed, not kept."""
        path, _ = saved
        backend, _ = _open(path)
        with backend:
            backend.clear(SCOPE)
            assert len(backend.lexical_index(SCOPE)) == 0
        assert _lexical_files(path) == []
        reopened, warnings = _open(path)
        with reopened:
            assert warnings == []
            assert reopened.lexical_search("topic", k=5, filters=SCOPE) == []

    def test_read_only_store_uses_the_files_and_never_writes_them(self, saved):
        path, items = saved
        before = {p: p.read_bytes() for p in [_vector_file(path), *_lexical_files(path)]}
        writer, _ = _open(path)
        writer.add_many(_items(200, 210))
        reader, _ = _open(path, read_only=True)
        with reader, _statements(reader) as statements:
            _assert_complete(reader, items + _items(200, 210))
        # Loaded and caught up, not rebuilt: no statement read every vector or every text.
        assert statements
        assert not [s for s in statements if "ORDER BY ae_items.id" in s]
        writer.engine.dispose()  # no save: the files stay as they were
        assert {p: p.read_bytes() for p in before} == before


class TestOtherWriters:
    def test_another_writers_changes_show_in_the_next_search(self, saved):
        """Two backends on one file, as two processes: adds, edits and deletes cross over."""
        path, items = saved
        mine, _ = _open(path)
        theirs, _ = _open(path)
        with mine, theirs:
            _searched(mine)
            rows, index = mine._files.vectors(), mine.lexical_index(SCOPE)
            theirs.add_many(_items(200, 230, word="zebra"))
            theirs.delete("item-00003")
            changed = theirs.get("item-00004")
            assert changed is not None
            theirs.update(attrs.evolve(changed, text="rewritten entirely quokka"))
            expected = [i for i in items + _items(200, 230) if i.id != "item-00003"]
            _assert_complete(mine, expected)
            # Its session neighbours match too (they lend each other terms); it ranks first.
            assert mine.lexical_search("quokka", k=3, filters=SCOPE)[0].item.id == "item-00004"
            assert mine.lexical_search("zebra", k=100, filters=SCOPE)[0].item.id.startswith(
                "item-002"
            )
            assert mine.get("item-00003") is None
            assert "item-00003" not in mine.lexical_index(SCOPE).item_ids()
            # Caught up in place, not rebuilt.
            assert mine._files.vectors() is rows
            assert mine.lexical_index(SCOPE) is index

    def test_items_read_before_follow_every_change_of_another_writer(self, saved):
        """Items are served from memory once read; any change elsewhere (an access count, an
        archive mark, a pin) shows in the next read, and the indexes are not redone."""
        path, _ = saved
        mine, _ = _open(path)
        theirs, _ = _open(path)
        with mine, theirs:
            _searched(mine)
            before = mine.get_many(["item-00001", "item-00002", "item-00005"])
            weights = dict(mine.lexical_index(SCOPE)._weights)
            assert weights
            start = theirs._files._read(position).seq
            theirs.touch(["item-00001"], datetime.now(UTC))
            theirs.set_archived(["item-00002"], datetime.now(UTC), ArchiveReason.EVICTED)
            stored = theirs.get("item-00005")
            assert stored is not None
            theirs.update(attrs.evolve(stored, importance=0.99))
            assert theirs._files._read(position).seq > start
            after = {item.id: item for item in mine.get_many([i.id for i in before])}
            assert after["item-00001"].access_count == before[0].access_count + 1
            assert after["item-00002"].archived_at is not None
            assert after["item-00005"].importance == 0.99
            # Nothing an index reads changed: its rows and cached term weights stay.
            assert mine.lexical_index(SCOPE)._weights.keys() == weights.keys()


class TestUntrustedFiles:
    @pytest.mark.parametrize("damage", DAMAGES)
    @pytest.mark.parametrize("which", ["vectors", "lexical"])
    def test_damaged_file_is_rebuilt(self, saved, damage, which):
        path, items = saved
        target = _vector_file(path) if which == "vectors" else _lexical_files(path)[0]
        damage_file(target, damage)
        backend, _ = _open(path)
        with backend:
            _, warnings = _searched(backend)
            assert warnings == ["index_file_unreadable_rebuilding"]
            _assert_complete(backend, items)
        assert _searched(_open(path)[0])[1] == []  # the rebuilt file is whole again

    def test_file_of_another_store_is_rebuilt(self, saved, tmp_path):
        """Index files copied beside another database do not answer for it."""
        path, _ = saved
        other = tmp_path / "other.db"
        backend, _ = _open(other)
        other_items = _items(500, 560)
        backend.add_many(other_items)
        backend.engine.dispose()
        shutil.rmtree(f"{other}.indexes", ignore_errors=True)
        shutil.copytree(f"{path}.indexes", f"{other}.indexes")
        reopened, _ = _open(other)
        with reopened:
            _, warnings = _searched(reopened)
            assert warnings == ["index_file_rejected_rebuilding"] * 2
            _assert_complete(reopened, other_items)

    def test_file_of_another_embedder_is_rebuilt(self, tmp_path):
        """A store re-embedded by another program: its files hold the old model's vectors."""
        path = tmp_path / "store.db"
        items = _items(0, 50)
        backend, _ = _open(path)
        backend.add_many(items)
        _searched(backend)
        backend.close()
        other = HashingEmbedder(dim=DIM, bigrams=False)
        scanning = SQLAlchemyBackend(f"sqlite:///{path}", indexed=False)
        scanning.reembed(other)
        scanning.engine.dispose()
        saved_rows = _vector_file(path).read_bytes()
        with capture_logs() as logs:
            reopened = SQLAlchemyBackend(f"sqlite:///{path}", embedder=other)
            hits = reopened.search(items[7].text, k=1, filters=SCOPE)
        warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert warnings == ["index_file_rejected_rebuilding"]
        assert hits[0].item.id == items[7].id
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        reopened.close()
        assert _vector_file(path).read_bytes() != saved_rows

    def test_files_ahead_of_a_restored_database_are_rebuilt(self, saved, tmp_path):
        """A database put back from an older copy: files that saw later writes are not used."""
        path, items = saved
        backup = tmp_path / "backup.db"
        shutil.copyfile(path, backup)
        backend, _ = _open(path)
        backend.add_many(_items(200, 260, word="later"))
        _searched(backend)
        backend.close()
        shutil.copyfile(backup, path)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        reopened, _ = _open(path)
        with reopened:
            _, warnings = _searched(reopened)
            assert warnings == ["index_file_rejected_rebuilding"] * 2
            _assert_complete(reopened, items)
            assert reopened.lexical_search("later", k=5, filters=SCOPE) == []


KILLED_BEFORE_SAVE = textwrap.dedent(
    """
    import os, sys
    from agent_engine.embeddings import HashingEmbedder
    from agent_engine.memory.sql import SQLAlchemyBackend
    from agent_engine.models import ContextItem, Tier

    backend = SQLAlchemyBackend(f"sqlite:///{sys.argv[1]}", embedder=HashingEmbedder(dim=32))
    backend.search("warm the indexes", k=1)
    backend.lexical_search("warm", k=1, filters={"namespace": "project:files", "tier": "project"})
    backend.add_many([
        ContextItem(id=f"late-{n}", kind="note", text=f"committed late walrus {n}",
                    namespace="project:files", tier=Tier.PROJECT)
        for n in range(40)
    ])
    backend.delete("item-00010")
    print("committed", flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_a_writer_killed_after_its_commit_loses_nothing(saved):
    """The index files never saw the last writes; the next process catches them up."""
    path, items = saved
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", KILLED_BEFORE_SAVE, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert "committed" in result.stdout
    backend, _ = _open(path)
    with backend:
        _, warnings = _searched(backend)
        assert warnings == []
        late = [
            ContextItem(
                id=f"late-{n}",
                kind="note",
                text=f"committed late walrus {n}",
                namespace="project:files",
                tier=Tier.PROJECT,
            )
            for n in range(40)
        ]
        expected = [i for i in items if i.id != "item-00010"] + late
        _assert_complete(backend, expected)
        assert len(backend.lexical_search("walrus", k=100, filters=SCOPE)) == 40
        assert backend._files.vectors().live == len(expected)


class TestErase:
    def test_erased_items_leave_no_trace_in_any_file(self, saved):
        """Erase rewrites every file, loaded in this process or not, without the items."""
        path, _ = saved
        backend, _ = _open(path)
        secret = ContextItem(
            id="secret-item",
            kind="note",
            text="the launch code is xylophone",
            namespace="project:files",
            tier=Tier.PROJECT,
        )
        backend.add(secret)
        _searched(backend)
        backend.lexical_search("xylophone", k=1, filters=SCOPE)
        backend.close()
        eraser, _ = _open(path)  # a process that never loaded the BM25 file
        with eraser:
            eraser.erase(["secret-item"])
        for file in [_vector_file(path), *_lexical_files(path)]:
            data = file.read_bytes()
            for needle in ("secret-item", "xylophone"):
                assert needle.encode("utf-32-le") not in data
                assert needle.encode() not in data

    def test_another_backend_forgets_an_erased_item_at_its_next_search(self, saved):
        path, _ = saved
        mine, _ = _open(path)
        theirs, _ = _open(path)
        with mine, theirs:
            _searched(mine)
            target = mine.get("item-00042")
            assert target is not None
            assert mine.search(target.text, k=1, filters=SCOPE)[0].item.id == "item-00042"
            theirs.erase(["item-00042"])
            assert "item-00042" not in mine._files.vectors().row_of
            assert "item-00042" not in mine.lexical_index(SCOPE).item_ids()
            assert mine.search(target.text, k=1, filters=SCOPE)[0].item.id != "item-00042"


class TestMappedVectors:
    """A new process maps the saved vectors rather than reading them (``RowIndex.load``)."""

    def _saved_rows(self, tmp_path) -> tuple[Path, np.ndarray]:
        rng = np.random.default_rng(7)
        matrix = rng.standard_normal((50, DIM)).astype(np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        rows = RowIndex("numpy", DIM, hnsw_m=0, ef_construction=0)
        rows.add([(f"id-{n}", "ns", matrix[n]) for n in range(50)])
        path = tmp_path / "vectors.npz"
        rows.save(path)
        return path, matrix

    def test_rows_changed_after_loading_leave_the_file_as_it_was(self, tmp_path):
        path, matrix = self._saved_rows(tmp_path)
        saved = path.read_bytes()
        rows = RowIndex.load(path, "numpy", 0, 0)
        assert np.array_equal(rows.vectors(), matrix)
        rows.remove("id-3")  # zeroes its vector where the rows are kept
        assert not rows.vectors()[3].any()
        rows.add([("id-50", "ns", matrix[0])])
        assert path.read_bytes() == saved
        assert np.array_equal(RowIndex.load(path, "numpy", 0, 0).vectors(), matrix)

    def test_a_flipped_byte_among_the_vectors_is_refused(self, tmp_path):
        path, matrix = self._saved_rows(tmp_path)
        data = bytearray(path.read_bytes())
        at = bytes(data).index(matrix[20].tobytes())  # inside the vectors' member
        data[at] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(IndexCorruptError, match="CRC"):
            RowIndex.load(path, "numpy", 0, 0)
