"""Memory that ages: decay, time to live by kind, staleness and a soft limit, as archive moves.

Seed 001 section 16 ("Compaction & TTL") and seed 003's context rot, read as transitions to
the archive (``docs/aging.md``). An :class:`AgingPolicy` says when an item of the working set
has aged out; :func:`plan_compaction` reads a store's working set once, in bounded pages, and
says which items would move and why, with the numbers (a :class:`CompactionReport`);
:func:`apply_plan` moves them through the store's ``archive_items``, in batches. Nothing is
deleted: an aged-out item stays searchable, builds page it back in when it matches, and
``restore`` brings it back.

**Nothing compounds.** Importance is never rewritten by aging. An item's *decayed importance*
is computed, whenever it is asked for, from what is stored (its importance, status and access
count) and the time since it was last read or written (seed 001's formula)::

    decayed = importance x 0.95^(days idle / 7) x status weight x access resistance
    status weight = 0.9 for a candidate, 1 otherwise
    access resistance = min(1, 0.5 + 0.05 x accesses)

so planning twice in a row gives the same numbers, and an item read again is fresh again.

**Why an item moves** (one reason per item, the first that applies; pinned items never move):

1. ``expired``: its own ``expires_at`` has passed, or it is older than its kind's time to live
   and was read fewer than ``ttl_exempt_accesses`` times;
2. ``decayed``: its decayed importance is below ``floor``;
3. ``stale``: unread (and unwritten) for ``stale_after`` and of importance below
   ``stale_below``;
4. ``compacted`` (``evicted`` when a write triggered it): the working set is still over
   ``soft_limit``; the items of lowest decayed importance go until ``low_mark`` is reached,
   sparing those read within ``protect_recent``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.filters import Condition, Filter, Op
from agent_engine.models import ArchiveReason, ContextItem, Status, Tier

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = [
    "DEFAULT_TTL_DAYS",
    "AgingPolicy",
    "CompactionMove",
    "CompactionReport",
    "apply_plan",
    "plan_compaction",
]

DAY: Final = timedelta(days=1)
RESISTANCE_BASE: Final = 0.5
"""Access resistance of an item never read: it keeps half its importance at most."""
RESISTANCE_PER_ACCESS: Final = 0.05
"""Each read adds this much resistance, up to 1 (ten reads: decay by time alone)."""
SCAN_PAGE: Final = 10_000
"""Items read per query while planning: memory stays bounded whatever the store's size."""
APPLY_BATCH: Final = 5_000
"""Items moved per journaled write when a plan is applied."""
PREVIEW: Final = 80
"""Characters of an item's text a move keeps, to show what it is."""

DEFAULT_TTL_DAYS: Final[Mapping[str, float | None]] = MappingProxyType(
    {
        # Seed 001's categories, for stores that use them as kinds.
        "task_progress": 14,
        "discovery": 21,
        "file_change": 21,
        "warning": 30,
        "decision": 90,
        "error": 90,
        "pattern": 180,
        "architecture": 180,
        "preference": 365,
        # The kinds this library's tiers write, each with the seed category it plays.
        "reasoning": 14,  # a step of a task: task progress
        "stage_output": 14,  # what a stage produced: task progress
        "tool_output": 21,  # what a tool found or changed: a discovery, a file change
        "note": 21,  # the CLI's default kind: a finding
        "failure": 90,  # a failure and its lesson: a recurring error and its solution
        "convention": 180,  # code conventions and idioms: a pattern
        "instruction": None,  # a task's instructions last as long as the task
    }
)
"""Days an item of each kind lives unless read often (``None``: no limit by kind)."""


def _real_in(field: str, value: object, low: float, high: float) -> float:
    number = _validate.real(field, value)
    if not low <= number <= high:
        raise ValidationError(
            f"{field} must be in [{low:g}, {high:g}], got {value!r}", field=field, value=value
        )
    return number


