"""The fuzz suite on every kind of backend of ``tests/conftest.py`` (``BACKEND_KINDS``).

PostgreSQL runs on the server :mod:`agent_engine.testing.databases` names; under ``CI=true``
an unreachable server fails these tests instead of skipping them.
"""

from __future__ import annotations

import pytest

from agent_engine.testing.fuzz import BackendFuzz


class TestBackendFuzz(BackendFuzz):
    @pytest.fixture
    def backend(self, embedder, backend_kind, open_backend):
        return open_backend(backend_kind, embedder)
