"""PostgreSQL with pgvector: vectors in a vector column, HNSW indexes, search in one statement.

These run on the pgvector server of the test run (tests/conftest.py), and on the plain local
PostgreSQL server for what a server without the extension does; either fails under
``CI=true`` when its server is unreachable.
"""

from __future__ import annotations

import sys
import tempfile

import numpy as np
import pytest
import sqlalchemy as sa
from structlog.testing import capture_logs

from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import BackendUnavailableError, DimensionMismatchError
from agent_engine.filters import parse_filter
from agent_engine.memory.sql import SQLAlchemyBackend, database_revision, upgrade_database
from agent_engine.memory.sql._engine import create_engine
from agent_engine.memory.sql._filters import where_clause
from agent_engine.memory.sql._migrate import downgrade
from agent_engine.memory.sql._pgvector import search_statement
from agent_engine.models import ContextItem
from agent_engine.testing.databases import pgvector_server, postgres_schema
from tests.integration.conftest import statements

PREVIOUS_HEAD = "0006"


@pytest.fixture
def pgvector_db(pgvector_server_url):
    """An empty schema (no tables yet) on the server with pgvector."""
    with postgres_schema(pgvector_server_url) as url:
        yield url


def _column_type(url):
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(
                sa.text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'ae_items'::regclass AND attname = 'embedding'"
                )
            ).scalar()
    finally:
        engine.dispose()


def _hnsw_indexes(url):
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'ae_items' "
                    "AND schemaname = current_schema() AND indexdef LIKE '%hnsw%'"
                )
            ).all()
    finally:
        engine.dispose()
    return {row.indexname: row.indexdef for row in rows}


def _random_items(count, dim, *, seed=7, namespace="project:a", prefix="v"):
    """Items with unnormalized random vectors (what a caller may hand over), one zero vector."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, dim)).astype(np.float32) * 3
    vectors[0] = 0
    return [
        ContextItem.create(
            "note", f"item {n}", id=f"{prefix}{n:04d}", namespace=namespace, embedding=v
        )
        for n, v in enumerate(vectors)
    ]


def _ranking(backend, query, k=10, filters=None):
    return [(hit.item.id, round(hit.score, 6)) for hit in backend.search(query, k, filters)]


class TestVectorColumn:
    def test_vectors_are_stored_in_a_vector_column_exactly(self, pgvector_db):
        """The column is pgvector's; every vector reads back bit for bit, unnormalized."""
        written = _random_items(50, 24)
        with SQLAlchemyBackend(pgvector_db) as backend:
            backend.add_many(written)
            stored = {item.id: item for item in backend.get_many([i.id for i in written])}
        assert _column_type(pgvector_db) == "vector"
        for item in written:
            assert np.array_equal(stored[item.id].embedding, item.embedding)

    def test_the_first_vector_makes_the_index_of_its_dimension(self, pgvector_db):
        upgrade_database(pgvector_db)
        assert _hnsw_indexes(pgvector_db) == {}
        with SQLAlchemyBackend(pgvector_db) as backend:
            backend.add(ContextItem.create("note", "no vector yet"))
            assert _hnsw_indexes(pgvector_db) == {}
            backend.add_many(_random_items(3, 24))
        (name, definition), *others = _hnsw_indexes(pgvector_db).items()
        assert not others
        assert name == "ix_ae_items_embedding_hnsw_24"
        assert "(embedding)::vector(24)) vector_cosine_ops" in definition
        assert "WHERE (vector_dims(embedding) = 24)" in definition

    def test_a_reembedding_moves_the_index_to_the_new_dimension(self, pgvector_db):
        texts = [f"memory {n} about topic {n % 5}" for n in range(20)]
        with SQLAlchemyBackend(pgvector_db, embedder=HashingEmbedder(dim=64)) as backend:
            backend.add_many(
                ContextItem.create("note", text, id=f"m{n:02d}") for n, text in enumerate(texts)
            )
            assert set(_hnsw_indexes(pgvector_db)) == {"ix_ae_items_embedding_hnsw_64"}
            assert backend.reembed(HashingEmbedder(dim=32), batch_size=7) == len(texts)
        assert set(_hnsw_indexes(pgvector_db)) == {"ix_ae_items_embedding_hnsw_32"}
        with SQLAlchemyBackend(pgvector_db, embedder=HashingEmbedder(dim=32)) as backend:
            for n, text in enumerate(texts):
                assert backend.search(text, k=1)[0].item.id == f"m{n:02d}"

    def test_another_dimension_is_a_typed_error(self, pgvector_db):
        with SQLAlchemyBackend(pgvector_db, embedder=HashingEmbedder(dim=64)) as backend:
            backend.add(ContextItem.create("note", "sixty-four dimensions"))
            with pytest.raises(DimensionMismatchError, match="32 dimensions"):
                backend.search([1.0] * 32)
            with pytest.raises(DimensionMismatchError):
                backend.add(ContextItem.create("note", "short", embedding=[1.0] * 32))
            assert backend.count() == 1
        with pytest.raises(DimensionMismatchError):
            SQLAlchemyBackend(pgvector_db, embedder=HashingEmbedder(dim=32))


