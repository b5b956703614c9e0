"""The SLO guard: builds that run slow make the next ones cheaper until latency recovers.

An executor calls ``build_context`` once per step; when a store slows down (a busy database,
a cold cache, a large scope), every step waits on it. Seed 001 section 17: keep a rolling
window of build latencies; once its p95 passes a threshold, degrade (a smaller candidate
pool: each source brings fewer candidates, and no tier gathers a second, wider time), and go
back to normal when the p95 falls under a lower threshold. The two thresholds keep it from
flapping; too few samples never degrade. A degraded build says so
(:attr:`~agent_engine.assembler.package.ContextPackage.degraded`), each change of state is
logged (``slo_degraded``, ``slo_recovered``), and :meth:`SLOGuard.status` is there for
metrics.

Off by default (``AssemblerConfig(slo=SLOPolicy())`` turns it on): a degraded build chooses
from fewer candidates, which an executor should opt into knowingly.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Any

import attrs

from agent_engine._log import get_logger
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.errors import ValidationError

__all__ = ["SLOGuard", "SLOPolicy", "SLOStatus"]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    del instance
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValidationError(
            f"{attribute.name} must be positive", field=attribute.name, value=value
        )


@attrs.frozen
class SLOPolicy:
    """When builds count as slow, when as recovered, and what a degraded build does.

    ``window``: how many of the latest builds the p95 is taken over. ``degrade_above_ms``:
    the p95 past which builds degrade; ``recover_below_ms``: the p95 under which they stop
    (at most ``degrade_above_ms``). ``min_samples``: the fewest builds a p95 is trusted on.
    ``degraded_limits``: the gathering of a degraded build (by default a quarter of the
    candidates per source and no widening).
    """

    window: int = attrs.field(default=100, validator=_positive)
    degrade_above_ms: float = attrs.field(default=300.0, validator=_positive)
    recover_below_ms: float = attrs.field(default=200.0, validator=_positive)
    min_samples: int = attrs.field(default=5, validator=_positive)
    degraded_limits: GatherLimits = attrs.field(
        factory=lambda: GatherLimits(per_source=25, widening_rounds=0)
    )

    def __attrs_post_init__(self) -> None:
        if self.recover_below_ms > self.degrade_above_ms:
            raise ValidationError(
                "recover_below_ms must not exceed degrade_above_ms",
                field="recover_below_ms",
                value=self.recover_below_ms,
            )
        if self.min_samples > self.window:
            raise ValidationError(
                "min_samples must not exceed window", field="min_samples", value=self.min_samples
            )


@attrs.frozen
class SLOStatus:
    """The guard's state now.

    The window's p95 (``None`` under ``min_samples``), its size, whether builds are
    degraded, and how many times they started being so.
    """

    p95_ms: float | None
    samples: int
    degraded: bool
    degradations: int


class SLOGuard:
    """The rolling window of one assembler's build latencies, and the state it decides.

    Thread-safe: builds on several threads record into one window.
    """

    def __init__(self, policy: SLOPolicy) -> None:
        self.policy = policy
        self._latencies: deque[float] = deque(maxlen=policy.window)
        self._degraded = False
        self._degradations = 0
        self._lock = threading.Lock()

    @property
    def degraded(self) -> bool:
        """Whether the next build should run degraded."""
        return self._degraded

    def record(self, seconds: float) -> None:
        """Take in one build's latency and move between normal and degraded as the p95 says."""
        with self._lock:
            self._latencies.append(seconds * 1000.0)
            p95 = self._p95()
            if p95 is None:
                return
            policy = self.policy
            if not self._degraded and p95 > policy.degrade_above_ms:
                self._degraded = True
                self._degradations += 1
                # The logger is made now: the application may have set up logging since.
                get_logger(component="slo_guard").warning(
                    "slo_degraded", p95_ms=round(p95, 2), limit=policy.degrade_above_ms
                )
            elif self._degraded and p95 < policy.recover_below_ms:
                self._degraded = False
                get_logger(component="slo_guard").info(
                    "slo_recovered", p95_ms=round(p95, 2), limit=policy.recover_below_ms
                )

    def status(self) -> SLOStatus:
        """The state now (see :class:`SLOStatus`)."""
        with self._lock:
            return SLOStatus(self._p95(), len(self._latencies), self._degraded, self._degradations)

    def _p95(self) -> float | None:
        if len(self._latencies) < self.policy.min_samples:
            return None
        ordered = sorted(self._latencies)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
