"""The ingestion worker: claims queued events in batches and stores them through the tiers.

Each batch is one claim (a lease on up to ``batch_size`` events), then per scope: the
decider's verdict on each event, one read for the events stored already, and one
:meth:`~agent_engine.tiers.base.TierStore.add_outcomes` for the rest, so the stores embed
the batch in one call, check it for duplicates and redact it as any write; then one update
marks the batch done. A worker killed anywhere in that loses nothing: its lease runs out and
the next worker claims the events again. It stores nothing twice either: an event's item id
is derived from its idempotency key, so what the killed worker stored is found stored (or
found merged, :mod:`agent_engine.tiers.dedup`) and only marked done.

Errors are kept to the events they belong to. A batch whose write fails is written again one
event at a time: an event the store refuses (invalid, declined by global memory's
confirmation) goes to the dead letters at once with the reason; one that failed for a
reason that may pass (the database unreachable, the embedder failing) is retried after a
backoff that doubles, and buried after ``max_failures``. An event claimed ``max_claims``
times without finishing (a worker dies on it each time) is buried too. A decider that
raises or answers something other than a :class:`~agent_engine.ingest.decide.Decision` is
contained: the event is stored (dropping is the one thing a failing decider must not do)
and the error reported.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import attrs

from agent_engine._log import get_logger
from agent_engine.errors import (
    AgentEngineError,
    BackendError,
    DuplicateItemError,
    EmbeddingError,
    ValidationError,
)
from agent_engine.ingest._stored import stored_ids
from agent_engine.ingest.decide import DEFAULT_DECIDER, Decision, MemoryDecider, decide_safely
from agent_engine.ingest.events import IngestEvent
from agent_engine.ingest.queue import IngestQueue
from agent_engine.memory.queue import Finished, QueuedEvent, State
from agent_engine.models import ContextItem, Task, Tier
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.stores import MemoryStores

__all__ = ["Backoff", "IngestReport", "IngestWorker"]


@attrs.frozen
class Backoff:
    """How long a failed event waits before it is due again: doubling, capped, jittered.

    The ``n``-th failure waits ``min(cap_s, base_s * 2 ** (n - 1))``, times a random factor
    in [0.5, 1] so events that failed together do not all come back together.
    """

    base_s: float = 1.0
    cap_s: float = 300.0

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure."""
        wait = min(self.cap_s, self.base_s * 2.0 ** max(0, failures - 1))
        return wait * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not a secret


@attrs.frozen
class IngestReport:
    """What a worker did: events claimed, stored, merged, found stored, dropped, and so on.

    ``found_stored``: stored by an earlier worker that died before marking them done.
    ``dropped``: by the decider, per reason. ``retried``: failed, due again later.
    ``dead``: buried in the dead letters. ``errors``: deciders that failed (contained).
    """

    batches: int = 0
    claimed: int = 0
    stored: int = 0
    merged: int = 0
    found_stored: int = 0
    dropped: dict[str, int] = attrs.field(factory=dict)
    retried: int = 0
    dead: int = 0
    errors: list[str] = attrs.field(factory=list)

    def __add__(self, other: IngestReport) -> IngestReport:
        return IngestReport(
            batches=self.batches + other.batches,
            claimed=self.claimed + other.claimed,
            stored=self.stored + other.stored,
            merged=self.merged + other.merged,
            found_stored=self.found_stored + other.found_stored,
            dropped=dict(Counter(self.dropped) + Counter(other.dropped)),
            retried=self.retried + other.retried,
            dead=self.dead + other.dead,
            errors=[*self.errors, *other.errors][-100:],
        )


@attrs.define
class _Batch:
    """What one batch comes to, collected while its scopes are written."""

    now: datetime
    finished: list[Finished] = attrs.field(factory=list)
    buried: list[tuple[int, str]] = attrs.field(factory=list)
    """Events whose attempt failed for good (counted as a failure)."""
    unread: list[tuple[int, str]] = attrs.field(factory=list)
    """Events buried without an attempt: unreadable, or claimed too often."""
    failed: list[tuple[QueuedEvent, str]] = attrs.field(factory=list)
    stored: int = 0
    merged: int = 0
    found_stored: int = 0
    dropped: Counter[str] = attrs.field(factory=Counter)
    errors: list[str] = attrs.field(factory=list)


_Entry = tuple[QueuedEvent, IngestEvent, ContextItem]


