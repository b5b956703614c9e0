"""Forgetting erases: afterwards no file the library wrote holds the item's text, id or vector.

Every test reads the files under the store's folder as bytes (the SQLite database, its
``-wal`` and ``-shm`` files, the FAISS index) and looks for the item's text, its id (as
UTF-8, and as the UTF-16/UTF-32 numpy may store strings in) and every 16 bytes of its vector
(as given, and normalized as FAISS keeps it). Each first checks that the same search finds
the item before it is forgotten, so an absence is never a search that could not succeed.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest
import sqlalchemy as sa

from agent_engine import FaissBackend, SQLAlchemyBackend
from agent_engine.memory.sql import upgrade_database
from agent_engine.testing.databases import postgres_schema
from agent_engine.tiers.project import ProjectMemoryStore

DIM = 16
TEXT = "zebra quokka marmalade protocol 7731"
ITEM_ID = "erase-me-5f1c9a2b7d"


def _vector() -> np.ndarray:
    return np.random.default_rng(7731).standard_normal(DIM).astype(np.float32)


def needles(item_id: str = ITEM_ID, text: str = TEXT) -> dict[str, list[bytes]]:
    """The byte strings that would betray the item, by what they betray."""
    vector = _vector()
    normalized = (vector / np.linalg.norm(vector)).astype("<f4")
    vector_bytes = [
        data[start : start + 16]
        for data in (vector.astype("<f4").tobytes(), normalized.tobytes())
        for start in range(0, len(data), 16)
    ]
    return {
        "text": [text.encode()],
        "id": [item_id.encode(encoding) for encoding in ("utf-8", "utf-16-le", "utf-32-le")],
        "vector": vector_bytes,
    }


def traces(folder: Path, item_id: str = ITEM_ID, text: str = TEXT) -> dict[str, set[str]]:
    """Which files under ``folder`` hold which kind of trace (files without any are left out)."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        kinds = {kind for kind, ns in needles(item_id, text).items() if any(n in data for n in ns)}
        if kinds:
            found[path.name] = kinds
    return found


def fill(project: ProjectMemoryStore) -> None:
    """Other items around the one to forget, and a history for it (update, pin, touch)."""
    rng = np.random.default_rng(1)
    project.add_many(
        project.new_item("note", f"filler note {n}", embedding=rng.standard_normal(DIM))
        for n in range(120)
    )
    item = project.add(
        project.new_item("decision", TEXT + " draft", id=ITEM_ID, embedding=_vector())
    )
    project.update(attrs.evolve(item, text=TEXT, tags=("secret",)))
    project.pin(ITEM_ID)
    project.backend.touch([ITEM_ID], project.clock())
    project.add_many(
        project.new_item("note", f"later note {n}", embedding=rng.standard_normal(DIM))
        for n in range(120)
    )


def open_sqlite(folder: Path) -> SQLAlchemyBackend:
    return SQLAlchemyBackend(f"sqlite:///{folder / 'memory.db'}", dim=DIM)


def open_faiss(folder: Path, index: str) -> FaissBackend:
    return FaissBackend(
        open_sqlite(folder), dim=DIM, index=index, index_path=folder / "vectors.faiss", hnsw_m=16
    )


STORES = {
    "sqlite": open_sqlite,
    "faiss-flat-over-sqlite": lambda folder: open_faiss(folder, "flat"),
    "faiss-hnsw-over-sqlite": lambda folder: open_faiss(folder, "hnsw"),
}


