"""A build's telemetry: its span, the time each of its phases took, and what its package says.

A build reports as one ``build_context`` span (``docs/telemetry.md``) whose children are the
tier stores' searches it ran. Its attributes say what the package says without its text (the
budget, each tier's allocation and use, how much was selected and omitted, whether it was
degraded, which tiers failed) and how long each phase took; its metrics, the build's
duration, its share of the budget used and each tier's tokens and candidates.

The phases interleave (each tier is gathered then scored, a wider gather runs in the middle
of packing), so :class:`Phases` charges each stretch of time to the innermost phase running:
the phases' times are each their own and add up to at most the build's. They are timed only
when the span records; otherwise a build measures nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal

from agent_engine._telemetry import AttributeValue, Telemetry, names, operation
from agent_engine.assembler.package import ContextPackage
from agent_engine.models import Task

if TYPE_CHECKING:
    from agent_engine._telemetry.otel import Operation

__all__ = ["NO_PHASES", "PHASES", "Phase", "Phases", "observe_build", "report_build"]

Phase = Literal["plan", "gather", "score", "pack", "render", "access"]
"""A phase of a build: planning the budget and the query (``plan``), reading candidates
(``gather``: a tier's pool, a wider pool, the open conflicts), ranking them (``score``), the
fill (``pack``), the render check and the package (``render``), the access write
(``access``)."""

PHASES: Final[tuple[Phase, ...]] = ("plan", "gather", "score", "pack", "render", "access")

_NOTHING: Final = nullcontext()


class Phases:
    """The seconds each phase of one build took, each phase's own; used by the build's thread.

    ``Phases(on=False)`` (:data:`NO_PHASES`) measures nothing. ``clock``: seconds, from any
    start (tests pass one of their own).
    """

    __slots__ = ("_clock", "_on", "_running", "_since", "seconds")

    def __init__(self, *, on: bool = True, clock: Callable[[], float] = time.perf_counter) -> None:
        self._on = on
        self._clock = clock
        self._running: list[Phase] = []
        self._since = 0.0
        self.seconds: dict[Phase, float] = {}

    def measure(self, phase: Phase) -> AbstractContextManager[None]:
        """Charge the time the ``with`` block takes to ``phase`` (less its nested phases')."""
        return _Stretch(self, phase) if self._on else _NOTHING

    def _switch(self, entering: Phase | None) -> None:
        """Charge the time since the last switch to the phase running, then run ``entering``.

        ``None``: back to the phase it interrupted.
        """
        now = self._clock()
        if self._running:
            running = self._running[-1]
            self.seconds[running] = self.seconds.get(running, 0.0) + now - self._since
        if entering is None:
            self._running.pop()
        else:
            self._running.append(entering)
        self._since = now


NO_PHASES: Final = Phases(on=False)
"""What a build whose span does not record times its phases with: nothing."""


class _Stretch(AbstractContextManager[None]):
    __slots__ = ("_phase", "_phases")

    def __init__(self, phases: Phases, phase: Phase) -> None:
        self._phases = phases
        self._phase = phase

    def __enter__(self) -> None:
        self._phases._switch(self._phase)  # noqa: SLF001 - the timer's own context

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._phases._switch(None)  # noqa: SLF001


def observe_build(telemetry: Telemetry | None) -> AbstractContextManager[Operation | None]:
    """The span of one build (``None`` in the block: nowhere to report)."""
    return operation(telemetry, names.BUILD_SPAN, {names.METHOD: "build_context"}, kind="build")


def report_build(span: Operation, task: Task, package: ContextPackage, phases: Phases) -> None:
    """Put what ``package`` says, and the phases' times, on the span; record the metrics.

    A fixed number of attributes and measurements, whatever the package holds; only with
    text allowed are its query and selections (their text as rendered) recorded too.
    """
    policy: dict[str, AttributeValue] = {"agent_engine.context.policy": package.policy}
    kept: dict[str, AttributeValue] = {**policy, "agent_engine.context.degraded": package.degraded}
    span.metric_attributes.update(kept)
    reporter = span.reporter
    used = package.tokens_used
    reporter.budget_utilization.record(used / package.budget_tokens, policy)
    for usage in package.usage:
        tier = {names.TIER: usage.tier.value}
        reporter.token_usage.record(usage.used, tier)
        reporter.items.add(usage.selected, {**tier, "agent_engine.context.outcome": "selected"})
        omitted = max(usage.candidates - usage.selected, 0)
        reporter.items.add(omitted, {**tier, "agent_engine.context.outcome": "omitted"})
    if not span.recording:
        return
    attributes: dict[str, AttributeValue] = {
        **kept,
        "agent_engine.task.id": task.id,
        "agent_engine.project.id": task.project_id,
        "agent_engine.context.budget_tokens": package.budget_tokens,
        "agent_engine.context.used_tokens": used,
        "agent_engine.context.selected": len(package.selections),
        "agent_engine.context.omitted": len(package.omissions),
    }
    if package.failures:
        attributes["agent_engine.context.failed_tiers"] = sorted(
            {failure.tier.value for failure in package.failures}
        )
    for usage in package.usage:
        prefix = f"agent_engine.context.{usage.tier.value}"
        attributes[f"{prefix}.allocated_tokens"] = usage.allocated
        attributes[f"{prefix}.used_tokens"] = usage.used
        attributes[f"{prefix}.candidates"] = usage.candidates
        attributes[f"{prefix}.selected"] = usage.selected
    for phase in PHASES:
        attributes[f"agent_engine.context.phase.{phase}.duration"] = phases.seconds.get(phase, 0.0)
    span.set(attributes)
    span.set_query(package.query)
    if span.captures_text:
        span.set_records(
            {
                "id": selection.item.id,
                "content": selection.body,
                "score": selection.score,
                "metadata": {"tier": selection.tier.value, "reason": selection.reason.value},
            }
            for selection in package.selections
        )
