"""The budget split between tiers: enforced, work-conserving, overridable."""

from __future__ import annotations

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    Task,
    Tier,
    TierShares,
    ValidationError,
)
from agent_engine.assembler.allocation import allocate

TASK = Task(id="t", project_id="p", user_id="u")
BUDGET = 1000
ITEM_COST = 7
"""What one filler line costs counted alone: "<tier> note <n> of the backlog" is six pieces
(a conversation turn has no markup), 6.6 tokens within a package."""


def fill(assembler, tiers, count=150):
    """``count`` small items of equal cost in each of ``tiers`` (different content per tier)."""
    stores = assembler.stores.for_task(TASK)
    for tier in tiers:
        if tier not in stores:  # the session, of a task that runs in none
            continue
        store = stores[tier]
        store.add_many(
            store.new_item("turn", f"{tier.value} note {n} of the backlog") for n in range(count)
        )


def build(assembler, **request):
    return assembler.build_context(TASK, ContextRequest(budget_tokens=BUDGET, **request))


class TestAllocate:
    def test_default_split(self):
        """The default split is 40/40/20 of the budget."""
        assert allocate(1000, TierShares()) == {
            Tier.TASK: 400,
            Tier.SESSION: 0,
            Tier.PROJECT: 400,
            Tier.GLOBAL: 200,
        }

    @pytest.mark.parametrize("budget", [1, 7, 999, 4001])
    def test_rounds_down(self, budget):
        """Each tier gets the floor of its share; the remainder is left for spill-over."""
        split = allocate(budget, TierShares(1 / 3, 1 / 3, 1 / 3))
        assert [split[tier] for tier in (Tier.TASK, Tier.PROJECT, Tier.GLOBAL)] == [budget // 3] * 3
        assert split[Tier.SESSION] == 0
        assert sum(split.values()) <= budget


class TestEnforcement:
    @pytest.mark.parametrize(
        "spill_order",
        [
            pytest.param((Tier.TASK, Tier.PROJECT, Tier.GLOBAL), id="task-first"),
            pytest.param((Tier.GLOBAL, Tier.PROJECT, Tier.TASK), id="global-first"),
        ],
    )
    def test_each_tier_stays_within_its_share(self, backend, clock, spill_order):
        """With plenty to choose from everywhere, only the first tier in spill order passes its
        share, and only by the leftovers."""
        assembler = ContextAssembler(
            backend, clock=clock, config=AssemblerConfig(spill_order=spill_order)
        )
        fill(assembler, Tier)
        package = build(assembler)
        first, *others = spill_order
        for tier in others:
            usage = package.usage_of(tier)
            assert usage.allocated - ITEM_COST < usage.used <= usage.allocated, tier
        assert package.usage_of(first).used > package.usage_of(first).allocated
        assert BUDGET - ITEM_COST < package.tokens_used <= BUDGET

    def test_shares_are_what_the_package_reports(self, assembler):
        """Each tier's usage reports its allocation, what it used and what it chose."""
        fill(assembler, Tier, count=5)
        package = build(assembler)
        assert [(u.tier, u.allocated) for u in package.usage] == [
            (Tier.GLOBAL, 200),
            (Tier.PROJECT, 400),
            (Tier.TASK, 400),
        ]
        assert all(u.selected == 5 and u.candidates == 5 for u in package.usage)


class TestWorkConserving:
    def test_empty_tier_share_flows_to_the_others(self, assembler):
        """With no global memory, its 20% goes to the other tiers: the package is still full."""
        fill(assembler, [Tier.TASK, Tier.PROJECT])
        package = build(assembler)
        assert package.usage_of(Tier.GLOBAL).used == 0
        assert package.usage_of(Tier.TASK).used > package.usage_of(Tier.TASK).allocated
        assert BUDGET - ITEM_COST < package.tokens_used <= BUDGET

    def test_one_tier_can_use_the_whole_budget(self, assembler):
        """When only project memory has items, it fills the whole budget, not just its 40%."""
        fill(assembler, [Tier.PROJECT], count=300)
        package = build(assembler)
        assert package.usage_of(Tier.PROJECT).used == package.tokens_used
        assert BUDGET - ITEM_COST < package.tokens_used <= BUDGET

    def test_spill_goes_in_spill_order(self, backend, clock):
        """Unused budget goes first to the first tier in spill order that still has items."""
        assembler = ContextAssembler(
            backend,
            clock=clock,
            config=AssemblerConfig(spill_order=(Tier.PROJECT, Tier.TASK, Tier.GLOBAL)),
        )
        fill(assembler, [Tier.TASK, Tier.PROJECT])
        package = build(assembler)
        task = package.usage_of(Tier.TASK)
        assert task.allocated - ITEM_COST < task.used <= task.allocated
        assert package.usage_of(Tier.PROJECT).used > 600 - ITEM_COST


class TestOverrides:
    def test_request_shares_override_the_default(self, assembler):
        """Shares on the request replace the assembler's split for that request only."""
        fill(assembler, Tier, count=200)
        package = build(assembler, shares=TierShares(0.1, 0.3, 0.6))
        assert {u.tier: u.allocated for u in package.usage} == {
            Tier.TASK: 100,
            Tier.PROJECT: 300,
            Tier.GLOBAL: 600,
        }
        assert package.usage_of(Tier.GLOBAL).used > 600 - ITEM_COST
        assert build(assembler).usage_of(Tier.GLOBAL).allocated == 200

    def test_profile_overrides_the_default(self, backend, clock):
        """A request naming an agent profile gets the profile's split."""
        researcher = TierShares(0.2, 0.7, 0.1)
        assembler = ContextAssembler(
            backend, clock=clock, config=AssemblerConfig(profiles={"researcher": researcher})
        )
        fill(assembler, Tier, count=200)
        package = build(assembler, profile="researcher")
        assert {u.tier: u.allocated for u in package.usage} == {
            Tier.TASK: 200,
            Tier.PROJECT: 700,
            Tier.GLOBAL: 100,
        }
        assert package.usage_of(Tier.PROJECT).used > 700 - ITEM_COST

    def test_request_shares_win_over_the_profile(self, backend, clock):
        """Explicit shares on the request beat the profile it names."""
        assembler = ContextAssembler(
            backend,
            clock=clock,
            config=AssemblerConfig(profiles={"researcher": TierShares(0.2, 0.7, 0.1)}),
        )
        package = build(assembler, profile="researcher", shares=TierShares(0.5, 0.5, 0.0))
        assert package.usage_of(Tier.TASK).allocated == 500

    def test_unknown_profile_is_refused(self, assembler):
        """A profile the assembler was not configured with is a ValidationError."""
        with pytest.raises(ValidationError, match="unknown agent profile 'coder'") as info:
            build(assembler, profile="coder")
        assert info.value.field == "profile"

    @pytest.mark.parametrize(
        ("task", "request_", "field"),
        [
            pytest.param(None, ContextRequest(budget_tokens=BUDGET), "task", id="task-none"),
            pytest.param("t-1", ContextRequest(budget_tokens=BUDGET), "task", id="task-id"),
            pytest.param(TASK, {"budget_tokens": BUDGET}, "request", id="request-dict"),
        ],
    )
    def test_wrong_argument_types_are_refused(self, assembler, task, request_, field):
        """build_context takes a Task and a ContextRequest; anything else names the argument."""
        with pytest.raises(ValidationError) as info:
            assembler.build_context(task, request_)
        assert info.value.field == field

    def test_unknown_policy_is_refused(self, assembler):
        """A policy that is not registered is a ValidationError listing the known ones."""
        known = r"unknown policy 'magic'; known: .*hybrid"
        with pytest.raises(ValidationError, match=known) as info:
            build(assembler, policy="magic")
        assert info.value.field == "policy"

    @pytest.mark.parametrize(
        "shares",
        [
            pytest.param((0.5, 0.5, 0.5), id="over-one"),
            pytest.param((0.5, 0.2, 0.2), id="under-one"),
            pytest.param((1.2, -0.1, -0.1), id="out-of-range"),
        ],
    )
    def test_shares_must_sum_to_one(self, shares):
        """A split that does not sum to 1 (or has a share outside [0, 1]) is refused."""
        with pytest.raises(ValidationError):
            TierShares(*shares)