class TestForgetLeavesNoTrace:
    @pytest.mark.parametrize("kind", sorted(STORES))
    def test_no_file_holds_the_item_once_forget_returns(self, kind, tmp_path):
        """Text, id and vector are in the files before forget, and in none of them after.

        If the text or vector stays in ``memory.db``: ``secure_delete`` is off, or an earlier
        version of the row lingers. In ``memory.db-wal``: the erase did not truncate the log.
        In ``vectors.faiss``: the dead row's id or vector was not blanked (flat) or zeroed
        (HNSW), or the file was not saved. The id alone in ``memory.db``: the journal was not
        redacted.
        """
        backend = STORES[kind](tmp_path)
        project = ProjectMemoryStore("shop", backend)
        fill(project)
        if isinstance(backend, FaissBackend):
            backend.save()
            assert traces(tmp_path)["vectors.faiss"] == {"id", "vector"}
        before = set().union(*traces(tmp_path).values())
        assert before == {"text", "id", "vector"}

        assert project.forget(ITEM_ID) == 1

        assert traces(tmp_path) == {}
        assert project.get(ITEM_ID) is None
        assert len(project.search(_vector(), k=5)) == 5
        backend.close()
        assert traces(tmp_path) == {}

    @pytest.mark.parametrize("kind", sorted(STORES))
    def test_forgotten_item_stays_gone_after_reopening(self, kind, tmp_path):
        """A store reopened from the erased files still serves the other items and not the one."""
        with STORES[kind](tmp_path) as backend:
            project = ProjectMemoryStore("shop", backend)
            fill(project)
            project.forget(ITEM_ID)
        with STORES[kind](tmp_path) as backend:
            project = ProjectMemoryStore("shop", backend)
            assert project.count() == 240
            assert ITEM_ID not in {hit.item.id for hit in project.search(_vector(), k=240)}
        assert traces(tmp_path) == {}


class TestForgetTakesItsConflicts:
    @pytest.mark.parametrize("kind", sorted(STORES))
    def test_no_file_holds_the_item_or_its_conflict(self, kind, tmp_path):
        """A conflict naming the item is recorded, and once forgotten no file names the item.

        If only the id stays in ``memory.db``: the conflict row was not deleted with the item
        (check the foreign keys of ``ae_conflicts``) or the ``conflict`` event not redacted.
        """
        text = "Never use the zebra quokka marmalade protocol 7731 in production."
        backend = STORES[kind](tmp_path)
        project = ProjectMemoryStore("shop", backend)
        fill(project)
        project.forget(ITEM_ID)
        kept = project.add_convention(
            "Always use the zebra quokka marmalade protocol 7731 in production.", "ops"
        )
        project.add(project.new_item("convention", text, id=ITEM_ID, embedding=_vector()))
        (conflict,) = project.conflicts()
        assert conflict.item_ids == (kept.id, project.scoped_id(ITEM_ID))
        if isinstance(backend, FaissBackend):
            backend.save()
        assert {"id", "text"} <= set().union(*traces(tmp_path, text=text).values())

        assert project.forget(ITEM_ID) == 1

        assert traces(tmp_path, text=text) == {}
        assert project.conflicts(include_resolved=True) == []
        backend.close()
        assert traces(tmp_path, text=text) == {}


class TestForgetTakesItsCheckpoints:
    @pytest.mark.parametrize("kind", sorted(STORES))
    def test_no_file_holds_the_item_through_a_checkpoint(self, kind, tmp_path):
        """A checkpoint holding the item is deleted with it: no file keeps its text.

        If the text stays in ``memory.db``: ``erase`` did not drop the checkpoints that hold
        the item (``CheckpointStore.drop_holding``), or the checkpoint table was not flushed.
        """
        backend = STORES[kind](tmp_path)
        project = ProjectMemoryStore("shop", backend)
        fill(project)
        holding = project.checkpoint("before forgetting")
        project.forget(ITEM_ID)
        assert holding not in project.checkpoints()
        backend.close()
        assert traces(tmp_path) == {}


