"""HEAD/TAIL: the task timeline's first and last items come before anything from its middle."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_engine import (
    DEFAULT_COUNTER,
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    Layout,
    MemoryStores,
    OmissionReason,
    SelectionReason,
    Status,
    Task,
    Tier,
    TierShares,
)
from agent_engine.assembler.render import TRUNCATION_MARKER, Line, render_lines

TASK = Task(id="t", project_id="p", user_id="u")
STEP = "Step {:02d}: checked the deployment logs for errors"


def make(backend, clock, *, head=2, tail=3, **config):
    return ContextAssembler(
        MemoryStores(backend, clock=clock, confirm=lambda _request: True),
        config=AssemblerConfig(head=head, tail=tail, track_access=False, **config),
    )


def steps(assembler, count, start=0):
    """``count`` task steps of equal cost (and different content), in timeline order."""
    store = assembler.task_store(TASK)
    return [store.add_reasoning(STEP.format(n), "work") for n in range(start, start + count)]


def render_cost(items, tier=Tier.TASK):
    """What a package holding just ``items`` (whole, in ``tier``) costs: its render's count."""
    return DEFAULT_COUNTER.count(render_lines([Line(i, tier, i.body) for i in items], Layout()))


def chosen(package, tier=Tier.TASK):
    return {s.item.id: s.reason for s in package.selections if s.tier is tier}


class TestHeadTail:
    def test_kept_before_the_middle(self, backend, clock):
        """The first and last task items are kept; only then is the middle paged by score."""
        assembler = make(backend, clock, head=2, tail=3)
        store = assembler.task_store(TASK)
        steps(assembler, 6)
        hot = [
            store.add_reasoning("Rollback of the canary release fixed it", "work"),
            store.add_reasoning("The canary release rollback script lives in ops/", "work"),
        ]
        steps(assembler, 6, start=6)
        timeline = store.timeline()
        request = {"query": "canary rollback", "policy": "lexical"}
        roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=100_000, **request))
        charged = {s.item.id: s.tokens for s in roomy.selections}
        kept = [*timeline[:2], *timeline[-3:], *hot]
        budget = sum(charged[i.id] for i in kept) + charged[timeline[1].id] // 2
        package = assembler.build_context(
            TASK,
            ContextRequest(budget_tokens=budget, shares=TierShares(1.0, 0.0, 0.0), **request),
        )
        picked = chosen(package)
        assert [picked[i.id] for i in timeline[:2]] == [SelectionReason.HEAD] * 2
        assert [picked[i.id] for i in timeline[-3:]] == [SelectionReason.TAIL] * 3
        assert [picked[i.id] for i in hot] == [SelectionReason.RANKED] * 2
        assert len(picked) == len(kept)

    def test_middle_waits_for_head_and_tail(self, backend, clock):
        """When HEAD and TAIL fill the task share, no middle item gets in, however relevant."""
        assembler = make(backend, clock, head=2, tail=3)
        store = assembler.task_store(TASK)
        steps(assembler, 4)
        hot = store.add_reasoning("Rollback of the canary release fixed it", "work")
        steps(assembler, 4, start=4)
        timeline = store.timeline()
        request = {"query": "canary rollback", "policy": "lexical"}
        roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=100_000, **request))
        charged = {s.item.id: s.tokens for s in roomy.selections}
        budget = sum(charged[i.id] for i in [*timeline[:2], *timeline[-3:]])
        package = assembler.build_context(
            TASK,
            ContextRequest(budget_tokens=budget, shares=TierShares(1.0, 0.0, 0.0), **request),
        )
        assert set(chosen(package).values()) == {SelectionReason.HEAD, SelectionReason.TAIL}
        assert len(package.selections) == 5
        assert {o.item_id: o.reason for o in package.omissions} == {
            hot.id: OmissionReason.LOWER_SCORE
        }

    def test_tail_is_the_latest_when_timestamps_tie(self, backend):
        """With a frozen clock the TAIL is still the timeline's last items, not its first."""
        frozen = datetime(2024, 1, 1, tzinfo=UTC)
        assembler = make(backend, lambda: frozen, head=1, tail=2)
        items = steps(assembler, 10)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=5000))
        picked = chosen(package)
        assert picked[items[0].id] is SelectionReason.HEAD
        assert picked[items[-1].id] is SelectionReason.TAIL
        assert picked[items[-2].id] is SelectionReason.TAIL
        assert list(picked.values()).count(SelectionReason.TAIL) == 2

    def test_head_and_tail_are_configuration(self, backend, clock):
        """head=0, tail=0 turns preservation off: every task item is ranked."""
        assembler = make(backend, clock, head=0, tail=0)
        steps(assembler, 5)
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=5000))
        assert set(chosen(package).values()) == {SelectionReason.RANKED}


