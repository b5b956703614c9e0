"""alembic migrations of the SQL backend, on SQLite and PostgreSQL, from a checkout and a wheel."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from structlog.testing import capture_logs

from agent_engine.embeddings import EmbedderIdentity, HashingEmbedder
from agent_engine.errors import DimensionMismatchError, ReembedRequiredError, SchemaVersionError
from agent_engine.memory.sql import (
    SQLAlchemyBackend,
    database_revision,
    head_revision,
    upgrade_database,
)
from agent_engine.memory.sql._engine import create_engine
from agent_engine.memory.sql._fulltext import COLUMN as FULLTEXT_COLUMN
from agent_engine.memory.sql._fulltext import INDEX_NAME as FULLTEXT_INDEX
from agent_engine.memory.sql._fulltext import postgresql_metadata
from agent_engine.memory.sql._migrate import VERSION_TABLE, _listed_head, downgrade, migrations_path
from agent_engine.memory.sql._pgvector import holds_pgvector, include_name, vector_metadata
from agent_engine.memory.sql._schema import metadata
from agent_engine.models import ContextItem
from agent_engine.tiers.project import ProjectMemoryStore
from tests.integration.conftest import SQL_KINDS, empty_database

ROOT = Path(__file__).resolve().parents[2]
TABLES = {"ae_items", "ae_item_tags", "ae_audit_events", "ae_store_meta", "ae_scope_versions"}

COUNT_VECTORS = "ix_ae_items_namespace_embedded"
COUNT_HISTORY = "ix_ae_items_namespace_tier_history"


@pytest.fixture(params=SQL_KINDS)
def sql_url(request, tmp_path):
    """An empty database of each kind, the PostgreSQL server with pgvector included."""
    with empty_database(request, request.param, tmp_path) as url:
        yield url


def _tables(url):
    engine = create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _columns(engine):
    return {column["name"] for column in sa.inspect(engine).get_columns("ae_items")}


def _indexes(engine):
    return {index["name"] for index in sa.inspect(engine).get_indexes("ae_items")}


def test_the_head_read_from_the_scripts_is_alembics():
    """Opening a store at the head skips alembic; the head it compares with must be alembic's."""
    assert _listed_head(migrations_path()) == head_revision()


