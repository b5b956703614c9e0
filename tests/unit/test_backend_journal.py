"""Where a backend's audit journal lives: with its items, never silently in memory."""

from __future__ import annotations

import pytest

from agent_engine.errors import BackendError
from agent_engine.memory.inmemory import InMemoryBackend


class _ForgetsItsJournal(InMemoryBackend):
    """A backend whose constructor sets no journal."""

    def __init__(self) -> None:
        super().__init__()
        self._audit_store = None


class TestJournal:
    def test_a_process_local_backend_journals_in_memory(self):
        """A backend whose items die with the process may keep its journal the same way."""
        backend = InMemoryBackend()
        assert backend.audit is backend.audit
        assert backend.audit.events(limit=None) == []

    def test_a_backend_without_a_journal_is_an_error(self):
        """No backend falls back to a journal it did not choose: a missing one is refused."""
        with pytest.raises(BackendError) as raised:
            _ = _ForgetsItsJournal().audit
        assert raised.value.backend == "_ForgetsItsJournal"
        assert "journal" in str(raised.value)
