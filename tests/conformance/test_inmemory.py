"""The conformance suite against the in-memory reference backend."""

from __future__ import annotations

import pytest

from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.testing.conformance import BackendConformance


class TestInMemoryBackend(BackendConformance):
    @pytest.fixture
    def backend(self, embedder):
        with InMemoryBackend(embedder=embedder) as backend:
            yield backend
