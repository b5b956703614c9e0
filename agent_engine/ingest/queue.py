"""The durable ingestion queue: enqueue returns at once, a worker stores later.

Seed 000's COLD path. An executor's hot loop should not wait for a memory to be embedded,
checked for duplicates and written: it hands the event to :meth:`IngestQueue.enqueue`, one
insert into a table of the store's own database, and goes on; an
:class:`~agent_engine.ingest.worker.IngestWorker` stores the queue's events in batches.

Nothing is persisted before it is redacted: the queue applies the same
:class:`~agent_engine.redaction.RedactionPolicy` as the stores before the event reaches its
table, and journals the redaction (kinds and counts, never the secret) in the store's audit
log. Input that is no event (a field missing or malformed, a line that is not JSON) goes to
the dead letters with the reason, and the rest of the batch is queued.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from agent_engine._log import get_logger
from agent_engine.errors import BackendError, ValidationError
from agent_engine.ingest.events import IngestEvent
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.queue import DeadLetter, QueueCounts, QueuedEvent, QueueStore
from agent_engine.models import AuditAction, AuditEvent, Tier, utcnow
from agent_engine.redaction import DEFAULT_REDACTION, Redacted, RedactionPolicy
from agent_engine.tiers.scope import scoped_id

__all__ = ["BackfillReport", "Enqueued", "IngestQueue", "check_events"]

_ORIGIN = "enqueue"
_BACKFILL_CHUNK = 500
"""Lines of a backfill queued per transaction."""


@attrs.frozen
class Enqueued:
    """What became of one event given to :meth:`IngestQueue.enqueue`.

    ``queued``: it is in the queue now; ``duplicate``: its key was queued already, so it was
    not queued again; ``rejected``: the reason it went to the dead letters instead (not an
    event). ``item_id`` is the id its memory will have (``None`` when rejected);
    ``redacted``: the kinds of secret taken out of it, with their counts.
    """

    idempotency_key: str | None
    item_id: str | None
    queued: bool = False
    duplicate: bool = False
    rejected: str | None = None
    redacted: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen
class BackfillReport:
    """What a backfill did: lines read, events queued, duplicates, lines rejected and why."""

    lines: int = 0
    queued: int = 0
    duplicates: int = 0
    rejected: list[tuple[int, str]] = attrs.field(factory=list)
    dry_run: bool = False


class IngestQueue:
    """Events waiting to be stored, in a :class:`~agent_engine.memory.queue.QueueStore`.

    ``audit`` is where redactions are journaled (the store's journal, as for a direct
    write); ``redaction`` what is taken out before anything is persisted (give the stores'
    policy; ``None`` queues events as given). :meth:`of` opens the queue of a backend that
    keeps one (the SQL backend: SQLite or PostgreSQL).
    """

    def __init__(
        self,
        store: QueueStore,
        *,
        audit: AuditStore | None = None,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.audit = audit
        self.redaction = redaction
        self.clock = clock
        self._log = get_logger(component="ingest_queue")

    @classmethod
    def of(
        cls,
        backend: MemoryBackend,
        *,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        clock: Callable[[], datetime] = utcnow,
    ) -> IngestQueue:
        """The queue kept in ``backend``'s database, journaling into its audit log.

        Raises :class:`~agent_engine.errors.BackendError` for a backend that keeps no queue
        (in memory, FAISS files, Redis): give those a queue on a database of its own,
        ``IngestQueue.of(SQLAlchemyBackend("sqlite:///queue.db"))``.
        """
        store = getattr(backend, "ingest_queue", None)
        if not isinstance(store, QueueStore):
            raise BackendError(
                f"{type(backend).__name__} keeps no ingestion queue; the queue lives in a SQL "
                "database (SQLite or PostgreSQL): open one with "
                "IngestQueue.of(SQLAlchemyBackend(url))",
                backend=type(backend).__name__,
            )
        return cls(store, audit=backend.audit, redaction=redaction, clock=clock)

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, event: IngestEvent | Any) -> Enqueued:
        """Queue one event (an :class:`IngestEvent` or its JSON object); return at once."""
        return self.enqueue_many([event])[0]

    def enqueue_many(self, events: Iterable[IngestEvent | Any]) -> list[Enqueued]:
        """Queue events (in one insert); say of each what became of it.

        Each is redacted first, and the redactions journaled. What is not an event goes to
        the dead letters with the reason (``Enqueued.rejected``), the rest is queued: each is
        its own transaction, so a rejected event never keeps the others out.
        """
        return self._enqueue([(event, _ORIGIN) for event in events])

    def _enqueue(self, given: Sequence[tuple[Any, str]]) -> list[Enqueued]:
        now = self.clock()
        results: list[Enqueued | None] = [None] * len(given)
        rows: list[QueuedEvent] = []
        at: list[int] = []
        letters: list[DeadLetter] = []
        redactions: list[tuple[IngestEvent, Redacted]] = []
        for index, (raw, origin) in enumerate(given):
            try:
                event = _event(raw).keyed(now)
            except ValidationError as error:
                # A dead letter is persisted too, reason and all: a reason may quote the
                # value it refused.
                reason, text = self._clean(str(error)), self._clean(_raw_text(raw))
                letters.append(DeadLetter(event=text, reason=reason, origin=origin))
                results[index] = Enqueued(None, None, rejected=reason)
                continue
            event, redacted = self._redacted(event)
            if redacted.found:
                redactions.append((event, redacted))
            rows.append(
                QueuedEvent(
                    seq=0,
                    tier=event.tier.value,
                    namespace=event.namespace,
                    idempotency_key=event.idempotency_key or "",
                    event=event.to_json(),
                )
            )
            at.append(index)
            results[index] = Enqueued(
                event.idempotency_key,
                scoped_id(event.namespace, event.item_id),
                redacted=dict(redacted.found),
            )
        journaled = self._journal(redactions)
        if letters:
            self.store.dead_letter(letters, now)
            self._log.warning("events_rejected", count=len(letters), first=letters[0].reason)
        try:
            new = self.store.enqueue(rows, now)
        except Exception as error:
            self._abort(journaled, error)
            raise
        for index, fresh in zip(at, new, strict=True):
            result = results[index]
            assert result is not None  # noqa: S101 - filled in above for every queued row
            results[index] = attrs.evolve(result, queued=fresh, duplicate=not fresh)
        return [result for result in results if result is not None]

    def _redacted(self, event: IngestEvent) -> tuple[IngestEvent, Redacted]:
        """``event`` as the policy lets it be persisted, and what was found in it."""
        item = event.item()
        if self.redaction is None:
            return event, Redacted(item)
        redacted = self.redaction.redact(item)
        if not redacted.found:
            return event, redacted
        kept = redacted.item
        return (
            attrs.evolve(event, text=kept.text, payload=kept.payload, tags=kept.tags),
            redacted,
        )

    def _clean(self, text: str) -> str:
        """``text`` with what the policy finds in it masked (as given without a policy)."""
        return self.redaction.redact_text(text)[0] if self.redaction is not None else text

    def _abort(self, journaled: list[AuditEvent], error: BaseException) -> None:
        """The queueing the ``redact`` events announced did not happen: say so, as stores do."""
        if self.audit is None:
            return
        why = self._clean(f"{type(error).__name__}: {error}")
        for intent in journaled:
            self.audit.append(
                AuditEvent(
                    action=AuditAction.ABORT,
                    tier=intent.tier,
                    namespace=intent.namespace,
                    item_ids=intent.item_ids,
                    detail={"intent": intent.id, "error": why},
                    at=self.clock(),
                )
            )

    def _journal(self, redactions: list[tuple[IngestEvent, Redacted]]) -> list[AuditEvent]:
        """One ``redact`` event per scope, journaled before the events are queued.

        As a store's write journals one (see redaction). An event re-sent with a key queued
        already was redacted too, and is journaled although it is not queued again.
        """
        if self.audit is None or not redactions:
            return []
        journaled: list[AuditEvent] = []
        scopes: dict[tuple[Tier, str], list[Redacted]] = {}
        for event, redacted in redactions:
            scopes.setdefault((event.tier, event.namespace), []).append(redacted)
        now = self.clock()
        for (tier, namespace), found in scopes.items():
            ids = tuple(scoped_id(namespace, entry.item.id) for entry in found)
            items = [{**e.detail(), "id": i} for e, i in zip(found, ids, strict=True)]
            detail = {"items": items, "via": "ingest_queue"}
            intent = AuditEvent(
                action=AuditAction.REDACT,
                tier=tier,
                namespace=namespace,
                item_ids=ids,
                detail=detail,
                at=now,
            )
            self.audit.append(intent)
            journaled.append(intent)
        return journaled

    # ------------------------------------------------------------------ backfill

    def backfill(
        self,
        lines: Iterable[str],
        *,
        origin: str = "backfill",
        dry_run: bool = False,
        progress: Callable[[int], None] | None = None,
        defaults: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> BackfillReport:
        """Queue the events of a JSONL stream, one JSON object per line.

        Blank lines are skipped; a line that is not an event goes to the dead letters as
        ``ORIGIN:LINE`` with the reason, and the rest is queued (500 lines per transaction).
        A line without an idempotency key is keyed by ``source`` (what the stream is: a
        file's full path; default ``origin``), its line number and its content, so
        backfilling a file again queues none of it twice, and two files' lines never share
        a key.
        ``dry_run`` is :func:`check_events`: every line checked, nothing queued or recorded.
        ``progress`` is called with the number of lines read after each chunk. ``defaults``:
        fields an object that lacks them takes (a project, a kind for a whole file).
        """
        if dry_run:
            return check_events(lines, progress=progress, defaults=defaults)
        keys = _Keys(origin, source or origin)
        return _read_lines(lines, self._backfill_chunk, keys, progress, defaults)

    def _backfill_chunk(
        self, report: BackfillReport, chunk: list[tuple[Any, str]], numbers: list[int]
    ) -> BackfillReport:
        results = self._enqueue(chunk)
        return attrs.evolve(
            report,
            queued=report.queued + sum(r.queued for r in results),
            duplicates=report.duplicates + sum(r.duplicate for r in results),
            rejected=[
                *report.rejected,
                *(
                    (number, r.rejected)
                    for r, number in zip(results, numbers, strict=True)
                    if r.rejected is not None
                ),
            ],
        )

    # ------------------------------------------------------------------ looking and retrying

    def status(self) -> QueueCounts:
        """How many events are pending, leased, done, dropped and dead now."""
        return self.store.counts(self.clock())

    def dead_letters(self, *, limit: int | None = 100) -> list[DeadLetter]:
        """What could not be stored, oldest first, with the reasons."""
        return self.store.dead(limit=limit)

    def retry(self, seqs: Iterable[int] | None = None) -> list[DeadLetter]:
        """Queue dead letters again (those numbered ``seqs``, or all that are events)."""
        revived = self.store.revive(None if seqs is None else list(seqs), self.clock())
        self._log.info("dead_letters_retried", count=len(revived))
        return revived


def check_events(
    lines: Iterable[str],
    *,
    progress: Callable[[int], None] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> BackfillReport:
    """Check a JSONL stream of events as a backfill would, queueing and recording nothing.

    ``queued`` counts the lines that are events (duplicates are not looked for: that needs
    the queue); ``rejected`` the others, with their line numbers and reasons.
    """
    report = _read_lines(lines, _check_chunk, _Keys("", ""), progress, defaults)
    return attrs.evolve(report, dry_run=True)


def _check_chunk(
    report: BackfillReport, chunk: list[tuple[Any, str]], numbers: list[int]
) -> BackfillReport:
    rejected = []
    queued = 0
    for (raw, _), number in zip(chunk, numbers, strict=True):
        try:
            _event(raw)
            queued += 1
        except ValidationError as error:
            rejected.append((number, str(error)))
    return attrs.evolve(
        report, queued=report.queued + queued, rejected=[*report.rejected, *rejected]
    )


_Chunk = Callable[[BackfillReport, list[tuple[Any, str]], list[int]], BackfillReport]


@attrs.frozen
class _Keys:
    """Where a backfill's lines come from: the name dead letters show, and what keys them."""

    origin: str
    source: str
    _digest: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        digest = hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).hexdigest()
        object.__setattr__(self, "_digest", digest[:16])

    def key(self, number: int, line: str) -> str:
        """The key of line ``number``: the source, the place, the content."""
        content = hashlib.sha256(line.strip().encode("utf-8", "surrogatepass")).hexdigest()
        return f"backfill:{self._digest}:{number}:{content[:16]}"


