"""The ContextAssembler: what a pipeline executor calls once per task step.

``build_context(task, request)`` pages items in from the task's memory, its project's memory
and its user's global memory under ``request.budget_tokens``:

1. the budget is split between tiers (40/40/20 by default; per request, per agent profile);
2. each tier gathers a bounded pool of candidates from its indexes and the request's policy
   scores them; the task tier also keeps the HEAD (first items: the instructions) and TAIL
   (latest steps) of its timeline;
3. the packer fills the budget: pinned items first, then each tier within its share, then
   whatever is left flows to the tiers in spill order (work-conserving); HEAD and TAIL items
   come before any item from the middle, in the share and in the spill-over;
4. the chosen items get their access recorded in one write per backend.

If a tier's backend fails, in whichever phase, the package is built from what the healthy
reads gave and names the failure (``strict=True`` raises instead): see ``_failopen``.
"""

from __future__ import annotations

import functools
import operator
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import date, datetime

import attrs

from agent_engine._log import get_logger
from agent_engine.assembler._costcache import CostCache
from agent_engine.assembler._failopen import FailOpen
from agent_engine.assembler._workers import search_pool
from agent_engine.assembler.allocation import DEFAULT_SPILL_ORDER, allocate
from agent_engine.assembler.candidates import GatherLimits, QueryVectors, gather
from agent_engine.assembler.package import (
    ContextPackage,
    Omission,
    OmissionReason,
    SelectionReason,
    TierFailure,
    TierUsage,
)
from agent_engine.assembler.packer import PROTECTED, BodyKey, Entry, Packer, Taken
from agent_engine.assembler.policies import DEFAULT_POLICIES, Policy, resolve_policy
from agent_engine.assembler.render import PROMPT_ORDER, Layout, Line, render_lines
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import (
    ContextItem,
    ContextRequest,
    Task,
    Tier,
    TierShares,
    new_id,
    utcnow,
)
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.global_ import Confirm, GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.task import TaskMemoryStore, task_namespace
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["AssemblerConfig", "ContextAssembler"]


