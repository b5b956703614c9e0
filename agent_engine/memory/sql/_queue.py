"""The ingestion queue as tables (``ae_ingest_queue``, ``ae_ingest_dead``) in the store's database.

Every operation is one transaction of the backend (retried on contention). Claims take rows
due oldest first; on PostgreSQL with ``FOR UPDATE SKIP LOCKED``, so workers running at once
take different rows instead of waiting on each other; SQLite has one writer at a time anyway
(its write transactions begin ``IMMEDIATE``). A re-sent event is caught by the unique key
(tier, namespace, idempotency key) with ``ON CONFLICT DO NOTHING``, so two processes sending
it at once still queue it once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from agent_engine.memory.queue import DeadLetter, Finished, QueueCounts, QueuedEvent, State
from agent_engine.memory.sql._audit import Runner
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import ingest_dead, ingest_queue

__all__ = ["SQLQueueStore"]

_CHUNK = 500
"""Sequence numbers per ``IN (...)`` list."""
_q = ingest_queue.c
_d = ingest_dead.c


class SQLQueueStore:
    """Implements :class:`~agent_engine.memory.queue.QueueStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def enqueue(self, events: Sequence[QueuedEvent], now: datetime) -> list[bool]:
        """Queue ``events``; say of each whether it was new (see the protocol)."""
        if not events:
            return []
        at = encode_time(now)
        rows = [_pending(event, at) for event in events]

        def work(connection: sa.Connection) -> set[tuple[str, str, str]]:
            insert = _insert(connection)
            statement = insert.on_conflict_do_nothing().returning(
                _q.tier, _q.namespace, _q.idempotency_key
            )
            result = connection.execute(statement, rows)
            return {(row.tier, row.namespace, row.idempotency_key) for row in result}

        inserted = self._write(work)
        new: list[bool] = []
        for event in events:
            key = (event.tier, event.namespace, event.idempotency_key)
            new.append(key in inserted)
            inserted.discard(key)  # the same key twice in one call: the first is the new one
        return new

    def claim(self, owner: str, limit: int, *, lease_s: float, now: datetime) -> list[QueuedEvent]:
        """Lease up to ``limit`` due pending events to ``owner``, oldest due first."""
        at = encode_time(now)
        until = encode_time(now + timedelta(seconds=lease_s))

        def work(connection: sa.Connection) -> list[QueuedEvent]:
            due = (
                sa.select(
                    _q.seq,
                    _q.tier,
                    _q.namespace,
                    _q.idempotency_key,
                    _q.event,
                    _q.claims,
                    _q.failures,
                )
                .where(
                    _q.state == State.PENDING,
                    _q.available_at <= at,
                    sa.or_(_q.lease_until.is_(None), _q.lease_until <= at),
                )
                .order_by(_q.available_at, _q.seq)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = connection.execute(due).all()
            if not rows:
                return []
            seqs = [row.seq for row in rows]
            connection.execute(
                ingest_queue.update()
                .where(_q.seq.in_(seqs))
                .values(lease_owner=owner, lease_until=until, claims=_q.claims + 1)
            )
            return [
                QueuedEvent(
                    seq=row.seq,
                    tier=row.tier,
                    namespace=row.namespace,
                    idempotency_key=row.idempotency_key,
                    event=row.event,
                    claims=row.claims + 1,
                    failures=row.failures,
                )
                for row in rows
            ]

        return self._write(work)

    def finish(self, owner: str, finished: Sequence[Finished], now: datetime) -> int:
        """Record what became of events ``owner`` still holds; return how many."""
        if not finished:
            return 0
        at = encode_time(now)

        def work(connection: sa.Connection) -> int:
            held = set(_held(connection, owner, [entry.seq for entry in finished]))
            rows = [
                {"s": entry.seq, "st": entry.state, "o": entry.outcome}
                for entry in finished
                if entry.seq in held
            ]
            if rows:
                connection.execute(
                    ingest_queue.update()
                    .where(_q.seq == sa.bindparam("s"), _q.lease_owner == owner)
                    .values(
                        state=sa.bindparam("st"),
                        outcome=sa.bindparam("o"),
                        event="",  # the memory holds it now; no second copy is kept
                        finished_at=at,
                        lease_owner=None,
                        lease_until=None,
                    ),
                    rows,
                )
            return len(rows)

        return self._write(work)

    def fail(self, owner: str, seqs: Sequence[int], error: str, retry_at: datetime) -> int:
        """Give back events ``owner`` holds after an error, due again at ``retry_at``."""

        def work(connection: sa.Connection) -> int:
            held = _held(connection, owner, seqs)
            for chunk in _chunks(held):
                connection.execute(
                    ingest_queue.update()
                    .where(_q.seq.in_(chunk), _q.lease_owner == owner)
                    .values(
                        failures=_q.failures + 1,
                        last_error=error,
                        available_at=encode_time(retry_at),
                        lease_owner=None,
                        lease_until=None,
                    )
                )
            return len(held)

        return self._write(work)

    def bury(
        self,
        owner: str,
        reasons: Sequence[tuple[int, str]],
        now: datetime,
        *,
        failed: bool = True,
    ) -> int:
        """Move events ``owner`` holds to the dead letters, each with its reason.

        ``failed``: the burial ends a failed attempt, which counts in ``failures``.
        """
        if not reasons:
            return 0
        why = dict(reasons)
        at = encode_time(now)

        def work(connection: sa.Connection) -> int:
            held = _held(connection, owner, list(why))
            rows: list[dict[str, Any]] = []
            for chunk in _chunks(held):
                selected = connection.execute(sa.select(ingest_queue).where(_q.seq.in_(chunk)))
                rows.extend(
                    {
                        "tier": row.tier,
                        "namespace": row.namespace,
                        "idempotency_key": row.idempotency_key,
                        "event": row.event,
                        "reason": why[row.seq],
                        "origin": "worker",
                        "failures": row.failures + int(failed),
                        "failed_at": at,
                    }
                    for row in selected
                )
                connection.execute(
                    ingest_queue.delete().where(_q.seq.in_(chunk), _q.lease_owner == owner)
                )
            if rows:
                connection.execute(ingest_dead.insert(), rows)
            return len(rows)

        return self._write(work)

    def dead_letter(self, letters: Sequence[DeadLetter], now: datetime) -> None:
        """Record input that never became a queued event."""
        if not letters:
            return
        at = encode_time(now)
        rows = [
            {
                "tier": letter.tier,
                "namespace": letter.namespace,
                "idempotency_key": letter.idempotency_key,
                "event": letter.event,
                "reason": letter.reason,
                "origin": letter.origin,
                "failures": letter.failures,
                "failed_at": encode_time(letter.failed_at) if letter.failed_at else at,
            }
            for letter in letters
        ]
        self._write(lambda connection: connection.execute(ingest_dead.insert(), rows))

    def counts(self, now: datetime) -> QueueCounts:
        """How many events are in each state now."""
        at = encode_time(now)
        leased = sa.and_(_q.lease_until.is_not(None), _q.lease_until > at)

        def work(connection: sa.Connection) -> QueueCounts:
            by_state = connection.execute(
                sa.select(
                    _q.state,
                    sa.func.count(),
                    sa.func.count().filter(leased),
                    sa.func.min(_q.enqueued_at),
                ).group_by(_q.state)
            ).all()
            dead = connection.execute(sa.select(sa.func.count()).select_from(ingest_dead))
            table = {row[0]: row for row in by_state}
            pending = table.get(State.PENDING)
            return QueueCounts(
                pending=(pending[1] - pending[2]) if pending else 0,
                leased=pending[2] if pending else 0,
                done=table[State.DONE][1] if State.DONE in table else 0,
                dropped=table[State.DROPPED][1] if State.DROPPED in table else 0,
                dead=dead.scalar_one(),
                oldest_pending=decode_time(pending[3]) if pending else None,
            )

        return self._read(work)

    def dead(self, *, limit: int | None = 100) -> list[DeadLetter]:
        """The dead letters, oldest first."""
        statement = sa.select(ingest_dead).order_by(_d.seq).limit(limit)
        rows = self._read(lambda connection: connection.execute(statement).all())
        return [_letter(row) for row in rows]

    def revive(self, seqs: Iterable[int] | None, now: datetime) -> list[DeadLetter]:
        """Queue dead letters again (those of ``seqs``, or all); return the ones revived."""
        wanted = None if seqs is None else sorted(set(seqs))
        at = encode_time(now)

        def work(connection: sa.Connection) -> list[DeadLetter]:
            rows: list[Any] = []
            base = sa.select(ingest_dead).where(_d.idempotency_key.is_not(None))
            if wanted is None:
                rows = list(connection.execute(base.order_by(_d.seq)))
            else:
                for chunk in _chunks(wanted):
                    rows += connection.execute(base.where(_d.seq.in_(chunk)).order_by(_d.seq))
            if not rows:
                return []
            queued = [_pending(row, at) for row in rows]
            connection.execute(_insert(connection).on_conflict_do_nothing(), queued)
            for chunk in _chunks([row.seq for row in rows]):
                connection.execute(ingest_dead.delete().where(_d.seq.in_(chunk)))
            return [_letter(row) for row in rows]

        return self._write(work)

    def purge(self, finished_before: datetime) -> int:
        """Forget done and dropped events finished before then; return how many."""
        cutoff = encode_time(finished_before)
        statement = ingest_queue.delete().where(
            _q.finished_at.is_not(None), _q.finished_at < cutoff
        )
        result = self._write(lambda connection: connection.execute(statement))
        return int(result.rowcount or 0)


def _pending(event: QueuedEvent | Any, at: int) -> dict[str, Any]:
    """The row of ``event`` (a queued event, or a dead letter's row) queued anew at ``at``."""
    return {
        "tier": event.tier,
        "namespace": event.namespace,
        "idempotency_key": event.idempotency_key,
        "event": event.event,
        "state": State.PENDING,
        "claims": 0,
        "failures": 0,
        "available_at": at,
        "enqueued_at": at,
    }


def _insert(connection: sa.Connection) -> Any:
    """The dialect's ``INSERT`` into the queue (it knows ``ON CONFLICT``)."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    return dialect.insert(ingest_queue)


def _held(connection: sa.Connection, owner: str, seqs: Iterable[int]) -> list[int]:
    """Those of ``seqs`` that ``owner`` holds (a lease may have run out and passed on), locked.

    Locked until the transaction ends (``FOR UPDATE`` on PostgreSQL; SQLite has one writer
    anyway), so no other worker can claim them between this read and the write that follows:
    a claim in progress is waited for, and a row it took no longer reads as ``owner``'s.
    """
    held: list[int] = []
    for chunk in _chunks(sorted(set(seqs))):
        held += connection.execute(
            sa.select(_q.seq).where(_q.seq.in_(chunk), _q.lease_owner == owner).with_for_update()
        ).scalars()
    return held


def _chunks(values: Sequence[int]) -> Iterable[list[int]]:
    return (list(values[i : i + _CHUNK]) for i in range(0, len(values), _CHUNK))


def _letter(row: Any) -> DeadLetter:
    return DeadLetter(
        seq=row.seq,
        tier=row.tier,
        namespace=row.namespace,
        idempotency_key=row.idempotency_key,
        event=row.event,
        reason=row.reason,
        origin=row.origin,
        failures=row.failures,
        failed_at=decode_time(row.failed_at),
    )
