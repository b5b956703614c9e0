"""The archive, versions and slots of tier stores, on every backend.

Eviction pages out to the archive instead of deleting; reads see the working set unless they
ask for more; updates keep the previous version; a keyed item supersedes the slot's holder;
history and ``as_of`` recover what held when. Bad requests change nothing.
"""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from agent_engine import (
    AuditAction,
    ItemNotFoundError,
    LifecycleStateError,
    Status,
    TaskMemoryStore,
    ValidationError,
    promote,
)
from agent_engine.models import ArchiveReason
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.views import View


def actions(store):
    return [
        event.action
        for event in reversed(store.backend.audit.events(namespace=store.namespace, limit=None))
    ]


def snapshot(store):
    """Every item of the store in every state, by id (what a refused request must not change)."""
    return {item.id: item for item in store.list_all(view=View.ALL)}


class TestArchive:
    def test_eviction_archives_and_the_archive_stays_searchable(self, backend, clock):
        """Over its limit a store pages out; nothing is deleted and the archive is searchable."""
        store = ProjectMemoryStore("p", backend, max_items=10, clock=clock)
        old = store.add_decision("use integer cents for money", importance=0.1)
        for n in range(10):
            store.add_decision(f"decision number {n}", importance=0.5 + n / 100)
        assert store.count() <= 10
        assert store.get(old.id).archived_reason is ArchiveReason.EVICTED
        assert old.id not in {item.id for item in store.list_all()}
        assert old.id in {item.id for item in store.list_all(view=View.ARCHIVED)}
        assert store.count(view=View.CURRENT) == 11
        working = {hit.item.id for hit in store.search("integer cents money", k=11)}
        assert old.id not in working
        paged = store.search("integer cents money", k=1, view=View.CURRENT)
        assert [hit.item.id for hit in paged] == [old.id]
        assert old.id in store.lexical().hits("integer cents").best(3)

    def test_archive_and_restore_round_trip(self, backend, clock):
        """Archive moves out of the working set with a reason; restore brings it back."""
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("deploy on tuesdays")
        (moved,) = store.archive(item.id)
        assert (moved.archived, moved.archived_reason) == (True, ArchiveReason.MANUAL)
        assert store.count() == 0
        assert store.archive(item.id) == []  # already archived: left as it is
        (back,) = store.restore(item.id)
        assert back.current
        assert store.get(item.id) == back
        assert store.restore(item.id) == []
        assert actions(store)[-2:] == [AuditAction.ARCHIVE, AuditAction.RESTORE]

    def test_pinned_items_cannot_be_archived_and_pinning_restores(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        pinned = store.add(store.new_item("decision", "always pinned", status=Status.PINNED))
        other = store.add_decision("archived then pinned")
        before = snapshot(store)
        with pytest.raises(LifecycleStateError, match="pinned"):
            store.archive(other.id, pinned.id)
        assert snapshot(store) == before
        store.archive(other.id)
        assert store.pin(other.id).current

    def test_unknown_or_foreign_ids_change_nothing(self, backend, clock):
        """Archive and restore refuse the whole request when any id is not this store's."""
        mine = ProjectMemoryStore("p", backend, clock=clock)
        theirs = ProjectMemoryStore("q", backend, clock=clock)
        item = mine.add_decision("mine")
        secret = theirs.add_decision("theirs")
        before = snapshot(mine), snapshot(theirs)
        for request in (
            lambda: mine.archive(item.id, secret.id),
            lambda: mine.archive(item.id, "no-such-id"),
            lambda: mine.restore(secret.id),
        ):
            with pytest.raises(ItemNotFoundError):
                request()
        assert (snapshot(mine), snapshot(theirs)) == before

    def test_a_bad_reason_is_refused(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("d")
        with pytest.raises(ValidationError, match="reason must be one of"):
            store.archive(item.id, reason="bored")
        assert store.get(item.id).current

    def test_a_bad_view_is_refused(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        with pytest.raises(ValidationError, match="view must be one of"):
            store.query(view="everything")


class TestVersions:
    def test_an_update_keeps_the_previous_version(self, backend, clock):
        """A content change makes version 2 and keeps version 1 as history, in one write."""
        store = ProjectMemoryStore("p", backend, clock=clock)
        first = store.add_decision("ship on fridays")
        second = store.update(attrs.evolve(first, text="ship on tuesdays"))
        assert (second.id, second.version) == (first.id, 2)
        assert store.count() == 1
        older, newer = store.history(first.id)
        assert (older.text, older.version, older.superseded_by) == (
            "ship on fridays",
            1,
            first.id,
        )
        assert older.valid_to == second.valid_from
        assert newer == store.get(first.id)
        assert store.count(view=View.ALL) == 2

    def test_bookkeeping_changes_keep_the_version(self, backend, clock):
        """Importance or status changes are not new versions."""
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("d")
        same = store.update(attrs.evolve(item, importance=0.2))
        assert same.version == 1
        assert store.count(view=View.ALL) == 1

    def test_update_cannot_move_lifecycle_state(self, backend, clock):
        """An update keeps the stored item's state: transitions have their own calls."""
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("d")
        store.update(attrs.evolve(item, archived_at=clock(), archived_reason="manual"))
        assert store.get(item.id).current

    def test_history_is_read_only(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("v1")
        store.update(attrs.evolve(item, text="v2"))
        old = store.history(item.id)[0]
        before = snapshot(store)
        for request in (
            lambda: store.update(attrs.evolve(old, text="rewritten")),
            lambda: store.restore(old.id),
            lambda: store.archive(old.id),
            lambda: store.pin(old.id),
            lambda: store.supersede(old.id, item.id),
        ):
            with pytest.raises(LifecycleStateError):
                request()
        assert snapshot(store) == before

    def test_as_of_sees_what_held_then(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("ship on fridays")
        between = clock()
        store.update(attrs.evolve(item, text="ship on tuesdays"))
        later = clock()
        assert [i.text for i in store.query(as_of=between)] == ["ship on fridays"]
        assert [i.text for i in store.query(as_of=later)] == ["ship on tuesdays"]
        assert store.query(as_of=item.timestamp - timedelta(seconds=1)) == []


class TestSlots:
    def test_a_keyed_item_supersedes_the_holder(self, backend, clock):
        """Same key, same scope: the newer item is current, the older one history."""
        store = GlobalMemoryStore(backend, "u", allow_unconfirmed=True, clock=clock)
        tea = store.add(store.new_item("preference", "prefers tea", key="preference:drink"))
        coffee = store.add(
            store.new_item("preference", "now prefers coffee", key="preference:drink")
        )
        assert [i.id for i in store.list_all()] == [coffee.id]
        assert coffee.version == 2
        assert store.get(tea.id).superseded_by == coffee.id
        assert [i.id for i in store.history(tea.id)] == [tea.id, coffee.id]
        assert AuditAction.SUPERSEDE in actions(store)

    def test_slots_are_per_scope(self, backend, clock):
        """The same key in another scope is another slot; a key naming another scope is refused."""
        mine = ProjectMemoryStore("p", backend, clock=clock)
        theirs = ProjectMemoryStore("q", backend, clock=clock)
        their_item = theirs.add(theirs.new_item("decision", "theirs", key="db"))
        mine.add(mine.new_item("decision", "mine", key="db"))
        assert theirs.get(their_item.id).current
        before = snapshot(mine), snapshot(theirs)
        with pytest.raises(ValidationError, match="names another scope"):
            mine.add(mine.new_item("decision", "reach", key="project:q/db"))
        assert (snapshot(mine), snapshot(theirs)) == before
        qualified = mine.add(mine.new_item("decision", "own", key="project:p/db"))
        assert qualified.key == "db"

    def test_keys_within_one_batch_chain(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        first, second = store.add_many(
            [store.new_item("decision", t, key="k") for t in ("first", "second")]
        )
        assert [i.id for i in store.list_all()] == [second.id]
        assert store.get(first.id).superseded_by == second.id

    def test_explicit_supersede(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        old = store.add_decision("use mysql")
        new = store.supersede(old.id, store.new_item("decision", "use postgres"))
        assert [i.id for i in store.list_all()] == [new.id]
        assert [i.id for i in store.history(new.id)] == [old.id, new.id]
        with pytest.raises(LifecycleStateError, match="itself"):
            store.supersede(new.id, new.id)

    def test_forget_takes_the_history_with_it(self, backend, clock):
        store = ProjectMemoryStore("p", backend, clock=clock)
        item = store.add_decision("v1")
        store.update(attrs.evolve(item, text="v2"))
        other = store.add_decision("unrelated")
        assert store.forget(item.id) == 1
        assert [i.id for i in store.list_all(view=View.ALL)] == [other.id]


class TestPromotionMeetsTheArchive:
    def test_promoting_archived_content_restores_the_copy(self, backend, clock):
        """The target's archived copy is the duplicate: reinforced and back, not stored twice."""
        task = TaskMemoryStore("t", backend, project_id="p", clock=clock)
        project = ProjectMemoryStore("p", backend, clock=clock)
        lesson = task.add_reasoning("Wait for network idle, never sleep", "fix")
        first = promote(task, project, lesson.id).item
        project.archive(first.id)
        again = promote(task, project, lesson.id)
        assert again.duplicate
        assert again.item.id == first.id
        assert again.item.current
        assert project.count(view=View.ALL) == 1


class TestForgetLeavesNoTrace:
    def test_forget_redacts_supersession_events(self, backend, clock):
        """The journal names a forgotten item nowhere, not in what replaced what either."""
        store = ProjectMemoryStore("p", backend, clock=clock)
        old = store.add(store.new_item("decision", "use mysql", key="db"))
        new = store.add(store.new_item("decision", "use postgres", key="db"))
        store.forget(new.id)
        journal = repr([(e.item_ids, e.detail) for e in backend.audit.events(limit=None)])
        assert old.id not in journal
        assert new.id not in journal
