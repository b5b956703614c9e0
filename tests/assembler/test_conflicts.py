"""Conflicts in a package: both sides marked, the newer named, the markers paid from the budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_engine import (
    DEFAULT_COUNTER,
    AssemblerConfig,
    BackendError,
    ContextAssembler,
    ContextRequest,
    InMemoryBackend,
    Layout,
    MemoryStores,
    OmissionReason,
    RenderFormat,
    Task,
    Tier,
)
from agent_engine.assembler._costcache import CostCaches
from agent_engine.assembler.package import SelectionReason
from agent_engine.assembler.packer import Entry, Packer
from agent_engine.assembler.render import Line, render_lines

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u", description="how do we rebase branches")
ALWAYS = "Always rebase feature branches on main."
NEVER = "Never rebase feature branches on main."


class Clock:
    """Each reading a minute later, so every write has its own time."""

    def __init__(self):
        self.now = NOW

    def __call__(self):
        self.now += timedelta(minutes=1)
        return self.now


def make(backend, layout=None, **options):
    config = AssemblerConfig(layout=layout or Layout(), track_access=False)
    stores = MemoryStores(backend, clock=Clock(), confirm=lambda _request: True)
    return ContextAssembler(stores, config=config, **options)


def conflicting(assembler):
    """An older and a newer convention that contradict, and a bystander."""
    project = assembler.project_store("p")
    older = project.add_convention(ALWAYS, "git")
    newer = project.add_convention(NEVER, "git")
    project.add_convention("Squash merge small fixes.", "git")
    return project, older, newer


class TestMarked:
    @pytest.mark.parametrize("format", list(RenderFormat))
    def test_both_sides_marked_with_the_newer_named(self, backend, format):  # noqa: A002
        """Each side's line carries the conflict's number and whether it is newer or older."""
        assembler = make(backend, Layout(format=format))
        _, older, newer = conflicting(assembler)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        (marked,) = package.conflicts
        assert (marked.number, marked.newer, marked.older) == (1, newer.id, older.id)
        assert marked.conflict.item_ids == (older.id, newer.id)
        bodies = {s.item.id: s.body for s in package.selections}
        assert bodies[older.id] == f"[\u26a0 conflict 1: older] {ALWAYS}"
        assert bodies[newer.id] == f"[\u26a0 conflict 1: newer] {NEVER}"
        rendered = package.render()
        assert rendered.count("\u26a0 conflict 1") == 2
        assert package.tokens_used == DEFAULT_COUNTER.count(rendered)

    def test_an_unmarked_build_has_no_markers(self, backend):
        """Without conflicts the lines are what they always were."""
        assembler = make(backend)
        project = assembler.project_store("p")
        project.add_convention(ALWAYS, "git")
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        assert package.conflicts == ()
        assert "\u26a0" not in package.render()

    def test_one_side_in_the_package_is_not_marked(self, backend):
        """A conflict whose other side was left out (here: expired) shows no marker."""
        assembler = make(backend)
        project = assembler.project_store("p")
        project.add(project.new_item("convention", ALWAYS, expires_at=NOW + timedelta(days=1)))
        project.add_convention(NEVER, "git")
        assert len(project.conflicts()) == 1
        later = make(backend, clock=lambda: NOW + timedelta(days=2))
        package = later.build_context(TASK, ContextRequest(budget_tokens=400))
        assert [s.body for s in package.selections] == [NEVER]
        assert package.conflicts == ()

    def test_a_resolved_conflict_is_not_marked(self, backend):
        """Once resolved, the superseded side is never selected and the kept one is plain."""
        assembler = make(backend)
        project, older, _ = conflicting(assembler)
        (conflict,) = project.conflicts()
        project.resolve(conflict.id, keep=older.id)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        assert package.conflicts == ()
        assert ALWAYS in [s.body for s in package.selections]
        assert NEVER not in package.render()

    def test_conflicts_are_numbered_in_prompt_order(self, backend):
        """Two conflicts in one package: 1 is the one whose first side is rendered first."""
        assembler = make(backend)
        project = assembler.project_store("p")
        first = project.add_convention("Always run the linter before pushing.", "ci")
        second = project.add_convention(ALWAYS, "git")
        project.add_convention(NEVER, "git")
        project.add_convention("Never run the linter before pushing.", "ci")
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=600))
        assert [(m.number, m.older) for m in package.conflicts] == [(1, first.id), (2, second.id)]
        rendered = package.render()
        assert rendered.index("conflict 1: older") < rendered.index("conflict 2: older")
        assert package.tokens_used == DEFAULT_COUNTER.count(rendered)


class TestBudget:
    def test_markers_are_paid_from_the_budget(self, backend):
        """Room for both lines but not their markers: one side only, unmarked, within budget.

        With room for the marked render, both are in and it costs exactly the budget.
        """
        assembler = make(backend)
        _, older, newer = conflicting(assembler)
        roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        pair = [s for s in roomy.selections if s.item.id in {older.id, newer.id}]
        plain = [Line(s.item, Tier.PROJECT, s.item.body) for s in pair]
        unmarked = DEFAULT_COUNTER.count(render_lines(plain, Layout()))
        tight = assembler.build_context(TASK, ContextRequest(budget_tokens=unmarked))
        assert tight.conflicts == ()
        assert len({s.item.id for s in tight.selections} & {older.id, newer.id}) == 1
        assert tight.tokens_used == DEFAULT_COUNTER.count(tight.render()) <= unmarked
        marked = DEFAULT_COUNTER.count(
            render_lines([Line(s.item, s.tier, s.body) for s in pair], Layout())
        )
        exact = assembler.build_context(TASK, ContextRequest(budget_tokens=marked))
        assert {s.item.id for s in exact.selections} == {older.id, newer.id}
        assert len(exact.conflicts) == 1
        assert exact.tokens_used == DEFAULT_COUNTER.count(exact.render()) == marked

    def test_a_counter_that_does_not_add_up_still_fits(self, backend):
        """With a counter whose pieces do not add up, the marked render is counted whole."""

        class NewlineCounter:
            name = "words-and-newlines"

            def count(self, text):
                return len(text.split()) + text.count("\n")

        counter = NewlineCounter()
        assembler = make(backend, counter=counter)
        conflicting(assembler)
        for budget in (12, 20, 40, 400):
            package = assembler.build_context(TASK, ContextRequest(budget_tokens=budget))
            assert counter.count(package.render()) == package.tokens_used <= budget

    def test_taking_a_marked_item_back_out_unmarks_its_other_side(self):
        """The render check's drop gives back both markers' units and leaves a plain line."""
        backend = InMemoryBackend()
        assembler = make(backend)
        project, older, newer = conflicting(assembler)
        (conflict,) = project.conflicts()
        older, newer = project.get(older.id), project.get(newer.id)
        packer = Packer(
            1000,
            dict.fromkeys(Tier, 1000),
            Layout(),
            DEFAULT_COUNTER,
            CostCaches(),
            conflicts=[conflict],
        )
        entries = [
            Entry(item, Tier.PROJECT, 1.0, SelectionReason.RANKED) for item in (older, newer)
        ]
        packer.offer_all(entries[:1], lambda: 1000, may_truncate=False)
        alone = packer.total
        packer.offer_all(entries[1:], lambda: 1000, may_truncate=False)
        assert len(packer.conflicts_shown()) == 1
        packer.drop(packer.taken[1], OmissionReason.LOWER_SCORE)
        assert packer.total == alone
        assert [line.body for line in packer.lines()] == [ALWAYS]
        assert packer.conflicts_shown() == []
        rendered = render_lines(packer.lines(), Layout())
        assert packer.scale.tokens(packer.total) == DEFAULT_COUNTER.count(rendered)


class _UnreadableConflicts(InMemoryBackend):
    """An in-memory backend whose conflict store cannot be read."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        store = self._conflict_store

        class Failing:
            def __getattr__(self, name):
                return getattr(store, name)

            def of_scope(self, *args, **kwargs):
                raise BackendError("the conflict table is gone", backend="test")

        self._conflict_store = Failing()


class TestFailure:
    def test_unreadable_conflicts_leave_the_items_unmarked_and_say_so(self):
        """The build goes on without markers; the package names the tiers' failure."""
        assembler = make(_UnreadableConflicts())
        conflicting(assembler)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=400))
        assert {s.body for s in package.selections} >= {ALWAYS, NEVER}
        assert package.conflicts == ()
        assert {(f.tier, f.phase) for f in package.failures} == {
            (tier, "conflicts") for tier in (Tier.TASK, Tier.PROJECT, Tier.GLOBAL)
        }
        with pytest.raises(BackendError):
            assembler.build_context(TASK, ContextRequest(budget_tokens=400), strict=True)