class TestHeadTailOverTheTaskShare:
    @pytest.fixture
    def crowded(self, backend, clock):
        """HEAD 2 + TAIL 3 of equal cost, and a task share that holds exactly three of them."""
        assembler = make(backend, clock, head=2, tail=3)
        items = steps(assembler, 10)
        share = render_cost(items[:3])
        request = ContextRequest(
            budget_tokens=2 * share, shares=TierShares(0.5, 0.5, 0.0), policy="recency"
        )
        return assembler, items, request

    def test_head_first_then_newest_tail_within_the_share(self, crowded):
        """In the task share: HEAD, then TAIL newest first; older TAIL loses to a full budget."""
        assembler, items, request = crowded
        project = assembler.project_store("p")
        project.add_many(project.new_item("turn", f"tip {n}") for n in range(200))
        package = assembler.build_context(TASK, request)
        picked = chosen(package)
        assert picked == {
            items[0].id: SelectionReason.HEAD,
            items[1].id: SelectionReason.HEAD,
            items[-1].id: SelectionReason.TAIL,
        }
        task = [s.item for s in package.selections if s.tier is Tier.TASK]
        assert render_cost(task) == package.usage_of(Tier.TASK).allocated
        reasons = {o.item_id: o.reason for o in package.omissions}
        assert reasons[items[-2].id] is OmissionReason.LOWER_SCORE
        assert reasons[items[-3].id] is OmissionReason.LOWER_SCORE
        assert package.tokens_used <= request.budget_tokens

    def test_rest_of_head_and_tail_wins_spill_over_before_the_middle(self, crowded):
        """Budget another tier leaves goes to the remaining TAIL before any middle item."""
        assembler, items, request = crowded
        package = assembler.build_context(TASK, request)
        picked = chosen(package)
        assert [picked[i.id] for i in items[:2]] == [SelectionReason.HEAD] * 2
        assert [picked[i.id] for i in items[-3:]] == [SelectionReason.TAIL] * 3
        assert list(picked.values()).count(SelectionReason.RANKED) == 1
        assert package.tokens_used <= request.budget_tokens

    def test_waiting_tail_beats_the_middle_to_spill_over(self, backend, clock):
        """A TAIL item that missed the task share gets spill-over before a middle item that
        would have fit in the share's last gap."""
        assembler = make(backend, clock, head=1, tail=2)
        store = assembler.task_store(TASK)
        first = store.add_instruction(STEP.format(0))
        middle = store.add_reasoning("canary ok", "work")
        tail = [store.add_reasoning(STEP.format(n), "work") for n in (1, 2)]
        request = {"query": "canary", "policy": "lexical"}
        roomy = assembler.build_context(TASK, ContextRequest(budget_tokens=100_000, **request))
        charged = {s.item.id: s.tokens for s in roomy.selections}
        assert charged[middle.id] < charged[tail[0].id]
        budget = render_cost([first, *tail])
        # The task share misses one token: the older TAIL item waits, a gap the middle item
        # fits in remains, and the global share (global memory is empty) spills over.
        shares = TierShares((budget - 1) / budget, 0.0, 1 / budget)
        package = assembler.build_context(
            TASK, ContextRequest(budget_tokens=budget, shares=shares, **request)
        )
        assert chosen(package) == {
            first.id: SelectionReason.HEAD,
            tail[0].id: SelectionReason.TAIL,
            tail[1].id: SelectionReason.TAIL,
        }
        assert {o.item_id: o.reason for o in package.omissions} == {
            middle.id: OmissionReason.LOWER_SCORE
        }
        assert package.tokens_used == budget


class TestOversizedItems:
    def test_head_larger_than_the_task_share_is_truncated(self, backend, clock):
        """A HEAD item bigger than the whole task share is cut, visibly, to what is left."""
        assembler = make(backend, clock, head=1, tail=1)
        store = assembler.task_store(TASK)
        instruction = store.add_instruction(" ".join(["Refactor the billing module."] * 300))
        store.add_reasoning("Started with the invoice tests", "work")
        request = ContextRequest(budget_tokens=500)
        package = assembler.build_context(TASK, request)
        (head,) = [s for s in package.selections if s.reason is SelectionReason.HEAD]
        assert head.item.id == instruction.id
        assert head.truncated
        assert head.body.endswith(TRUNCATION_MARKER)
        assert instruction.text.startswith(head.body.removesuffix(TRUNCATION_MARKER))
        assert head.tokens <= package.usage_of(Tier.TASK).allocated
        rendered = package.render()
        assert TRUNCATION_MARKER in rendered
        assert DEFAULT_COUNTER.count(rendered) <= package.tokens_used <= request.budget_tokens

    def test_pinned_larger_than_the_budget_is_truncated(self, backend, clock):
        """A pinned item bigger than the whole budget is cut to fit it, with the marker."""
        assembler = make(backend, clock, head=0, tail=0)
        project = assembler.project_store("p")
        rule = project.add(
            project.new_item(
                "convention", " ".join(["Never deploy on Fridays."] * 400), status=Status.PINNED
            )
        )
        request = ContextRequest(budget_tokens=120)
        package = assembler.build_context(TASK, request)
        (selection,) = package.selections
        assert (selection.item.id, selection.reason) == (rule.id, SelectionReason.PINNED)
        assert selection.truncated
        assert selection.body.endswith(TRUNCATION_MARKER)
        assert DEFAULT_COUNTER.count(package.render()) <= request.budget_tokens

    def test_middle_item_larger_than_the_budget_is_left_out(self, backend, clock):
        """A ranked item bigger than the budget is never cut: it is left out as over_budget."""
        assembler = make(backend, clock, head=0, tail=0)
        store = assembler.task_store(TASK)
        huge = store.add_reasoning(" ".join(["log line with details"] * 300), "work")
        small = store.add_reasoning("short note", "work")
        package = assembler.build_context(TASK, ContextRequest(budget_tokens=100))
        assert [s.item.id for s in package.selections] == [small.id]
        reasons = {o.item_id: o.reason for o in package.omissions}
        assert reasons == {huge.id: OmissionReason.OVER_BUDGET}
