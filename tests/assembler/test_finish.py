"""finish_task: what a task's contexts used most outlives it only as the stores are told."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    MemoryStores,
    Status,
    Task,
    Tier,
)

TASK = Task(id="fix-login", project_id="p", user_id="u")
LESSON = "The login test waits for the network to be idle, not a fixed sleep"


def steps(assembler, task, count):
    """``count`` builds of the task's context: each chooses, and so accesses, its items."""
    return [
        assembler.build_context(task, ContextRequest(budget_tokens=400, query="login test"))
        for _ in range(count)
    ]


@pytest.fixture
def assembler(backend, clock):
    """Without HEAD and TAIL: every task item is ranked in on its merits, or not at all."""
    return ContextAssembler(
        MemoryStores(backend, clock=clock, confirm=lambda _request: True),
        config=AssemblerConfig(head=0, tail=0),
    )


class TestFinishTask:
    def test_reports_what_the_builds_used(self, assembler):
        """Items chosen for three builds are the candidates; nothing reaches the project."""
        memory = assembler.task_store(TASK)
        memory.add_instruction("Fix the flaky login test")
        lesson = memory.add_reasoning(LESSON, "fix")
        steps(assembler, TASK, 3)
        end = assembler.finish_task(TASK)
        assert [c.item.id for c in end.candidates] == [lesson.id]
        assert end.promoted == ()
        assert assembler.project_store("p").count() == 0
        assert assembler.task_store(TASK).count() == 0

    def test_a_preset_closes_the_loop(self, backend, clock):
        """Promoted as a candidate, used by the next task's builds, confirmed at its end."""
        assembler = ContextAssembler(
            MemoryStores(backend, clock=clock, promotion="balanced"),
            config=AssemblerConfig(head=0, tail=0),
        )
        assembler.task_store(TASK).add_reasoning(LESSON, "fix")
        steps(assembler, TASK, 3)
        (promoted,) = assembler.finish_task(TASK).promoted
        assert promoted.item.status is Status.CANDIDATE

        later = Task(id="deploy", project_id="p", user_id="u")
        (package,) = steps(assembler, later, 1)
        assert promoted.item.id in {s.item.id for s in package.selections if s.tier is Tier.PROJECT}
        clock.now += timedelta(hours=25)
        review = assembler.finish_task(later).review
        assert [i.id for i in review.confirmed] == [promoted.item.id]
        assert assembler.project_store("p").require(promoted.item.id).status is Status.CONFIRMED