def _duration(field: str, value: object) -> timedelta:
    """A non-negative duration: a :class:`~datetime.timedelta`, or a number of days."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValidationError(
                f"{field} must not be negative, got {value!r}", field=field, value=value
            )
        return value
    days = _validate.real(field, value)
    if days < 0:
        raise ValidationError(
            f"{field} must be a number of days >= 0, got {value!r}", field=field, value=value
        )
    try:
        return timedelta(days=days)
    except OverflowError:
        raise ValidationError(
            f"{field} is longer than a duration can be: {value!r} days", field=field, value=value
        ) from None


def _optional_duration(field: str, value: object) -> timedelta | None:
    return None if value is None else _duration(field, value)


def _ttl_table(value: object) -> Mapping[str, timedelta | None]:
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"ttl must be a mapping of kind to days (or None), got {type(value).__name__}",
            field="ttl",
            value=value,
        )
    table: dict[str, timedelta | None] = {}
    for kind, days in value.items():
        _validate.identifier("ttl", kind)
        table[kind] = _optional_duration(f"ttl[{kind}]", days)
    return MappingProxyType(table)


def _floor(value: object) -> float:
    return _real_in("floor", value, 0.0, 1.0)


def _stale_below(value: object) -> float:
    return _real_in("stale_below", value, 0.0, 1.0)


def _weekly_retention(value: object) -> float:
    return _real_in("weekly_retention", value, 0.0, 1.0)


def _candidate_weight(value: object) -> float:
    return _real_in("candidate_weight", value, 0.0, 1.0)


def _default_ttl(value: object) -> timedelta | None:
    return _optional_duration("default_ttl", value)


def _stale_after(value: object) -> timedelta:
    return _duration("stale_after", value)


def _protect_recent(value: object) -> timedelta:
    return _duration("protect_recent", value)


def _ttl_exempt_accesses(value: object) -> int:
    return _validate.integer("ttl_exempt_accesses", value, minimum=1)


def _soft_limit(value: object) -> int | None:
    return None if value is None else _validate.integer("soft_limit", value, minimum=1)


def _low_mark(value: object) -> int:
    return _validate.integer("low_mark", value)


@attrs.frozen
class AgingPolicy:
    """When an item of a store's working set has aged out, and where compaction stops.

    Every field is checked when the policy is built (a
    :class:`~agent_engine.errors.ValidationError` naming the field), so a bad policy never
    reaches a store. Durations are :class:`~datetime.timedelta` values or numbers of days.

    * ``floor``: an item whose decayed importance falls below it is archived as ``decayed``.
    * ``ttl``: days an item of each kind lives (``None``: no limit); kinds it does not name
      get ``default_ttl``. Items read ``ttl_exempt_accesses`` times or more outlive it; an
      item's own ``expires_at`` applies whatever its reads.
    * ``stale_after`` and ``stale_below``: an item neither read nor written for that long and
      of importance below that is archived as ``stale``.
    * ``soft_limit`` and ``low_mark``: a working set over the soft limit is brought down to
      the low mark, lowest decayed importance first (``None``: no limit). Items read within
      ``protect_recent`` are spared.
    * ``weekly_retention`` and ``candidate_weight``: the decay per week, and the weight of an
      unconfirmed (candidate) item.
    """

    floor: float = attrs.field(default=0.05, converter=_floor)
    ttl: Mapping[str, timedelta | None] = attrs.field(
        default=DEFAULT_TTL_DAYS, converter=_ttl_table, hash=False
    )
    default_ttl: timedelta | None = attrs.field(default=None, converter=_default_ttl)
    ttl_exempt_accesses: int = attrs.field(default=3, converter=_ttl_exempt_accesses)
    stale_after: timedelta = attrs.field(default=timedelta(days=90), converter=_stale_after)
    stale_below: float = attrs.field(default=0.3, converter=_stale_below)
    soft_limit: int | None = attrs.field(default=3000, converter=_soft_limit)
    low_mark: int = attrs.field(default=2700, converter=_low_mark)
    protect_recent: timedelta = attrs.field(default=DAY, converter=_protect_recent)
    weekly_retention: float = attrs.field(default=0.95, converter=_weekly_retention)
    candidate_weight: float = attrs.field(default=0.9, converter=_candidate_weight)

    def __attrs_post_init__(self) -> None:
        if self.soft_limit is not None and self.low_mark >= self.soft_limit:
            raise ValidationError(
                f"low_mark ({self.low_mark}) must be below soft_limit ({self.soft_limit}): "
                "compaction brings a store over its soft limit down to its low mark",
                field="low_mark",
                value=self.low_mark,
            )

    def with_limit(self, soft_limit: int | None) -> AgingPolicy:
        """This policy with another soft limit, its low mark at the same share of it.

        How a project store's ``max_items`` becomes its soft limit (``None``: no limit).
        """
        if soft_limit is None:
            return attrs.evolve(self, soft_limit=None)
        limit = _soft_limit(soft_limit)
        assert limit is not None  # noqa: S101 - _soft_limit keeps a number a number
        share = self.low_mark / self.soft_limit if self.soft_limit else 0.9
        return attrs.evolve(
            self, soft_limit=limit, low_mark=min(limit - 1, math.floor(limit * share))
        )

    def ttl_of(self, kind: str) -> timedelta | None:
        """How long an item of ``kind`` lives by kind (``None``: no limit)."""
        return self.ttl.get(kind, self.default_ttl)

    def decayed(self, item: ContextItem, now: datetime) -> float:
        """``item``'s importance decayed to ``now`` (a pinned item's never decays)."""
        return self.decayed_after(item, _days(now - _touched(item)))

    def decayed_after(self, item: ContextItem, idle_days: float) -> float:
        """``item``'s importance after ``idle_days`` unread (a pinned item's never decays)."""
        if item.status is Status.PINNED:
            return item.importance
        weight = self.candidate_weight if item.status is Status.CANDIDATE else 1.0
        resistance = min(1.0, RESISTANCE_BASE + RESISTANCE_PER_ACCESS * item.access_count)
        decay = math.pow(self.weekly_retention, idle_days / 7)
        return item.importance * decay * weight * resistance


def _touched(item: ContextItem) -> datetime:
    """When ``item`` was last read or written: its decay clock starts there."""
    read = item.last_accessed_at
    written = item.valid_since
    return written if read is None or read < written else read


def _days(span: timedelta) -> float:
    return max(0.0, span / DAY)


@attrs.frozen
class CompactionMove:
    """One item a compaction moves to the archive, why, and the numbers that decided it.

    ``decayed`` is its decayed importance, ``idle_days`` the days since it was last read or
    written, ``age_days`` the days since this version was written, ``ttl_days`` its kind's
    time to live (``None``: none); ``expires_at`` its own expiry. ``access_count`` and
    ``last_accessed_at`` are as planned: an item read since is not moved.
    """

    id: str
    kind: str
    reason: ArchiveReason
    importance: float
    decayed: float
    idle_days: float
    age_days: float
    ttl_days: float | None
    access_count: int
    last_accessed_at: datetime | None
    expires_at: datetime | None
    preview: str

    def why(self, policy: AgingPolicy) -> str:
        """One line saying why this item moves, with the numbers."""
        if self.reason is ArchiveReason.EXPIRED:
            if self.ttl_days is None or self.age_days <= self.ttl_days:
                stamp = self.expires_at.isoformat() if self.expires_at else "?"
                return f"its own expiry passed ({stamp})"
            return (
                f"age {self.age_days:.1f} d > ttl {self.ttl_days:g} d ({self.kind}), "
                f"read {self.access_count} time(s) < {policy.ttl_exempt_accesses}"
            )
        if self.reason is ArchiveReason.DECAYED:
            return (
                f"decayed importance {self.decayed:.4f} < floor {policy.floor:g} "
                f"(importance {self.importance:g}, idle {self.idle_days:.1f} d, "
                f"read {self.access_count} time(s))"
            )
        if self.reason is ArchiveReason.STALE:
            return (
                f"idle {self.idle_days:.1f} d > {_days(policy.stale_after):g} d and "
                f"importance {self.importance:g} < {policy.stale_below:g}"
            )
        return (
            f"over the soft limit {policy.soft_limit}: decayed importance {self.decayed:.4f} "
            f"is among the lowest (down to {policy.low_mark})"
        )


@attrs.frozen
class CompactionReport:
    """What compaction would move (a plan) or moved (``applied``), and why.

    ``working`` is the size of the working set when planned, ``pinned`` how many of it are
    pinned (never moved) and ``protected`` how many the soft limit spared because they were
    read within ``protect_recent``. Once applied, ``moved`` counts what moved and ``skipped``
    names the planned items left where they were, because they were read, pinned or moved
    by someone else in between.
    """

    tier: Tier
    namespace: str
    at: datetime
    policy: AgingPolicy
    working: int
    moves: tuple[CompactionMove, ...]
    pinned: int = 0
    protected: int = 0
    applied: bool = False
    moved: int = 0
    skipped: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many moves each reason has, in the order reasons apply.

        Compaction's four reasons are always there (zero or not); ``evicted`` only in a
        write's eviction.
        """
        counts = dict.fromkeys((reason.value for reason in _ORDER[:4]), 0)
        for move in self.moves:
            counts[move.reason.value] = counts.get(move.reason.value, 0) + 1
        return counts

    @property
    def remaining(self) -> int:
        """The working set's size once the plan is applied."""
        return self.working - (self.moved if self.applied else len(self.moves))

    @property
    def short(self) -> int:
        """How many items over the low mark the plan leaves (pinned and recent ones are kept)."""
        limit = self.policy.soft_limit
        if limit is None or self.working - len(self.moves) <= limit:
            return 0
        return self.working - len(self.moves) - self.policy.low_mark

    def summary(self) -> dict[str, Any]:
        """The report without its items, JSON-safe: what a ``compact`` journal event says."""
        return {
            "at": self.at.isoformat(),
            "working": self.working,
            "planned": len(self.moves),
            "counts": self.counts(),
            "pinned": self.pinned,
            "protected": self.protected,
            "remaining": self.remaining,
            "short": self.short,
            "policy": _policy_json(self.policy),
            **({"moved": self.moved, "skipped": len(self.skipped)} if self.applied else {}),
        }


