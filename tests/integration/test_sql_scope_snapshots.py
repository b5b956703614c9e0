"""Saved BM25 indexes in the database: a new process restores a scope's index and catches up.

Backends open with an in-process BM25 index (``fulltext=False`` on PostgreSQL, no index files
on SQLite), as executor processes of one shared store would. The scope holds
:data:`~agent_engine.memory.sql._snapshots.MIN_ITEMS` items, so the first process to build
its index saves it.
"""

from __future__ import annotations

import attrs
import pytest
import sqlalchemy as sa

from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.memory.sql import _snapshots as snapshots
from agent_engine.models import ContextItem, Tier
from agent_engine.retrieval.bm25 import LexicalIndex
from tests.integration.conftest import SQL_KINDS, empty_database

SCOPE = {"namespace": "project:a", "tier": "project"}
KEY = ("project:a", Tier.PROJECT)
WORDS = ["postgres", "css", "deploy", "tuesday", "kubernetes", "cache", "retry", "flaky"]
QUERIES = ["postgres deploy", "css cache", "flaky retry", "kubernetes tuesday"]


def _item(n: int, text: str | None = None) -> ContextItem:
    words = text or " ".join(WORDS[(n * k) % len(WORDS)] for k in (1, 3, 5))
    return ContextItem.create(
        "note", f"{words} note {n}", id=f"i{n:05d}", namespace="project:a", tier=Tier.PROJECT
    )


def _open(url: str) -> SQLAlchemyBackend:
    return SQLAlchemyBackend(url, fulltext=False, indexed=False)


def _ranked(backend: SQLAlchemyBackend, query: str) -> list[tuple[str, float]]:
    hits = backend.lexical_search(query, k=30, filters=SCOPE)
    return [(hit.item.id, round(hit.score, 9)) for hit in hits]


def _reference(backend: SQLAlchemyBackend, query: str) -> list[tuple[str, float]]:
    """The ranking of an index built from every stored item of the scope, here and now."""
    index = LexicalIndex()
    index.upsert(backend.query(SCOPE, limit=None))
    hits = index.hits(query)
    ids = hits.best(30)
    scores = hits.of(ids)
    return [(item_id, round(scores[item_id], 9)) for item_id in ids]


def _saved(backend: SQLAlchemyBackend) -> int | None:
    with backend.engine.connect() as connection:
        query = sa.text("SELECT version FROM ae_lexical_snapshots WHERE namespace = 'project:a'")
        return connection.execute(query).scalar_one_or_none()


class _Statements:
    """The statements a backend runs, to tell a restored index from one built by a scan."""

    def __init__(self, backend: SQLAlchemyBackend) -> None:
        self.seen: list[str] = []
        sa.event.listen(backend.engine, "before_cursor_execute", self._record)

    def _record(self, *event: object) -> None:
        # The event passes the connection, the cursor, then the statement...
        self.seen.append(str(event[2]))

    def scanned(self) -> bool:
        """Whether the scope was read whole (the rebuild's read, ordered by id)."""
        return any("FROM ae_items" in s and "ORDER BY ae_items.id" in s for s in self.seen)


@pytest.fixture(params=SQL_KINDS)
def any_url(request, tmp_path):
    """An empty SQLite file, PostgreSQL schema, or schema on the pgvector server (whose
    connections send blobs as vectors: a snapshot must still be stored as bytes)."""
    with empty_database(request, request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(any_url):
    """A store whose scope is big enough to be saved, its index built and saved by a first
    process (closed); the URL to open it again."""
    sql_url = any_url
    with _open(sql_url) as first:
        first.add_many([_item(n) for n in range(snapshots.MIN_ITEMS)])
        assert _saved(first) is None
        _ranked(first, "postgres")
        assert _saved(first) is not None
    return sql_url


class TestScopeSnapshots:
    def test_a_new_process_restores_and_catches_up(self, store):
        """Another writer's adds, edits and deletes since the save are caught up from the log:
        the restored index ranks as one built from the records, without reading the scope."""
        with _open(store) as writer:
            writer.add_many(
                [_item(n, "postgres kubernetes rollout") for n in range(90_000, 90_005)]
            )
            writer.update(attrs.evolve(writer.get("i00003"), text="flaky retry in css cache"))
            writer.delete("i00010")
            with _open(store) as reader:
                statements = _Statements(reader)
                for query in QUERIES:
                    assert _ranked(reader, query) == _reference(reader, query)
                assert not statements.scanned()

    def test_close_saves_what_moved(self, store):
        """A process's own writes move its index; closing saves it at the new version."""
        with _open(store) as backend:
            before = _saved(backend)
            _ranked(backend, "postgres")
            backend.add(_item(99_000, "a written note"))
        with _open(store) as backend:
            assert _saved(backend) > before
            statements = _Statements(backend)
            assert _ranked(backend, "written") == _reference(backend, "written")
            assert not statements.scanned()

    def test_an_erase_drops_the_snapshot(self, store):
        """An erased item must survive nowhere: its scope's snapshot goes with it, and the
        next process builds the index from the records."""
        with _open(store) as writer:
            writer.erase(["i00001"])
            assert _saved(writer) is None
            with _open(store) as reader:
                statements = _Statements(reader)
                assert "i00001" not in {item_id for item_id, _ in _ranked(reader, "css")}
                assert statements.scanned()
                assert "i00001" not in reader.lexical_index(SCOPE)

    def test_a_save_behind_an_erase_is_refused(self, store):
        """An index taken before an erase holds the erased item: saving it is refused."""
        with _open(store) as backend:
            index = backend.lexical_index(SCOPE)
            version = backend._scope_versions(KEY)[KEY]
            backend.erase(["i00002"])
            with backend.engine.begin() as connection:
                data = snapshots.encode(index)
                assert not snapshots.save(connection, "project:a", "project", version, data)
            assert _saved(backend) is None

    @pytest.mark.parametrize("damage", ["ahead", "garbage"])
    def test_an_unusable_snapshot_is_rebuilt(self, store, damage):
        """A snapshot ahead of the store's counters (a restored backup) or unreadable is not
        used: the index is built from the records and saved again."""
        change = {
            "ahead": "UPDATE ae_lexical_snapshots SET version = version + 1000",
            "garbage": "UPDATE ae_lexical_snapshots SET data = CAST('junk' AS BYTEA)",
        }[damage]
        with _open(store) as backend, backend.engine.begin() as connection:
            if damage == "garbage" and connection.dialect.name == "sqlite":
                change = "UPDATE ae_lexical_snapshots SET data = X'6a756e6b'"
            connection.execute(sa.text(change))
        with _open(store) as backend:
            statements = _Statements(backend)
            assert _ranked(backend, "postgres") == _reference(backend, "postgres")
            assert statements.scanned()
            if damage == "garbage":
                assert _saved(backend) == backend._scope_versions(KEY)[KEY]

    def test_small_scopes_are_not_saved(self, sql_url):
        """A scope under the threshold rebuilds in a moment; no row is kept for it."""
        with _open(sql_url) as backend:
            backend.add_many([_item(n) for n in range(50)])
            _ranked(backend, "postgres")
        with _open(sql_url) as backend:
            assert _saved(backend) is None
