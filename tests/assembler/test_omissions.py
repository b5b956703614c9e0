"""Every candidate left out says why: duplicate, expired, below threshold, lower score, no room
for its header, over budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_engine import (
    DEFAULT_COUNTER,
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    GatherLimits,
    Layout,
    MemoryStores,
    OmissionReason,
    ProjectMemoryStore,
    SelectionReason,
    Status,
    Task,
    Tier,
    promote,
)
from agent_engine.assembler.render import Line, render_lines

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


@pytest.fixture
def assembler(backend):
    """A frozen-clock assembler without HEAD/TAIL, so every candidate is ranked."""
    return ContextAssembler(
        MemoryStores(backend, clock=lambda: NOW, confirm=lambda _request: True),
        config=AssemblerConfig(head=0, tail=0),
    )


def why(package):
    return {o.item_id: o.reason for o in package.omissions}


def build(assembler, budget=2000, **request):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=budget, **request))


class TestDuplicate:
    def test_promoted_copy_is_not_shown_twice(self, assembler):
        """After a promotion the task and project hold the same text: it is shown once."""
        task = assembler.task_store(TASK)
        project = assembler.project_store("p")
        lesson = task.add_reasoning("Retry the upload with exponential backoff", "fix")
        copy = promote(task, project, lesson.id).item
        package = build(assembler, query="upload backoff")
        assert [s.item.id for s in package.selections] == [lesson.id]
        assert why(package) == {copy.id: OmissionReason.DUPLICATE}
        (omission,) = package.omissions
        assert omission.tier is Tier.PROJECT
        assert omission.tokens > 0

    def test_same_text_in_one_tier_is_shown_once(self, assembler, backend):
        """Two items differing only in case and spacing are one piece of content.

        A store merges such an add into the item it holds; one that does not (merging off,
        or items written before it merged) still shows the content once.
        """
        project = ProjectMemoryStore("p", backend, clock=lambda: NOW, merge=None)
        first = project.add_pattern("Run  migrations before deploys")
        second = project.add_pattern("run migrations BEFORE deploys")
        package = build(assembler)
        assert len(package.selections) == 1
        (shown,) = package.selections
        hidden = ({first.id, second.id} - {shown.item.id}).pop()
        assert why(package) == {hidden: OmissionReason.DUPLICATE}


class TestExpired:
    def test_expired_items_are_left_out(self, assembler):
        """An item whose time to live ran out is reported as expired, pinned or not."""
        project = assembler.project_store("p")
        past, future = NOW - timedelta(minutes=1), NOW + timedelta(days=1)
        stale = project.add(project.new_item("note", "Staging is down", expires_at=past))
        stale_pin = project.add(
            project.new_item("note", "Freeze merges", expires_at=past, status=Status.PINNED)
        )
        fresh = project.add(project.new_item("note", "Prod is green", expires_at=future))
        package = build(assembler)
        assert [s.item.id for s in package.selections] == [fresh.id]
        assert why(package) == {
            stale.id: OmissionReason.EXPIRED,
            stale_pin.id: OmissionReason.EXPIRED,
        }

    def test_expiry_is_judged_by_the_assembler_clock(self, backend):
        """An item expiring later than the assembler's now is still shown."""
        later = ContextAssembler(backend, clock=lambda: NOW - timedelta(hours=1))
        project = later.project_store("p")
        item = project.add(project.new_item("note", "Staging is down", expires_at=NOW))
        assert [s.item.id for s in build(later).selections] == [item.id]


class TestBelowThreshold:
    def test_ranked_items_under_min_score_are_left_out(self, backend):
        """With min_score set, ranked candidates scoring under it are below_threshold."""
        assembler = ContextAssembler(
            backend, clock=lambda: NOW, config=AssemblerConfig(head=0, tail=0, min_score=0.5)
        )
        project = assembler.project_store("p")
        keep = project.add_pattern("Prefer small pull requests", importance=0.8)
        drop = project.add_pattern("Tabs in the legacy module", importance=0.2)
        pinned = project.add(project.new_item("rule", "No force-push", importance=0.1))
        project.pin(pinned.id)
        package = build(assembler, policy="importance")
        assert {s.item.id: s.reason for s in package.selections} == {
            keep.id: SelectionReason.RANKED,
            pinned.id: SelectionReason.PINNED,
        }
        assert why(package) == {drop.id: OmissionReason.BELOW_THRESHOLD}
        (omission,) = package.omissions
        assert omission.score == pytest.approx(0.2)

    def test_head_and_tail_ignore_the_threshold(self, backend):
        """HEAD and TAIL are kept whatever they score: the threshold applies to the middle."""
        assembler = ContextAssembler(
            backend, clock=lambda: NOW, config=AssemblerConfig(head=1, tail=1, min_score=0.9)
        )
        store = assembler.task_store(TASK)
        first = store.add_instruction("Write the release notes", importance=0.1)
        middle = store.add_reasoning("Collected merged PRs", "notes", importance=0.1)
        last = store.add_reasoning("Drafted the summary", "notes", importance=0.1)
        package = build(assembler, policy="importance")
        assert {s.item.id for s in package.selections} == {first.id, last.id}
        assert why(package) == {middle.id: OmissionReason.BELOW_THRESHOLD}


