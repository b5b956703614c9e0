"""How an assembler assembles: everything a request does not say itself."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from agent_engine.assembler.allocation import DEFAULT_SPILL_ORDER
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.assembler.diversity import Diversity
from agent_engine.assembler.render import Layout
from agent_engine.assembler.rerank import RerankConfig
from agent_engine.assembler.slo import SLOPolicy
from agent_engine.assembler.summary import SummaryConfig
from agent_engine.errors import ValidationError
from agent_engine.models import Tier, TierShares

__all__ = ["AssemblerConfig"]


def _spill_order(value: object) -> object:
    """An order that leaves the session out spills to it right after the task.

    Orders were written before sessions existed: the session keeps its place between the
    task and the project in them. Anything else is left for the check to refuse.
    """
    if not isinstance(value, tuple | list) or Tier.SESSION in value or Tier.TASK not in value:
        return value
    order = list(value)
    order.insert(order.index(Tier.TASK) + 1, Tier.SESSION)
    return tuple(order)


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
    Turn it off to keep every read on the calling thread. ``slo``: an SLO guard
    (:mod:`.slo`): past its p95, builds gather fewer candidates until latency recovers
    (``None``, the default: no guard). ``stable_prefix``: for prompt caching, each section
    depends only on itself and the sections rendered before it (:mod:`.allocation`), so when
    only task memory changes the global and project sections render byte-identical; room the
    task has not used yet stays empty instead of going to the project tier. ``summary``:
    summarize what a build leaves out for lack of room, in a share of its budget
    (:mod:`.summary`; ``None``, the default: no summary). ``rerank``: a reranker that reorders
    each tier's best candidates after fusion (:mod:`.rerank`; ``None``, the default: the
    fused order). ``diversity``: caps per session and per source on each tier's ranked
    candidates, past which a session's (or source's) others wait until the rest were offered
    (:mod:`.diversity`; ``None``, the default: no caps).
    """

    shares: TierShares = attrs.field(factory=TierShares)
    head: int = 2
    tail: int = 4
    layout: Layout = attrs.field(factory=Layout)
    limits: GatherLimits = attrs.field(factory=GatherLimits)
    spill_order: tuple[Tier, ...] = attrs.field(default=DEFAULT_SPILL_ORDER, converter=_spill_order)
    min_score: float | None = None
    track_access: bool = True
    profiles: Mapping[str, TierShares] = attrs.field(factory=dict)
    overlap_searches: bool = True
    slo: SLOPolicy | None = None
    stable_prefix: bool = False
    summary: SummaryConfig | None = None
    rerank: RerankConfig | None = None
    diversity: Diversity | None = None

    def __attrs_post_init__(self) -> None:
        for name, value in (("head", self.head), ("tail", self.tail)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(
                    f"{name} must be a non-negative integer", field=name, value=value
                )
        if self.summary is not None and not isinstance(self.summary, SummaryConfig):
            raise ValidationError(
                f"summary must be a SummaryConfig or None, got {type(self.summary).__name__}",
                field="summary",
                value=self.summary,
            )
        if self.diversity is not None and not isinstance(self.diversity, Diversity):
            raise ValidationError(
                f"diversity must be a Diversity or None, got {type(self.diversity).__name__}",
                field="diversity",
                value=self.diversity,
            )
        if self.rerank is not None and not isinstance(self.rerank, RerankConfig):
            raise ValidationError(
                f"rerank must be a RerankConfig or None, got {type(self.rerank).__name__}",
                field="rerank",
                value=self.rerank,
            )
        if sorted(self.spill_order) != sorted(Tier):
            raise ValidationError(
                "spill_order must name each tier once", field="spill_order", value=self.spill_order
            )