class TestRevisions:
    def test_up_down_up(self, sql_url):
        assert database_revision(sql_url) is None
        assert upgrade_database(sql_url) == head_revision()
        assert _tables(sql_url) >= TABLES
        engine = create_engine(sql_url)
        try:
            downgrade(engine, "base")
        finally:
            engine.dispose()
        assert database_revision(sql_url) is None
        assert not TABLES & _tables(sql_url)
        upgrade_database(sql_url)
        assert database_revision(sql_url) == head_revision()
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(ContextItem.create("note", "after the round trip", tags=["a"]))
            assert backend.count({"tags": "a"}) == 1

    def test_fulltext_revision_indexes_postgresql_alone(self, sql_url):
        """0009 adds the tsvector column and its index on PostgreSQL, the downgrade drops them.

        Items stored before the index is made are found once it is: it covers them.
        """
        postgresql = not sql_url.startswith("sqlite")
        scope = {"namespace": "project:a", "tier": "project"}
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(
                ContextItem.create(
                    "note", "postgres migrations", id="m0", namespace="project:a", tier="project"
                )
            )
        engine = create_engine(sql_url)
        try:
            assert (FULLTEXT_INDEX in _indexes(engine)) is postgresql
            assert (FULLTEXT_COLUMN in _columns(engine)) is postgresql
            downgrade(engine, "0008")
            assert database_revision(sql_url) == "0008"
            assert FULLTEXT_INDEX not in _indexes(engine)
            assert FULLTEXT_COLUMN not in _columns(engine)
            upgrade_database(sql_url)
            assert (FULLTEXT_INDEX in _indexes(engine)) is postgresql
            assert (FULLTEXT_COLUMN in _columns(engine)) is postgresql
        finally:
            engine.dispose()
        with SQLAlchemyBackend(sql_url) as backend:
            assert [h.item.id for h in backend.lexical_search("migration", 1, scope)] == ["m0"]

    def test_unaccented_fulltext_revision_folds_what_is_stored(self, sql_url):
        """0017 regenerates PostgreSQL's tsvector without diacritics, items stored before it
        included; the downgrade indexes words as written again. SQLite has no such column."""
        postgresql = not sql_url.startswith("sqlite")
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(
                ContextItem.create("note", "the office in Zürich", id="z0", namespace="project:a")
            )
        engine = create_engine(sql_url)
        folded = "'in':3 'office':2 'the':1 'zurich':4"

        def indexed() -> str | None:
            if not postgresql:
                assert FULLTEXT_COLUMN not in _columns(engine)
                return None
            with engine.connect() as connection:
                return connection.execute(
                    sa.text(f"SELECT {FULLTEXT_COLUMN}::text FROM ae_items")  # noqa: S608 - a constant
                ).scalar_one()

        try:
            assert indexed() == (folded if postgresql else None)
            downgrade(engine, "0016")
            assert indexed() == (folded.replace("zurich", "zürich") if postgresql else None)
            upgrade_database(sql_url)
            assert indexed() == (folded if postgresql else None)
            assert (FULLTEXT_INDEX in _indexes(engine)) is postgresql
        finally:
            engine.dispose()
        with SQLAlchemyBackend(sql_url) as backend:
            found = backend.lexical_search("Zurich", 1, {"namespace": "project:a"})
            assert [h.item.id for h in found] == ["z0"]

    def test_count_index_revision_serves_the_index_files_counts(self, sql_url):
        """0010's partial indexes answer the counts an opened index file is checked against."""
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(ContextItem.create("note", "counted", id="c0", namespace="project:a"))
        engine = create_engine(sql_url)
        try:
            assert {COUNT_VECTORS, COUNT_HISTORY} <= _indexes(engine)
            downgrade(engine, "0009")
            assert not {COUNT_VECTORS, COUNT_HISTORY} & _indexes(engine)
            upgrade_database(sql_url)
            assert {COUNT_VECTORS, COUNT_HISTORY} <= _indexes(engine)
            if sql_url.startswith("sqlite"):
                with engine.connect() as connection:
                    for statement in (
                        "SELECT count(*) FROM ae_items WHERE embedding IS NOT NULL",
                        (
                            "SELECT count(*) FROM ae_items WHERE namespace = 'project:a' "
                            "AND tier = 'project' AND valid_to IS NOT NULL"
                        ),
                    ):
                        plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}")
                        assert "USING INDEX ix_ae_items_namespace_" in str(plan.all())
        finally:
            engine.dispose()
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.get("c0") is not None

    def test_status_index_revision_keeps_items(self, sql_url):
        """0002 only adds the pinned-items index: down to 0001 and back, nothing stored is lost."""
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add_many(
                [
                    ContextItem.create("note", "kept", id="kept", namespace="project:a"),
                    ContextItem.create(
                        "note", "pinned", id="pin", namespace="project:a", status="pinned"
                    ),
                ]
            )
        engine = create_engine(sql_url)
        try:
            downgrade(engine, "0001")
            assert "ix_ae_items_namespace_status_importance" not in _indexes(engine)
        finally:
            engine.dispose()
        assert database_revision(sql_url) == "0001"
        upgrade_database(sql_url)
        engine = create_engine(sql_url)
        try:
            assert "ix_ae_items_namespace_status_importance" in _indexes(engine)
        finally:
            engine.dispose()
        with SQLAlchemyBackend(sql_url) as backend:
            pinned = backend.query({"namespace": "project:a", "status": "pinned"})
            assert [item.id for item in pinned] == ["pin"]
            assert backend.count({"namespace": "project:a"}) == 2

    def test_scoped_id_revision_keeps_items_and_tags(self, sql_url):
        """0003 widens item ids: down to 0002 and back up, every item and tag row is kept."""
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add_many(
                [
                    ContextItem.create("note", "one", id="one", tags=["a", "b"]),
                    ContextItem.create("note", "two", id="two", tags=["b"]),
                ]
            )
        engine = create_engine(sql_url)
        try:
            downgrade(engine, "0002")
        finally:
            engine.dispose()
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            assert sorted(item.id for item in backend.query({"tags": "b"})) == ["one", "two"]
            assert [item.id for item in backend.query({"tags": {"$all": ["a", "b"]}})] == ["one"]
            long_id = "project:a/" + "x" * 1000
            backend.add(ContextItem.create("note", "long", id=long_id, tags=["c"]))
            assert [item.id for item in backend.query({"tags": "c"})] == [long_id]

    def test_store_meta_revision_infers_the_embedder_from_stored_vectors(self, sql_url):
        """0004 on a 0003 database with vectors records their size; other sizes are refused."""
        hashing = HashingEmbedder(dim=64)
        texts = ["postgres migrations run in ci", "the css build uses modules", "deploy on tue"]
        _at_0003_with(sql_url, hashing, texts)
        with capture_logs() as logs:
            upgrade_database(sql_url)
        inferred = [entry for entry in logs if entry["event"] == "store_identity_inferred"]
        assert [(entry["dim"], entry["reembed_required"]) for entry in inferred] == [(64, False)]
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.stored_identity() == EmbedderIdentity(None, 64)
        with pytest.raises(DimensionMismatchError, match="an unnamed embedder"):
            SQLAlchemyBackend(sql_url, embedder=HashingEmbedder(dim=384))
        with SQLAlchemyBackend(sql_url, embedder=hashing) as backend:
            assert backend.search(texts[1], k=1)[0].item.id == "m1"
            scope = {"namespace": "project:a", "tier": "project"}
            assert [h.item.id for h in backend.lexical_search("postgres", 1, scope)] == ["m0"]
            backend.add(ContextItem.create("note", "after the upgrade", id="m3"))
            assert backend.stored_identity() == EmbedderIdentity.of(hashing)

    def test_store_meta_revision_marks_mixed_vectors_for_reembedding(self, sql_url):
        """Vectors of two sizes (the store changed embedders before 0004) must be re-embedded."""
        texts = ["postgres migrations run in ci", "the css build uses modules", "deploy on tue"]
        _at_0003_with(sql_url, HashingEmbedder(dim=64), texts)
        engine = create_engine(sql_url)
        try:
            with engine.begin() as connection:
                connection.execute(
                    sa.text("UPDATE ae_items SET embedding = :vector WHERE id = 'm2'"),
                    {"vector": np.ones(32, dtype="<f4").tobytes()},
                )
        finally:
            engine.dispose()
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            assert backend.stored_identity() == EmbedderIdentity(None, 64)
            with pytest.raises(ReembedRequiredError, match="several sizes"):
                backend.search([1.0] * 64)
            assert backend.reembed(HashingEmbedder(dim=32)) == len(texts)
        with SQLAlchemyBackend(sql_url, embedder=HashingEmbedder(dim=32)) as backend:
            for n, text in enumerate(texts):
                assert backend.search(text, k=1)[0].item.id == f"m{n}"

    def test_upgrade_is_idempotent(self, sql_url):
        upgrade_database(sql_url)
        upgrade_database(sql_url)
        assert database_revision(sql_url) == head_revision()

    def test_models_and_migrations_agree(self, sql_url, request):
        """alembic autogenerate finds nothing to do: no drift between models and migrations.

        A pgvector store is compared with the schema of one (a ``vector`` embedding column),
        after a vector has made its HNSW index, which is left out of the comparison. A
        PostgreSQL store is compared with the schema holding its ``tsvector`` column and GIN
        index, which SQLite stores lack.
        """
        upgrade_database(sql_url)
        pgvector = request.node.callspec.params["sql_url"] == "pgvector"
        if pgvector:
            with SQLAlchemyBackend(sql_url, embedder=HashingEmbedder(dim=16)) as backend:
                backend.add(ContextItem.create("note", "makes the index"))
        engine = create_engine(sql_url)
        try:
            with engine.connect() as connection:
                assert holds_pgvector(connection) is pgvector
                context = MigrationContext.configure(
                    connection,
                    opts={
                        "version_table": VERSION_TABLE,
                        "compare_type": True,
                        "include_name": include_name,
                    },
                )
                kind = request.node.callspec.params["sql_url"]
                target = {"pgvector": vector_metadata, "postgresql": postgresql_metadata}.get(
                    kind, lambda: metadata
                )()
                assert compare_metadata(context, target) == []
                if pgvector:
                    assert _indexes(engine) >= {"ix_ae_items_embedding_hnsw_16"}
        finally:
            engine.dispose()

    def test_unknown_revision_is_refused_and_not_written(self, sql_url):
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(ContextItem.create("note", "kept"))
        engine = create_engine(sql_url)
        try:
            with engine.begin() as connection:
                connection.execute(
                    sa.text(f"UPDATE {VERSION_TABLE} SET version_num = 'f00d'")  # noqa: S608
                )
        finally:
            engine.dispose()
        with pytest.raises(SchemaVersionError, match="newer version") as raised:
            SQLAlchemyBackend(sql_url, upgrade=True)
        assert raised.value.current == "f00d"
        with pytest.raises(SchemaVersionError, match="newer version"):
            upgrade_database(sql_url)
        assert database_revision(sql_url) == "f00d"

    def test_empty_database_without_create_names_the_command(self, sql_url):
        with pytest.raises(SchemaVersionError, match="agent-engine db upgrade") as raised:
            SQLAlchemyBackend(sql_url, create=False)
        assert raised.value.current is None
        assert raised.value.expected == head_revision()


