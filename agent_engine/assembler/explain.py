"""The last step of a build: the package, with what it holds and why the rest is not in it.

Every candidate ends up either selected or omitted, with its score and a reason. Omissions
come from three places: the plans (expired, below the threshold), the render safety net
(dropped to fit), and the packer's settling of what was offered and not taken.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_engine.assembler._build import Build
from agent_engine.assembler.package import ContextPackage, TierUsage
from agent_engine.assembler.packer import Packer
from agent_engine.assembler.plans import TierPlan
from agent_engine.assembler.render import PROMPT_ORDER
from agent_engine.models import Tier, new_id

__all__ = ["explain"]


def explain(
    build: Build,
    packer: Packer,
    plans: Mapping[Tier, TierPlan],
    counted: Mapping[Tier, int] | None,
) -> ContextPackage:
    """The package of ``build``: ``packer``'s choice explained against every candidate.

    ``counted``: each tier's part of the rendered count, when the render safety net found it
    differs from what the packer charged.
    """
    early = [omission for plan in plans.values() for omission in plan.left_out]
    omissions = packer.rescored(early) + packer.settle()
    selections, used = packer.package()
    used = dict(counted) if counted is not None else used
    allocation = build.budget.allocation
    usage = tuple(
        TierUsage(
            tier,
            allocation[tier],
            used[tier],
            len(plans[tier].pool) if tier in plans else 0,
            sum(1 for s in selections if s.tier is tier),
        )
        for tier in PROMPT_ORDER
        # A task that runs in no session has no session tier to account for.
        if tier is not Tier.SESSION or build.task.session_id is not None
    )
    candidate_tokens = sum(s.tokens for s in selections) + sum(o.tokens for o in omissions)
    return ContextPackage(
        id=new_id(),
        task_id=build.task.id,
        budget_tokens=build.budget.tokens,
        policy=build.policy.name,
        layout=build.config.layout,
        selections=tuple(selections),
        omissions=tuple(omissions),
        usage=usage,
        failures=tuple(build.reads.failures),
        candidate_tokens=candidate_tokens,
        conflicts=tuple(packer.conflicts_shown()),
        query=build.query,
        degraded=build.degraded,
    )
