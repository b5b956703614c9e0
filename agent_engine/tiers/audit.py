"""The journal-first audit log the tier stores write through.

Seed 001 section 18: every mutation is journaled *before* it happens, so a crash mid-change
leaves a record of what was attempted; a failed mutation is followed by an ``abort`` event
naming it. The journal is bounded: past ``max_events`` (or ``max_age``) the oldest events go.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from agent_engine import _validate
from agent_engine.errors import ValidationError
from agent_engine.memory.audit import AuditStore, erasure_token, redact_value
from agent_engine.models import AuditAction, AuditEvent, Tier, utcnow

__all__ = ["AuditLog"]


class AuditLog:
    """Appends events to an :class:`~agent_engine.memory.audit.AuditStore` and bounds it.

    ``actor`` names who acts through the stores writing here (an agent of a shared pool):
    every event's ``detail`` then says so as ``"agent"``.

    Trimming runs every ``trim_every`` appends rather than on each one, so the journal costs
    one insert per mutation; it may briefly hold up to ``trim_every`` events over the bound.
    """

    def __init__(
        self,
        store: AuditStore,
        *,
        max_events: int | None = 5000,
        max_age: timedelta | None = None,
        trim_every: int = 100,
        clock: Callable[[], datetime] = utcnow,
        actor: str | None = None,
    ) -> None:
        if max_events is not None and (isinstance(max_events, bool) or max_events < 0):
            raise ValidationError("max_events must be >= 0 or None", field="max_events")
        if trim_every < 1:
            raise ValidationError("trim_every must be >= 1", field="trim_every")
        self.store = store
        self.max_events = max_events
        self.max_age = max_age
        self._trim_every = trim_every
        self._clock = clock
        self.actor = None if actor is None else _validate.identifier("actor", actor)
        self._appends = 0
        self._lock = threading.Lock()

    def record(
        self,
        action: AuditAction,
        tier: Tier,
        namespace: str,
        item_ids: tuple[str, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """Append one event now and return it."""
        said = detail or {}
        if self.actor is not None:
            said = {"agent": self.actor, **said}
        event = AuditEvent(
            action=action,
            tier=tier,
            namespace=namespace,
            item_ids=item_ids,
            detail=said,
            at=self._clock(),
        )
        self.store.append(event)
        with self._lock:
            self._appends += 1
            due = self._appends % self._trim_every == 0
        if due:
            self.trim()
        return event

    @contextmanager
    def journal(
        self,
        action: AuditAction,
        tier: Tier,
        namespace: str,
        item_ids: tuple[str, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> Iterator[AuditEvent]:
        """Record the intent, run the body, and record an abort if the body raises."""
        event = self.record(action, tier, namespace, item_ids, detail)
        try:
            yield event
        except BaseException as exc:
            self.record(
                AuditAction.ABORT,
                tier,
                namespace,
                item_ids,
                {"intent": event.id, "error": f"{type(exc).__name__}: {exc}"},
            )
            raise

    @contextmanager
    def erasing(
        self, tier: Tier, namespace: str, item_ids: tuple[str, ...]
    ) -> Iterator[dict[str, str]]:
        """Journal an erase of ``item_ids`` first, by token, and yield the tokens (id -> token).

        The ``erase`` event names the items only by their tokens; an ``abort`` that follows a
        failure names them the same way, with the ids in its error text replaced too. Once
        the body succeeded, this log's store is redacted as well (nothing left to do when it
        is the journal the backend already redacted while erasing).
        """
        tokens = {item_id: erasure_token(item_id) for item_id in item_ids}
        hidden = tuple(tokens.values())
        event = self.record(AuditAction.ERASE, tier, namespace, hidden)
        try:
            yield tokens
        except BaseException as exc:
            error = redact_value(f"{type(exc).__name__}: {exc}", tokens)
            self.record(
                AuditAction.ABORT, tier, namespace, hidden, {"intent": event.id, "error": error}
            )
            raise
        self.store.redact(tokens)

    def trim(self) -> int:
        """Apply the retention settings now; return how many events were dropped."""
        older_than = self._clock() - self.max_age if self.max_age is not None else None
        if self.max_events is None and older_than is None:
            return 0
        return self.store.trim(keep_latest=self.max_events, older_than=older_than)