_ORDER: Final = (
    ArchiveReason.EXPIRED,
    ArchiveReason.DECAYED,
    ArchiveReason.STALE,
    ArchiveReason.COMPACTED,
    ArchiveReason.EVICTED,
)


def _policy_json(policy: AgingPolicy) -> dict[str, Any]:
    """``policy`` as JSON-safe numbers (durations in days)."""

    def days(span: timedelta | None) -> float | None:
        return None if span is None else span / DAY

    return {
        "floor": policy.floor,
        "ttl_days": {kind: days(span) for kind, span in sorted(policy.ttl.items())},
        "default_ttl_days": days(policy.default_ttl),
        "ttl_exempt_accesses": policy.ttl_exempt_accesses,
        "stale_after_days": days(policy.stale_after),
        "stale_below": policy.stale_below,
        "soft_limit": policy.soft_limit,
        "low_mark": policy.low_mark,
        "protect_recent_days": days(policy.protect_recent),
        "weekly_retention": policy.weekly_retention,
        "candidate_weight": policy.candidate_weight,
    }


# ----------------------------------------------------------------------------- planning


def _pages(store: TierStore, size: int) -> Iterator[list[ContextItem]]:
    """``store``'s working set, oldest first, about ``size`` items per query.

    Keyset paging on ``(timestamp, id)``, the order the backend sorts by (and, on SQL, the
    working set's own index): a page costs one bounded, ordered query however deep it is.
    The filter language has no "or", so a page starts at the instant the last one ended on
    and skips the items of it already read; a run of one instant longer than a page is
    walked by id instead.
    """
    after: tuple[datetime, str] | None = None
    seen = 0  # items of the instant ``after`` names that were read already
    while True:
        if after is not None and seen >= size:
            rest = Filter(
                (Condition("timestamp", Op.EQ, after[0]), Condition("id", Op.GT, after[1]))
            )
            run = store.query(rest, limit=size, order_by="+id")
            if run:
                yield run
                after, seen = (after[0], run[-1].id), seen + len(run)
                continue
            limit = size
            later = {"timestamp": {"$gt": after[0]}}
            page = fresh = store.query(later, limit=limit, order_by="+timestamp")
        else:
            limit = size + seen
            since = None if after is None else {"timestamp": {"$gte": after[0]}}
            page = store.query(since, limit=limit, order_by="+timestamp")
            fresh = page if after is None else [i for i in page if (i.timestamp, i.id) > after]
        if fresh:
            yield fresh
        if len(page) < limit:
            return
        last = page[-1]
        after, seen = (last.timestamp, last.id), sum(i.timestamp == last.timestamp for i in page)


