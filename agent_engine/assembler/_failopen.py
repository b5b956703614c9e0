"""The one boundary every backend read of a build goes through: degrade, don't fail.

A build reads each tier's backend in three phases: the first gather (HEAD and TAIL, the
pinned items, every candidate source), the wider gathers that keep a spent pool
work-conserving, and the access write for what was chosen. A failure in any of them costs the
failing tier what that phase would have given, never the package: the build records a
:class:`TierFailure` and goes on with what it has (``strict`` raises instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from agent_engine.assembler.package import FailurePhase, TierFailure
from agent_engine.errors import ValidationError
from agent_engine.models import Tier

__all__ = ["FailOpen"]

T = TypeVar("T")

_ITEM_READS: frozenset[FailurePhase] = frozenset({"history", "gather", "widen"})


class FailOpen:
    """Runs a build's reads; collects the failures of those that raise, unless ``strict``.

    A :class:`ValidationError` always propagates: it is the request's fault, not the tier's.
    """

    def __init__(self, *, strict: bool, log: Any) -> None:
        self.strict = strict
        self.failures: list[TierFailure] = []
        self._log = log

    def run(self, tiers: Iterable[Tier], phase: FailurePhase, read: Callable[[], T]) -> T | None:
        """``read()``, or ``None`` when it raised (recorded as a failure of each of ``tiers``)."""
        try:
            return read()
        except ValidationError:
            raise
        except Exception as exc:
            if self.strict:
                raise
            error = f"{type(exc).__name__}: {exc}"
            for tier in tiers:
                self.failures.append(TierFailure(tier, error, phase))
                self._log.warning(
                    "tier_failed", tier=tier.value, phase=phase, error=str(exc), exc_info=True
                )
            return None

    def failed(self, tier: Tier) -> bool:
        """Whether reading ``tier``'s items has failed in this build (what widening asks).

        Only the phases that read items count: a project's aliases, a tier's conflicts or an
        access write that failed say nothing of whether a wider gather would work.
        """
        return any(
            failure.tier is tier and failure.phase in _ITEM_READS for failure in self.failures
        )
