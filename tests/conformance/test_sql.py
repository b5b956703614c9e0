"""The conformance suite on the SQL backend's in-memory SQLite database.

An SQLite file and PostgreSQL run in ``test_backends.py`` with every other kind of backend.
"""

from __future__ import annotations

import pytest

from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.conformance import BackendConformance


class TestSQLiteMemory(BackendConformance):
    @pytest.fixture
    def backend(self, embedder):
        with SQLAlchemyBackend("sqlite://", embedder=embedder) as backend:
            yield backend