class _Candidate(NamedTuple):
    """An item the soft limit may move: its rank first (lowest decayed, oldest, id).

    Then what its move would say. A tuple rather than a :class:`CompactionMove`, as most of
    a large store is a candidate and most candidates stay.
    """

    decayed: float
    touched: datetime
    id: str
    kind: str
    importance: float
    idle_days: float
    age_days: float
    access_count: int
    last_accessed_at: datetime | None
    expires_at: datetime | None
    preview: str

    def move(self, policy: AgingPolicy, reason: ArchiveReason) -> CompactionMove:
        """This candidate moved for ``reason``."""
        ttl = policy.ttl_of(self.kind)
        return CompactionMove(
            id=self.id,
            kind=self.kind,
            reason=reason,
            importance=self.importance,
            decayed=self.decayed,
            idle_days=self.idle_days,
            age_days=self.age_days,
            ttl_days=None if ttl is None else ttl / DAY,
            access_count=self.access_count,
            last_accessed_at=self.last_accessed_at,
            expires_at=self.expires_at,
            preview=self.preview,
        )


def plan_compaction(
    store: TierStore,
    policy: AgingPolicy,
    now: datetime,
    *,
    rules: bool = True,
    limit_reason: ArchiveReason = ArchiveReason.COMPACTED,
    page_size: int = SCAN_PAGE,
) -> CompactionReport:
    """Which of ``store``'s working set ``policy`` moves at ``now``, and why (reads only).

    One pass over the working set in pages of ``page_size``; what is kept between pages is
    a small tuple per item that may move (its numbers and a preview of its text), never the
    items themselves with their vectors.
    ``rules=False`` leaves expiry, decay and staleness out (what a write's eviction does)
    and ``limit_reason`` names what the soft limit's moves are (``evicted`` for that).
    """
    working = pinned = protected = 0
    moves: list[CompactionMove] = []
    ranked: list[_Candidate] = []
    for page in _pages(store, _validate.integer("page_size", page_size, minimum=1)):
        for item in page:
            working += 1
            if item.status is Status.PINNED:
                pinned += 1
                continue
            last = _touched(item)
            idle = _days(now - last)
            age = _days(now - item.valid_since)
            if rules:
                reason = _rule(policy, item, now, idle, age)
                if reason is not None:
                    moves.append(_candidate(policy, item, last, idle, age).move(policy, reason))
                    continue
            read = item.last_accessed_at
            if read is not None and now - read < policy.protect_recent:
                protected += 1
                continue
            ranked.append(_candidate(policy, item, last, idle, age))
    limit = policy.soft_limit
    if limit is not None and working - len(moves) > limit:
        ranked.sort(key=lambda entry: entry[:3])
        chosen = ranked[: working - len(moves) - policy.low_mark]
        moves.extend(candidate.move(policy, limit_reason) for candidate in chosen)
    return CompactionReport(
        tier=store.tier,
        namespace=store.namespace,
        at=now,
        policy=policy,
        working=working,
        moves=tuple(moves),
        pinned=pinned,
        protected=protected,
    )


