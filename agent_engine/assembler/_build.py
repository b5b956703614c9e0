"""One build's state: what every step of ``build_context`` reads, made once per call.

A build's query, policy, clock reading, budget, stores and failure record belong together;
carrying them in one value keeps each step's signature to what it adds, and keeps anything
of one build from leaking into the next (the assembler itself holds only settings and
caches shared across builds).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from agent_engine.assembler._failopen import FailOpen
from agent_engine.assembler._observe import NO_PHASES, Phases
from agent_engine.assembler.allocation import Budget
from agent_engine.assembler.candidates import QueryVectors
from agent_engine.assembler.config import AssemblerConfig
from agent_engine.assembler.policies import Policy
from agent_engine.models import ContextRequest, Task, Tier
from agent_engine.retrieval.aliases import NO_ALIASES, Aliases
from agent_engine.tiers.base import TierStore

__all__ = ["Build"]


@attrs.frozen
class Build:
    """The state of one ``build_context`` call.

    ``query``: what the candidates are ranked against: the request's query (else the task's
    description), as the assembler's query builder made it.
    ``reads``: every backend read goes through it, and it records the tiers that failed.
    ``query_vectors``: the query's embeddings so far, shared by the tiers that embed alike.
    """

    task: Task
    request: ContextRequest
    config: AssemblerConfig
    policy: Policy
    budget: Budget
    stores: Mapping[Tier, TierStore]
    now: datetime
    reads: FailOpen
    log: Any
    query: str
    query_vectors: QueryVectors = attrs.field(factory=dict)
    aliases: Aliases = NO_ALIASES
    """The project's aliases, read once for the build (:mod:`agent_engine.retrieval.aliases`)."""
    degraded: bool = False
    """Whether the SLO guard made this build gather less (:mod:`.slo`)."""
    started: float = attrs.field(factory=time.perf_counter)
    phases: Phases = NO_PHASES
    """Where the steps charge their time, when the build's span records (:mod:`._observe`)."""
