"""Gathering and scoring a tier: the candidates a build offers, in the order it offers them.

For each tier the build gathers a bounded pool (see :mod:`candidates`), and for the task tier
the HEAD (first items: the instructions) and TAIL (latest steps) of its timeline too; the
request's policy scores the whole pool; then the pool is split by how each candidate is
protected (pinned, HEAD/TAIL, ranked), with the expired and those below ``min_score`` left out
and explained.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, KeysView, Mapping
from datetime import datetime

import attrs

from agent_engine.assembler._build import Build
from agent_engine.assembler._workers import search_pool
from agent_engine.assembler.candidates import GatherLimits, gather
from agent_engine.assembler.diversity import spread
from agent_engine.assembler.package import Omission, OmissionReason, SelectionReason
from agent_engine.assembler.packer import Entry
from agent_engine.assembler.policies import Candidates
from agent_engine.assembler.rerank import RerankConfig, rerank_order
from agent_engine.models import ContextItem, ContextRequest, Tier
from agent_engine.tiers.base import TierStore

__all__ = ["TierPlan", "plan_tier", "plan_tiers"]


@attrs.frozen
class TierPlan:
    """One tier's candidates, in the order the fill should offer them."""

    tier: Tier
    store: TierStore
    pinned: list[Entry]
    protected: list[Entry]
    ranked: list[Entry]
    saturated: bool
    """Whether a source was cut at its limit: a wider gather could find more candidates."""
    pool: Mapping[str, ContextItem]
    """Every candidate the policy scored (pinned, HEAD and TAIL items included)."""
    scores: dict[str, float]
    left_out: list[Omission]
    """Candidates left out before packing (expired, below the threshold), and why."""


@attrs.frozen
class _Gathered:
    """What one tier's reads gave, before scoring."""

    candidates: Candidates
    pinned: list[ContextItem]
    head: list[ContextItem]
    tail: list[ContextItem]
    saturated: bool


def plan_tiers(build: Build) -> dict[Tier, TierPlan]:
    """Every tier's plan; a tier whose reads fail is left out (``build.reads`` says why)."""
    plans: dict[Tier, TierPlan] = {}
    for tier, store in build.stores.items():
        plan = build.reads.run((tier,), "gather", functools.partial(plan_tier, build, store))
        if plan is not None:
            plans[tier] = plan
    return plans


def plan_tier(
    build: Build,
    store: TierStore,
    *,
    limits: GatherLimits | None = None,
    wider_than: TierPlan | None = None,
) -> TierPlan:
    """Gather and score one tier; split its candidates by how they are protected.

    ``wider_than``: the plan this one widens. Its pool joins the new one and the two are
    scored together, so every score the tier reports is on one scale; only candidates it
    did not hold are judged and ranked here (its own were offered already), and its pinned
    items are not read again. Every read happens before anything is returned: a failing
    read leaves nothing half-planned behind.
    """
    with build.phases.measure("gather"):
        gathered = _gather(build, store, limits or build.config.limits, wider_than)
    with build.phases.measure("score"):
        return _score(build, store, gathered, wider_than)


def _gather(
    build: Build, store: TierStore, limits: GatherLimits, wider_than: TierPlan | None
) -> _Gathered:
    config = build.config
    head: list[ContextItem] = []
    tail: list[ContextItem] = []
    if store.tier is Tier.TASK and wider_than is None:
        if config.head:
            head = store.query(None, limit=config.head, order_by="+timestamp")
        if config.tail:
            tail = _tail(store, config.tail)
    candidates, pinned, saturated = gather(
        store,
        build.query,
        build.policy,
        limits,
        build.now,
        known=wider_than.pool if wider_than is not None else None,
        read_pinned=wider_than is None,
        query_vectors=build.query_vectors,
        background=search_pool() if config.overlap_searches else None,
        aliases=build.aliases,
    )
    everything = {**candidates.items, **{item.id: item for item in pinned + head + tail}}
    wanted = _wanted(build.request)
    if wanted is not None:
        everything = {item_id: item for item_id, item in everything.items() if wanted(item)}
        candidates = _only(candidates, everything.keys())
        pinned, head, tail = ([i for i in items if wanted(i)] for items in (pinned, head, tail))
    return _Gathered(attrs.evolve(candidates, items=everything), pinned, head, tail, saturated)


def _wanted(request: ContextRequest) -> Callable[[ContextItem], bool] | None:
    """What the request takes of the items a gather read (``None``: all of them).

    Its ``kinds``, and no archived item when it leaves the archive out. The reads bring in
    what they would for any request, and the others go before scoring, so nothing the
    request did not ask for is scored, explained or offered; a tier that loses candidates
    here gathers wider when room is left, as for any pool cut short.
    """
    kinds, archive = request.kinds, request.archive
    if kinds is None and archive:
        return None
    return lambda item: (
        (kinds is None or item.kind in kinds) and (archive or item.archived_at is None)
    )


def _only(candidates: Candidates, keep: KeysView[str]) -> Candidates:
    """``candidates`` with the signals of ``keep``'s items alone (their neighbours too)."""
    return attrs.evolve(
        candidates,
        dense={i: score for i, score in candidates.dense.items() if i in keep},
        lexical={i: score for i, score in candidates.lexical.items() if i in keep},
        neighbours={
            i: [(n, offset) for n, offset in near if n in keep]
            for i, near in candidates.neighbours.items()
            if i in keep
        },
    )