class TestBudget:
    def test_lower_score_when_better_items_used_the_budget(self, assembler):
        """An item that would fit alone but lost to higher-scoring ones is lower_score."""
        project = assembler.project_store("p")
        best = project.add_pattern("Pin dependencies in CI", importance=0.9)
        worse = project.add_pattern("Pin fonts in the mockups", importance=0.3)
        alone = build(assembler, policy="importance")
        cost = {s.item.id: s.tokens for s in alone.selections}
        package = build(assembler, budget=cost[best.id], policy="importance")
        assert [s.item.id for s in package.selections] == [best.id]
        assert why(package) == {worse.id: OmissionReason.LOWER_SCORE}
        (omission,) = package.omissions
        assert omission.tokens <= package.budget_tokens
        assert omission.score == pytest.approx(0.3)

    def test_over_budget_when_larger_than_the_budget(self, assembler):
        """An item that could not fit even in an empty package is over_budget."""
        project = assembler.project_store("p")
        essay = project.add_pattern(" ".join(["Document every endpoint."] * 200))
        note = project.add_pattern("Keep endpoints versioned")
        package = build(assembler, budget=60)
        assert [s.item.id for s in package.selections] == [note.id]
        assert why(package) == {essay.id: OmissionReason.OVER_BUDGET}
        assert package.omissions[0].tokens > 60

    def test_over_budget_counts_pinned_items_first(self, assembler):
        """Room taken by pinned items is not room a ranked item could have had."""
        project = assembler.project_store("p")
        rule = project.add(project.new_item("rule", " ".join(["Review every migration."] * 8)))
        project.pin(rule.id)
        note = project.add_pattern(" ".join(["Keep endpoints versioned."] * 6))
        alone = build(assembler)
        cost = {s.item.id: s.tokens for s in alone.selections}
        package = build(assembler, budget=cost[rule.id] + cost[note.id] - 1)
        assert [s.item.id for s in package.selections] == [rule.id]
        assert why(package) == {note.id: OmissionReason.OVER_BUDGET}


class TestNoRoomForHeader:
    def test_a_pinned_item_whose_section_header_does_not_fit(self, assembler):
        """A pinned item whose line fits the room the pinned items left, but not with the
        section header it would open, says so, even once a later item has opened that section."""
        user = assembler.global_store("u")
        project = assembler.project_store("p")
        rule = user.add(
            user.new_item(
                "rule", " ".join(["Always write the rollback first."] * 12), status=Status.PINNED
            )
        )
        freeze = project.add(
            project.new_item(
                "rule", "Freeze merges to main during the release window", status=Status.PINNED
            )
        )
        short = project.add(project.new_item("turn", "ok"))
        both = [Line(rule, Tier.GLOBAL, rule.body), Line(freeze, Tier.PROJECT, freeze.body)]
        budget = DEFAULT_COUNTER.count(render_lines(both, Layout())) - 1
        package = build(assembler, budget=budget)
        assert [s.item.id for s in package.selections] == [rule.id, short.id]
        assert why(package) == {freeze.id: OmissionReason.NO_ROOM_FOR_HEADER}


class TestPinnedAreAllExplained:
    def test_every_pinned_item_is_chosen_or_left_out_with_a_reason(self, backend):
        """However many items a tier has pinned, each one is chosen as pinned or says why not,
        even when the candidate sources bring in only a few of them."""
        assembler = ContextAssembler(
            backend,
            clock=lambda: NOW,
            config=AssemblerConfig(head=0, tail=0, limits=GatherLimits(per_source=5)),
        )
        project = assembler.project_store("p")
        pinned = project.add_many(
            project.new_item("rule", f"Rule {n}: review the migration first", status=Status.PINNED)
            for n in range(80)
        )
        package = build(assembler, budget=300)
        chosen = [s.item.id for s in package.selections]
        left_out = [o.item_id for o in package.omissions]
        assert sorted(chosen + left_out) == sorted(item.id for item in pinned)
        assert {s.reason for s in package.selections} == {SelectionReason.PINNED}
        assert {o.reason for o in package.omissions} == {OmissionReason.OVER_BUDGET}
