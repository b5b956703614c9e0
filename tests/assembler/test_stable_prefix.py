"""A stable prefix: each section depends only on itself and the sections rendered before it."""

from __future__ import annotations

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    OmissionReason,
    Tier,
)
from tests.assembler.test_allocation import BUDGET, ITEM_COST, TASK, build, fill

STABLE = AssemblerConfig(stable_prefix=True)


@pytest.fixture
def stable(backend, clock):
    return ContextAssembler(backend, clock=clock, config=STABLE)


class TestBorrowing:
    def test_project_fills_only_the_global_share_it_was_left(self, stable):
        """With global memory empty, project memory takes the global share, not the task's."""
        fill(stable, [Tier.TASK, Tier.PROJECT])
        package = build(stable)
        project, task = package.usage_of(Tier.PROJECT), package.usage_of(Tier.TASK)
        assert 600 - ITEM_COST < project.used <= 600
        assert task.allocated - ITEM_COST < task.used <= task.allocated

    def test_room_the_task_has_not_used_stays_empty(self, stable, assembler):
        """The cost of a stable prefix: a small task's unused share is not lent onwards."""
        fill(stable, [Tier.PROJECT, Tier.GLOBAL])
        package = build(stable)
        assert package.usage_of(Tier.GLOBAL).used <= package.usage_of(Tier.GLOBAL).allocated
        assert 600 - ITEM_COST < package.tokens_used <= 600
        # The default fill lends it: the same memory fills the whole budget.
        assert build(assembler).tokens_used > BUDGET - ITEM_COST

    def test_the_last_section_takes_whatever_is_left(self, stable):
        """Task memory, rendered last, fills the room every other tier left."""
        fill(stable, [Tier.TASK], count=300)
        package = build(stable)
        assert package.usage_of(Tier.TASK).used == package.tokens_used
        assert BUDGET - ITEM_COST < package.tokens_used <= BUDGET

    def test_an_item_larger_than_its_reach_is_over_budget(self, stable, assembler):
        """A global memory larger than the global share fits the budget but never its tier."""
        memory = stable.global_store(TASK.user_id)
        big = memory.add(memory.new_item("note", " ".join(["preference"] * 300)))
        package = build(stable)
        (omission,) = package.omissions
        assert (omission.item_id, omission.reason) == (big.id, OmissionReason.OVER_BUDGET)
        assert big.id in {s.item.id for s in build(assembler).selections}


class TestPrefix:
    def _earlier_sections(self, assembler, steps):
        """The render before the task section, after each new task item."""
        fill(assembler, [Tier.GLOBAL], count=30)
        project = assembler.project_store(TASK.project_id)
        project.add_many(
            project.new_item("note", f"backlog note {n} " + "detail " * (n % 7)) for n in range(60)
        )
        timeline = assembler.task_store(TASK)
        seen = []
        for step in range(steps):
            timeline.add(timeline.new_item("tool_output", f"step {step} " + "output " * 12))
            render = build(assembler, query="backlog note detail").render()
            seen.append(render.partition("## Task memory")[0])
        return seen

    def test_only_task_memory_changed_so_earlier_sections_render_as_before(self, stable):
        """Task items added between builds leave the global and project sections unchanged."""
        seen = self._earlier_sections(stable, steps=10)
        assert len(set(seen)) == 1
        assert "## Project memory" in seen[0]

    def test_the_default_fill_lets_the_task_move_them(self, assembler):
        """What the stable prefix prevents: the task taking back room the project used."""
        seen = self._earlier_sections(assembler, steps=10)
        assert len(set(seen)) > 1

    @pytest.mark.parametrize("stable_prefix", [False, True])
    def test_unchanged_inputs_render_byte_identical(self, backend, clock, stable_prefix):
        """Two builds of one request on unchanged memory render the same bytes."""
        assembler = ContextAssembler(
            backend, clock=clock, config=AssemblerConfig(stable_prefix=stable_prefix)
        )
        fill(assembler, Tier, count=60)
        request = ContextRequest(budget_tokens=BUDGET, query="note of the backlog")
        first = assembler.build_context(TASK, request).render()
        assert assembler.build_context(TASK, request).render() == first


class TestWidening:
    """Pools cut at their limit gather wider: each tier only into the room it may fill."""

    CONFIG = AssemblerConfig(stable_prefix=True, limits=GatherLimits(per_source=5))

    def test_a_widening_task_leaves_earlier_sections_as_they_were(self, backend, clock):
        """The task widens last: it never takes room the project widened into before it."""
        stable = ContextAssembler(backend, clock=clock, config=self.CONFIG)
        project = stable.project_store(TASK.project_id)
        project.add_many(
            project.new_item("note", f"deploy rule {n}: tag the release first") for n in range(60)
        )
        timeline = stable.task_store(TASK)
        seen = []
        for step in range(4):
            timeline.add_many(
                timeline.new_item("tool_output", f"step {step} run {k}: deploy output " * 3)
                for k in range(12)
            )
            render = build(stable, query="deploy release rule").render()
            seen.append(render.partition("## Task memory")[0])
        assert len(set(seen)) == 1
        assert build(stable, query="deploy release rule").usage_of(Tier.PROJECT).used > 400

    def test_no_tier_fills_the_room_another_filled(self, backend, clock):
        """Room the project borrowed from the global share is not widened into again."""
        stable = ContextAssembler(backend, clock=clock, config=self.CONFIG)
        user = stable.global_store(TASK.user_id)
        user.add_many(
            user.new_item("note", f"deploy preference {n}: release on tuesdays") for n in range(60)
        )
        project = stable.project_store(TASK.project_id)
        project.add_many(
            project.new_item("note", f"deploy rule {n}: tag the release " + "before it " * 3)
            for n in range(25)
        )
        package = build(stable, query="deploy release rule")
        used = {usage.tier: usage.used for usage in package.usage}
        assert used[Tier.GLOBAL] <= 200
        assert used[Tier.GLOBAL] + used[Tier.PROJECT] <= 600
