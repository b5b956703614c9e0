"""Packing ranked candidates into the budget, charging every rendered token.

The packer walks candidates in priority order and takes each one that fits. Adding an item
costs its line plus, the first time they are needed, its tier's section and its session's
group header (the layout's own strings, counted by the same counter). Phases, in order:

0. pinned items of every tier, against the whole budget (pinned is "always in when it fits");
1. each tier within its own allocation: the task timeline's HEAD then TAIL, then the ranked
   middle; other tiers their ranked candidates;
2. spill-over: the budget left by every tier goes to the tiers in ``spill_order``, protected
   items (HEAD/TAIL) first, then ranked ones. A tier with a HEAD or TAIL item still waiting
   offers its ranked middle only after that turn (first within what is left of its share),
   so a middle item never takes room a waiting HEAD or TAIL item could have had.

A pinned, HEAD or TAIL item larger than its tier's whole allocation is truncated with a
visible marker to what is left, instead of being dropped; any other item that does not fit is
left out. Nothing is ever added past the budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from datetime import date
from typing import NamedTuple

from agent_engine.assembler._costcache import CostCache
from agent_engine.assembler.package import (
    Omission,
    OmissionReason,
    Selection,
    SelectionReason,
)
from agent_engine.assembler.render import TRUNCATION_MARKER, Layout
from agent_engine.models import ContextItem, Tier
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["Entry", "Packer"]

MIN_TRUNCATED_BODY = 8
"""A truncated item keeps at least this many tokens of body, or it is left out instead."""

PROTECTED = frozenset({SelectionReason.PINNED, SelectionReason.HEAD, SelectionReason.TAIL})


class Entry(NamedTuple):
    """A candidate on its way into the package (a tuple: a build makes hundreds per tier)."""

    item: ContextItem
    tier: Tier
    score: float
    reason: SelectionReason


class Packer:
    """Tracks what the package already holds and what each addition would cost."""

    def __init__(
        self,
        budget: int,
        allocation: dict[Tier, int],
        layout: Layout,
        counter: TokenCounter,
        body_cost: Callable[[ContextItem, str], int],
        *,
        header_costs: CostCache[str] | None = None,
        group_costs: CostCache[tuple[str, date]] | None = None,
    ) -> None:
        self.budget = budget
        self.allocation = allocation
        self.layout = layout
        self.counter = counter
        self._body_cost = body_cost
        self.used: dict[Tier, int] = dict.fromkeys(Tier, 0)
        self._total = 0
        self.selections: list[Selection] = []
        self._sections: set[Tier] = set()
        self._groups: dict[tuple[Tier, str], int] = {}
        self._fingerprints: set[str] = set()
        self._chosen: set[str] = set()
        self._settled: set[str] = set()
        self._line_overhead: dict[str, int] = {}
        self._section_costs: dict[Tier, int] = {}
        # Whether an item's cached token_cost is what its full body costs as shown (the
        # default counter, a format that shows bodies as they are): then a line's cost is
        # that plus the line's markup, without looking at the body at all.
        self._cached_costs_shown = counter is DEFAULT_COUNTER and layout.verbatim
        self._header_costs = header_costs if header_costs is not None else CostCache(1024)
        # An entry is offered up to once per packing phase; its line costs the same every
        # time, so it is counted once per package. A session's group header costs the same
        # in every package of one layout, so the caller may share that cache across builds.
        self._line_costs: dict[str, int] = {}
        self._group_costs = group_costs if group_costs is not None else CostCache(1024)
        # The shared cache takes a lock per read; a pool's items share few sessions.
        self._group_memo: dict[tuple[str, date], int] = {}
        self.skipped: dict[str, Entry] = {}
        self.omissions: list[Omission] = []

    @property
    def total(self) -> int:
        """Tokens used so far."""
        return self._total

    def holds(self, item_id: str) -> bool:
        """Whether the item is already in the package."""
        return item_id in self._chosen

    # ------------------------------------------------------------------ costs

    def _count(self, text: str) -> int:
        """Count a header string once (the same headers recur for every candidate and step)."""
        cost = self._header_costs.get(text)
        if cost is None:
            cost = self._header_costs[text] = self.counter.count(text)
        return cost

    def _headers(self, entry: Entry) -> int:
        cost = 0
        if entry.tier not in self._sections:
            section = self._section_costs.get(entry.tier)
            if section is None:
                section = sum(self._count(part) for part in self.layout.section(entry.tier))
                self._section_costs[entry.tier] = section
            cost += section
        session = entry.item.session
        if session and (entry.tier, session) not in self._groups:
            key = (session, entry.item.timestamp.date())
            group_cost = self._group_memo.get(key)
            if group_cost is None:
                group_cost = self._group_costs.get(key)
                if group_cost is None:
                    group = self.layout.group(session, entry.item.timestamp)
                    group_cost = self._group_costs[key] = sum(self._count(p) for p in group)
                self._group_memo[key] = group_cost
            cost += group_cost
        return cost

    def _overhead(self, item: ContextItem) -> int:
        overhead = self._line_overhead.get(item.kind)
        if overhead is None:
            overhead = self._count(self.layout.line(item, ""))
            self._line_overhead[item.kind] = overhead
        return overhead

    def _line(self, item: ContextItem, body: str) -> int:
        return self._overhead(item) + self._body_cost(item, body)

    def _line_cost(self, item: ContextItem) -> int:
        line = self._line_costs.get(item.id)
        if line is None:
            if self._cached_costs_shown and item.token_cost is not None:
                line = self._overhead(item) + item.token_cost
            else:
                line = self._line(item, item.body)
            self._line_costs[item.id] = line
        return line

    def typical_cost(self, entries: list[Entry]) -> int:
        """The median line cost of ``entries`` (0 for none): what a typical one needs."""
        if not entries:
            return 0
        return statistics.median_low(self._line_cost(entry.item) for entry in entries)

    def cost(self, entry: Entry) -> int:
        """What adding the entry costs now, headers it would open included."""
        return self._line_cost(entry.item) + self._headers(entry)

    # ------------------------------------------------------------------ adding

    def offer(self, entry: Entry, available: int, *, may_truncate: bool) -> bool:
        """Add ``entry`` if it fits in ``available`` tokens (truncating if allowed)."""
        if entry.item.id in self._settled:
            return entry.item.id in self._chosen
        if entry.item.fingerprint in self._fingerprints:
            self.skipped.pop(entry.item.id, None)
            self.omissions.append(
                Omission(
                    entry.item.id,
                    entry.tier,
                    OmissionReason.DUPLICATE,
                    self.cost(entry),
                    entry.score,
                )
            )
            self._settled.add(entry.item.id)
            return False
        available = min(available, self.budget - self._total)
        line = self._line_cost(entry.item)
        if line > available and not may_truncate:
            # Headers only add to the line, so it cannot fit. Most offers of a large pool end
            # here once the budget is spent; what it would cost is settled at the end.
            self.skipped[entry.item.id] = entry
            return False
        cost = line + self._headers(entry)
        if cost <= available:
            self._take(entry, entry.item.body, cost, truncated=False)
            return True
        if may_truncate and cost > self.allocation[entry.tier]:
            body = self._truncate(entry, available - self._headers(entry))
            if body is not None:
                self._take(
                    entry, body, self._line(entry.item, body) + self._headers(entry), truncated=True
                )
                return True
        self.skipped[entry.item.id] = entry
        return False

    def _take(self, entry: Entry, body: str, cost: int, *, truncated: bool) -> None:
        self._sections.add(entry.tier)
        if entry.item.session:
            key = (entry.tier, entry.item.session)
            self._groups[key] = self._groups.get(key, 0) + 1
        self.used[entry.tier] += cost
        self._total += cost
        self._fingerprints.add(entry.item.fingerprint)
        self._chosen.add(entry.item.id)
        self._settled.add(entry.item.id)
        self.skipped.pop(entry.item.id, None)
        self.selections.append(
            Selection(entry.item, entry.tier, entry.score, entry.reason, cost, body, truncated)
        )

    def drop(self, selection: Selection, reason: OmissionReason) -> None:
        """Take a chosen item back out (the render check's last resort), recording why."""
        self.selections.remove(selection)
        self.used[selection.tier] -= selection.tokens
        self._total -= selection.tokens
        self.omissions.append(
            Omission(selection.item.id, selection.tier, reason, selection.tokens, selection.score)
        )

    def _truncate(self, entry: Entry, room: int) -> str | None:
        """The longest word-boundary prefix of the body that fits ``room`` with the marker."""
        words = entry.item.body.split(" ")
        best: str | None = None
        low, high = 1, len(words) - 1
        while low <= high:
            middle = (low + high) // 2
            body = " ".join(words[:middle]) + TRUNCATION_MARKER
            if self._line(entry.item, body) <= room:
                best, low = body, middle + 1
            else:
                high = middle - 1
        if best is None or self._body_cost(entry.item, best) < MIN_TRUNCATED_BODY:
            return None
        return best

    def offer_all(
        self, entries: Iterable[Entry], available: Callable[[], int], *, may_truncate: bool
    ) -> None:
        """Offer entries in order, each against the room ``available()`` reports at its turn.

        The room only changes when an entry is taken, so it is asked for again only then; and
        an entry seen before whose line alone exceeds the room is passed over without a call,
        which is the fate of most of a large pool once the budget is spent.
        """
        room = available()
        for entry in entries:
            if not may_truncate:
                item = entry.item
                line = self._line_costs.get(item.id)
                if (
                    line is not None
                    and line > room
                    and item.id in self.skipped
                    and item.fingerprint not in self._fingerprints
                ):
                    continue
            if self.offer(entry, room, may_truncate=may_truncate):
                room = available()

    def settle(self, reach: dict[Tier, int]) -> list[Omission]:
        """Omissions for every offered entry left out, by why (``reach``: a tier's best room).

        An omission's tokens are what the entry would cost in the final package. Most of a
        large pool ends here, so headers are only looked up for entries whose section or
        session group the package has not opened.
        """
        line_costs, sections, groups = self._line_costs, self._sections, self._groups
        over, lower = OmissionReason.OVER_BUDGET, OmissionReason.LOWER_SCORE
        settled = self.omissions.append
        for entry in self.skipped.values():
            item, tier = entry.item, entry.tier
            cost = line_costs.get(item.id)
            if cost is None:
                cost = self._line_cost(item)
            if tier not in sections or (item.session and (tier, item.session) not in groups):
                cost += self._headers(entry)
            reason = over if cost > reach[tier] else lower
            settled(Omission(item.id, tier, reason, cost, entry.score))
        self.skipped.clear()
        return self.omissions