def _tail(store: TierStore, size: int) -> list[ContextItem]:
    """The last ``size`` items of the timeline, newest first.

    Backends break timestamp ties by ascending id, so a plain newest-first query keeps the
    *earliest* of items that share a timestamp (a frozen or coarse clock, a batch written
    at once). Ids are time-ordered: among the tied items, the greatest ids are the latest.
    """
    newest = store.query(None, limit=size)
    if not newest:
        return []
    boundary = newest[-1].timestamp
    newer = sorted(
        (item for item in newest if item.timestamp > boundary),
        key=lambda item: (item.timestamp, item.id),
        reverse=True,
    )
    tied = store.query({"timestamp": boundary}, limit=size - len(newer), order_by="-id")
    return newer + tied


def _score(
    build: Build, store: TierStore, gathered: _Gathered, wider_than: TierPlan | None
) -> TierPlan:
    """Score the pool, leave out the expired, and split the rest by protection."""
    tier = store.tier
    everything = gathered.candidates.items
    scores = dict(build.policy.scorer(gathered.candidates))
    live, expired = _live(everything, wider_than, build.now, tier, scores)
    placed: set[str] = set()

    def claim(items: list[ContextItem], reason: SelectionReason) -> list[Entry]:
        claimed = [
            Entry(i, tier, scores.get(i.id, 0.0), reason)
            for i in items
            if i.id in live and i.id not in placed
        ]
        placed.update(e.item.id for e in claimed)
        return claimed

    pinned = claim(gathered.pinned, SelectionReason.PINNED)
    head = claim(gathered.head, SelectionReason.HEAD)
    tail = claim(gathered.tail, SelectionReason.TAIL)
    rest = [
        Entry(item, tier, scores.get(item_id, 0.0), SelectionReason.RANKED)
        for item_id, item in live.items()
        if item_id not in placed
    ]
    floor = build.request.min_score
    ranked, below = _threshold(rest, build.config.min_score if floor is None else floor)
    if build.config.rerank is not None:
        ranked = _reranked(build, build.config.rerank, ranked, scores)
    if build.config.diversity is not None:
        ranked = spread(ranked, build.config.diversity)
    return TierPlan(
        tier=tier,
        store=store,
        pinned=pinned,
        protected=head + tail,
        ranked=ranked,
        saturated=gathered.saturated,
        pool=everything,
        scores=scores,
        left_out=expired + below,
    )


def _reranked(
    build: Build, config: RerankConfig, ranked: list[Entry], scores: dict[str, float]
) -> list[Entry]:
    """``ranked`` (best first) with its ``config.top`` best in the reranker's order.

    Their scores are dealt out again in that order, in ``scores`` too, so the plan reports
    what the entries carry. A reranker that fails leaves the fused order, logged (raised
    when the build is strict).
    """
    top = ranked[: config.top]
    if len(top) < 2:  # noqa: PLR2004 - nothing to reorder
        return ranked
    try:
        order = rerank_order(build.query, [e.item for e in top], config.reranker)
    except Exception as error:  # a reranker of the user's: the build goes on without it
        if build.reads.strict:
            raise
        build.log.warning(
            "reranker_failed", reranker=type(config.reranker).__name__, error=str(error)
        )
        return ranked
    reranked = [top[at]._replace(score=top[rank].score) for rank, at in enumerate(order)]
    for entry in reranked:
        scores[entry.item.id] = entry.score
    return reranked + ranked[config.top :]


def _live(
    pool: Mapping[str, ContextItem],
    wider_than: TierPlan | None,
    now: datetime,
    tier: Tier,
    scores: Mapping[str, float],
) -> tuple[dict[str, ContextItem], list[Omission]]:
    """The pool's items still to judge that have not expired; and the expired ones' omissions.

    A widened plan's earlier pool was judged already: its items are neither live nor expired.
    """
    judged = wider_than.pool if wider_than is not None else {}
    expired: list[Omission] = []
    live: dict[str, ContextItem] = {}
    for item_id, item in pool.items():  # one pass: a pool holds hundreds of items
        if item_id in judged:
            continue
        if item.expired(now):
            expired.append(Omission(item_id, tier, OmissionReason.EXPIRED, 0, scores.get(item_id)))
        else:
            live[item_id] = item
    return live, expired


def _threshold(entries: list[Entry], floor: float | None) -> tuple[list[Entry], list[Omission]]:
    """The entries at or above ``floor``, best first; and the omissions of those below it.

    Ties in score go to the older item, then the smaller id. Relevance scores rarely tie,
    and then sorting by score alone (a C-level key) gives that order already.
    """
    kept, below = entries, []
    if floor is not None:
        kept = [e for e in entries if e.score >= floor]
        below = [
            Omission(e.item.id, e.tier, OmissionReason.BELOW_THRESHOLD, 0, e.score)
            for e in entries
            if e.score < floor
        ]
    if len({entry.score for entry in kept}) == len(kept):
        return sorted(kept, key=_by_score, reverse=True), below
    return sorted(kept, key=lambda e: (-e.score, e.item.timestamp, e.item.id)), below


_by_score = operator.attrgetter("score")