@attrs.frozen
class AssemblerConfig:
    """How contexts are assembled (everything a request does not say itself).

    ``head``/``tail``: how many of the task timeline's first and last items are kept before
    anything from its middle. ``profiles`` maps agent profile names to tier splits.
    ``min_score``: ranked candidates scoring below it are left out. ``track_access``: record
    accesses of chosen items (turn off for read-only evaluation). ``overlap_searches``: run a
    large tier's vector search (and the query embedding) on a worker thread while its BM25
    scoring and other reads run in the caller's; FAISS, numpy, torch and database drivers
    release the GIL, so they overlap (about 0.8 ms of a 5 ms build at 100k items on HNSW).
    Turn it off to keep every read on the calling thread.
    """

    shares: TierShares = attrs.field(factory=TierShares)
    head: int = 2
    tail: int = 4
    layout: Layout = attrs.field(factory=Layout)
    limits: GatherLimits = attrs.field(factory=GatherLimits)
    spill_order: tuple[Tier, ...] = DEFAULT_SPILL_ORDER
    min_score: float | None = None
    track_access: bool = True
    profiles: Mapping[str, TierShares] = attrs.field(factory=dict)
    overlap_searches: bool = True

    def __attrs_post_init__(self) -> None:
        for name, value in (("head", self.head), ("tail", self.tail)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(
                    f"{name} must be a non-negative integer", field=name, value=value
                )
        if sorted(self.spill_order) != sorted(Tier):
            raise ValidationError(
                "spill_order must name each tier once", field="spill_order", value=self.spill_order
            )


@attrs.frozen
class _TierPlan:
    """One tier's candidates, in the order the packer should offer them."""

    tier: Tier
    store: TierStore
    pinned: list[Entry]
    protected: list[Entry]
    ranked: list[Entry]
    saturated: bool
    """Whether a source was cut at its limit: a wider gather could find more candidates."""
    pool: dict[str, ContextItem]
    """Every candidate the policy scored (pinned, HEAD and TAIL items included)."""
    scores: dict[str, float]
    left_out: list[Omission]
    """Candidates left out before packing (expired, below the threshold), and why."""


class ContextAssembler:
    """Assembles token-budgeted contexts from task, project and global memory.

    Give one ``backend`` for every tier, or one per tier (``task_backend`` defaults to a fresh
    in-memory backend, as task memory is ephemeral). Stores are created on first use and kept.
    """

    def __init__(
        self,
        backend: MemoryBackend | None = None,
        *,
        task_backend: MemoryBackend | None = None,
        project_backend: MemoryBackend | None = None,
        global_backend: MemoryBackend | None = None,
        config: AssemblerConfig | None = None,
        counter: TokenCounter = DEFAULT_COUNTER,
        policies: Mapping[str, Policy] = DEFAULT_POLICIES,
        confirm: Confirm | None = None,
        max_project_items: int | None = 1000,
        clock: Callable[[], datetime] = utcnow,
        strict: bool = False,
    ) -> None:
        shared = backend if backend is not None else InMemoryBackend()
        self.backends = {
            Tier.TASK: task_backend or backend or InMemoryBackend(),
            Tier.PROJECT: project_backend or shared,
            Tier.GLOBAL: global_backend or shared,
        }
        self.config = config or AssemblerConfig()
        self.counter = counter
        self.policies = dict(policies)
        self.confirm = confirm
        self.max_project_items = max_project_items
        self.clock = clock
        self.strict = strict
        self._tasks: dict[str, TaskMemoryStore] = {}
        self._projects: dict[str, ProjectMemoryStore] = {}
        self._globals: dict[str, GlobalMemoryStore] = {}
        self._lock = threading.Lock()
        self._costs: CostCache[BodyKey] = CostCache(maxsize=100_000)
        # Section and session headers recur across steps; counted once per assembler.
        self._header_costs: CostCache[str] = CostCache(maxsize=10_000)
        self._group_units: CostCache[tuple[str, date]] = CostCache(maxsize=10_000)

    # ------------------------------------------------------------------ stores

    def task_store(self, task: Task | str) -> TaskMemoryStore:
        """The memory of a task (created on first use).

        A :class:`~agent_engine.models.Task` scopes it by its project and user; a bare task id
        means the default project and user.
        """
        key = _task_key(task)
        with self._lock:
            store = self._tasks.get(key)
            if store is None:
                store = TaskMemoryStore(task, self.backends[Tier.TASK], clock=self.clock)
                self._tasks[key] = store
            return store

    def project_store(self, project_id: str) -> ProjectMemoryStore:
        """The memory of a project (created on first use)."""
        with self._lock:
            if project_id not in self._projects:
                self._projects[project_id] = ProjectMemoryStore(
                    project_id,
                    self.backends[Tier.PROJECT],
                    max_items=self.max_project_items,
                    clock=self.clock,
                )
            return self._projects[project_id]

    def global_store(self, user_id: str = "default") -> GlobalMemoryStore:
        """A user's global memory (created on first use, with the assembler's callback)."""
        with self._lock:
            if user_id not in self._globals:
                self._globals[user_id] = GlobalMemoryStore(
                    self.backends[Tier.GLOBAL], user_id, confirm=self.confirm, clock=self.clock
                )
            return self._globals[user_id]

    def cleanup_task(self, task: Task | str) -> int:
        """Clear a finished task's memory and forget its store; return items removed."""
        with self._lock:
            store = self._tasks.pop(_task_key(task), None)
        store = store or TaskMemoryStore(task, self.backends[Tier.TASK], clock=self.clock)
        return store.clear()

    # ------------------------------------------------------------------ assembly

    def build_context(
        self, task: Task, request: ContextRequest, *, strict: bool | None = None
    ) -> ContextPackage:
        """Assemble the context for one step of ``task`` (see the module docstring)."""
        for name, value, kind in (("task", task, Task), ("request", request, ContextRequest)):
            if not isinstance(value, kind):
                raise ValidationError(
                    f"{name} must be a {kind.__name__}, got {type(value).__name__}",
                    field=name,
                    value=value,
                )
        strict = self.strict if strict is None else strict
        started = time.perf_counter()
        policy = resolve_policy(request.policy, self.policies)
        shares = self._shares(request)
        budget = request.budget_tokens
        allocation = allocate(budget, shares)
        now = self.clock()
        query = request.query or task.description
        stores: dict[Tier, TierStore] = {
            Tier.TASK: self.task_store(task),
            Tier.PROJECT: self.project_store(task.project_id),
            Tier.GLOBAL: self.global_store(task.user_id),
        }
        log = get_logger(task=task.id, project=task.project_id, policy=policy.name)
        reads = FailOpen(strict=strict, log=log)
        plans: dict[Tier, _TierPlan] = {}
        vectors: QueryVectors = {}
        for tier, store in stores.items():
            plan = reads.run(
                (tier,),
                "gather",
                functools.partial(self._plan, store, query, policy, now, query_vectors=vectors),
            )
            if plan is not None:
                plans[tier] = plan

        packer = self._packer(budget, allocation, trust_cached_costs=True)
        self._pack(packer, plans)
        self._widen(
            packer=packer,
            plans=plans,
            query=query,
            policy=policy,
            now=now,
            query_vectors=vectors,
            reads=reads,
        )
        if not packer.cached_costs_hold():
            # A cached token_cost is not its body's count: every figure charged with it is
            # wrong, and so may be what it let in. Pack again, counting every body.
            packer = self._repack(packer, plans, budget, allocation)
        counted = self._fit_render(packer, budget)
        early = [omission for plan in plans.values() for omission in plan.left_out]
        omissions = packer.rescored(early) + packer.settle()
        if self.config.track_access:
            self._record_access(packer.taken, stores, now, reads)

        package = self._package(
            task=task,
            request=request,
            policy=policy,
            packer=packer,
            plans=plans,
            allocation=allocation,
            omissions=omissions,
            failures=reads.failures,
            counted=counted,
        )
        log.info(
            "context_built",
            budget=budget,
            used=package.tokens_used,
            per_tier={u.tier.value: [u.used, u.allocated, u.selected] for u in package.usage},
            omitted=_count_by_reason(omissions),
            failures=[f.tier.value for f in package.failures],
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return package

    def _shares(self, request: ContextRequest) -> TierShares:
        if request.shares is not None:
            return request.shares
        if request.profile is not None:
            try:
                return self.config.profiles[request.profile]
            except KeyError:
                known = ", ".join(sorted(self.config.profiles)) or "none configured"
                raise ValidationError(
                    f"unknown agent profile {request.profile!r}; known: {known}",
                    field="profile",
                    value=request.profile,
                ) from None
        return self.config.shares

    def _plan(
        self,
        store: TierStore,
        query: str,
        policy: Policy,
        now: datetime,
        *,
        limits: GatherLimits | None = None,
        wider_than: _TierPlan | None = None,
        query_vectors: QueryVectors | None = None,
    ) -> _TierPlan:
        """Gather and score one tier; split its candidates by how they are protected.

        ``wider_than``: the plan this one widens. Its pool joins the new one and the two are
        scored together, so every score the tier reports is on one scale; only candidates it
        did not hold are judged and ranked here (its own were offered already), and its pinned
        items are not read again. Every read happens before anything is returned: a failing
        read leaves nothing half-planned behind.
        """
        head: list[ContextItem] = []
        tail: list[ContextItem] = []
        if store.tier is Tier.TASK and wider_than is None:
            if self.config.head:
                head = store.query(None, limit=self.config.head, order_by="-timestamp")
            if self.config.tail:
                tail = self._tail(store)
        candidates, pinned, saturated = gather(
            store,
            query,
            policy,
            limits or self.config.limits,
            now,
            known=wider_than.pool if wider_than is not None else None,
            read_pinned=wider_than is None,
            query_vectors=query_vectors,
            background=search_pool() if self.config.overlap_searches else None,
        )
        everything = {
            **candidates.items,
            **{item.id: item for item in pinned + head + tail},
        }
        scores = dict(policy.scorer(attrs.evolve(candidates, items=everything)))
        judged = wider_than.pool if wider_than is not None else {}

        tier = store.tier
        omitted: list[Omission] = []
        live: dict[str, ContextItem] = {}
        for item_id, item in everything.items():  # one pass: a pool holds hundreds of items
            if item_id in judged:
                continue
            if item.expired(now):
                omitted.append(
                    Omission(item_id, tier, OmissionReason.EXPIRED, 0, scores.get(item_id))
                )
            else:
                live[item_id] = item
        placed: set[str] = set()

        def claim(items: list[ContextItem], reason: SelectionReason) -> list[Entry]:
            claimed = [
                Entry(i, tier, scores.get(i.id, 0.0), reason)
                for i in items
                if i.id in live and i.id not in placed
            ]
            placed.update(e.item.id for e in claimed)
            return claimed

        pinned_entries = claim(pinned, SelectionReason.PINNED)
        protected = claim(head, SelectionReason.HEAD) + claim(tail, SelectionReason.TAIL)
        ranked_reason = SelectionReason.RANKED
        rest = [
            Entry(item, tier, scores.get(item_id, 0.0), ranked_reason)
            for item_id, item in live.items()
            if item_id not in placed
        ]
        return _TierPlan(
            tier=tier,
            store=store,
            pinned=pinned_entries,
            protected=protected,
            ranked=self._threshold(rest, omitted),
            saturated=saturated,
            pool=everything,
            scores=scores,
            left_out=omitted,
        )

    def _tail(self, store: TierStore) -> list[ContextItem]:
        """The last ``tail`` items of the timeline, newest first.

        Backends break timestamp ties by ascending id, so a plain newest-first query keeps the
        *earliest* of items that share a timestamp (a frozen or coarse clock, a batch written
        at once). Ids are time-ordered: among the tied items, the greatest ids are the latest.
        """
        newest = store.query(None, limit=self.config.tail)
        if not newest:
            return []
        boundary = newest[-1].timestamp
        newer = sorted(
            (item for item in newest if item.timestamp > boundary),
            key=lambda item: (item.timestamp, item.id),
            reverse=True,
        )
        tied = store.query(
            {"timestamp": boundary}, limit=self.config.tail - len(newer), order_by="id"
        )
        return newer + tied

    def _threshold(self, entries: list[Entry], omitted: list[Omission]) -> list[Entry]:
        """Drop entries under ``min_score`` (recording why) and rank the rest, best first.

        Ties in score go to the older item, then the smaller id. Relevance scores rarely tie,
        and then sorting by score alone (a C-level key) gives that order already.
        """
        floor = self.config.min_score
        kept = entries
        if floor is not None:
            kept = [e for e in entries if e.score >= floor]
            omitted.extend(
                Omission(e.item.id, e.tier, OmissionReason.BELOW_THRESHOLD, 0, e.score)
                for e in entries
                if e.score < floor
            )
        if len({entry.score for entry in kept}) == len(kept):
            return sorted(kept, key=_by_score, reverse=True)
        return sorted(kept, key=lambda e: (-e.score, e.item.timestamp, e.item.id))

    def _pack(self, packer: Packer, plans: dict[Tier, _TierPlan]) -> None:
        left = packer.left
        by_prompt = [plans[tier] for tier in PROMPT_ORDER if tier in plans]
        by_spill = [plans[tier] for tier in self.config.spill_order if tier in plans]
        for plan in by_prompt:  # phase 0: pinned, against the whole budget
            packer.offer_all(plan.pinned, left, may_truncate=True)

        def room(tier: Tier) -> Callable[[], int]:
            return functools.partial(packer.room, tier)

        deferred: list[_TierPlan] = []
        for plan in by_spill:  # phase 1: each tier within its share
            packer.offer_all(plan.protected, room(plan.tier), may_truncate=True)
            if any(entry.item.id in packer.waiting for entry in plan.protected):
                # A HEAD/TAIL item is waiting: the middle must not take room that, with the
                # spill-over, would let it in. It gets its share after phase 2's protected turn.
                deferred.append(plan)
            else:
                packer.offer_all(plan.ranked, room(plan.tier), may_truncate=False)
        for plan in by_spill:  # phase 2: spill-over, protected items first
            packer.offer_all(plan.pinned + plan.protected, left, may_truncate=False)
        for plan in deferred:
            packer.offer_all(plan.ranked, room(plan.tier), may_truncate=False)
        for plan in by_spill:
            packer.offer_all(plan.ranked, left, may_truncate=False)

    def _widen(
        self,
        *,
        packer: Packer,
        plans: dict[Tier, _TierPlan],
        query: str,
        policy: Policy,
        now: datetime,
        query_vectors: QueryVectors,
        reads: FailOpen,
    ) -> None:
        """Stay work-conserving past the first pool: gather wider while budget is left.

        The first pool is bounded for speed; when its candidates are spent with budget to
        spare and a source was cut at its limit, the tier gathers again with four times the
        limit (``limits.widening_rounds`` times at most) and offers the newcomers. The wider
        pool is scored together with the first, and the package reports those scores for all
        of the tier's candidates: a score is comparable with every other score of its tier,
        whichever gather found the item.

        Room smaller than the pool's typical candidate does not count as spare: the pool's
        small items already had their turn at it, and a wider pool could only fill it with one
        of its lowest-ranked items, at several times the cost of the whole build.

        A tier whose wider gather fails keeps what its narrower ones gave, and is not widened
        again in this build.
        """
        limits = self.config.limits
        for _ in range(limits.widening_rounds):
            if packer.tokens_left() < limits.min_widening_room:
                return
            limits = attrs.evolve(limits, per_source=limits.per_source * 4)
            widened = False
            for tier in self.config.spill_order:
                plan = plans.get(tier)
                if plan is None or not plan.saturated or reads.failed(tier):
                    continue
                if packer.left() < packer.typical_cost(plan.ranked):
                    continue
                wider = reads.run(
                    (tier,),
                    "widen",
                    functools.partial(
                        self._plan,
                        plan.store,
                        query,
                        policy,
                        now,
                        limits=limits,
                        wider_than=plan,
                        query_vectors=query_vectors,
                    ),
                )
                if wider is None:
                    continue
                packer.offer_all(wider.ranked, packer.left, may_truncate=False)
                packer.rescore(wider.scores)
                plans[tier] = attrs.evolve(
                    wider,
                    pinned=plan.pinned,
                    protected=plan.protected,
                    ranked=plan.ranked + wider.ranked,
                    left_out=plan.left_out + wider.left_out,
                )
                widened = True
            if not widened:
                return

    def _packer(
        self, budget: int, allocation: dict[Tier, int], *, trust_cached_costs: bool
    ) -> Packer:
        return Packer(
            budget,
            allocation,
            self.config.layout,
            self.counter,
            self._costs,
            trust_cached_costs=trust_cached_costs,
            header_costs=self._header_costs,
            group_units=self._group_units,
        )

    def _repack(
        self, packed: Packer, plans: dict[Tier, _TierPlan], budget: int, allocation: dict[Tier, int]
    ) -> Packer:
        """The package packed again from the same candidates, every body counted (memoised)."""
        packer = self._packer(budget, allocation, trust_cached_costs=False)
        packer.rescore(packed.scores)
        self._pack(packer, plans)
        return packer

    def _fit_render(self, packer: Packer, budget: int) -> dict[Tier, int] | None:
        """For counters whose counts may not add up: make the render fit, and count it.

        With the default counter the packer's units are what the render costs, so there is
        nothing to check. Any other counter is asked for the whole render; while it is over
        the budget the lowest-scored ranked item is dropped. Returns each tier's part of the
        rendered count when it differs from what was charged (``None`` when it does not).
        """
        if packer.scale.exact:
            return None
        layout, count = self.config.layout, self.counter.count
        while True:
            lines = [Line(t.entry.item, t.entry.tier, t.body) for t in packer.taken]
            rendered = count(render_lines(lines, layout))
            if rendered <= budget or not packer.taken:
                break
            ranked = [t for t in packer.taken if t.entry.reason not in PROTECTED]
            victim = min(
                ranked or packer.taken, key=lambda t: (packer.score_of(t.entry), t.entry.item.id)
            )
            packer.drop(victim, OmissionReason.LOWER_SCORE)
        if rendered == packer.scale.tokens(packer.total):
            return None
        # A tier's part: the render up to the end of its section, less the render before it.
        parts = dict.fromkeys(Tier, 0)
        shown: list[Line] = []
        before = 0
        last = next(tier for tier in reversed(PROMPT_ORDER) if tier in {x.tier for x in lines})
        for tier in PROMPT_ORDER:
            mine = [line for line in lines if line.tier is tier]
            if not mine:
                continue
            shown += mine
            after = rendered if tier is last else count(render_lines(shown, layout))
            parts[tier], before = after - before, after
        return parts

    def _record_access(
        self,
        taken: list[Taken],
        stores: dict[Tier, TierStore],
        now: datetime,
        reads: FailOpen,
    ) -> None:
        """One touch() per distinct backend for everything chosen."""
        by_backend: dict[int, tuple[MemoryBackend, set[Tier], list[str]]] = {}
        for chosen in taken:
            tier = chosen.entry.tier
            backend = stores[tier].backend
            _, tiers, ids = by_backend.setdefault(id(backend), (backend, set(), []))
            tiers.add(tier)
            ids.append(chosen.entry.item.id)
        for backend, tiers, ids in by_backend.values():
            reads.run(
                [tier for tier in Tier if tier in tiers],
                "access",
                functools.partial(backend.touch, ids, now),
            )

    def _package(
        self,
        *,
        task: Task,
        request: ContextRequest,
        policy: Policy,
        packer: Packer,
        plans: dict[Tier, _TierPlan],
        allocation: dict[Tier, int],
        omissions: list[Omission],
        failures: list[TierFailure],
        counted: dict[Tier, int] | None,
    ) -> ContextPackage:
        selections, used = packer.package()
        if counted is not None:
            used = counted
        usage = tuple(
            TierUsage(
                tier,
                allocation[tier],
                used[tier],
                len(plans[tier].pool) if tier in plans else 0,
                sum(1 for s in selections if s.tier is tier),
            )
            for tier in PROMPT_ORDER
        )
        candidate_tokens = sum(s.tokens for s in selections) + sum(o.tokens for o in omissions)
        return ContextPackage(
            id=new_id(),
            task_id=task.id,
            budget_tokens=request.budget_tokens,
            policy=policy.name,
            layout=self.config.layout,
            selections=tuple(selections),
            omissions=tuple(omissions),
            usage=usage,
            failures=tuple(failures),
            candidate_tokens=candidate_tokens,
        )


_by_score = operator.attrgetter("score")


def _task_key(task: Task | str) -> str:
    """The namespace of a task's memory, as its store builds it (defaults included)."""
    if isinstance(task, Task):
        return task_namespace(task.id, task.project_id, task.user_id)
    return task_namespace(task)


def _count_by_reason(omissions: list[Omission]) -> dict[str, int]:
    counts = Counter(omission.reason for omission in omissions)
    return {reason.value: count for reason, count in counts.items()}
