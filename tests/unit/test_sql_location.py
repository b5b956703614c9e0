"""Where the SQL backend stores by default, and the typed errors for stores it cannot open."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import sqlalchemy as sa

from agent_engine import ContextItem, SQLAlchemyBackend, database_revision, default_database_url
from agent_engine.errors import BackendError, BackendUnavailableError, SchemaVersionError
from agent_engine.memory.sql import DB_ENV
from agent_engine.testing.databases import postgres_schema


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG layout is Linux's")
def test_default_is_a_file_in_the_user_data_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(DB_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_database_url() == f"sqlite:///{tmp_path / 'agent_engine' / 'memory.db'}"


def test_environment_variable_overrides_the_default(monkeypatch, tmp_path):
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.setenv(DB_ENV, url)
    assert default_database_url() == url
    with SQLAlchemyBackend() as backend:
        assert backend.url == url
    assert (tmp_path / "elsewhere.db").exists()


@pytest.mark.parametrize("url", ["mysql://root@localhost/db", "not a url", ""])
def test_unsupported_urls_are_refused(url):
    with pytest.raises(BackendUnavailableError):
        SQLAlchemyBackend(url)


def test_unreachable_server_is_a_typed_error():
    with pytest.raises(BackendUnavailableError, match="database error"):
        SQLAlchemyBackend("postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2")


def test_closed_backend_refuses_work(tmp_path):
    backend = SQLAlchemyBackend(f"sqlite:///{tmp_path / 'm.db'}")
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.count()


def _missing_driver() -> str:
    """A PostgreSQL driver SQLAlchemy knows that is not installed here."""
    for driver in ("pg8000", "psycopg2", "asyncpg"):
        if importlib.util.find_spec(driver) is None:
            return driver
    pytest.skip("every PostgreSQL driver is installed")  # pragma: no cover
    return ""  # pragma: no cover


class TestDriverHints:
    def test_a_missing_driver_names_the_install(self):
        """A PostgreSQL URL whose driver is not installed says what to install."""
        driver = _missing_driver()
        with pytest.raises(BackendUnavailableError) as caught:
            SQLAlchemyBackend(f"postgresql+{driver}://postgres@127.0.0.1/test")
        message = str(caught.value)
        assert f"the PostgreSQL driver {driver!r} is not installed" in message
        assert "pip install 'agent-engine[postgres]'" in message

    def test_an_unknown_driver_names_the_supported_one(self):
        """A driver name SQLAlchemy does not know is refused with the URL that works."""
        with pytest.raises(BackendUnavailableError, match="unknown PostgreSQL driver 'nosuch'"):
            SQLAlchemyBackend("postgresql+nosuch://postgres@127.0.0.1/test")


class TestReadOnly:
    def test_an_empty_file_is_not_written(self, tmp_path):
        """read_only on a file without a schema raises, and leaves the file as it was."""
        path = tmp_path / "empty.db"
        path.touch()
        with pytest.raises(SchemaVersionError) as caught:
            SQLAlchemyBackend(f"sqlite:///{path}", read_only=True)
        assert caught.value.current is None
        assert path.stat().st_size == 0

    def test_reads_work_and_writes_are_refused(self, tmp_path):
        """A read-only backend reads what is stored and refuses every write, typed."""
        url = f"sqlite:///{tmp_path / 'm.db'}"
        item = ContextItem.create("note", "kept", namespace="project:x")
        with SQLAlchemyBackend(url) as writer:
            writer.add(item)
        with SQLAlchemyBackend(url, read_only=True) as reader:
            assert reader.get(item.id).text == "kept"
            with pytest.raises(BackendError, match="read-only"):
                reader.add(ContextItem.create("note", "new", namespace="project:x"))
            with pytest.raises(BackendError, match="read-only"):
                reader.delete(item.id)
            assert reader.count() == 1

    def test_revision_of_a_missing_file_creates_nothing(self, tmp_path):
        """database_revision of a file that does not exist is None, and creates nothing."""
        path = tmp_path / "nowhere" / "m.db"
        assert database_revision(f"sqlite:///{path}") is None
        assert not path.parent.exists()

    def test_the_connections_cannot_write_either(self, tmp_path):
        """Below the backend's own check, the database refuses a read-only session's writes."""
        url = f"sqlite:///{tmp_path / 'm.db'}"
        with SQLAlchemyBackend(url):
            pass
        with (
            SQLAlchemyBackend(url, read_only=True) as reader,
            reader.engine.connect() as connection,
            pytest.raises(sa.exc.OperationalError, match="readonly"),
        ):
            connection.execute(sa.text("DELETE FROM ae_items"))

    def test_postgresql_sessions_are_read_only(self):
        """On PostgreSQL a read-only backend keeps the URL's search_path and cannot write."""
        item = ContextItem.create("note", "kept", namespace="project:x")
        with postgres_schema() as url:
            with SQLAlchemyBackend(url) as writer:
                writer.add(item)
            with (
                SQLAlchemyBackend(url, read_only=True) as reader,
                reader.engine.connect() as connection,
            ):
                assert reader.get(item.id).text == "kept"
                with pytest.raises(sa.exc.DBAPIError, match="read-only transaction"):
                    connection.execute(sa.text("DELETE FROM ae_items"))
