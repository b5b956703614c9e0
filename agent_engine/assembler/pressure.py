"""Memory pressure: which tiers filled their budget, and what was paged out for lack of room.

MemGPT warns its model when memory is under pressure, so the model knows that what it does
not see may still be remembered and can search for it (``memory_search``,
:mod:`agent_engine.tools`). A package already knows it: each tier's allocation and use
(:class:`~agent_engine.assembler.package.TierUsage`) and every candidate left out for lack
of room (omitted as lower score, no room for its header, or over budget; not the
duplicates, the expired or those under the score threshold, which more room would not have
brought in). :class:`MemoryPressure` reads it off a package; :meth:`MemoryPressure.message`
is a line an executor can show the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from agent_engine.models import Tier

if TYPE_CHECKING:
    from agent_engine.assembler.package import ContextPackage

__all__ = ["NEAR_BUDGET", "MemoryPressure", "TierPressure"]

NEAR_BUDGET: Final = 0.9
"""The share of its allocation a tier uses from which it counts as near its budget."""


@attrs.frozen
class TierPressure:
    """One tier's budget use and what it paged out for lack of room."""

    tier: Tier
    allocated: int
    used: int
    paged_out: int
    """Candidates left out for lack of room."""
    paged_out_tokens: int
    """What their lines would have cost."""

    @property
    def share(self) -> float:
        """Used over allocated (above 1 when the tier took spill-over from others)."""
        return self.used / self.allocated if self.allocated else (1.0 if self.used else 0.0)

    @property
    def near_budget(self) -> bool:
        """Whether the tier used :data:`NEAR_BUDGET` of its allocation or more."""
        return self.share >= NEAR_BUDGET


@attrs.frozen
class MemoryPressure:
    """Every tier's :class:`TierPressure`, in the package's tier order."""

    tiers: tuple[TierPressure, ...]

    @classmethod
    def of(cls, package: ContextPackage) -> MemoryPressure:
        """The pressure of ``package``."""
        from agent_engine.assembler.package import LACK_OF_ROOM  # noqa: PLC0415 - a cycle

        tiers = []
        for usage in package.usage:
            out = [
                o for o in package.omissions if o.tier is usage.tier and o.reason in LACK_OF_ROOM
            ]
            tiers.append(
                TierPressure(
                    usage.tier,
                    usage.allocated,
                    usage.used,
                    len(out),
                    sum(o.tokens for o in out),
                )
            )
        return cls(tuple(tiers))

    @property
    def paged_out(self) -> int:
        """Candidates left out for lack of room, over every tier."""
        return sum(tier.paged_out for tier in self.tiers)

    @property
    def under_pressure(self) -> bool:
        """Whether any tier paged something out for lack of room."""
        return self.paged_out > 0

    def message(self) -> str:
        """A line for the model when memory is under pressure; empty when it is not."""
        if not self.under_pressure:
            return ""
        parts = [
            f"{tier.tier.value}: {tier.paged_out} ({tier.paged_out_tokens} tokens)"
            for tier in self.tiers
            if tier.paged_out
        ]
        return (
            f"Memory pressure: {self.paged_out} relevant memories did not fit in this context "
            f"({'; '.join(parts)}). Search memory before assuming something was never recorded."
        )
