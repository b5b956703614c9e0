"""Project memory: helpers and eviction at and around the limit."""

from __future__ import annotations

import pytest

from agent_engine import AuditAction, InMemoryBackend, Status, ValidationError
from agent_engine.models import ArchiveReason
from agent_engine.tiers.eviction import LowestImportanceOldest
from agent_engine.tiers.project import ProjectMemoryStore


class CountingBackend(InMemoryBackend):
    """The real in-memory backend, counting the delete, update and archive calls it receives."""

    def __init__(self):
        super().__init__()
        self.delete_calls = 0
        self.update_calls = 0
        self.archive_calls = 0

    def update_many(self, items):
        self.update_calls += 1
        return super().update_many(items)

    def set_archived(self, item_ids, at, reason):
        self.archive_calls += 1
        return super().set_archived(item_ids, at, reason)

    def delete_many(self, item_ids):
        self.delete_calls += 1
        return super().delete_many(item_ids)

    def delete(self, item_id):
        self.delete_calls += 1
        return super().delete(item_id)


class TestHelpers:
    def test_typed_items(self, backend, clock):
        """Decisions, conventions, failures, patterns and preferences carry the seed's shape."""
        store = ProjectMemoryStore("web", backend, clock=clock)
        decision = store.add_decision("Use SQLite by default", tags=["db"], rationale="zero setup")
        convention = store.add_convention("Snake case for modules", "python")
        failure = store.add_failure(
            {"message": "Migration deadlocked", "code": "E42"}, "Run migrations alone"
        )
        pattern = store.add_pattern("Retry with jittered backoff", "network")
        preference = store.add_preference("Prefer small PRs", "review")
        assert decision.importance == 0.9
        assert decision.payload == {"decision": "Use SQLite by default", "rationale": "zero setup"}
        assert convention.tags == ("convention", "python")
        assert failure.text == "Migration deadlocked Lesson: Run migrations alone"
        assert failure.payload["failure"] == {"message": "Migration deadlocked", "code": "E42"}
        assert (pattern.kind, preference.kind) == ("pattern", "preference")
        assert store.query_decisions(["db"]) == [decision]
        assert store.query_decisions(["ui"]) == []

    @pytest.mark.parametrize("max_items", [0, -1, True])
    def test_bad_limit(self, backend, max_items):
        """max_items is a positive integer or None."""
        with pytest.raises(ValidationError):
            ProjectMemoryStore("p", backend, max_items=max_items)


class TestEviction:
    def fill(self, store, n, importance=lambda i: (i % 10) / 10):
        return [store.add_decision(f"decision {i}", importance=importance(i)) for i in range(n)]

    def test_at_the_limit_nothing_is_evicted(self, backend, clock):
        """Exactly max_items items stay."""
        store = ProjectMemoryStore("p", backend, max_items=20, clock=clock)
        self.fill(store, 20)
        assert store.count() == 20

    def test_one_over_evicts_down_to_the_low_mark(self, backend, clock):
        """Going one over evicts to the low mark (90%): least important first, oldest on ties."""
        store = ProjectMemoryStore("p", backend, max_items=20, clock=clock)
        assert (store.aging.soft_limit, store.aging.low_mark) == (20, 18)
        items = self.fill(store, 21, importance=lambda i: 0.5 if i < 10 else 0.9)
        remaining = {i.id for i in store.list_all()}
        assert store.count() == 18
        evicted = [i for i in items if i.id not in remaining]
        assert [i.text for i in evicted] == ["decision 0", "decision 1", "decision 2"]

    def test_pinned_items_are_never_evicted(self, backend, clock):
        """Pinned items survive eviction even when they are the least important."""
        store = ProjectMemoryStore("p", backend, max_items=10, clock=clock)
        low = store.add_decision("keep me", importance=0.0)
        store.pin(low.id)
        self.fill(store, 10, importance=lambda _: 0.5)
        assert store.get(low.id).status is Status.PINNED
        assert store.count() <= 10

    def test_all_pinned_cannot_evict(self, backend, clock):
        """When everything is pinned the store stays over its limit rather than evict a pin."""
        store = ProjectMemoryStore("p", backend, max_items=3, clock=clock)
        for i in range(4):
            store.add(store.new_item("decision", f"pinned {i}", status=Status.PINNED))
        assert store.count() == 4
        assert store.evict() == 0

    def test_eviction_is_one_batch_and_journaled(self, clock):
        """Eviction marks the archive in one backend call, journaled with its reason and numbers.

        Nothing is deleted or rewritten: only the archive mark changes.
        """
        backend = CountingBackend()
        store = ProjectMemoryStore("p", backend, max_items=50, clock=clock)
        self.fill(store, 50)
        backend.delete_calls = backend.update_calls = 0
        store.add_decision("one too many", importance=1.0)
        assert (backend.delete_calls, backend.update_calls, backend.archive_calls) == (0, 0, 1)
        assert store.count() == 45
        assert store.count(view="archived") == 6
        assert backend.count() == 51
        events = backend.audit.events(namespace=store.namespace, actions=[AuditAction.ARCHIVE])
        assert len(events) == 1
        assert len(events[0].item_ids) == 6
        detail = events[0].detail
        assert (detail["reason"], detail["soft_limit"], detail["low_mark"]) == ("evicted", 50, 45)
        assert detail["decayed"] == sorted(detail["decayed"])
        assert len(detail["decayed"]) == 6
        archived = store.get_many(events[0].item_ids)
        assert {item.archived_reason for item in archived} == {ArchiveReason.EVICTED}

    def test_custom_policy(self, backend, clock):
        """A pluggable policy decides what goes."""

        class NewestFirst:
            def select(self, store, count, max_items):
                return [
                    i.id
                    for i in store.query({"status": {"$ne": "pinned"}}, limit=count - max_items)
                ]

        store = ProjectMemoryStore("p", backend, max_items=3, eviction=NewestFirst(), clock=clock)
        self.fill(store, 4)
        assert [i.text for i in store.timeline()] == ["decision 0", "decision 1", "decision 2"]

    def test_fraction_validation(self):
        """The policy's fraction is a share."""
        with pytest.raises(ValidationError):
            LowestImportanceOldest(fraction=1.5)

    def test_disabled(self, backend, clock):
        """max_items=None never evicts."""
        store = ProjectMemoryStore("p", backend, max_items=None, clock=clock)
        self.fill(store, 30)
        assert store.evict() == 0
        assert store.count() == 30
