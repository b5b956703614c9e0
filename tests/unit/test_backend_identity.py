"""The one rule on a store's recorded embedder: it binds only while the store holds vectors."""

from __future__ import annotations

import pytest

from agent_engine.embeddings import EmbedderIdentity
from agent_engine.memory.backend import binding_identity

RECORDED = EmbedderIdentity("old-model", 64)


class _Store:
    """Answers whether it holds vectors, and counts how often it was asked."""

    def __init__(self, holds: bool) -> None:
        self.holds = holds
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.holds


class TestBindingIdentity:
    @pytest.mark.parametrize("holds", [True, False])
    def test_nothing_recorded_binds_nothing(self, holds):
        """Without a record there is nothing to bind, and the store is not asked."""
        store = _Store(holds)
        assert binding_identity(None, store) is None
        assert store.asked == 0

    def test_a_record_binds_while_vectors_are_held(self):
        """A store holding vectors is bound to its record."""
        assert binding_identity(RECORDED, _Store(holds=True)) == RECORDED

    def test_a_record_without_vectors_binds_nothing(self):
        """A store whose vectors were all deleted takes any embedder."""
        assert binding_identity(RECORDED, _Store(holds=False)) is None

    def test_a_fitting_record_is_kept_without_asking_the_store(self):
        """When the record agrees with what the caller brings, the store's read is skipped."""
        store = _Store(holds=False)
        assert binding_identity(RECORDED, store, lambda identity: identity.dim == 64) == RECORDED
        assert store.asked == 0

    def test_a_record_that_does_not_fit_asks_the_store(self):
        """Disagreeing with the caller, the record binds only if the store holds vectors."""
        store = _Store(holds=False)
        assert binding_identity(RECORDED, store, lambda identity: identity.dim == 32) is None
        assert store.asked == 1