class TestSearch:
    def test_search_is_one_statement_with_the_filter_and_a_limit(self, pgvector_db):
        with SQLAlchemyBackend(pgvector_db) as backend:
            backend.add_many(_random_items(60, 16))
            backend.add_many(_random_items(60, 16, seed=8, namespace="project:b", prefix="b"))
            query = np.ones(16, dtype=np.float32)
            with statements(backend.engine, lambda sql: "<=>" in sql) as seen:
                hits = backend.search(query, k=5, filters={"namespace": "project:a"})
        assert len(hits) == 5
        assert {hit.item.namespace for hit in hits} == {"project:a"}
        (sql,) = seen
        assert "LIMIT" in sql
        assert "namespace" in sql

    def test_ranking_and_scores_equal_the_exact_scan(self, pgvector_db, tmp_path):
        """The same vectors in SQLite (scanned in Python) rank and score the same."""
        written = _random_items(300, 16)
        queries = np.random.default_rng(3).normal(size=(5, 16)).astype(np.float32)
        with (
            SQLAlchemyBackend(pgvector_db) as pgvector,
            SQLAlchemyBackend(f"sqlite:///{tmp_path / 'scan.db'}") as scan,
        ):
            pgvector.add_many(written)
            scan.add_many(written)
            for query in queries:
                assert _ranking(pgvector, query) == _ranking(scan, query)
                narrow = {"id": {"$in": [f"v{n:04d}" for n in range(0, 300, 7)]}}
                assert _ranking(pgvector, query, 30, narrow) == _ranking(scan, query, 30, narrow)

    def test_a_filter_the_index_candidates_miss_is_answered_exactly(self, pgvector_db):
        """With the index forced, a namespace far from the query still gets its k matches."""
        forced = pgvector_db.replace("options=", "options=-cenable_seqscan%3Doff%20")
        assert forced != pgvector_db
        query = np.ones(16, dtype=np.float32)
        rng = np.random.default_rng(11)
        near = query + rng.normal(scale=0.1, size=(400, 16)).astype(np.float32)
        far = -query + rng.normal(scale=0.1, size=(5, 16)).astype(np.float32)
        with SQLAlchemyBackend(forced) as backend:
            backend.add_many(
                ContextItem.create("note", "near", id=f"a{n:03d}", namespace="a", embedding=v)
                for n, v in enumerate(near)
            )
            backend.add_many(
                ContextItem.create("note", "far", id=f"b{n}", namespace="b", embedding=v)
                for n, v in enumerate(far)
            )
            with statements(backend.engine, lambda sql: "<=>" in sql) as seen:
                hits = backend.search(query, k=5, filters={"namespace": "b"})
        assert sorted(hit.item.id for hit in hits) == [f"b{n}" for n in range(5)]
        assert len(seen) == 2  # the index's candidates held too few: asked again, exactly

    def test_the_statement_can_read_the_hnsw_index(self, pgvector_db):
        """Planned with sequential scans off, the search reads the index in distance order."""
        with SQLAlchemyBackend(pgvector_db) as backend:
            backend.add_many(_random_items(400, 16))
            statement = search_statement(
                where_clause(parse_filter(None), "postgresql"),
                np.ones(16, dtype=np.float32),
                10,
                exact=False,
            )
            sql = statement.compile(backend.engine, compile_kwargs={"literal_binds": True})
            with backend.engine.begin() as connection:
                connection.execute(sa.text("SET LOCAL enable_seqscan = off"))
                plan = "\n".join(connection.execute(sa.text(f"EXPLAIN {sql}")).scalars())
        assert "ix_ae_items_embedding_hnsw_16" in plan


