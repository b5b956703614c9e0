"""The conformance suite on the SQL backend's in-memory SQLite database, and on PostgreSQL
searching text by its full text.

An SQLite file and PostgreSQL (with its default, in-process BM25 indexes) run in
``test_backends.py`` with every other kind of backend.
"""

from __future__ import annotations

import pytest

from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.conformance import BackendConformance
from agent_engine.testing.databases import sql_delete_all


class TestSQLiteMemory(BackendConformance):
    @pytest.fixture
    def backend(self, embedder):
        with SQLAlchemyBackend("sqlite://", embedder=embedder) as backend:
            yield backend


class TestPostgreSQLFullText(BackendConformance):
    @pytest.fixture
    def backend(self, embedder, postgres_url):
        sql_delete_all(postgres_url)
        with SQLAlchemyBackend(postgres_url, embedder=embedder, fulltext=True) as backend:
            yield backend