def _rule(
    policy: AgingPolicy, item: ContextItem, now: datetime, idle: float, age: float
) -> ArchiveReason | None:
    """The first of expiry, decay and staleness that moves ``item``, if one does."""
    if item.expires_at is not None and item.expires_at <= now:
        return ArchiveReason.EXPIRED
    ttl = policy.ttl_of(item.kind)
    if ttl is not None and item.access_count < policy.ttl_exempt_accesses and age > ttl / DAY:
        return ArchiveReason.EXPIRED
    if policy.decayed_after(item, idle) < policy.floor:
        return ArchiveReason.DECAYED
    if idle > policy.stale_after / DAY and item.importance < policy.stale_below:
        return ArchiveReason.STALE
    return None


def _candidate(
    policy: AgingPolicy, item: ContextItem, last: datetime, idle: float, age: float
) -> _Candidate:
    return _Candidate(
        policy.decayed_after(item, idle),
        last,
        item.id,
        item.kind,
        item.importance,
        idle,
        age,
        item.access_count,
        item.last_accessed_at,
        item.expires_at,
        item.body[:PREVIEW],
    )


# ----------------------------------------------------------------------------- applying


def apply_plan(store: TierStore, plan: CompactionReport) -> CompactionReport:
    """Move ``plan``'s items to the archive, a reason at a time in batches; return what was done.

    Each batch is read again and moved through ``store.archive_items`` as one ``archive``
    event whose detail holds the batch's numbers, in the order of its ids. An item read,
    pinned or moved since it was planned stays where it is (``skipped``): the numbers that
    chose it no longer hold.
    """
    moved = 0
    skipped: list[str] = []
    for reason in _ORDER:
        chosen = [move for move in plan.moves if move.reason is reason]
        for start in range(0, len(chosen), APPLY_BATCH):
            batch = {move.id: move for move in chosen[start : start + APPLY_BATCH]}
            current = {item.id: item for item in store.get_many(list(batch))}
            ready = [
                current[move_id]
                for move_id, move in batch.items()
                if move_id in current and _as_planned(current[move_id], move)
            ]
            kept = {item.id for item in ready}
            skipped.extend(move_id for move_id in batch if move_id not in kept)
            if ready:
                detail = _detail(plan.policy, reason, [batch[item.id] for item in ready])
                moved += len(store.archive_items(ready, reason, detail))
    return attrs.evolve(plan, applied=True, moved=moved, skipped=tuple(skipped))


