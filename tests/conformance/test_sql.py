"""The conformance suite, unchanged, against the SQL backend on each store it supports."""

from __future__ import annotations

import shutil

import pytest

from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.conformance import BackendConformance
from agent_engine.testing.databases import sql_delete_all


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
