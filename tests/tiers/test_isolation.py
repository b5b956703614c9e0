"""Isolation attacks: a store must never reach another namespace, whatever it is given."""

from __future__ import annotations

import attrs
import pytest

from agent_engine import (
    AuditAction,
    ContextAssembler,
    ContextItem,
    ContextRequest,
    DuplicateItemError,
    ItemNotFoundError,
    MemoryStores,
    Task,
    ValidationError,
)
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore


@pytest.fixture
def stores(backend, clock):
    a = ProjectMemoryStore("alpha", backend, clock=clock)
    b = ProjectMemoryStore("beta", backend, clock=clock)
    a_item = a.add_decision("Alpha uses PostgreSQL for everything", tags=["db"])
    b_item = b.add_decision("Beta secret: the launch code is 0000", tags=["db"])
    return a, b, a_item, b_item


class TestProjectIsolation:
    def test_reads_see_only_own_items(self, stores):
        """get, get_many, query, count, list_all and search stay inside the namespace."""
        a, _, a_item, b_item = stores
        assert a.get(b_item.id) is None
        assert a.get_many([a_item.id, b_item.id]) == [a.get(a_item.id)]
        assert [i.id for i in a.list_all()] == [a_item.id]
        assert a.count() == 1
        assert all(
            hit.item.namespace == a.namespace for hit in a.search("launch code secret", k=10)
        )

    @pytest.mark.parametrize(
        "filters",
        [
            {"namespace": "project:beta"},
            {"namespace": {"$in": ["project:alpha", "project:beta"]}},
            {"namespace": {"$ne": "project:alpha"}},
            {"tier": "global"},
            {"id": {"$in": []}},
        ],
    )
    def test_filters_naming_the_scope_are_intersected(self, stores, filters):
        """A filter that names another namespace or tier matches nothing of theirs."""
        a, _, a_item, _ = stores
        found = {item.id for item in a.query(filters, limit=None)}
        assert found <= {a_item.id}
        assert a.count(filters) == len(found)
        assert {hit.item.id for hit in a.search("launch code", k=5, filters=filters)} <= {a_item.id}

    def test_foreign_ids_are_not_found_for_writes(self, stores):
        """update, delete, pin and unpin of another project's id fail as not found."""
        a, b, _, b_item = stores
        hijacked = attrs.evolve(b_item, namespace=a.namespace, text="overwritten by alpha")
        with pytest.raises(ItemNotFoundError):
            a.update(hijacked)
        assert a.delete(b_item.id) is False
        assert a.delete_many([b_item.id]) == 0
        with pytest.raises(ItemNotFoundError):
            a.pin(b_item.id)
        with pytest.raises(ItemNotFoundError):
            a.unpin(b_item.id)
        assert b.get(b_item.id) == b_item

    def test_items_built_for_another_scope_are_refused(self, stores):
        """Adding or updating with an item of another namespace or tier is a ValidationError."""
        a, b, a_item, b_item = stores
        with pytest.raises(ValidationError):
            a.add(b.new_item("decision", "smuggled"))
        with pytest.raises(ValidationError):
            a.update(b_item)
        with pytest.raises(ValidationError):
            a.add(attrs.evolve(a.new_item("note", "x"), tier="global"))
        assert b.count() == 1
        assert a.get(a_item.id) == a_item

    def test_clear_is_scoped(self, stores):
        """Clearing one project leaves the other untouched."""
        a, b, _, b_item = stores
        assert a.clear() == 1
        assert b.list_all() == [b_item]

    def test_ids_do_not_leak_existence_through_get(self, stores):
        """A foreign id reads exactly like a missing one."""
        a, _, _, b_item = stores
        with pytest.raises(ItemNotFoundError) as foreign:
            a.require(b_item.id)
        with pytest.raises(ItemNotFoundError) as missing:
            a.require("no-such-id")
        assert foreign.value.namespace == missing.value.namespace == a.namespace


class TestOtherTiers:
    def test_tasks_are_isolated(self, backend, clock):
        """Two tasks on one backend see only their own steps, and clearing one keeps the other."""
        t1 = TaskMemoryStore("t1", backend, clock=clock)
        t2 = TaskMemoryStore("t2", backend, clock=clock)
        t1.add_reasoning("t1 thinks", "plan")
        kept = t2.add_reasoning("t2 thinks", "plan")
        assert [i.text for i in t1.timeline()] == ["t1 thinks"]
        t1.clear()
        assert t2.timeline() == [kept]

    def test_users_are_isolated(self, backend, clock):
        """Two users' global memories do not mix."""
        u1 = GlobalMemoryStore(backend, "u1", allow_unconfirmed=True, clock=clock)
        u2 = GlobalMemoryStore(backend, "u2", allow_unconfirmed=True, clock=clock)
        u1.add_preference("Answer in French", "language")
        assert u2.query_preferences() == []
        assert u2.count({"namespace": "global:u1"}) == 0

    def test_tiers_do_not_mix_on_one_backend(self, backend, clock):
        """A project store never returns task or global items stored in the same backend."""
        project = ProjectMemoryStore("p", backend, clock=clock)
        TaskMemoryStore("p", backend, clock=clock).add_reasoning("task step", "s")
        GlobalMemoryStore(backend, "p", allow_unconfirmed=True, clock=clock).add_pattern(
            "global pattern"
        )
        assert project.count() == 0
        assert project.search("task step global pattern", k=5) == []


