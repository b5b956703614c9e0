"""Opening a store from a URL: schemes, SQLite paths, and what a missing file means."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_engine import (
    BackendError,
    BackendUnavailableError,
    ContextItem,
    HashingEmbedder,
    InMemoryBackend,
    ValidationError,
)
from agent_engine.cli._store import (
    Access,
    locate,
    make_embedder,
    open_store,
    scheme_of,
    sqlite_path,
)


class TestUrls:
    @pytest.mark.parametrize(
        ("url", "scheme"),
        [
            ("memory://", "memory"),
            ("memory:", "memory"),
            ("sqlite:///memory.db", "sqlite"),
            ("sqlite+pysqlite:////srv/x.db", "sqlite"),
            ("postgresql+psycopg://postgres@127.0.0.1/test", "postgresql"),
            ("postgres://u@h/d", "postgresql"),
        ],
    )
    def test_schemes(self, url, scheme):
        """Each supported URL maps to its store kind, driver suffixes aside."""
        assert scheme_of(url) == scheme

    @pytest.mark.parametrize("url", ["mysql://root@h/d", "nothing", "", "http://x"])
    def test_unsupported(self, url):
        """Anything else is refused with the URLs that work."""
        with pytest.raises(BackendUnavailableError, match=r"sqlite:///PATH"):
            scheme_of(url)

    @pytest.mark.parametrize(
        ("url", "path"),
        [
            ("sqlite:///memory.db", Path("memory.db")),
            ("sqlite:////srv/a/b.db", Path("/srv/a/b.db")),
            ("sqlite:////srv/a.db?timeout=5", Path("/srv/a.db")),
            ("sqlite://", None),
            ("sqlite:///:memory:", None),
        ],
    )
    def test_sqlite_paths(self, url, path):
        """Three slashes and a relative path, four and an absolute one; no file in memory."""
        assert sqlite_path(url) == path


class TestLocate:
    def test_explicit_missing_file_is_an_error(self, tmp_path):
        """A file named explicitly must exist unless the command creates stores."""
        url = f"sqlite:///{tmp_path / 'gone' / 'x.db'}"
        with pytest.raises(BackendUnavailableError, match="no database at"):
            locate(url)
        assert not (tmp_path / "gone").exists()

    def test_create_makes_the_folder(self, tmp_path):
        """With create, the file's folder is made (the backend makes the file)."""
        url = f"sqlite:///{tmp_path / 'new' / 'x.db'}"
        location = locate(url, create=True)
        assert location.path == tmp_path / "new" / "x.db"
        assert (tmp_path / "new").is_dir()

    def test_memory_store(self):
        """memory:// opens an in-memory backend with the embedder given."""
        embedder = HashingEmbedder()
        store = open_store("memory://", embedder=embedder)
        assert isinstance(store.backend, InMemoryBackend)
        assert store.backend.embedder is embedder
        assert store.size_bytes() is None
        assert store.revision() is None

    def test_sql_store_takes_the_statement_timeout(self, tmp_path):
        """The --statement-timeout setting reaches the SQL backend (None: its own default)."""
        url = f"sqlite:///{tmp_path / 'x.db'}"
        store = open_store(url, access=Access.CREATE, statement_timeout=2.5)
        try:
            assert store.backend.statement_timeout == 2.5
        finally:
            store.backend.close()


class TestEmbedders:
    def test_hashing(self):
        """hashing needs no model."""
        assert isinstance(make_embedder("hashing"), HashingEmbedder)

    def test_unknown(self):
        """An unknown name is a validation error naming the choices."""
        with pytest.raises(ValidationError, match="auto, minilm, hashing"):
            make_embedder("word2vec")


class TestAccess:
    def test_a_read_of_the_missing_default_creates_nothing(self, tmp_path, monkeypatch):
        """Before the first write the default store reads as empty; no folder appears."""
        monkeypatch.delenv("AGENT_ENGINE_DB", raising=False)
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        for access in (Access.READ, Access.WRITE):
            store = open_store(None, access=access)
            assert store.empty
            assert store.backend.count() == 0
            assert store.revision() is None
        assert not (tmp_path / "data").exists()

    def test_an_empty_database_is_left_alone_unless_created(self, tmp_path):
        """A file without a schema stays as it is for reads and writes; CREATE gives it one."""
        path = tmp_path / "empty.db"
        path.touch()
        url = f"sqlite:///{path}"
        assert open_store(url, access=Access.READ).empty
        assert open_store(url, access=Access.WRITE).empty
        assert path.stat().st_size == 0
        created = open_store(url, access=Access.CREATE)
        try:
            assert not created.empty
            assert created.backend_name == "SQLAlchemyBackend"
            assert created.revision()
        finally:
            created.backend.close()
        reader = open_store(url, access=Access.READ)
        try:
            assert not reader.empty
            with pytest.raises(BackendError, match="read-only"):
                reader.backend.add(ContextItem.create("note", "x", namespace="project:p"))
        finally:
            reader.backend.close()
