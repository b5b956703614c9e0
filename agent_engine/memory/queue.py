"""Where the ingestion queue is kept: in the store's own database, beside the items.

The write path's queue (:mod:`agent_engine.ingest`) takes events fire-and-forget and a worker
stores them later, so the queue must outlive the process that enqueued and the worker that
died mid-batch. Keeping it in the store's database (a table, :mod:`.sql`) means nothing new
has to run, and it is shared by every process that shares the memory.

A :class:`QueueStore` knows rows, not memories: an event is JSON text under a tier, a
namespace and an idempotency key, unique together. Claiming leases rows to one worker until a
deadline; a worker that dies holds them only that long. Finishing, failing and burying act
only on rows the worker still holds, locked against a claim while they act, so a worker
whose lease ran out cannot undo what the next one did. What could not be stored goes to the
dead letters, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

__all__ = [
    "DeadLetter",
    "Finished",
    "QueueCounts",
    "QueueStore",
    "QueuedEvent",
    "State",
]


class State:
    """The states of a row of the queue."""

    PENDING = "pending"
    """Waiting for a worker (or leased to one, until its lease runs out)."""
    DONE = "done"
    """Stored (or merged into a memory held, or found stored already)."""
    DROPPED = "dropped"
    """Not stored: the decider judged it not worth a memory; ``outcome`` says why."""


@attrs.frozen
class QueuedEvent:
    """One event of the queue, as a worker claims it."""

    seq: int
    tier: str
    namespace: str
    idempotency_key: str
    event: str
    """The event as JSON text."""
    claims: int = 0
    """How many times a worker has claimed it (this claim included)."""
    failures: int = 0
    """How many of those ended in an error."""


@attrs.frozen
class Finished:
    """What became of a claimed event: ``state`` done or dropped, and the outcome."""

    seq: int
    state: str
    outcome: str


@attrs.frozen
class DeadLetter:
    """An event that could not be stored, or input that was no event at all.

    ``tier``, ``namespace`` and ``idempotency_key`` are ``None`` when the input did not say
    (a malformed line); ``event`` is the input as given; ``origin`` where it came from
    (``enqueue``, ``worker``, ``FILE:LINE`` of a backfill).
    """

    event: str
    reason: str
    origin: str
    tier: str | None = None
    namespace: str | None = None
    idempotency_key: str | None = None
    failures: int = 0
    failed_at: datetime | None = None
    seq: int | None = None


@attrs.frozen
class QueueCounts:
    """How many events are in each state; ``oldest_pending`` is when the oldest was enqueued."""

    pending: int
    leased: int
    done: int
    dropped: int
    dead: int
    oldest_pending: datetime | None = None


@runtime_checkable
class QueueStore(Protocol):
    """**Protocol:** the rows of an ingestion queue and its dead letters.

    Times are given by the caller (a clock it owns), so a test can move them.
    """

    def enqueue(self, events: Sequence[QueuedEvent], now: datetime) -> list[bool]:
        """Queue ``events`` (their ``seq`` ignored); say of each whether it was new.

        An event whose tier, namespace and idempotency key a queued row (pending, done or
        dropped) already holds is not queued again: ``False``.
        """
        ...

    def claim(self, owner: str, limit: int, *, lease_s: float, now: datetime) -> list[QueuedEvent]:
        """Lease up to ``limit`` due pending events to ``owner``, oldest first.

        Due: available now, and not leased, or leased by a lease that has run out.
        """
        ...

    def finish(self, owner: str, finished: Sequence[Finished], now: datetime) -> int:
        """Record what became of events ``owner`` holds; return how many it still held."""
        ...

    def fail(self, owner: str, seqs: Sequence[int], error: str, retry_at: datetime) -> int:
        """Give back events ``owner`` holds after an error, due again at ``retry_at``."""
        ...

    def bury(
        self,
        owner: str,
        reasons: Sequence[tuple[int, str]],
        now: datetime,
        *,
        failed: bool = True,
    ) -> int:
        """Move events ``owner`` holds to the dead letters, each with its reason.

        ``failed``: the burial ends a failed attempt, which counts in ``failures`` (not so
        for an event that never got that far: unreadable, or claimed too often).
        """
        ...

    def dead_letter(self, letters: Sequence[DeadLetter], now: datetime) -> None:
        """Record input that never became a queued event (malformed, refused at enqueue)."""
        ...

    def counts(self, now: datetime) -> QueueCounts:
        """How many events are in each state now."""
        ...

    def dead(self, *, limit: int | None = 100) -> list[DeadLetter]:
        """The dead letters, oldest first."""
        ...

    def revive(self, seqs: Iterable[int] | None, now: datetime) -> list[DeadLetter]:
        """Queue dead letters again (those of ``seqs``, or all); return the ones revived.

        Only letters that name a tier, namespace and key can be queued again; a malformed
        line stays (fix its file and backfill again). A letter whose key is queued already is
        dropped as revived: the queue holds it.
        """
        ...

    def purge(self, finished_before: datetime) -> int:
        """Forget done and dropped events finished before then; return how many."""
        ...
