"""The conformance suite, unchanged, on every kind of backend of ``tests/conftest.py``.

``BACKEND_KINDS`` there is the one place a backend's test fixture is written: this suite, the
fuzz suite, the tier and assembler tests and the isolation properties all run on each kind.
The other files here add configurations that only the conformance suite needs.
"""

from __future__ import annotations

import pytest

from agent_engine.memory import registry
from agent_engine.testing.conformance import BackendConformance


class TestBackend(BackendConformance):
    @pytest.fixture
    def backend(self, embedder, backend_kind, open_backend):
        return open_backend(backend_kind, embedder)


def test_every_registered_backend_has_a_kind(backend_kinds):
    """A backend registered without a test kind would run in no suite: add it to the table."""
    assert {entry.name for entry in registry.backends()} <= {
        kind.backend for kind in backend_kinds.values()
    }