class TestLifecycleRevision:
    def test_lifecycle_revision_upgrades_items_in_place(self, sql_url):
        """0005 on a 0004 database with data: every item, tag and vector is kept, and becomes
        the first version of itself in the working set; the lifecycle then works on it."""
        hashing = HashingEmbedder(dim=64)
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url, embedder=hashing) as backend:
            store = ProjectMemoryStore("a", backend, max_items=3)
            written = store.add_many(
                store.new_item("decision", text, tags=["db", f"t{n}"], importance=0.2 + n / 10)
                for n, text in enumerate(
                    ["postgres migrations run in ci", "the css build uses modules", "deploy"]
                )
            )
            store.pin(written[2].id)
            before = {item.id: item for item in backend.get_many([i.id for i in written])}
        engine = create_engine(sql_url)
        try:
            downgrade(engine, "0004")
        finally:
            engine.dispose()
        assert database_revision(sql_url) == "0004"
        upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url, embedder=hashing) as backend:
            after = {item.id: item for item in backend.get_many(list(before))}
            assert after == before
            for item in after.values():
                assert (item.version, item.valid_from, item.valid_to) == (1, None, None)
                assert (item.archived_at, item.key, item.merged_from) == (None, None, ())
                assert item.embedding is not None
            assert np.array_equal(after[written[0].id].embedding, before[written[0].id].embedding)
            store = ProjectMemoryStore("a", backend, max_items=3)
            assert {i.id for i in store.query({"tags": "db"}, limit=None)} == set(before)
            assert store.search("postgres migrations", k=1)[0].item.id == written[0].id
            store.add_decision("one more decision", importance=0.9)
            # Past its limit (3) the store evicts down to its low mark (2), least important first.
            assert store.count() == 2
            evicted = [item.id for item in store.list_all(view="archived")]
            assert sorted(evicted) == sorted(item.id for item in written[:2])
            assert backend.count() == 4