class IngestWorker:
    """Stores the events of ``queue`` through ``stores`` (redaction, merge, eviction apply).

    ``decider`` judges each event first (``None``: every event is stored). ``batch_size``
    events are claimed at a time, leased for ``lease_s`` seconds (longer than a batch takes:
    a lease that runs out mid-batch lets another worker take the events too, which stores
    nothing twice but does the work twice). ``owner`` names the worker in the leases
    (default: host, process and a random suffix).
    """

    def __init__(
        self,
        queue: IngestQueue,
        stores: MemoryStores,
        *,
        decider: MemoryDecider | None = DEFAULT_DECIDER,
        batch_size: int = 64,
        lease_s: float = 300.0,
        max_failures: int = 5,
        max_claims: int = 20,
        backoff: Backoff = Backoff(),
        retention: timedelta = timedelta(days=7),
        owner: str | None = None,
    ) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("max_failures", max_failures),
            ("max_claims", max_claims),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive integer", field=name)
        if not lease_s > 0:
            raise ValidationError("lease_s must be positive", field="lease_s", value=lease_s)
        self.queue = queue
        self.stores = stores
        self.decider = decider
        self.batch_size = batch_size
        self.lease_s = float(lease_s)
        self.max_failures = max_failures
        self.max_claims = max_claims
        self.backoff = backoff
        self.retention = retention
        self.owner = (
            owner or f"{socket.gethostname()[:32]}:{os.getpid()}:{random.getrandbits(32):08x}"
        )
        self._log = get_logger(component="ingest_worker", owner=self.owner)

    # ------------------------------------------------------------------ running

    def run(
        self,
        *,
        until_idle: bool = False,
        poll_s: float = 1.0,
        stop: threading.Event | None = None,
        max_batches: int | None = None,
        on_batch: Callable[[IngestReport], None] | None = None,
    ) -> IngestReport:
        """Process batches until ``stop`` is set (or, ``until_idle``, the queue has none due).

        An idle worker polls every ``poll_s`` seconds. Finished events older than
        ``retention`` are purged on the way (their keys stop guarding against re-sends then;
        the items' ids still do). ``on_batch`` sees each batch's report. When the database
        fails (a :class:`~agent_engine.errors.BackendError`), the worker waits, backing off
        as for a failed event, and goes on; with ``until_idle`` it raises the error after
        ``max_failures`` failures in a row.
        """
        total = IngestReport()
        outages = 0
        purge_at = 0.0
        while stop is None or not stop.is_set():
            if max_batches is not None and total.batches >= max_batches:
                break
            try:
                if time.monotonic() >= purge_at:
                    self.purge()
                    purge_at = time.monotonic() + _PURGE_EVERY_S
                report = self.run_once()
            except BackendError as error:
                # The database is unreachable or busy past its retries: what this worker
                # held goes back when its lease runs out. Wait and try again; a run that is
                # to end once idle gives up after max_failures outages in a row.
                outages += 1
                if until_idle and outages >= self.max_failures:
                    raise
                wait = self.backoff.delay(outages)
                self._log.warning("ingest_backend_down", error=str(error), retry_in_s=wait)
                _wait(stop, wait)
                continue
            outages = 0
            if report.claimed:
                total = total + report
                if on_batch is not None:
                    on_batch(report)
            elif until_idle:
                break
            else:
                _wait(stop, poll_s)
        return total

    def purge(self) -> int:
        """Forget finished events older than ``retention``; return how many."""
        return self.queue.store.purge(self.queue.clock() - self.retention)

    def run_once(self) -> IngestReport:
        """Claim one batch and store it; report what became of it (empty: nothing was due)."""
        now = self.queue.clock()
        claimed = self.queue.store.claim(self.owner, self.batch_size, lease_s=self.lease_s, now=now)
        if not claimed:
            return IngestReport()
        batch = _Batch(now)
        scopes: dict[tuple[Tier, str], list[tuple[QueuedEvent, IngestEvent]]] = {}
        for row in claimed:
            try:
                event = IngestEvent.from_json(row.event)
            except ValidationError as error:
                batch.unread.append((row.seq, f"not an event: {error}"))
                continue
            scopes.setdefault((event.tier, event.namespace), []).append((row, event))
        for entries in scopes.values():
            try:
                self._store_scope(entries, batch)
            except Exception as error:  # noqa: BLE001 - the scope's store would not open
                for row, _ in entries:
                    self._failed(row, error, batch)
        return self._settle(claimed, batch)

    # ------------------------------------------------------------------ one scope

    def _store_for(self, event: IngestEvent) -> TierStore:
        if event.tier is Tier.PROJECT:
            return self.stores.project_store(event.project)
        if event.tier is Tier.GLOBAL:
            return self.stores.global_store(event.user)
        if event.tier is Tier.SESSION:
            return self.stores.session_store(event.session, event.project, event.user)
        task = Task(id=event.task or "", project_id=event.project, user_id=event.user)
        return self.stores.task_store(task)

    def _store_scope(self, entries: list[tuple[QueuedEvent, IngestEvent]], batch: _Batch) -> None:
        store = self._store_for(entries[0][1])
        kept: list[_Entry] = []
        for row, event in entries:
            item = event.item()
            verdict = self._decide(item, batch)
            if verdict.keep:
                kept.append((row, event, item))
            else:
                batch.dropped[verdict.reason] += 1
                batch.finished.append(Finished(row.seq, State.DROPPED, verdict.reason))
        if not kept:
            return
        try:
            held = stored_ids(store, (entry[2] for entry in kept))
        except Exception as error:  # noqa: BLE001 - the store unreachable: retry them all
            for row, _, _ in kept:
                self._failed(row, error, batch)
            return
        fresh: list[_Entry] = []
        for entry in kept:
            row, item_id = entry[0], store.scoped_id(entry[2].id)
            if item_id in held:  # stored by a worker that died before marking it done
                batch.found_stored += 1
                batch.finished.append(Finished(row.seq, State.DONE, f"stored:{item_id}"))
            elif row.claims > self.max_claims:
                reason = f"claimed {row.claims} times and never finished: a worker dies on it"
                batch.unread.append((row.seq, reason))
            else:
                fresh.append(entry)
        self._write(store, fresh, batch)

    def _write(self, store: TierStore, entries: list[_Entry], batch: _Batch) -> None:
        """Write ``entries`` in one add; on an error, one at a time to find whose it is."""
        if not entries:
            return
        try:
            outcomes = store.add_outcomes([item for _, _, item in entries])
        except Exception as error:  # noqa: BLE001 - contained per event below
            if len(entries) > 1:
                for entry in entries:
                    self._write(store, [entry], batch)
                return
            row = entries[0][0]
            if isinstance(error, DuplicateItemError):  # another worker stored it meanwhile
                batch.found_stored += 1
                item_id = store.scoped_id(entries[0][2].id)
                batch.finished.append(Finished(row.seq, State.DONE, f"stored:{item_id}"))
            else:
                self._failed(row, error, batch)
            return
        for (row, _, _), outcome in zip(entries, outcomes, strict=True):
            if outcome.merged:
                batch.merged += 1
                batch.finished.append(Finished(row.seq, State.DONE, f"merged:{outcome.item.id}"))
            else:
                batch.stored += 1
                batch.finished.append(Finished(row.seq, State.DONE, f"stored:{outcome.item.id}"))

    def _decide(self, item: ContextItem, batch: _Batch) -> Decision:
        """The decider's verdict; "keep", with the error reported, when the decider failed."""
        verdict, error = decide_safely(self.decider, item)
        if error is not None:
            batch.errors.append(error)
        return verdict

    def _failed(self, row: QueuedEvent, error: BaseException, batch: _Batch) -> None:
        reason = f"{type(error).__name__}: {error}"
        transient = not isinstance(error, AgentEngineError) or isinstance(
            error, BackendError | EmbeddingError
        )
        if not transient:
            batch.buried.append((row.seq, f"refused: {reason}"))
        elif row.failures + 1 >= self.max_failures:
            batch.buried.append((row.seq, f"failed {row.failures + 1} times; last: {reason}"))
        else:
            batch.failed.append((row, reason))

    # ------------------------------------------------------------------ settling

    def _settle(self, claimed: Sequence[QueuedEvent], batch: _Batch) -> IngestReport:
        """Mark the batch's events done, dropped, due again or dead; report it."""
        store = self.queue.store
        store.finish(self.owner, batch.finished, batch.now)
        for row, reason in batch.failed:
            retry_at = batch.now + timedelta(seconds=self.backoff.delay(row.failures + 1))
            store.fail(self.owner, [row.seq], reason, retry_at)
        store.bury(self.owner, batch.buried, batch.now)
        store.bury(self.owner, batch.unread, batch.now, failed=False)
        dead = [*batch.buried, *batch.unread]
        report = IngestReport(
            batches=1,
            claimed=len(claimed),
            stored=batch.stored,
            merged=batch.merged,
            found_stored=batch.found_stored,
            dropped=dict(batch.dropped),
            retried=len(batch.failed),
            dead=len(dead),
            errors=batch.errors,
        )
        if dead or batch.failed or batch.errors:
            self._log.warning(
                "ingest_batch_trouble",
                dead=len(dead),
                retried=len(batch.failed),
                errors=batch.errors[:3],
                first_dead=dead[0][1] if dead else None,
            )
        self._log.debug(
            "ingest_batch",
            claimed=report.claimed,
            stored=report.stored,
            merged=report.merged,
            found_stored=report.found_stored,
            dropped=sum(report.dropped.values()),
        )
        return report


def _owner() -> str:
    """A worker's name in its leases: host, process, and a random suffix (pids are reused)."""
    return f"{socket.gethostname()[:32]}:{os.getpid()}:{random.getrandbits(32):08x}"


_PURGE_EVERY_S = 600.0
"""How often a running worker forgets finished events past their retention."""


def _wait(stop: threading.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or until ``stop`` is set."""
    if stop is not None:
        stop.wait(seconds)
    else:
        time.sleep(seconds)
