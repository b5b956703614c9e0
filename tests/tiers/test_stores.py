"""MemoryStores: one object opens every tier's stores, with the tiers' own settings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    ConfirmationDeclined,
    ContextAssembler,
    InMemoryBackend,
    MemoryStores,
    Task,
    Tier,
    ValidationError,
)


class TestOpening:
    def test_one_store_per_scope_kept(self, backend):
        """Asking twice for a scope gives the same store; other scopes get their own."""
        stores = MemoryStores(backend)
        task = Task(id="t", project_id="p", user_id="u", description="d")
        assert stores.task_store(task) is stores.task_store(task)
        assert stores.project_store("p") is stores.project_store("p")
        assert stores.global_store("u") is stores.global_store("u")
        assert stores.project_store("p") is not stores.project_store("q")
        other = Task(id="t", project_id="q", user_id="u", description="d")
        assert stores.task_store(task) is not stores.task_store(other)

    def test_for_task_reads_the_tasks_own_scopes(self, backend):
        """A step reads its task's memory, its project's and its user's, nothing else."""
        stores = MemoryStores(backend)
        task = Task(id="t", project_id="p", user_id="u", description="d")
        opened = stores.for_task(task)
        assert opened[Tier.TASK] is stores.task_store(task)
        assert opened[Tier.PROJECT] is stores.project_store("p")
        assert opened[Tier.GLOBAL] is stores.global_store("u")

    def test_task_memory_goes_where_the_backend_is(self, backend):
        """With one backend given, task memory is kept there too."""
        stores = MemoryStores(backend)
        stores.task_store("t").add_instruction("Do it")
        assert backend.count() == 1

    def test_per_tier_backends(self, backend):
        """Each tier writes to its own backend when given one."""
        task_backend, global_backend = InMemoryBackend(), InMemoryBackend()
        stores = MemoryStores(backend, task_backend=task_backend, global_backend=global_backend)
        stores.task_store("t").add_instruction("Do it")
        stores.project_store("p").add_decision("Keep it")
        stores.global_store("u").add_pattern("Test first")
        assert [task_backend.count(), backend.count(), global_backend.count()] == [1, 1, 1]
        assert stores.backends[Tier.PROJECT] is backend

    def test_without_a_backend_every_tier_is_in_memory(self):
        """Nothing given: task memory on one in-memory backend, project and global on another."""
        stores = MemoryStores()
        assert isinstance(stores.backends[Tier.TASK], InMemoryBackend)
        assert stores.backends[Tier.PROJECT] is stores.backends[Tier.GLOBAL]
        assert stores.backends[Tier.TASK] is not stores.backends[Tier.PROJECT]


class TestTierSettings:
    def test_project_limit_applies(self, backend):
        """Project memory evicts past the limit the stores were given."""
        stores = MemoryStores(backend, max_project_items=2)
        project = stores.project_store("p")
        for n in range(4):
            project.add_decision(f"Decision {n}")
        assert project.count() == 2

    def test_confirmation_callback_is_asked(self, backend):
        """A high-risk global write asks the stores' callback, and its answer stands."""
        asked = []
        stores = MemoryStores(backend, confirm=lambda request: asked.append(request) or False)
        with pytest.raises(ConfirmationDeclined):
            stores.global_store("u").add_preference("Tabs, not spaces")
        assert [request.operation for request in asked] == ["add_preference"]
        assert stores.global_store("u").count() == 0

    def test_clock_stamps_writes(self, backend):
        """What the stores write is stamped by their clock."""
        then = datetime(2020, 2, 29, 12, tzinfo=UTC)
        stores = MemoryStores(backend, clock=lambda: then)
        item = stores.project_store("p").add_decision("Keep it")
        assert item.timestamp == then


class TestCleanup:
    def test_clears_and_forgets(self, backend):
        """A finished task's memory goes and its store is forgotten; others stay."""
        stores = MemoryStores(backend)
        old = stores.task_store("t1")
        old.add_instruction("Do t1")
        stores.task_store("t2").add_instruction("Do t2")
        assert stores.cleanup_task("t1") == 1
        assert stores.task_store("t1") is not old
        assert stores.task_store("t2").count() == 1

    def test_clears_a_task_it_never_opened(self, backend):
        """A task written by an earlier process is cleared from the backend all the same."""
        MemoryStores(backend).task_store("t").add_instruction("Do it")
        assert MemoryStores(backend).cleanup_task("t") == 1
        assert backend.count() == 0


class TestAssemblerShares:
    def test_assembler_and_application_share_one_store(self, backend):
        """The assembler opens its stores through the same object the application writes to."""
        stores = MemoryStores(backend)
        assembler = ContextAssembler(stores)
        assert assembler.project_store("p") is stores.project_store("p")
        assert assembler.clock is stores.clock

    def test_tier_settings_beside_stores_are_refused(self, backend):
        """A tier setting given to the assembler beside its stores would be ignored: refused."""
        with pytest.raises(ValidationError, match="max_project_items"):
            ContextAssembler(MemoryStores(backend), max_project_items=5)

    def test_tier_settings_on_the_assembler_are_deprecated(self, backend):
        """The old keywords still work, with a warning naming the new way."""
        with pytest.warns(DeprecationWarning, match="MemoryStores"):
            assembler = ContextAssembler(backend, max_project_items=2)
        project = assembler.project_store("p")
        project.add_decision("One")
        project.add_decision("Two")
        project.add_decision("Three")  # over 2: evicted down to the low mark, 1
        assert project.count() == 1

    def test_unknown_keyword_is_a_type_error(self, backend):
        """A misspelt keyword fails as it would on any Python call."""
        with pytest.raises(TypeError, match="max_items"):
            ContextAssembler(backend, max_items=5)
