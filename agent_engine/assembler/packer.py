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

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import NamedTuple

import attrs
import numpy as np
import numpy.typing as npt

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
        # A pool's items share few sessions: most group lookups end in this per-build memo.
        self._group_memo: dict[tuple[str, date], int] = {}
        # Every list of entries offered, in order: settle explains each entry left out once.
        self._offered: list[Sequence[Entry]] = []
        self._line_arrays: dict[int, tuple[Sequence[Entry], npt.NDArray[np.int64]]] = {}
        self.waiting: set[str] = set()
        """Entries that were offered in full and did not fit (a HEAD/TAIL item waiting)."""
        self.omissions: list[Omission] = []
        self._scores: dict[str, float] = {}

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
            cost += self._section_cost(entry.tier)
        session = entry.item.session
        if session and (entry.tier, session) not in self._groups:
            cost += self._group_cost(session, entry.item.timestamp)
        return cost

    def _section_cost(self, tier: Tier) -> int:
        section = self._section_costs.get(tier)
        if section is None:
            section = sum(self._count(part) for part in self.layout.section(tier))
            self._section_costs[tier] = section
        return section

    def _group_cost(self, session: str, started: datetime) -> int:
        key = (session, started.date())
        group_cost = self._group_memo.get(key)
        if group_cost is None:
            group_cost = self._group_costs.get(key)
            if group_cost is None:
                group = self.layout.group(session, started)
                group_cost = self._group_costs[key] = sum(self._count(p) for p in group)
            self._group_memo[key] = group_cost
        return group_cost

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

    def _lines(self, entries: Sequence[Entry]) -> npt.NDArray[np.int64]:
        """The line costs of ``entries`` as an array.

        Kept per list object: a plan's list is offered in several phases.
        """
        kept = self._line_arrays.get(id(entries))
        if kept is not None and kept[0] is entries:
            return kept[1]
        line_cost = self._line_cost
        lines = np.array([line_cost(entry.item) for entry in entries], dtype=np.int64)
        self._line_arrays[id(entries)] = (entries, lines)
        return lines

    def typical_cost(self, entries: Sequence[Entry]) -> int:
        """The median line cost of ``entries`` (0 for none): what a typical one needs."""
        if not entries:
            return 0
        lines = np.sort(self._lines(entries))
        return int(lines[(len(lines) - 1) // 2])  # the lower median, as median_low

    # ------------------------------------------------------------------ adding

    def offer(self, entry: Entry, available: int, *, may_truncate: bool) -> bool:
        """Add ``entry`` if it fits in ``available`` tokens (truncating if allowed)."""
        self._offered.append((entry,))
        return self._offer(entry, available, may_truncate=may_truncate)

    def _offer(self, entry: Entry, available: int, *, may_truncate: bool) -> bool:
        item = entry.item
        if item.id in self._settled:
            return item.id in self._chosen
        if item.fingerprint in self._fingerprints:
            # Its content is in already: never taken, and settle says it is a duplicate.
            self._settled.add(item.id)
            self.waiting.discard(item.id)
            return False
        available = min(available, self.budget - self._total)
        line = self._line_cost(item)
        if line > available and not may_truncate:
            # Headers only add to the line, so it cannot fit.
            self.waiting.add(item.id)
            return False
        cost = line + self._headers(entry)
        if cost <= available:
            self._take(entry, item.body, cost, truncated=False)
            return True
        if may_truncate and cost > self.allocation[entry.tier]:
            body = self._truncate(entry, available - self._headers(entry))
            if body is not None:
                self._take(
                    entry, body, self._line(item, body) + self._headers(entry), truncated=True
                )
                return True
        self.waiting.add(item.id)
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
        self.waiting.discard(entry.item.id)
        self.selections.append(
            Selection(entry.item, entry.tier, entry.score, entry.reason, cost, body, truncated)
        )

    def rescore(self, scores: Mapping[str, float]) -> None:
        """Report ``scores`` for the items they name (their tier's pool was scored again, wider).

        Packing order stands; what changes is the score each selection and omission carries,
        so that all of a tier's scores come from one scoring of one pool.
        """
        self._scores.update(scores)
        self.selections = [
            attrs.evolve(s, score=scores[s.item.id]) if s.item.id in scores else s
            for s in self.selections
        ]

    def rescored(self, omissions: list[Omission]) -> list[Omission]:
        """``omissions`` made before a rescore, carrying the scores it gave."""
        scores = self._scores
        return [
            attrs.evolve(o, score=scores[o.item_id]) if o.item_id in scores else o
            for o in omissions
        ]

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
        self, entries: Sequence[Entry], available: Callable[[], int], *, may_truncate: bool
    ) -> None:
        """Offer entries in order, each against the room ``available()`` reports at its turn.

        The room only shrinks, and only when an entry is taken; headers only add to a line. So
        an entry whose line alone exceeds the room at the start can never fit, and only the
        few that might are looked at one by one: a large pool is mostly left out, and settle
        explains those at the end.
        """
        self._offered.append(entries)
        room = available()
        if may_truncate:
            for entry in entries:
                if self._offer(entry, room, may_truncate=True):
                    room = available()
            return
        lines = self._lines(entries)
        for at in np.flatnonzero(lines <= room).tolist():
            if lines[at] <= room and self._offer(entries[at], room, may_truncate=False):
                room = available()

    def settle(self, reach: dict[Tier, int]) -> list[Omission]:
        """Omissions for every offered entry left out, by why (``reach``: a tier's best room).

        A left-out entry whose content a chosen item already shows is a duplicate; otherwise it
        is over budget when it could not fit in its tier's best room, else it lost to better
        candidates. An omission's tokens are what the entry would cost in the final package;
        headers are only looked up for entries whose section or session group the package has
        not opened.
        """
        line_costs, sections, groups = self._line_costs, self._sections, self._groups
        fingerprints = self._fingerprints
        over, lower = OmissionReason.OVER_BUDGET, OmissionReason.LOWER_SCORE
        duplicate = OmissionReason.DUPLICATE
        settled = self.omissions.append
        scores = self._scores
        seen = set(self._chosen)
        for entries in self._offered:
            for entry in entries:
                item, tier = entry.item, entry.tier
                item_id = item.id
                if item_id in seen:
                    continue
                seen.add(item_id)
                cost = line_costs.get(item_id)
                if cost is None:
                    cost = self._line_cost(item)
                if tier not in sections or (item.session and (tier, item.session) not in groups):
                    cost += self._headers(entry)
                if item.fingerprint in fingerprints:
                    reason = duplicate
                else:
                    reason = over if cost > reach[tier] else lower
                score = scores.get(item_id, entry.score) if scores else entry.score
                settled(Omission(item_id, tier, reason, cost, score))
        self._offered.clear()
        self.waiting.clear()
        return self.omissions
