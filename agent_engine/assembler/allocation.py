"""The budget: how a context's tokens are split between tiers, and the order they are filled in.

**Shares.** A request's ``shares`` win; else the agent profile it names; else the assembler's
split (40/40/20 by default). A build of a task that runs in a session gives the session its
share: the split's own, else :data:`~agent_engine.models.SESSION_SHARE` (a quarter) of the
task's and project's shares (:meth:`~agent_engine.models.TierShares.with_session`: 30/20/30/20
by default), unless the request's ``tiers`` leave the session out. Each tier's own allocation is
``floor(budget * share)``: the floors never add up to more than the budget, and what rounding
leaves over is spill-over.

**Tiers on.** A tier whose share is 0, or that the request's ``tiers`` leave out, is off: it
is not read, not even its pinned items, and its allocation is 0, so the room the split gave
it is spill-over for the tiers that are on.

**The fill** (work-conserving: a package is never smaller than its candidates allow):

0. pinned items of every tier, against the whole budget (pinned is "always in when it fits");
1. each tier within its own allocation: the task timeline's HEAD then TAIL, then the ranked
   middle; other tiers their ranked candidates;
2. spill-over: the budget left by every tier goes to the tiers in ``spill_order``, protected
   items (HEAD/TAIL) first, then ranked ones. A tier with a HEAD or TAIL item still waiting
   offers its ranked middle only after that turn (first within what is left of its share),
   so a middle item never takes room a waiting HEAD or TAIL item could have had.

**Stable prefix** (``AssemblerConfig(stable_prefix=True)``): providers cache a prompt's
unchanged prefix, and the render puts the most stable tiers first (global, project, then the
task). Spill-over breaks that: the project tier fills the room the task has not used yet, so
each new task step shrinks the project section and changes the prompt from there on. With a
stable prefix, phase 2 goes in prompt order and a tier borrows only the room left by the tiers
rendered before it (the last tier takes whatever is left): a section depends on nothing that
follows it, and when only task memory changes, everything before the task section renders as
it did. The cost: room the task has not grown into yet is left empty.

The packer charges what each offered item costs and says whether it fits; this module decides
who is offered what room, when.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import attrs

from agent_engine.assembler.packer import Entry, Packer
from agent_engine.assembler.render import PROMPT_ORDER
from agent_engine.errors import ValidationError
from agent_engine.models import ContextRequest, Tier, TierShares

__all__ = ["DEFAULT_SPILL_ORDER", "Budget", "Offers", "allocate", "fill", "plan_budget"]

DEFAULT_SPILL_ORDER = (Tier.TASK, Tier.SESSION, Tier.PROJECT, Tier.GLOBAL)
"""Who gets leftover budget first: the current task, its session, the project, then global."""


@attrs.frozen
class Budget:
    """One build's budget: its tokens, the split they follow and each tier's own allocation."""

    tokens: int
    shares: TierShares
    allocation: Mapping[Tier, int]
    spill_order: tuple[Tier, ...]
    stable_prefix: bool = False
    """Spill in prompt order, each tier borrowing only from the tiers before it (see the module)."""
    tiers: frozenset[Tier] = frozenset(Tier)
    """The tiers on: the others are not read and get no room (see the module)."""

    def resized(self, tokens: int) -> Budget:
        """The same split, tiers and order over ``tokens`` (a summary's room taken out)."""
        return attrs.evolve(
            self, tokens=tokens, allocation=_allocation(tokens, self.shares, self.tiers)
        )

    @property
    def lenders(self) -> dict[Tier, tuple[Tier, ...]]:
        """For each tier that may not fill just any room left, the tiers whose shares it may.

        Empty unless the prefix is stable; then each tier but the last in prompt order may
        fill its own share and those of the tiers rendered before it.
        """
        if not self.stable_prefix:
            return {}
        return {tier: PROMPT_ORDER[: at + 1] for at, tier in enumerate(PROMPT_ORDER[:-1])}

    def spare(self, packer: Packer, tier: Tier) -> Callable[[], int]:
        """The room ``tier`` may fill past its own share, as ``packer`` has it at each offer.

        With a stable prefix, every run of tiers from the first that holds ``tier`` must stay
        within its shares: the project may not fill what is left of the global share twice
        over, once by borrowing it and again when global memory widens into it.
        """
        if tier not in self.lenders:
            return packer.left
        runs = [lenders for lenders in self.lenders.values() if tier in lenders]
        return lambda: min(packer.left(), *(sum(packer.room(t) for t in run) for run in runs))


class Offers(Protocol):
    """A tier's candidates as the fill offers them: pinned, protected (HEAD/TAIL), ranked."""

    @property
    def tier(self) -> Tier:
        """The tier the candidates are of."""

    @property
    def pinned(self) -> Sequence[Entry]:
        """Pinned items: in whenever they fit, against the whole budget."""

    @property
    def protected(self) -> Sequence[Entry]:
        """HEAD then TAIL items of the task timeline (empty for other tiers)."""

    @property
    def ranked(self) -> Sequence[Entry]:
        """The rest, best first."""


def allocate(budget: int, shares: TierShares) -> dict[Tier, int]:
    """Each tier's own share of ``budget`` (the remainder is left for spill-over)."""
    return {tier: math.floor(budget * shares.of(tier)) for tier in Tier}


def plan_budget(
    request: ContextRequest,
    *,
    shares: TierShares,
    profiles: Mapping[str, TierShares],
    spill_order: tuple[Tier, ...] = DEFAULT_SPILL_ORDER,
    stable_prefix: bool = False,
    session: bool = False,
) -> Budget:
    """The budget of ``request``: its split (see the module docstring) and allocations.

    ``shares`` and ``profiles``: the assembler's split and its agent profiles' splits.
    ``stable_prefix``: spill in prompt order, borrowing only from earlier tiers.
    ``session``: whether the build reads a session (without one, the session tier is off).
    """
    split = request.shares
    if split is None and request.profile is not None:
        split = _profile(request.profile, profiles)
    split = split or shares
    tokens = request.budget_tokens
    wanted = request.tiers if request.tiers is not None else frozenset(Tier)
    if not session:
        wanted -= {Tier.SESSION}
    if Tier.SESSION in wanted:
        # A request that leaves the session out keeps the task's and project's whole shares.
        split = split.with_session()
    on = frozenset(tier for tier in wanted if split.of(tier) > 0)
    return Budget(tokens, split, _allocation(tokens, split, on), spill_order, stable_prefix, on)


def _allocation(tokens: int, shares: TierShares, on: frozenset[Tier]) -> dict[Tier, int]:
    """:func:`allocate`, with nothing for the tiers that are off."""
    return {tier: room if tier in on else 0 for tier, room in allocate(tokens, shares).items()}


def _profile(name: str, profiles: Mapping[str, TierShares]) -> TierShares:
    try:
        return profiles[name]
    except KeyError:
        known = ", ".join(sorted(profiles)) or "none configured"
        raise ValidationError(
            f"unknown agent profile {name!r}; known: {known}", field="profile", value=name
        ) from None


def fill(
    packer: Packer,
    offers: Mapping[Tier, Offers],
    budget: Budget,
    *,
    then: Callable[[Tier], None] | None = None,
) -> None:
    """Offer every tier's candidates to ``packer`` in the phases of the module docstring.

    ``then``: with a stable prefix, called after each tier's spill-over, before the next
    tier's (where the assembler widens that tier's pool: a later tier must not take the room
    an earlier one would widen into).
    """
    left = packer.left
    by_prompt = [offers[tier] for tier in PROMPT_ORDER if tier in offers]
    by_spill = [offers[tier] for tier in budget.spill_order if tier in offers]
    for tier_offers in by_prompt:  # phase 0: pinned, against the whole budget
        packer.offer_all(tier_offers.pinned, left, may_truncate=True)

    def room(tier: Tier) -> Callable[[], int]:
        return functools.partial(packer.room, tier)

    deferred: list[Offers] = []
    for tier_offers in by_spill:  # phase 1: each tier within its share
        packer.offer_all(tier_offers.protected, room(tier_offers.tier), may_truncate=True)
        if any(entry.item.id in packer.waiting for entry in tier_offers.protected):
            # A HEAD/TAIL item is waiting: the middle must not take room that, with the
            # spill-over, would let it in. It gets its share after phase 2's protected turn.
            deferred.append(tier_offers)
        else:
            packer.offer_all(tier_offers.ranked, room(tier_offers.tier), may_truncate=False)
    if budget.stable_prefix:
        _spill_in_prompt_order(packer, by_prompt, budget, then)
        return
    for tier_offers in by_spill:  # phase 2: spill-over, protected items first
        both = [*tier_offers.pinned, *tier_offers.protected]
        packer.offer_all(both, left, may_truncate=False)
    for tier_offers in deferred:
        packer.offer_all(tier_offers.ranked, room(tier_offers.tier), may_truncate=False)
    for tier_offers in by_spill:
        packer.offer_all(tier_offers.ranked, left, may_truncate=False)


def _spill_in_prompt_order(
    packer: Packer,
    by_prompt: Sequence[Offers],
    budget: Budget,
    then: Callable[[Tier], None] | None,
) -> None:
    """Phase 2 with a stable prefix: each tier's whole claim in turn, on the room it may fill."""
    for tier_offers in by_prompt:
        spare = budget.spare(packer, tier_offers.tier)
        both = [*tier_offers.pinned, *tier_offers.protected]
        packer.offer_all(both, spare, may_truncate=False)
        packer.offer_all(tier_offers.ranked, spare, may_truncate=False)
        if then is not None:
            then(tier_offers.tier)
