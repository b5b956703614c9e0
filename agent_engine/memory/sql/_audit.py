"""The audit journal as a table (``ae_audit_events``), beside the items it describes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol, TypeVar

import sqlalchemy as sa

from agent_engine.errors import ValidationError
from agent_engine.memory.audit import check_window
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import audit_events
from agent_engine.models import AuditAction, AuditEvent

__all__ = ["Runner", "SQLAuditStore"]

T = TypeVar("T")


class Runner(Protocol):
    """Runs a function in one (retried) transaction of the backend and returns its result."""

    def __call__(self, work: Callable[[sa.Connection], T], /) -> T: ...


class SQLAuditStore:
    """Implements :class:`~agent_engine.memory.audit.AuditStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def append(self, event: AuditEvent) -> None:
        """Add one event to the journal (its own transaction)."""
        if not isinstance(event, AuditEvent):
            raise ValidationError(f"expected AuditEvent, got {type(event).__name__}", value=event)
        row = {
            "id": event.id,
            "action": event.action.value,
            "tier": event.tier.value,
            "namespace": event.namespace,
            "item_ids": json.dumps(list(event.item_ids), ensure_ascii=False),
            "detail": json.dumps(event.detail, ensure_ascii=False),
            "at": encode_time(event.at),
        }
        self._write(lambda connection: connection.execute(audit_events.insert(), [row]))

    def events(
        self,
        *,
        namespace: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        actions: Iterable[AuditAction] | None = None,
        limit: int | None = 100,
    ) -> list[AuditEvent]:
        """Return matching events, newest first (ties by id, newest id first)."""
        check_window(since, until, limit)
        wanted = None if actions is None else sorted({AuditAction(a).value for a in actions})
        query = sa.select(audit_events)
        if namespace is not None:
            query = query.where(audit_events.c.namespace == namespace)
        if since is not None:
            query = query.where(audit_events.c.at >= encode_time(since))
        if until is not None:
            query = query.where(audit_events.c.at < encode_time(until))
        if wanted is not None:
            query = query.where(audit_events.c.action.in_(wanted))
        query = query.order_by(audit_events.c.at.desc(), audit_events.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        rows = self._read(lambda connection: connection.execute(query).all())
        return [
            AuditEvent(
                action=row.action,
                tier=row.tier,
                namespace=row.namespace,
                item_ids=json.loads(row.item_ids),
                detail=json.loads(row.detail),
                at=decode_time(row.at),
                id=row.id,
            )
            for row in rows
        ]

    def count(self, *, namespace: str | None = None) -> int:
        """Count events (in one namespace, or all)."""
        query = sa.select(sa.func.count()).select_from(audit_events)
        if namespace is not None:
            query = query.where(audit_events.c.namespace == namespace)
        return int(self._read(lambda connection: connection.execute(query).scalar_one()))

    def trim(self, *, keep_latest: int | None = None, older_than: datetime | None = None) -> int:
        """Drop the oldest events beyond ``keep_latest`` or before ``older_than``."""
        check_window(older_than, None, keep_latest)

        def run(connection: sa.Connection) -> int:
            removed = 0
            if older_than is not None:
                result = connection.execute(
                    audit_events.delete().where(audit_events.c.at < encode_time(older_than))
                )
                removed += result.rowcount
            if keep_latest is not None:
                newest = (
                    sa.select(audit_events.c.id)
                    .order_by(audit_events.c.at.desc(), audit_events.c.id.desc())
                    .limit(keep_latest)
                    .scalar_subquery()
                )
                keep = sa.select(audit_events.c.id).where(audit_events.c.id.in_(newest))
                if keep_latest == 0:
                    result = connection.execute(audit_events.delete())
                else:
                    # A derived table: MySQL-style "IN (... LIMIT)" is fine on SQLite and PG.
                    result = connection.execute(
                        audit_events.delete().where(audit_events.c.id.not_in(keep))
                    )
                removed += result.rowcount
            return removed

        return self._write(run)