def _at_0003_with(url, embedder, texts):
    """A database at revision 0003 holding items ``m0``, ``m1``... embedded by ``embedder``."""
    upgrade_database(url)
    with SQLAlchemyBackend(url, embedder=embedder) as backend:
        backend.add_many(
            ContextItem.create("note", text, id=f"m{n}", namespace="project:a")
            for n, text in enumerate(texts)
        )
    engine = create_engine(url)
    try:
        downgrade(engine, "0003")
    finally:
        engine.dispose()
    assert database_revision(url) == "0003"


def _open_and_add(url, name, start, errors):
    try:
        start.wait(10)
        with SQLAlchemyBackend(url) as backend:
            backend.add(ContextItem.create("note", f"from {name}", id=name))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        errors.put(f"{name}: {type(exc).__name__}: {exc}")


def test_two_processes_open_a_new_database_at_once(sql_url, monkeypatch):
    """Both first opens succeed: the schema is created once, under a lock."""
    # Spawned children import this module by name; the repository root must be on the path
    # they inherit even when the package under test is an installed wheel (as under tox).
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    errors = context.Queue()
    workers = [
        context.Process(target=_open_and_add, args=(sql_url, name, start, errors))
        for name in ("first", "second")
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert failures == []
    assert [worker.exitcode for worker in workers] == [0, 0]
    with SQLAlchemyBackend(sql_url) as backend:
        assert sorted(item.id for item in backend.list_all()) == ["first", "second"]
    assert database_revision(sql_url) == head_revision()


@pytest.mark.slow
def test_upgrade_from_an_installed_wheel(tmp_path):
    """The wheel carries the migrations: an installed package upgrades without a checkout."""
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(  # noqa: S603 - our own build, arguments from the test
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("agent_engine-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert "agent_engine/_migrations/versions/0001_initial.py" in archive.namelist()
    target = tmp_path / "installed"
    subprocess.run(  # noqa: S603 - our own wheel, arguments from the test
        [*pip, "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    # Without site processing, the checkout (editable installs, PYTHONPATH) is out of reach;
    # the dependencies come from this interpreter's site-packages.
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENT_ENGINE_")},
        "PYTHONPATH": os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]]),
    }
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    script = (
        "import agent_engine, sys\n"
        "from agent_engine.memory.sql._migrate import migrations_path\n"
        f"assert agent_engine.__file__.startswith({str(target)!r}), agent_engine.__file__\n"
        f"assert str(migrations_path()).startswith({str(target)!r}), migrations_path()\n"
        f"print(agent_engine.upgrade_database({url!r}))\n"
    )
    result = subprocess.run(  # noqa: S603 - our own script
        [sys.executable, "-S", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == head_revision()
    assert database_revision(url) == head_revision()


NEXT_REVISION = '''
"""A later revision, as a future release would ship it."""
import sqlalchemy as sa
from alembic import op

revision = "9999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_ae_items_source", "ae_items", ["source"])


def downgrade():
    op.drop_index("ix_ae_items_source", table_name="ae_items")
'''


class TestOlderSchema:
    """A database at an older revision than the code's head: refused, or upgraded on request."""

    @pytest.fixture
    def newer_code(self, tmp_path, monkeypatch):
        """The shipped scripts plus one revision after their head, as the next release has them."""
        import shutil  # noqa: PLC0415

        from agent_engine.memory.sql import _migrate  # noqa: PLC0415

        scripts = tmp_path / "migrations"
        shutil.copytree(_migrate.migrations_path(), scripts)
        shipped = head_revision()
        (scripts / "versions" / "9999_next.py").write_text(NEXT_REVISION.format(head=shipped))
        monkeypatch.setattr(_migrate, "migrations_path", lambda: scripts)
        _migrate._scripts.cache_clear()
        yield
        _migrate._scripts.cache_clear()

    def test_older_revision_names_the_command_then_upgrades_when_asked(self, sql_url, request):
        shipped = upgrade_database(sql_url)
        with SQLAlchemyBackend(sql_url) as backend:
            backend.add(ContextItem.create("note", "written before the release", id="old"))
        request.getfixturevalue("newer_code")
        assert head_revision() == "9999"
        with pytest.raises(SchemaVersionError, match="agent-engine db upgrade") as raised:
            SQLAlchemyBackend(sql_url)
        assert (raised.value.current, raised.value.expected) == (shipped, "9999")
        assert database_revision(sql_url) == shipped
        with SQLAlchemyBackend(sql_url, upgrade=True) as backend:
            assert backend.get("old") is not None
        assert database_revision(sql_url) == "9999"