def _read_lines(
    lines: Iterable[str],
    handle: _Chunk,
    keys: _Keys,
    progress: Callable[[int], None] | None,
    defaults: Mapping[str, Any] | None,
) -> BackfillReport:
    """Parse ``lines`` into chunks of objects (defaults filled in) and ``handle`` each."""
    report = BackfillReport()
    chunk: list[tuple[Any, str]] = []
    numbers: list[int] = []
    count = 0
    for count, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parsed = _parsed_line(line)
        if isinstance(parsed, dict):
            # A line without a key of its own gets one from its source, place and content:
            # the same file backfilled again queues nothing twice, a turn said twice stays two.
            key = {"idempotency_key": keys.key(count, line)}
            parsed = {**(defaults or {}), **key, **parsed}
        chunk.append((parsed, f"{keys.origin}:{count}"))
        numbers.append(count)
        if len(chunk) >= _BACKFILL_CHUNK:
            report = handle(report, chunk, numbers)
            chunk, numbers = [], []
            if progress is not None:
                progress(count)
    if chunk:
        report = handle(report, chunk, numbers)
    if progress is not None:
        progress(count)
    return attrs.evolve(report, lines=count)


class _Unparsed:
    """A backfill line that is not JSON: rejected with the parser's reason, kept as given."""

    def __init__(self, line: str, reason: str) -> None:
        self.line = line
        self.reason = reason


def _parsed_line(line: str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as error:
        return _Unparsed(line.rstrip("\n"), f"not JSON: {error}")


def _event(raw: object) -> IngestEvent:
    if isinstance(raw, _Unparsed):
        raise ValidationError(raw.reason, value=raw.line[:200])
    return IngestEvent.from_mapping(raw)


def _raw_text(raw: object) -> str:
    """What the dead letters keep of input that is no event: its JSON, else its text."""
    if isinstance(raw, _Unparsed):
        return raw.line
    try:
        return json.dumps(raw, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(raw)