def _as_planned(item: ContextItem, move: CompactionMove) -> bool:
    return (
        item.current
        and item.status is not Status.PINNED
        and item.access_count == move.access_count
        and item.last_accessed_at == move.last_accessed_at
    )


def _detail(
    policy: AgingPolicy, reason: ArchiveReason, moves: list[CompactionMove]
) -> dict[str, Any]:
    """An ``archive`` event's numbers: the rule's thresholds, then one value per item.

    The per-item lists follow the event's ``item_ids`` and name no id themselves, so erasing
    an item later (which replaces its id in the journal by a token) leaves nothing of it here.
    """
    decayed = [round(move.decayed, 6) for move in moves]
    if reason is ArchiveReason.EXPIRED:
        return {
            "ttl_exempt_accesses": policy.ttl_exempt_accesses,
            "age_days": [round(move.age_days, 3) for move in moves],
            "ttl_days": [move.ttl_days for move in moves],
            "expires_at": [m.expires_at.isoformat() if m.expires_at else None for m in moves],
            "access_count": [move.access_count for move in moves],
        }
    if reason is ArchiveReason.DECAYED:
        return {
            "floor": policy.floor,
            "decayed": decayed,
            "idle_days": [round(move.idle_days, 3) for move in moves],
        }
    if reason is ArchiveReason.STALE:
        return {
            "stale_after_days": policy.stale_after / DAY,
            "stale_below": policy.stale_below,
            "idle_days": [round(move.idle_days, 3) for move in moves],
            "importance": [move.importance for move in moves],
        }
    return {"soft_limit": policy.soft_limit, "low_mark": policy.low_mark, "decayed": decayed}
