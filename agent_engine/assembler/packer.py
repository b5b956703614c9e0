"""Cost bookkeeping for a package: what each item would add, and whether it still fits.

The packer holds what the package already has and charges every rendered token: adding an
item costs its line plus, the first time they are needed, its tier's section and its
session's group header (the layout's own strings, counted by the same counter). Costs are
kept in the units of ``_scale``, which add up to exactly what the render costs with the
default counter. Who is offered what room, and in which order, is the fill's business
(:mod:`allocation`); the packer takes each offered item that fits its room.

A pinned, HEAD or TAIL item larger than its tier's whole allocation is truncated with a
visible marker to what is left, instead of being dropped; any other item that does not fit is
left out. Nothing is ever added past the budget.

An item whose open conflict's other side is already in the package costs its line plus both
sides' conflict markers (:mod:`.conflicts`): taken, it marks the pair; left out, neither side
shows one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import NamedTuple

import attrs
import numpy as np
import numpy.typing as npt

from agent_engine.assembler._costcache import CostCaches
from agent_engine.assembler._scale import scale_of
from agent_engine.assembler.conflicts import ConflictMarks, MarkedConflict
from agent_engine.assembler.package import (
    Omission,
    OmissionReason,
    Selection,
    SelectionReason,
)
from agent_engine.assembler.render import TRUNCATION_MARKER, Layout, Line, prompt_order
from agent_engine.memory.conflicts import Conflict
from agent_engine.models import ContextItem, Tier
from agent_engine.tokens import TokenCounter

__all__ = ["PROTECTED", "Entry", "Packer", "Taken"]

MIN_TRUNCATED_BODY = 8
"""A truncated item keeps at least this many tokens of body, or it is left out instead."""

PROTECTED = frozenset({SelectionReason.PINNED, SelectionReason.HEAD, SelectionReason.TAIL})


class Entry(NamedTuple):
    """A candidate on its way into the package (a tuple: a build makes hundreds per tier)."""

    item: ContextItem
    tier: Tier
    score: float
    reason: SelectionReason


class Taken(NamedTuple):
    """An entry in the package: the body shown and the units charged (line and headers opened)."""

    entry: Entry
    body: str
    units: int
    truncated: bool


class Packer:
    """Tracks what the package already holds and what each addition would cost.

    ``caches``: counts shared across builds. ``trust_cached_costs``: charge an item's cached
    ``token_cost`` for its body without counting it (the default counter's fast path);
    :meth:`cached_costs_hold` tells afterwards whether every one charged was true.
    ``conflicts``: the open conflicts of the build's tiers, marked when both sides are taken.
    ``max_items``: take no more items than this (a request's ``limit``); those offered after
    are left out as :attr:`~.package.OmissionReason.LIMIT`.
    """

    def __init__(
        self,
        budget: int,
        allocation: dict[Tier, int],
        layout: Layout,
        counter: TokenCounter,
        caches: CostCaches,
        *,
        trust_cached_costs: bool = True,
        conflicts: Sequence[Conflict] = (),
        lenders: Mapping[Tier, Sequence[Tier]] | None = None,
        max_items: int | None = None,
    ) -> None:
        self.budget = budget
        self._max_items = max_items
        self._limited: set[str] = set()
        """Entries refused because the package held ``max_items`` already."""
        self._lenders = lenders or {}
        """The tiers whose shares a tier may fill, for those that may not fill any room left
        (a stable prefix, :mod:`.allocation`): the most room they could ever have."""
        self.layout = layout
        self.counter = counter
        self.scale = scale = scale_of(counter)
        self._num, self._den = scale.margin.numerator, scale.margin.denominator
        self._cap = scale.units(budget)
        self._shares = {tier: scale.units(share) for tier, share in allocation.items()}
        self._costs = caches.bodies
        self._trust = trust_cached_costs and scale.cached_costs
        self.used: dict[Tier, int] = dict.fromkeys(Tier, 0)
        """Units each tier holds."""
        self._total = 0
        self.taken: list[Taken] = []
        self._sections: set[Tier] = set()
        self._groups: dict[tuple[Tier, str], datetime] = {}
        """Session groups opened, with the time of the item that opened each."""
        self._fingerprints: set[str] = set()
        self._chosen: set[str] = set()
        self._settled: set[str] = set()
        self._line_overhead: dict[str, int] = {}
        self._section_units: dict[Tier, int] = {}
        # Whether an item's cached token_cost is what its full body costs as shown (the
        # default counter, a format that shows bodies as they are): then a line's cost is
        # that plus the line's markup, without looking at the body at all.
        self._cached_costs_shown = self._trust and layout.verbatim
        self._header_costs = caches.headers
        # An entry is offered up to once per packing phase; its line costs the same every
        # time, so it is counted once per package. A session's group header costs the same
        # in every package of one layout, so the caller may share that cache across builds.
        self._line_costs: dict[str, int] = {}
        self._group_units = caches.groups
        # A pool's items share few sessions: most group lookups end in this per-build memo.
        self._group_memo: dict[tuple[str, date], int] = {}
        # Every list of entries offered, in order: settle explains each entry left out once.
        self._offered: list[Sequence[Entry]] = []
        self._line_arrays: dict[int, tuple[Sequence[Entry], npt.NDArray[np.int64]]] = {}
        self.waiting: set[str] = set()
        """Entries that were offered in full and did not fit (a HEAD/TAIL item waiting)."""
        self.omissions: list[Omission] = []
        self._scores: dict[str, float] = {}
        self._marks = ConflictMarks(conflicts, layout, self._units)
        self._taken_items: dict[str, ContextItem] = {}
        """The items taken, by id (what a conflict's other side is looked up in)."""

    @property
    def total(self) -> int:
        """Units used so far."""
        return self._total

    def left(self) -> int:
        """Units left in the budget."""
        return self._cap - self._total

    def room(self, tier: Tier) -> int:
        """Units left in ``tier``'s own share."""
        return self._shares[tier] - self.used[tier]

    def tokens_left(self) -> int:
        """Tokens of the budget the package does not use."""
        return self.budget - self.scale.tokens(self._total)

    # ------------------------------------------------------------------ costs

    def _count(self, text: str) -> int:
        """Count a header string once (the same headers recur for every candidate and step)."""
        cost = self._header_costs.get(text)
        if cost is None:
            cost = self._header_costs[text] = self.counter.count(text)
        return cost

    def _units(self, text: str) -> int:
        return self._count(text) * self._den // self._num

    def _headers(self, entry: Entry) -> int:
        """Units of the headers ``entry`` would open in the package as it is."""
        cost = 0
        if entry.tier not in self._sections:
            cost += self._section_cost(entry.tier)
        session = entry.item.session
        if session and (entry.tier, session) not in self._groups:
            cost += self._group_cost(session, entry.item.timestamp)
        return cost

    def _section_cost(self, tier: Tier) -> int:
        section = self._section_units.get(tier)
        if section is None:
            section = sum(self._units(part) for part in self.layout.section(tier))
            self._section_units[tier] = section
        return section

    def _group_cost(self, session: str, started: datetime) -> int:
        key = (session, started.date())
        group_cost = self._group_memo.get(key)
        if group_cost is None:
            group_cost = self._group_units.get(key)
            if group_cost is None:
                group = self.layout.group(session, started)
                group_cost = self._group_units[key] = sum(self._units(p) for p in group)
            self._group_memo[key] = group_cost
        return group_cost

    def _overhead(self, item: ContextItem) -> int:
        overhead = self._line_overhead.get(item.kind)
        if overhead is None:
            overhead = self._units(self.layout.line(item, ""))
            self._line_overhead[item.kind] = overhead
        return overhead

    def _body_cost(self, item: ContextItem, body: str) -> int:
        """Tokens of a body as shown: the item's cached cost when trusted, else counted once."""
        layout = self.layout
        shown = layout.shown(body)
        if self._trust and shown == item.body and item.token_cost is not None:
            return item.token_cost
        key = (item.id, shown if body != item.body else item.fingerprint, layout.format.value)
        cost = self._costs.get(key)
        if cost is None:
            cost = self._costs[key] = self.counter.count(shown)
        return cost

    def _line(self, item: ContextItem, body: str) -> int:
        return self._overhead(item) + self._body_cost(item, body) * self._den // self._num

    def _line_cost(self, item: ContextItem) -> int:
        line = self._line_costs.get(item.id)
        if line is None:
            if self._cached_costs_shown and item.token_cost is not None:
                line = self._overhead(item) + item.token_cost * self._den // self._num
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
        """The median line cost of ``entries`` in units (0 for none): what a typical one needs."""
        if not entries:
            return 0
        lines = np.sort(self._lines(entries))
        return int(lines[(len(lines) - 1) // 2])  # the lower median, as median_low

    def cached_costs_hold(self) -> bool:
        """Whether every cached ``token_cost`` charged for a chosen body is that body's count.

        Each is checked against a count of the body once per item version (the count is kept
        with the others), so an honest cost is counted once, not once per build.
        """
        if not self._trust:
            return True
        layout, costs, count = self.layout, self._costs, self.counter.count
        format_, verbatim = layout.format.value, layout.verbatim
        for taken in self.taken:
            item = taken.entry.item
            if taken.truncated or item.token_cost is None:
                continue  # counted when it was charged
            if not verbatim and layout.shown(item.body) != item.body:
                continue  # counted as escaped when it was charged
            key = (item.id, item.fingerprint, format_)
            counted = costs.get(key)
            if counted is None:
                counted = costs[key] = count(item.body)
            if counted != item.token_cost:
                return False
        return True

    # ------------------------------------------------------------------ adding

    def _offer(self, entry: Entry, available: int, *, may_truncate: bool) -> bool:
        item = entry.item
        if item.id in self._settled:
            return item.id in self._chosen
        if self._turned_away(item):
            return False
        available = min(available, self._cap - self._total)
        line = self._line_cost(item)
        if line > available and not may_truncate:
            # Headers only add to the line, so it cannot fit.
            self.waiting.add(item.id)
            return False
        marks = self._marks.cost(item, self._taken_items) if self._marks else 0
        cost = line + self._headers(entry) + marks
        if cost <= available:
            self._take(entry, item.body, cost, truncated=False)
            return True
        if may_truncate and cost > self._shares[entry.tier]:
            body = self._truncate(entry, available - self._headers(entry) - marks)
            if body is not None:
                units = self._line(item, body) + self._headers(entry) + marks
                self._take(entry, body, units, truncated=True)
                return True
        self.waiting.add(item.id)
        return False

    def _turned_away(self, item: ContextItem) -> bool:
        """Whether ``item`` cannot be taken, whatever the room.

        Its content is in already (a duplicate, settled so), or the package holds
        ``max_items`` already.
        """
        if item.fingerprint in self._fingerprints:
            self._settled.add(item.id)
            self.waiting.discard(item.id)
            return True
        if self._max_items is not None and len(self.taken) >= self._max_items:
            self._limited.add(item.id)
            return True
        return False

    def _known_reason(self, item: ContextItem) -> OmissionReason | None:
        """Why ``item`` was left out when room had nothing to do with it (else ``None``)."""
        if item.fingerprint in self._fingerprints:
            return OmissionReason.DUPLICATE
        if item.id in self._limited:
            return OmissionReason.LIMIT
        return None

    def _take(self, entry: Entry, body: str, units: int, *, truncated: bool) -> None:
        """Add ``entry`` at ``units`` (its markers and its conflicts' other sides' included).

        The markers an earlier item now shows are moved onto that item's units, so every
        taken item carries what its own line costs.
        """
        if self._marks:
            for conflict, other, own, others in self._marks.pending(entry.item, self._taken_items):
                self._marks.show(conflict, {entry.item.id: own, other.id: others})
                self._recharge(other.id, others)
                units -= others
        self._taken_items[entry.item.id] = entry.item
        self._sections.add(entry.tier)
        if entry.item.session:
            self._groups.setdefault((entry.tier, entry.item.session), entry.item.timestamp)
        self.used[entry.tier] += units
        self._total += units
        self._fingerprints.add(entry.item.fingerprint)
        self._chosen.add(entry.item.id)
        self._settled.add(entry.item.id)
        self.waiting.discard(entry.item.id)
        self.taken.append(Taken(entry, body, units, truncated))

    @property
    def scores(self) -> Mapping[str, float]:
        """Scores given by :meth:`rescore`, by item id."""
        return self._scores

    def rescore(self, scores: Mapping[str, float]) -> None:
        """Report ``scores`` for the items they name (their tier's pool was scored again, wider).

        Packing order stands; what changes is the score each selection and omission carries,
        so that all of a tier's scores come from one scoring of one pool.
        """
        self._scores.update(scores)

    def score_of(self, entry: Entry) -> float:
        """The score ``entry`` reports (its rescored one, if any)."""
        return self._scores.get(entry.item.id, entry.score)

    def rescored(self, omissions: list[Omission]) -> list[Omission]:
        """``omissions`` made before a rescore, carrying the scores it gave."""
        scores = self._scores
        return [
            attrs.evolve(o, score=scores[o.item_id]) if o.item_id in scores else o
            for o in omissions
        ]

    def _recharge(self, item_id: str, units: int) -> None:
        """Add ``units`` (negative: take them off) to a taken item, its tier and the total."""
        at = next(i for i, t in enumerate(self.taken) if t.entry.item.id == item_id)
        taken = self.taken[at]
        self.taken[at] = taken._replace(units=taken.units + units)
        self.used[taken.entry.tier] += units
        self._total += units

    def drop(self, taken: Taken, reason: OmissionReason) -> None:
        """Take a chosen item back out (the render check's last resort), recording why.

        The conflicts it showed are shown no more: their other sides lose their markers.
        """
        self.taken.remove(taken)
        entry = taken.entry
        self.used[entry.tier] -= taken.units
        self._total -= taken.units
        self._taken_items.pop(entry.item.id, None)
        for other, units in self._marks.hide(entry.item.id):
            self._recharge(other, -units)
        self.omissions.append(
            Omission(
                entry.item.id,
                entry.tier,
                reason,
                self.scale.tokens(taken.units),
                self.score_of(entry),
            )
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

    # ------------------------------------------------------------------ explaining

    def _beside_pinned(
        self,
    ) -> tuple[int, int, dict[Tier, int], dict[tuple[Tier, str], int]]:
        """The room beside the pinned items alone, and the headers only other items opened.

        Returns the reach (units the pinned items leave), the room under which an entry fits
        whatever headers it opens, and those headers' units by section and by session group.
        """
        pinned = [t for t in self.taken if t.entry.reason is SelectionReason.PINNED]
        reach = self._cap - sum(t.units for t in pinned)
        # Beside the pinned items alone, an entry would also open the headers that only other
        # chosen items opened: a few of them, looked up once here.
        pinned_groups = {(t.entry.tier, t.entry.item.session) for t in pinned}
        later_sections = {
            tier: self._section_cost(tier)
            for tier in self._sections - {t.entry.tier for t in pinned}
        }
        later_groups = {
            key: self._group_cost(key[1], started)
            for key, started in self._groups.items()
            if key not in pinned_groups
        }
        roomy = reach - max(later_sections.values(), default=0)
        roomy -= max(later_groups.values(), default=0)
        return reach, roomy, later_sections, later_groups

    def _reaches(self) -> dict[Tier, int]:
        """The reach of each tier that may only fill the shares of some tiers (its lenders)."""
        pinned = [t for t in self.taken if t.entry.reason is SelectionReason.PINNED]
        left = {
            run: sum(self._shares[t] for t in run)
            - sum(t.units for t in pinned if t.entry.tier in run)
            for run in map(tuple, self._lenders.values())
        }
        # Every run of tiers holding this one must stay within its shares (Budget.spare).
        return {
            tier: min(room for run, room in left.items() if tier in run) for tier in self._lenders
        }

    def settle(self) -> list[Omission]:
        """Omissions for every offered entry left out, by why.

        A left-out entry whose content a chosen item already shows is a duplicate. Otherwise
        it is judged against the best room its tier could have had, the budget the pinned
        items leave (with a stable prefix, of the shares its tier may fill): over budget when
        its line alone is larger, no room for header when its line fits but not with the
        section or session header the pinned items left unopened, else it lost to better
        candidates. An omission's tokens are what the entry would cost
        in the final package; headers are only looked up for entries whose section or session
        group the package has not opened.
        """
        line_costs, sections, groups = self._line_costs, self._sections, self._groups
        over, lower = OmissionReason.OVER_BUDGET, OmissionReason.LOWER_SCORE
        headerless = OmissionReason.NO_ROOM_FOR_HEADER
        whole, roomy_whole, later_sections, later_groups = self._beside_pinned()
        reaches = self._reaches()
        num, den = self._num, self._den
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
                line = line_costs.get(item_id)
                if line is None:
                    line = self._line_cost(item)
                cost = line
                session = item.session
                if tier not in sections or (session and (tier, session) not in groups):
                    cost += self._headers(entry)
                if self._marks:
                    cost += self._marks.cost(item, self._taken_items)
                reach = min(reaches.get(tier, whole), whole)
                roomy = roomy_whole - (whole - reach)
                known = self._known_reason(item)
                if known is not None:
                    reason = known
                elif line > reach:
                    reason = over
                elif cost <= roomy:
                    reason = lower
                else:  # with every header the pinned items left unopened, a few more than cost has
                    best = cost + later_sections.get(tier, 0) + later_groups.get((tier, session), 0)
                    reason = headerless if best > reach else lower
                score = scores.get(item_id, entry.score)
                settled(Omission(item_id, tier, reason, -(-cost * num // den), score))
        self._offered.clear()
        self.waiting.clear()
        self._limited.clear()
        return self.omissions

    def lines(self) -> list[Line]:
        """The package's lines as rendered: each body shown, with its conflict markers."""
        lines = [Line(t.entry.item, t.entry.tier, t.body) for t in self.taken]
        bodies, _ = self._marks.numbered(lines)
        if not bodies:
            return lines
        return [attrs.evolve(line, body=bodies.get(line.item.id, line.body)) for line in lines]

    def conflicts_shown(self) -> list[MarkedConflict]:
        """The open conflicts both of whose items are in the package, numbered as rendered."""
        lines = [Line(t.entry.item, t.entry.tier, t.body) for t in self.taken]
        return self._marks.numbered(lines)[1]

    def package(self) -> tuple[list[Selection], dict[Tier, int]]:
        """The chosen items in prompt order, and each tier's part of what the render costs.

        Units add up along the render; a tier's part is what the render costs up to the end
        of its section less what it costs before it, so the parts add up to the whole. A
        selection's body is its line's, conflict markers included.
        """
        by_id = {taken.entry.item.id: taken for taken in self.taken}
        lines = self.lines()
        num, den, scores = self._num, self._den, self._scores
        used = dict.fromkeys(Tier, 0)
        selections: list[Selection] = []
        units = before = 0
        for _, groups in prompt_order(lines):
            for _, members in groups:
                for line in members:
                    taken = by_id[line.item.id]
                    item, tier, score, reason = taken.entry
                    units += taken.units
                    after = -(-units * num // den)
                    used[tier] += after - before
                    before = after
                    selections.append(
                        Selection(
                            item,
                            tier,
                            scores.get(item.id, score),
                            reason,
                            -(-taken.units * num // den),
                            line.body,
                            taken.truncated,
                        )
                    )
        return selections, used
