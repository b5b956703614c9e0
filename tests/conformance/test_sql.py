"""The conformance suite, unchanged, against the SQL backend on each store it supports."""

from __future__ import annotations

import shutil

import pytest

from agent_engine.memory.sql import SQLAlchemyBackend, upgrade_database
from agent_engine.testing.conformance import BackendConformance
from agent_engine.testing.databases import postgres_schema, sql_delete_all


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory):
    """A migrated database file, copied per test: a fresh file without a migration each time."""
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_schema() as url:
        upgrade_database(url)
        yield url


class TestSQLiteFile(BackendConformance):
    @pytest.fixture
    def backend(self, embedder, sqlite_template, tmp_path):
        path = tmp_path / "memory.db"
        shutil.copy(sqlite_template, path)
        with SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder) as backend:
            yield backend


class TestSQLiteMemory(BackendConformance):
    @pytest.fixture
    def backend(self, embedder):
        with SQLAlchemyBackend("sqlite://", embedder=embedder) as backend:
            yield backend


class TestPostgreSQL(BackendConformance):
    @pytest.fixture
    def backend(self, embedder, postgres_url):
        sql_delete_all(postgres_url)
        with SQLAlchemyBackend(postgres_url, embedder=embedder) as backend:
            yield backend
