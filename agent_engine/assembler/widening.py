"""Staying work-conserving past the first pool: gather wider while budget is left.

The first pool is bounded for speed; when its candidates are spent with budget to spare and
a source was cut at its limit, the tier gathers again with four times the limit
(``limits.widening_rounds`` times at most) and offers the newcomers. The wider pool is scored
together with the first, and the package reports those scores for all of the tier's
candidates: a score is comparable with every other score of its tier, whichever gather found
the item.

Room smaller than the pool's typical candidate does not count as spare: the pool's small
items already had their turn at it, and a wider pool could only fill it with one of its
lowest-ranked items, at several times the cost of the whole build.

A tier whose wider gather fails keeps what its narrower ones gave, and is not widened again
in this build.
"""

from __future__ import annotations

import functools

import attrs

from agent_engine.assembler._build import Build
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.assembler.packer import Packer
from agent_engine.assembler.plans import TierPlan, plan_tier
from agent_engine.models import Tier

__all__ = ["widen"]


def widen(
    build: Build,
    packer: Packer,
    plans: dict[Tier, TierPlan],
    tiers: tuple[Tier, ...] | None = None,
) -> dict[Tier, TierPlan]:
    """Offer ``packer`` wider pools while it has room; return the plans as they end up.

    ``tiers``: those to widen (by default every tier, in spill order). A stable prefix widens
    one tier at a time, each as its spill-over turn ends, against the room it may fill.
    """
    limits = build.config.limits
    order = build.budget.spill_order if tiers is None else tiers
    for _ in range(limits.widening_rounds):
        if tiers is None:
            room = packer.tokens_left()
        else:
            room = packer.scale.tokens(max(min(build.budget.spare(packer, t)() for t in tiers), 0))
        if room < limits.min_widening_room:
            break
        limits = attrs.evolve(limits, per_source=limits.per_source * 4)
        wider = {
            tier: plan
            for tier in order
            if (plan := _widened(build, packer, plans, tier, limits)) is not None
        }
        if not wider:
            break
        plans = {**plans, **wider}
    return plans


def _widened(
    build: Build, packer: Packer, plans: dict[Tier, TierPlan], tier: Tier, limits: GatherLimits
) -> TierPlan | None:
    """``tier``'s plan widened once, its newcomers offered; ``None`` when it is not widened."""
    plan = plans.get(tier)
    if plan is None or not plan.saturated or build.reads.failed(tier):
        return None
    if build.budget.spare(packer, tier)() < packer.typical_cost(plan.ranked):
        return None
    wider = build.reads.run(
        (tier,),
        "widen",
        functools.partial(plan_tier, build, plan.store, limits=limits, wider_than=plan),
    )
    if wider is None:
        return None
    packer.offer_all(wider.ranked, build.budget.spare(packer, tier), may_truncate=False)
    packer.rescore(wider.scores)
    return attrs.evolve(
        wider,
        pinned=plan.pinned,
        protected=plan.protected,
        ranked=plan.ranked + wider.ranked,
        left_out=plan.left_out + wider.left_out,
    )
