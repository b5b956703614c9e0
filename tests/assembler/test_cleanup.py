"""cleanup_task: a finished task's memory goes, and nothing else does."""

from __future__ import annotations

from agent_engine import AuditAction, ContextAssembler, ContextRequest, Task, Tier


def remember(assembler):
    """Two tasks of one project, the project's memory and the user's global memory."""
    for task_id in ("t1", "t2"):
        store = assembler.task_store(task_id)
        store.add_instruction(f"Do {task_id}")
        store.add_reasoning(f"Working on {task_id}", "s")
    assembler.project_store("p").add_decision("Keep the API stable")
    assembler.global_store("u").add_pattern("Write the test first")


class TestCleanupTask:
    def test_clears_the_task_and_nothing_else(self, assembler, backend):
        """Only the finished task's items are removed; other tasks, project and global stay."""
        remember(assembler)
        before = backend.count()
        assert assembler.cleanup_task("t1") == 2
        assert assembler.task_store("t1").count() == 0
        assert assembler.task_store("t2").count() == 2
        assert assembler.project_store("p").count() == 1
        assert assembler.global_store("u").count() == 1
        assert backend.count() == before - 2

    def test_is_journaled(self, assembler, backend):
        """The clear is recorded in the audit log under the task's namespace."""
        remember(assembler)
        assembler.cleanup_task("t1")
        (event,) = [e for e in backend.audit.events() if e.action is AuditAction.CLEAR]
        assert (event.tier, event.namespace) == (Tier.TASK, "task:default:default:t1")

    def test_forgets_the_store(self, assembler):
        """The task's store is dropped; asking again gives a fresh, empty one."""
        remember(assembler)
        old = assembler.task_store("t1")
        assembler.cleanup_task("t1")
        new = assembler.task_store("t1")
        assert new is not old
        assert new.count() == 0

    def test_next_context_has_no_task_items(self, assembler):
        """After cleanup, a context for the task is built from project and global memory only."""
        remember(assembler)
        task = Task(id="t1", project_id="p", user_id="u")
        assembler.cleanup_task("t1")
        package = assembler.build_context(task, ContextRequest(budget_tokens=500))
        assert {s.tier for s in package.selections} == {Tier.PROJECT, Tier.GLOBAL}

    def test_unknown_task_is_a_no_op(self, assembler, backend):
        """Cleaning up a task that has no memory removes nothing."""
        remember(assembler)
        before = backend.count()
        assert assembler.cleanup_task("never-ran") == 0
        assert backend.count() == before

    def test_works_from_another_assembler(self, assembler, backend, clock):
        """A task written by one assembler is cleaned up by another on the same backend."""
        remember(assembler)
        restarted = ContextAssembler(backend, clock=clock)
        assert restarted.cleanup_task("t2") == 2
        assert assembler.task_store("t2").count() == 0
        assert assembler.task_store("t1").count() == 2