class TestScopedIds:
    def test_an_id_another_scope_holds_is_no_obstacle(self, stores):
        """Adding with an id of another project stores it here: no error, no abort journaled."""
        a, b, _, b_item = stores
        events_before = len(a.backend.audit.events(namespace=a.namespace, limit=None))
        for foreign in (b_item.id, b_item.id.removeprefix(b.id_prefix)):
            added = a.add(a.new_item("decision", f"Alpha's own {len(foreign)}", id=foreign))
            assert added.id != b_item.id
            assert added.id.startswith(a.id_prefix)
            assert a.get(foreign) == added
        events = a.backend.audit.events(namespace=a.namespace, limit=None)[events_before:]
        assert [e.action for e in events] == [AuditAction.ADD, AuditAction.ADD]
        assert b.list_all() == [b_item]

    def test_a_long_id_of_another_scope_is_not_found(self, stores):
        """A whole id of another scope, longer than a local id may be, reads as missing."""
        a, b, _, _ = stores
        long_item = b.add(b.new_item("decision", "long", id="x" * 255))
        assert len(long_item.id) > 255
        assert a.get(long_item.id) is None
        assert a.get_many([long_item.id]) == []
        assert a.delete(long_item.id) is False
        assert b.get(long_item.id) == long_item

    def test_an_id_this_scope_holds_is_a_duplicate(self, stores):
        """Within one scope, a local id and the whole id name one item: adding it twice fails."""
        a, _, _, _ = stores
        first = a.add(a.new_item("decision", "one", id="fix-1"))
        assert first.id == a.id_prefix + "fix-1"
        for again in ("fix-1", first.id):
            with pytest.raises(DuplicateItemError):
                a.add(a.new_item("decision", "two", id=again))
        assert a.get("fix-1") == first

    def test_ids_written_before_scoping_are_found_in_their_scope_only(self, stores, backend):
        """An item stored under a bare id reads, updates and counts as a duplicate in its own
        scope, and is not found from another."""
        a, b, _, _ = stores
        legacy = ContextItem.create("note", "old", id="old-1", namespace=a.namespace)
        backend.add(legacy)
        assert a.get("old-1") == legacy
        assert b.get("old-1") is None
        with pytest.raises(DuplicateItemError):
            a.add(a.new_item("note", "again", id="old-1"))
        assert b.add(b.new_item("note", "theirs", id="old-1")).id == b.id_prefix + "old-1"
        assert a.update(attrs.evolve(legacy, text="newer")).text == "newer"
        assert a.delete("old-1") is True
        assert b.get("old-1") is not None


class TestTaskScopes:
    def test_one_task_id_in_two_projects_is_two_memories(self, backend, clock):
        """Two projects running a task with the same id never see each other's task memory."""
        assembler = ContextAssembler(
            MemoryStores(backend, clock=clock, confirm=lambda _request: True)
        )
        ours = Task(id="fix-login", project_id="shop", description="fix login")
        theirs = Task(id="fix-login", project_id="bank", description="fix login")
        assembler.task_store(theirs).add_reasoning("bank login secret: rotate the HSM key", "s")
        assembler.task_store(ours).add_reasoning("shop login uses cookies", "s")
        request = ContextRequest(budget_tokens=500, query="login secret key")
        texts = [s.item.text for s in assembler.build_context(ours, request).selections]
        assert texts == ["shop login uses cookies"]
        assert assembler.cleanup_task(ours) == 1
        assert assembler.task_store(theirs).count() == 1

    def test_users_of_one_project_have_their_own_task_memory(self, backend, clock):
        """The user is part of a task's scope."""
        ada = TaskMemoryStore(Task(id="t", project_id="p", user_id="ada"), backend, clock=clock)
        bob = TaskMemoryStore("t", backend, project_id="p", user_id="bob", clock=clock)
        ada.add_reasoning("ada's step", "s")
        assert bob.count() == 0
        assert ada.namespace == "task:p:ada:t"

    def test_a_task_names_its_scope_once(self, backend):
        """A Task carries its project and user; naming them again is refused, not ignored."""
        with pytest.raises(ValidationError) as raised:
            TaskMemoryStore(Task(id="t", project_id="p"), backend, project_id="q")
        assert raised.value.field == "project_id"
