"""Where the SQL backend stores by default, and the typed errors for stores it cannot open."""

from __future__ import annotations

import sys

import pytest

from agent_engine import SQLAlchemyBackend, default_database_url
from agent_engine.errors import BackendError, BackendUnavailableError
from agent_engine.memory.sql import DB_ENV


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