class TestUpgrade:
    def test_upgrade_from_the_previous_head_carries_the_vectors(self, pgvector_db):
        """A store at the previous head (blobs) with data: upgraded in place, searched the same."""
        written = _random_items(120, 16)
        queries = np.random.default_rng(5).normal(size=(4, 16)).astype(np.float32)
        with SQLAlchemyBackend(pgvector_db) as backend:
            backend.add_many(written)
            before = [_ranking(backend, query) for query in queries]
        engine = create_engine(pgvector_db)
        try:
            downgrade(engine, PREVIOUS_HEAD)
        finally:
            engine.dispose()
        assert database_revision(pgvector_db) == PREVIOUS_HEAD
        assert _column_type(pgvector_db) == "bytea"
        assert _hnsw_indexes(pgvector_db) == {}
        with capture_logs() as logs:
            upgrade_database(pgvector_db)
        assert _column_type(pgvector_db) == "vector"
        assert set(_hnsw_indexes(pgvector_db)) == {"ix_ae_items_embedding_hnsw_16"}
        carried = [entry for entry in logs if entry["event"] == "vector_search"]
        assert [(e["search"], e["vectors_carried"]) for e in carried] == [("pgvector", 120)]
        with SQLAlchemyBackend(pgvector_db) as backend:
            stored = {item.id: item for item in backend.get_many([i.id for i in written])}
            for item in written:
                assert np.array_equal(stored[item.id].embedding, item.embedding)
            assert [_ranking(backend, query) for query in queries] == before

    def test_a_store_made_without_the_extension_moves_to_it_on_upgrade(self, pgvector_db):
        """Without the vector type in reach the store keeps blobs; `db upgrade` moves it later."""
        hidden = pgvector_db.replace("%2Cpublic", "")
        assert hidden != pgvector_db
        with capture_logs() as logs:
            upgrade_database(hidden)
        assert [e["search"] for e in logs if e["event"] == "vector_search"] == ["scan"]
        written = _random_items(40, 16)
        with SQLAlchemyBackend(hidden) as backend:
            backend.add_many(written)
            before = _ranking(backend, np.ones(16, dtype=np.float32))
        assert _column_type(hidden) == "bytea"
        upgrade_database(pgvector_db)
        assert _column_type(pgvector_db) == "vector"
        with SQLAlchemyBackend(pgvector_db) as backend:
            assert _ranking(backend, np.ones(16, dtype=np.float32)) == before
            assert backend.get("v0001").embedding.tolist() == written[1].embedding.tolist()


class TestWithoutTheExtension:
    def test_plain_postgresql_scans_and_says_how_to_get_pgvector(self):
        """The local server has no pgvector: blobs and the exact scan, logged at open."""
        with postgres_schema() as url:
            with capture_logs() as logs:
                upgrade_database(url)
                backend = SQLAlchemyBackend(url, embedder=HashingEmbedder(dim=16))
            try:
                backend.add(ContextItem.create("note", "scanned", id="s"))
                assert backend.search("scanned", k=1)[0].item.id == "s"
            finally:
                backend.close()
            assert _column_type(url) == "bytea"
        said = [entry for entry in logs if entry["event"] == "vector_search"]
        assert {entry["search"] for entry in said} == {"scan"}
        assert any("pgvector" in entry.get("detail", "") for entry in said)
        assert any(entry.get("reason") == "no pgvector on server" for entry in said)


class TestWithoutThePackage:
    def test_an_upgrade_without_the_package_keeps_blobs_and_says_why(
        self, pgvector_db, monkeypatch
    ):
        monkeypatch.setitem(sys.modules, "pgvector.sqlalchemy", None)  # as if not installed
        with capture_logs() as logs:
            upgrade_database(pgvector_db)
        assert _column_type(pgvector_db) == "bytea"
        (said,) = [entry for entry in logs if entry["event"] == "vector_search"]
        assert "package is missing" in said["reason"]
        assert "agent-engine[postgres]" in said["how"]

    def test_a_pgvector_store_without_the_package_is_refused_naming_it(
        self, pgvector_db, monkeypatch
    ):
        upgrade_database(pgvector_db)
        monkeypatch.setitem(sys.modules, "pgvector.sqlalchemy", None)
        with pytest.raises(
            BackendUnavailableError, match=r"pip install 'agent-engine\[postgres\]'"
        ):
            SQLAlchemyBackend(pgvector_db)


class TestServerStart:
    def test_a_server_that_cannot_start_fails_under_ci_and_skips_elsewhere(
        self, monkeypatch, tmp_path
    ):
        """No folder for the server (the temporary folder is a file): no silent skip in CI."""
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        monkeypatch.setattr(tempfile, "tempdir", str(blocker))
        monkeypatch.setenv("CI", "true")
        with (
            pytest.raises(pytest.fail.Exception, match="cannot start a PostgreSQL server"),
            pgvector_server(),
        ):
            pass
        monkeypatch.setenv("CI", "")
        with (
            pytest.raises(pytest.skip.Exception, match="cannot start a PostgreSQL server"),
            pgvector_server(),
        ):
            pass
