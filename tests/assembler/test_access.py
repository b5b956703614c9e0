"""Access tracking: items ranked in are counted in one batched write per backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    MemoryStores,
    SelectionReason,
    Status,
    Task,
    Tier,
)

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u")


class CountingBackend(InMemoryBackend):
    """An in-memory backend that records each touch() call."""

    def __init__(self):
        super().__init__(embedder=HashingEmbedder(dim=32))
        self.touches: list[list[str]] = []

    def touch(self, item_ids, at):
        ids = list(item_ids)
        self.touches.append(ids)
        return super().touch(ids, at)


def fill(assembler):
    """Three small items per tier and one that cannot fit; return every stored item."""
    task = assembler.task_store(TASK)
    project = assembler.project_store("p")
    user = assembler.global_store("u")
    items = [task.add_reasoning(f"Traced request {n} through the proxy", "debug") for n in range(3)]
    items += [project.add_pattern(f"Proxy rule {n}: strip cookies") for n in range(3)]
    items += [user.add_pattern(f"Answer in short sentences ({n})") for n in range(3)]
    items.append(project.add_pattern(" ".join(["A very long runbook line."] * 300)))
    return items


def build(assembler, budget=500):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=budget, query="proxy"))


@pytest.fixture
def assembler(backend, clock):
    """Without HEAD and TAIL, so every chosen item is ranked in."""
    return ContextAssembler(
        MemoryStores(backend, clock=clock, confirm=lambda _request: True),
        config=AssemblerConfig(head=0, tail=0),
    )


class TestAccessTracking:
    def test_items_in_by_rule_are_not_counted(self, backend, clock):
        """Pinned, HEAD and TAIL items are in every package: choosing them is not an access."""
        assembler = ContextAssembler(MemoryStores(backend, clock=clock))
        task = assembler.task_store(TASK)
        steps = [
            task.add_reasoning(f"Traced request {n} through the proxy", "debug") for n in range(3)
        ]
        project = assembler.project_store("p")
        pinned = project.add(
            project.new_item("pattern", "Proxy: pinned rule", status=Status.PINNED)
        )
        ranked = project.add_pattern("Proxy rule: strip cookies")
        package = build(assembler)
        reasons = {s.item.id: s.reason for s in package.selections}
        assert reasons[pinned.id] is SelectionReason.PINNED
        assert {reasons[step.id] for step in steps} <= {SelectionReason.HEAD, SelectionReason.TAIL}
        assert reasons[ranked.id] is SelectionReason.RANKED
        assert backend.get(ranked.id).access_count == 1
        assert [backend.get(i.id).access_count for i in (pinned, *steps)] == [0, 0, 0, 0]

    def test_chosen_items_are_counted(self, assembler, clock):
        """Each ranked item gets access_count + 1 and last_accessed_at; the rest nothing."""
        items = fill(assembler)
        package = build(assembler)
        accessed_at = clock.now
        chosen = {s.item.id for s in package.selections}
        assert chosen
        assert len(chosen) < len(items)
        backend = assembler.backends[Tier.PROJECT]
        for item in backend.get_many(i.id for i in items):
            if item.id in chosen:
                assert (item.access_count, item.last_accessed_at) == (1, accessed_at)
            else:
                assert (item.access_count, item.last_accessed_at) == (0, None)

    def test_counts_accumulate_over_builds(self, assembler):
        """Every build that chooses an item counts one more access."""
        fill(assembler)
        for _ in range(3):
            package = build(assembler)
        backend = assembler.backends[Tier.PROJECT]
        for selection in package.selections:
            assert backend.get(selection.item.id).access_count == 3

    def test_package_shows_items_as_they_were_chosen(self, assembler):
        """The package holds the items as read, before this build's access was recorded."""
        fill(assembler)
        package = build(assembler)
        assert all(s.item.access_count == 0 for s in package.selections)

    def test_track_access_off_writes_nothing(self, backend, clock):
        """With track_access=False a build leaves every item exactly as it was."""
        assembler = ContextAssembler(
            backend, clock=clock, config=AssemblerConfig(track_access=False)
        )
        items = fill(assembler)
        assert build(assembler).selections
        assert backend.get_many(i.id for i in items) == items


class TestBatching:
    def test_one_touch_per_distinct_backend(self):
        """Task memory on one backend, project and global on another: exactly two touches."""
        task_backend, shared = CountingBackend(), CountingBackend()
        assembler = ContextAssembler(
            MemoryStores(
                shared, task_backend=task_backend, clock=lambda: NOW, confirm=lambda _r: True
            ),
            config=AssemblerConfig(head=0, tail=0),
        )
        fill(assembler)
        package = build(assembler)
        by_tier = {tier: {s.item.id for s in package.selections if s.tier is tier} for tier in Tier}
        assert [set(ids) for ids in task_backend.touches] == [by_tier[Tier.TASK]]
        assert [set(ids) for ids in shared.touches] == [
            by_tier[Tier.PROJECT] | by_tier[Tier.GLOBAL]
        ]

    def test_one_touch_when_every_tier_shares_a_backend(self):
        """One backend for all three tiers: one touch for everything chosen."""
        backend = CountingBackend()
        assembler = ContextAssembler(
            MemoryStores(backend, clock=lambda: NOW, confirm=lambda _r: True),
            config=AssemblerConfig(head=0, tail=0),
        )
        fill(assembler)
        package = build(assembler)
        assert [set(ids) for ids in backend.touches] == [{s.item.id for s in package.selections}]

    def test_no_touch_without_tracking(self):
        """track_access=False never calls touch(), whatever is chosen."""
        backend = CountingBackend()
        assembler = ContextAssembler(
            backend, clock=lambda: NOW, config=AssemblerConfig(track_access=False)
        )
        fill(assembler)
        assert build(assembler).selections
        assert backend.touches == []

    def test_nothing_chosen_nothing_written(self):
        """A build that chooses nothing makes no write at all."""
        backend = CountingBackend()
        assembler = ContextAssembler(backend, clock=lambda: NOW)
        package = build(assembler)
        assert package.selections == ()
        assert backend.touches == []
