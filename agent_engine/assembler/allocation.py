"""Splitting a token budget between tiers.

Each tier first gets ``floor(budget * share)`` (40/40/20 by default). Allocation is
work-conserving: whatever a tier leaves unused, and the rounding remainder, is offered to the
tiers again in ``spill_order`` once every tier has had its own share, so a package is never
smaller than its candidates allow.
"""

from __future__ import annotations

import math

from agent_engine.models import Tier, TierShares

__all__ = ["DEFAULT_SPILL_ORDER", "allocate"]

DEFAULT_SPILL_ORDER = (Tier.TASK, Tier.PROJECT, Tier.GLOBAL)
"""Who gets leftover budget first: the current task, then project knowledge, then global."""


def allocate(budget: int, shares: TierShares) -> dict[Tier, int]:
    """Each tier's own share of ``budget`` (the remainder is left for spill-over)."""
    return {tier: math.floor(budget * shares.of(tier)) for tier in Tier}
