"""The ContextAssembler: what a pipeline executor calls once per task step.

``build_context(task, request)`` pages items in from the task's memory, its project's memory
and its user's global memory under ``request.budget_tokens``, in five steps, each a module of
its own:

1. **plan the budget** (:mod:`allocation`): the split between tiers, 40/40/20 by default, per
   request or per agent profile;
2. **gather** (:mod:`plans`, :mod:`candidates`): each tier a bounded pool of candidates from
   its indexes, and the task tier the HEAD (first items: the instructions) and TAIL (latest
   steps) of its timeline;
3. **score** (:mod:`plans`, :mod:`policies`): the request's policy ranks each pool;
4. **pack** (:mod:`allocation`, :mod:`packer`, :mod:`widening`): pinned items first, then
   each tier within its share, then whatever is left flows to the tiers in spill order
   (work-conserving, gathering wider while budget is left); HEAD and TAIL items come before
   any item from the middle;
5. **explain** (:mod:`explain`): the package names every candidate left out and why;
   with ``AssemblerConfig(summary=...)``, what was left out for lack of room is summarized
   in a share of the budget kept for it (:mod:`summary`).

The items ranked in get their access recorded in one write per backend: pinned, HEAD and
TAIL items are in every package by rule, and counting them would make the access counts that
aging and consolidation read say nothing. If a tier's backend
fails, in whichever phase, the package is built from what the healthy reads gave and names
the failure (``strict=True`` raises instead): see ``_failopen``.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

import attrs

from agent_engine._log import get_logger
from agent_engine.assembler._build import Build
from agent_engine.assembler._costcache import CostCaches
from agent_engine.assembler._failopen import FailOpen
from agent_engine.assembler._fit import fit_render
from agent_engine.assembler._observe import NO_PHASES, Phases, observe_build, report_build
from agent_engine.assembler._summarize import reserve, summarize
from agent_engine.assembler.allocation import fill, plan_budget
from agent_engine.assembler.config import AssemblerConfig
from agent_engine.assembler.conflicts import CONFLICTS_READ
from agent_engine.assembler.explain import explain
from agent_engine.assembler.package import ContextPackage, SelectionReason
from agent_engine.assembler.packer import Packer, Taken
from agent_engine.assembler.plans import TierPlan, plan_tiers
from agent_engine.assembler.policies import DEFAULT_POLICIES, Policy, resolve_policy
from agent_engine.assembler.query import DEFAULT_QUERY_BUILDER, QueryBuilder, checked_query
from agent_engine.assembler.slo import SLOGuard, SLOStatus
from agent_engine.assembler.widening import widen
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.conflicts import Conflict
from agent_engine.models import ContextItem, ContextRequest, Task, Tier, utcnow
from agent_engine.retrieval.aliases import NO_ALIASES, Aliases
from agent_engine.tiers.base import TierStore, by_backend, record_access
from agent_engine.tiers.consolidation import TaskEnd
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.session import (
    SessionEnd,
    SessionMemoryStore,
    SessionSummarizer,
    extractive_digest,
)
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.task import TaskMemoryStore
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["AssemblerConfig", "ContextAssembler"]

_TIER_SETTINGS = frozenset(
    {"task_backend", "project_backend", "global_backend", "max_project_items", "confirm"}
)
"""What ``ContextAssembler`` once took itself and :class:`MemoryStores` takes now."""


@attrs.frozen
class _Packed:
    """The pack step's outcome: the packer, and the render's count per tier when it differs."""

    packer: Packer
    plans: dict[Tier, TierPlan]
    counted: dict[Tier, int] | None
    conflicts: Sequence[Conflict] = ()
    """The open conflicts read for the plans (a repack marks them without reading again)."""


class ContextAssembler:
    """Assembles token-budgeted contexts from task, project and global memory.

    ``stores`` opens the tiers' stores (:class:`~agent_engine.tiers.stores.MemoryStores`);
    a backend instead means every tier on it, with the stores' default settings. ``clock``
    is the time builds judge expiry and recency by (by default the stores' clock).
    ``query_builder`` makes what each build ranks against from the request and the task's
    last items (:mod:`.query`: by default the request, after the last turns when it is
    vague; ``None``: the request as given).
    """

    def __init__(
        self,
        stores: MemoryStores | MemoryBackend | None = None,
        *,
        config: AssemblerConfig | None = None,
        counter: TokenCounter = DEFAULT_COUNTER,
        policies: Mapping[str, Policy] = DEFAULT_POLICIES,
        clock: Callable[[], datetime] | None = None,
        strict: bool = False,
        query_builder: QueryBuilder | None = DEFAULT_QUERY_BUILDER,
        **tier_settings: object,
    ) -> None:
        if query_builder is not None and not isinstance(query_builder, QueryBuilder):
            raise ValidationError(
                "query_builder must have history_turns and build_query(request, history), "
                f"got {type(query_builder).__name__}",
                field="query_builder",
            )
        self.query_builder = query_builder
        self.stores = _stores(stores, clock, tier_settings)
        self.config = config or AssemblerConfig()
        self.counter = counter
        self.policies = dict(policies)
        self.clock = clock or self.stores.clock
        self.strict = strict
        self._caches = CostCaches()
        self._slo = SLOGuard(self.config.slo) if self.config.slo is not None else None

    @property
    def slo(self) -> SLOStatus | None:
        """The SLO guard's state (``None``: the config has no guard), for metrics."""
        return self._slo.status() if self._slo is not None else None

    @property
    def backends(self) -> Mapping[Tier, MemoryBackend]:
        """The backend each tier lives on."""
        return self.stores.backends

    def task_store(self, task: Task | str) -> TaskMemoryStore:
        """The memory of a task (see :meth:`MemoryStores.task_store`)."""
        return self.stores.task_store(task)

    def project_store(self, project_id: str) -> ProjectMemoryStore:
        """The memory of a project (see :meth:`MemoryStores.project_store`)."""
        return self.stores.project_store(project_id)

    def global_store(self, user_id: str = "default") -> GlobalMemoryStore:
        """A user's global memory (see :meth:`MemoryStores.global_store`)."""
        return self.stores.global_store(user_id)

    def session_store(
        self, session_id: str, project_id: str = "default", user_id: str = "default"
    ) -> SessionMemoryStore:
        """The memory of a session (see :meth:`MemoryStores.session_store`)."""
        return self.stores.session_store(session_id, project_id, user_id)

    def finish_task(self, task: Task | str) -> TaskEnd:
        """Clear a finished task's memory and report it (see :meth:`MemoryStores.finish_task`)."""
        return self.stores.finish_task(task)

    def finish_session(
        self,
        session_id: str,
        project_id: str = "default",
        user_id: str = "default",
        *,
        summarizer: SessionSummarizer | None = extractive_digest,
    ) -> SessionEnd:
        """Finalise a session and report it (see :meth:`MemoryStores.finish_session`)."""
        return self.stores.finish_session(session_id, project_id, user_id, summarizer=summarizer)

    def cleanup_task(self, task: Task | str) -> int:
        """Clear a finished task's memory and forget its store; return items removed.

        :meth:`finish_task` says what its promotion candidates were, too.
        """
        return self.stores.cleanup_task(task)

    # ------------------------------------------------------------------ assembly

    def build_context(
        self, task: Task, request: ContextRequest, *, strict: bool | None = None
    ) -> ContextPackage:
        """Assemble the context for one step of ``task`` (see the module docstring).

        The build reports as a span with its stores' telemetry (``docs/telemetry.md``).
        """
        with observe_build(self.stores.telemetry) as span:
            phases = Phases() if span is not None and span.recording else NO_PHASES
            package = self._build(task, request, self.strict if strict is None else strict, phases)
            if span is not None:
                report_build(span, task, package, phases)
            return package

    def _build(
        self, task: Task, request: ContextRequest, strict: bool, phases: Phases
    ) -> ContextPackage:
        with contextlib.ExitStack() as reading:
            with phases.measure("plan"):
                build = self._begin(task, request, strict, phases)
            for store in build.stores.values():
                # Each store's lineage (is it a fork?) is looked up once for the whole build.
                reading.enter_context(store.reading())
            packed, package = self._summarized(build, plan_tiers(build))
        if self.config.track_access:
            with phases.measure("access"):
                self._record_access(build, packed.packer.taken)
            # The access write comes after the package is explained (a summary needs its
            # omissions): the failures it adds join the package's.
            package = attrs.evolve(package, failures=tuple(build.reads.failures))
        duration = time.perf_counter() - build.started
        if self._slo is not None:
            self._slo.record(duration)
        build.log.info(
            "context_built",
            budget=package.budget_tokens,
            used=package.tokens_used,
            per_tier={u.tier.value: [u.used, u.allocated, u.selected] for u in package.usage},
            omitted=dict(Counter(omission.reason.value for omission in package.omissions)),
            failures=[f.tier.value for f in package.failures],
            degraded=package.degraded,
            summary=None if package.summary is None else package.summary.tokens,
            duration_ms=round(duration * 1000, 2),
        )
        return package

    def _begin(self, task: Task, request: ContextRequest, strict: bool, phases: Phases) -> Build:
        """The build's state, its budget planned (step 1)."""
        for name, value, kind in (("task", task, Task), ("request", request, ContextRequest)):
            if not isinstance(value, kind):
                raise ValidationError(
                    f"{name} must be a {kind.__name__}, got {type(value).__name__}",
                    field=name,
                    value=value,
                )
        policy = resolve_policy(request.policy, self.policies)
        config = self.config
        degraded = self._slo is not None and self._slo.degraded
        if degraded and config.slo is not None:
            config = attrs.evolve(config, limits=config.slo.degraded_limits)
        stores = self.stores.for_task(task)
        budget = plan_budget(
            request,
            shares=config.shares,
            profiles=config.profiles,
            spill_order=config.spill_order,
            stable_prefix=config.stable_prefix,
            session=Tier.SESSION in stores,
        )
        log = get_logger(task=task.id, project=task.project_id, policy=policy.name)
        reads = FailOpen(strict=strict, log=log)
        # The query builder reads the task's last steps whichever tiers are on.
        query = self._query(request.query or task.description, stores[Tier.TASK], reads)
        return Build(
            task=task,
            request=request,
            config=config,
            policy=policy,
            budget=budget,
            stores={tier: store for tier, store in stores.items() if tier in budget.tiers},
            now=self.clock(),
            reads=reads,
            log=log,
            query=query,
            aliases=_read_aliases(stores, reads) if query and budget.tiers else NO_ALIASES,
            degraded=degraded,
            phases=phases,
        )

    def _query(self, request: str, timeline: TierStore, reads: FailOpen) -> str:
        """What the build ranks against: the query builder's, from the task's last items."""
        builder = self.query_builder
        if builder is None:
            return request

        def history(count: int) -> list[ContextItem]:
            newest = reads.run((Tier.TASK,), "history", lambda: timeline.query(None, limit=count))
            return list(reversed(newest or []))

        try:
            return checked_query(builder, request, history)
        except Exception as error:  # a builder of the user's: the build goes on without it
            if reads.strict:
                raise
            get_logger(component="query").warning(
                "query_builder_failed", builder=type(builder).__name__, error=str(error)
            )
            return request

    def _summarized(
        self, build: Build, plans: dict[Tier, TierPlan]
    ) -> tuple[_Packed, ContextPackage]:
        """Pack and explain (steps 4 and 5), with a summary of what was left out when configured.

        With summaries on, the items are packed into the budget less the summary's share;
        the candidates left out for lack of room are summarized into the room the items
        leave (:mod:`.summary`). When nothing was left out for lack of room, or no summarizer
        gave a usable text, the share goes back to the items: they are packed again into the
        whole budget (the plans as widened and scored, their conflicts as read: nothing is
        read twice).
        """
        config = self.config.summary
        kept = reserve(config, build.budget.tokens, self.config.layout, self.counter)
        if config is None or not kept:
            return self._pack_and_explain(build, plans)
        tokens = build.budget.tokens - kept
        squeezed = attrs.evolve(build, budget=build.budget.resized(tokens))
        packed, package = self._pack_and_explain(squeezed, plans)
        with build.phases.measure("render"):
            summary = summarize(
                package,
                packed.plans,
                config=config,
                budget=build.budget.tokens,
                query=build.query,
                counter=self.counter,
                strict=build.reads.strict,
                log=build.log,
            )
        if summary is not None and summary.text:
            return packed, attrs.evolve(package, budget_tokens=build.budget.tokens, summary=summary)
        packed, package = self._pack_and_explain(build, packed.plans, again=packed)
        return packed, attrs.evolve(package, summary=summary)

    def _pack_and_explain(
        self, build: Build, plans: dict[Tier, TierPlan], *, again: _Packed | None = None
    ) -> tuple[_Packed, ContextPackage]:
        """Steps 4 and 5 into ``build``'s budget, each timed as its phase.

        ``again``: an earlier packing to pack again (see :meth:`_pack`).
        """
        with build.phases.measure("pack"):
            packed = self._pack(build, plans, again=again)
        with build.phases.measure("render"):
            return packed, explain(build, packed.packer, packed.plans, packed.counted)

    def _pack(
        self, build: Build, plans: dict[Tier, TierPlan], *, again: _Packed | None = None
    ) -> _Packed:
        """Fill the budget from the plans, gathering wider while room is left (step 4).

        The open conflicts of the planned tiers are read first: a pair both taken is marked.
        ``again``: an earlier packing of these plans (widened, scored, their conflicts read)
        to pack again into ``build``'s budget, without reading anything twice.
        """
        if again is not None:
            return self._repack(build, again, trust_cached_costs=True)
        with build.phases.measure("gather"):
            conflicts = _read_conflicts(build, plans)
        packer = self._packer(build, trust_cached_costs=True, conflicts=conflicts)
        if build.budget.stable_prefix:
            # Each tier widens as its spill-over turn ends, before a later tier's turn.
            widened = plans

            def widen_tier(tier: Tier) -> None:
                nonlocal widened
                widened = widen(build, packer, widened, (tier,))

            fill(packer, plans, build.budget, then=widen_tier)
            plans = widened
        else:
            fill(packer, plans, build.budget)
            plans = widen(build, packer, plans)
        packed = _Packed(packer, plans, None, conflicts)
        if not packer.cached_costs_hold():
            # A cached token_cost is not its body's count: every figure charged with it is
            # wrong, and so may be what it let in. Pack again, counting every body.
            return self._repack(build, packed, trust_cached_costs=False)
        return self._fitted(build, packed)

    def _repack(self, build: Build, packed: _Packed, *, trust_cached_costs: bool) -> _Packed:
        """``packed``'s plans packed again into ``build``'s budget, with the scores they had."""
        packer = self._packer(
            build, trust_cached_costs=trust_cached_costs, conflicts=packed.conflicts
        )
        packer.rescore(packed.packer.scores)
        fill(packer, packed.plans, build.budget)
        if trust_cached_costs and not packer.cached_costs_hold():
            return self._repack(build, packed, trust_cached_costs=False)
        return self._fitted(build, attrs.evolve(packed, packer=packer))

    def _fitted(self, build: Build, packed: _Packed) -> _Packed:
        """``packed`` with the render fitted to the budget (the counts per tier it found)."""
        with build.phases.measure("render"):
            counted = fit_render(
                packed.packer, build.budget.tokens, self.config.layout, self.counter
            )
        return attrs.evolve(packed, counted=counted)

    def _packer(
        self, build: Build, *, trust_cached_costs: bool, conflicts: Sequence[Conflict] = ()
    ) -> Packer:
        return Packer(
            build.budget.tokens,
            dict(build.budget.allocation),
            self.config.layout,
            self.counter,
            self._caches,
            trust_cached_costs=trust_cached_costs,
            conflicts=conflicts,
            lenders=build.budget.lenders,
            max_items=build.request.limit,
        )

    def _record_access(self, build: Build, taken: list[Taken]) -> None:
        """One write per distinct backend for everything ranked in (chosen on its merits)."""
        chosen: dict[Tier, list[str]] = {}
        for entry in (t.entry for t in taken):
            if entry.reason is SelectionReason.RANKED:
                chosen.setdefault(entry.tier, []).append(entry.item.id)
        for group in by_backend(build.stores[tier] for tier in Tier if tier in chosen):
            build.reads.run(
                [store.tier for store in group],
                "access",
                functools.partial(record_access, {s: chosen[s.tier] for s in group}, build.now),
            )


def _read_conflicts(build: Build, tiers: Iterable[Tier]) -> list[Conflict]:
    """The open conflicts of ``tiers``' stores, read once per tier through ``build.reads``."""
    found: list[Conflict] = []
    for tier in tiers:
        read = functools.partial(build.stores[tier].conflicts, limit=CONFLICTS_READ)
        found.extend(build.reads.run((tier,), "conflicts", read) or ())
    return found


def _stores(
    stores: MemoryStores | MemoryBackend | None,
    clock: Callable[[], datetime] | None,
    tier_settings: Mapping[str, object],
) -> MemoryStores:
    """The stores an assembler is given, or the ones its (deprecated) tier settings describe."""
    unknown = set(tier_settings) - _TIER_SETTINGS
    if unknown:
        raise TypeError(f"ContextAssembler() got unexpected keyword arguments: {sorted(unknown)}")
    if isinstance(stores, MemoryStores):
        if tier_settings:
            raise ValidationError(
                f"{', '.join(sorted(tier_settings))}: tier settings belong to the MemoryStores "
                "given, not to the assembler",
                field=min(tier_settings),
                value=tier_settings,
            )
        return stores
    if tier_settings:
        warnings.warn(
            f"ContextAssembler({', '.join(f'{name}=' for name in sorted(tier_settings))}...) is "
            "deprecated: pass ContextAssembler(MemoryStores(backend, ...)) instead",
            DeprecationWarning,
            stacklevel=3,
        )
    return MemoryStores(stores, clock=clock or utcnow, **tier_settings)  # type: ignore[arg-type]


def _read_aliases(stores: Mapping[Tier, TierStore], reads: FailOpen) -> Aliases:
    """The project's aliases, read once for the build: every tier's gather uses them.

    A project names its people and terms for all of its memory: a task's steps and the
    user's global memory speak of them too.
    """
    project = stores.get(Tier.PROJECT)
    if not isinstance(project, ProjectMemoryStore):
        return NO_ALIASES
    found = reads.run((Tier.PROJECT,), "aliases", project.aliases)
    return found if found is not None else NO_ALIASES
