"""The fuzz suite on every backend: in memory, an SQLite file, PostgreSQL and FAISS over SQLite.

PostgreSQL runs on the server :mod:`agent_engine.testing.databases` names; under ``CI=true``
an unreachable server fails these tests instead of skipping them.
"""

from __future__ import annotations

import shutil

import pytest

from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.databases import sql_delete_all
from agent_engine.testing.fuzz import BackendFuzz


class TestInMemoryFuzz(BackendFuzz):
    @pytest.fixture
    def backend(self, embedder):
        with InMemoryBackend(embedder=embedder) as backend:
            yield backend


class TestSQLiteFileFuzz(BackendFuzz):
    @pytest.fixture
    def backend(self, embedder, sqlite_template, tmp_path):
        path = tmp_path / "memory.db"
        shutil.copy(sqlite_template, path)
        with SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder) as backend:
            yield backend


class TestPostgreSQLFuzz(BackendFuzz):
    @pytest.fixture
    def backend(self, embedder, postgres_url):
        sql_delete_all(postgres_url)
        with SQLAlchemyBackend(postgres_url, embedder=embedder) as backend:
            yield backend


class TestFaissOverSQLiteFuzz(BackendFuzz):
    @pytest.fixture
    def backend(self, embedder, sqlite_template, tmp_path):
        path = tmp_path / "records.db"
        shutil.copy(sqlite_template, path)
        records = SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder)
        with FaissBackend(
            records, embedder=embedder, index_path=tmp_path / "vectors.faiss"
        ) as backend:
            yield backend
