"""The confirmation step: quarantined candidates are confirmed by use, or penalised.

Seed 001 section 9: what auto-promotion brings into a store starts as a *candidate*
(:attr:`~agent_engine.models.Status.CANDIDATE`); after a window (24 hours) a candidate that
was accessed is confirmed, one that was not loses importance (x 0.8), and pinned items never
decay. Candidates are used in contexts like any other item meanwhile: being chosen for a
context is how one proves itself.

Each candidate is reviewed once, by the first step that runs after its window ended. It was
accessed if the assembler chose it (or a promotion of the same content reinforced it) since
it landed (its provenance's ``promoted_at``, or its timestamp when it has none): then it is
confirmed as it is. Otherwise it is *penalised*: confirmed at 0.8 times its importance. Both
leave quarantine, so however often the step runs, no candidate is penalised twice; a
penalised item is ranked lower from then on and is the first the store's eviction pages out.
A candidate still within its window waits. Pinning a candidate ends its quarantine, so a
pinned item is never penalised.

When it runs: whenever :func:`confirm_candidates` is called, and, with an auto-promotion
preset on :class:`~agent_engine.tiers.stores.MemoryStores`, at every task end, for the task's
project, before the task's own candidates land. Never when a store opens: reading a store
(the CLI's read-only commands among them) never writes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import attrs

from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Status
from agent_engine.tiers.base import TierStore

__all__ = [
    "DEFAULT_WINDOW",
    "PENALTY",
    "CandidateReview",
    "check_window",
    "confirm_candidates",
    "quarantine_ends",
    "review_candidates",
]

DEFAULT_WINDOW: Final = timedelta(hours=24)
"""How long a candidate stays in quarantine before it is reviewed (the seed's 24 hours)."""
PENALTY: Final = 0.8
"""What a candidate's importance is multiplied by when nothing accessed it in its window."""


@attrs.frozen
class CandidateReview:
    """What a confirmation step did: candidates confirmed, penalised, and still waiting.

    Each holds the items as they are now (confirmed and penalised ones as written).
    """

    confirmed: tuple[ContextItem, ...] = ()
    penalised: tuple[ContextItem, ...] = ()
    waiting: tuple[ContextItem, ...] = ()


def check_window(window: object) -> timedelta:
    """``window`` if it is a duration of zero or more; a ValidationError otherwise."""
    if not isinstance(window, timedelta) or window < timedelta(0):
        raise ValidationError(
            f"the candidate window must be a timedelta of zero or more, got {window!r}",
            field="window",
            value=window,
        )
    return window


def quarantine_ends(item: ContextItem, window: timedelta) -> datetime:
    """When ``item``'s quarantine ends: ``window`` after it landed."""
    return _landed(item) + window


def review_candidates(store: TierStore, *, window: timedelta = DEFAULT_WINDOW) -> CandidateReview:
    """What :func:`confirm_candidates` would do now, writing nothing.

    Its confirmed and penalised items are shown as the step would write them.
    """
    check_window(window)
    now = store.clock()
    candidates = store.query({"status": Status.CANDIDATE.value}, limit=None, order_by="+timestamp")
    due = [item for item in candidates if quarantine_ends(item, window) <= now]
    return CandidateReview(
        confirmed=tuple(
            attrs.evolve(item, status=Status.CONFIRMED) for item in due if _accessed(item)
        ),
        penalised=tuple(
            attrs.evolve(item, status=Status.CONFIRMED, importance=item.importance * PENALTY)
            for item in due
            if not _accessed(item)
        ),
        waiting=tuple(item for item in candidates if quarantine_ends(item, window) > now),
    )


def confirm_candidates(store: TierStore, *, window: timedelta = DEFAULT_WINDOW) -> CandidateReview:
    """Review ``store``'s candidates whose window ended; one journaled ``confirm`` write.

    The ``confirm`` event names every item reviewed; its ``detail`` lists those
    ``confirmed`` and those ``penalised``. A bad ``window`` raises
    :class:`~agent_engine.errors.ValidationError` and nothing changes.
    """
    review = review_candidates(store, window=window)
    store.settle_candidates(
        review.confirmed,
        review.penalised,
        {"window_seconds": window.total_seconds(), "penalty": PENALTY},
    )
    return review


def _landed(item: ContextItem) -> datetime:
    return item.provenance.promoted_at if item.provenance is not None else item.timestamp


def _accessed(item: ContextItem) -> bool:
    return item.last_accessed_at is not None and item.last_accessed_at >= _landed(item)