class TestDeleteLeavesWhatTheDocsSay:
    def test_sqlite_delete_keeps_the_item_in_the_log_and_journal(self, tmp_path):
        """A plain delete leaves the row's old pages in the WAL and the id in the journal."""
        with open_sqlite(tmp_path) as backend:
            project = ProjectMemoryStore("shop", backend)
            fill(project)
            project.delete(ITEM_ID)
            assert traces(tmp_path)["memory.db-wal"] == {"text", "id", "vector"}
        # The last connection's close checkpoints the log; zeroed rows keep only the journal.
        assert traces(tmp_path) == {"memory.db": {"id"}}

    @pytest.mark.parametrize(("index", "left"), [("flat", set()), ("hnsw", {"vector"})])
    def test_faiss_delete_blanks_the_row_in_the_next_saved_file(self, index, left, tmp_path):
        """After a delete the saved index holds no id; flat no vector, HNSW its graph's copy."""
        with open_faiss(tmp_path, index) as backend:
            project = ProjectMemoryStore("shop", backend)
            fill(project)
            backend.save()
            project.delete(ITEM_ID)
            backend.save()
            assert traces(tmp_path).get("vectors.faiss", set()) == left


@pytest.fixture
def postgres_url():
    with postgres_schema() as url:
        upgrade_database(url)
        yield url


class TestPostgreSQL:
    def test_forget_deletes_redacts_and_vacuums(self, postgres_url):
        """No row names the item (its conflict included), and the tables were vacuumed."""
        with SQLAlchemyBackend(postgres_url, dim=DIM) as backend:
            project = ProjectMemoryStore("shop", backend)
            fill(project)
            project.add_decision(TEXT.replace("protocol", "protocol is never"))
            assert project.conflicts()
            project.checkpoint()
            project.forget(ITEM_ID)
            with backend.engine.connect() as connection:
                tables_named = (
                    "ae_items",
                    "ae_item_tags",
                    "ae_audit_events",
                    "ae_conflicts",
                    "ae_checkpoints",
                )
                for table in tables_named:
                    text = connection.execute(
                        sa.text(f"SELECT string_agg(t::text, ' ') FROM {table} t")  # noqa: S608
                    ).scalar_one()
                    assert ITEM_ID not in (text or "")
                    assert TEXT not in (text or "")
                vacuumed = connection.execute(
                    sa.text(
                        "SELECT relname FROM pg_stat_user_tables "
                        "WHERE schemaname = current_schema() AND last_vacuum IS NOT NULL"
                    )
                ).scalars()
                tables = {
                    "ae_items",
                    "ae_item_tags",
                    "ae_audit_events",
                    "ae_conflicts",
                    "ae_scope_log",
                    "ae_checkpoints",
                    "ae_fork_hidden",
                }
                assert tables <= set(vacuumed)

    def test_vacuum_full_leaves_the_table_files_clean(self, postgres_url):
        """What docs/backends.md tells operators to run removes the bytes from the table files.

        Reads the server's own files, which needs a superuser (the test server's default).
        """
        with SQLAlchemyBackend(postgres_url, dim=DIM) as backend:
            project = ProjectMemoryStore("shop", backend)
            fill(project)
            project.checkpoint()
            project.forget(ITEM_ID)
            with backend.engine.connect() as connection:
                superuser = sa.text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
                if not connection.execute(superuser).scalar_one():
                    pytest.skip("reading the server's files needs a superuser")
                connection.commit()
                autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
                autocommit.exec_driver_sql(
                    "VACUUM FULL ae_items, ae_item_tags, ae_audit_events, ae_conflicts, "
                    "ae_scope_log, ae_checkpoints, ae_fork_hidden"
                )
                autocommit.exec_driver_sql("CHECKPOINT")
                relations = connection.execute(
                    sa.text(
                        "SELECT pg_relation_filepath(oid) FROM pg_class "
                        "WHERE relnamespace = current_schema()::regnamespace "
                        "AND relkind IN ('r', 'i') "
                        "UNION SELECT pg_relation_filepath(reltoastrelid) FROM pg_class "
                        "WHERE relnamespace = current_schema()::regnamespace "
                        "AND reltoastrelid <> 0"
                    )
                ).scalars()
                for path in relations:
                    data = bytes(
                        connection.execute(
                            sa.text("SELECT pg_read_binary_file(:path)"), {"path": path}
                        ).scalar_one()
                    )
                    assert not any(
                        needle in data for group in needles().values() for needle in group
                    ), path
