"""The audit journal as a table (``ae_audit_events``), beside the items it describes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa

from agent_engine.errors import ValidationError
from agent_engine.memory.audit import (
    check_namespace,
    check_window,
    redact_value,
    wanted_actions,
)
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import audit_events
from agent_engine.models import AuditAction, AuditEvent

__all__ = ["Runner", "SQLAuditStore", "redact_events", "redact_json", "where_text_names"]

T = TypeVar("T")
_REDACT_CHUNK = 100
"""Ids looked for per query (each adds a ``LIKE`` condition per column)."""


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
        check_namespace(namespace)
        members = wanted_actions(actions)
        wanted = None if members is None else sorted(action.value for action in members)
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
        check_namespace(namespace)
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

    def redact(self, tokens: Mapping[str, str]) -> int:
        """Replace each id of ``tokens`` by its token in every event that names it."""
        if not tokens:
            return 0
        return self._write(lambda connection: redact_events(connection, tokens))


def where_text_names(
    columns: Iterable[sa.ColumnElement[str]], ids: Iterable[str]
) -> sa.ColumnElement[bool]:
    """Rows whose JSON text in one of ``columns`` may name one of ``ids`` (a superset).

    Every string that contains an id contains its JSON escape, so a ``LIKE`` on the escape
    finds each such row; the caller decodes the candidates and decides.
    """
    escaped = [json.dumps(item_id, ensure_ascii=False)[1:-1] for item_id in ids]
    return sa.or_(
        *(column.contains(text, autoescape=True) for column in columns for text in escaped)
    )


def redact_events(connection: sa.Connection, tokens: Mapping[str, str]) -> int:
    """Redact the journal in ``connection``'s transaction; return how many events changed."""
    columns = (audit_events.c.item_ids, audit_events.c.detail)
    return redact_json(connection, columns, tokens, _dumps_event)


def _dumps_event(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def redact_json(
    connection: sa.Connection,
    columns: Sequence[sa.Column[Any]],
    tokens: Mapping[str, str],
    dumps: Callable[[Any], str],
) -> int:
    """Replace each id of ``tokens`` in the JSON text ``columns`` of one table; count the rows.

    The rows that may name an id are found with ``LIKE`` (a hundred ids per query),
    decoded and redacted here (:func:`~agent_engine.memory.audit.redact_value`),
    and written back, re-encoded with ``dumps``, by one ``UPDATE`` run over all of them.
    Runs in ``connection``'s transaction.
    """
    table = columns[0].table
    (key,) = table.primary_key.columns
    ids = list(tokens)
    changed: dict[Any, dict[str, Any]] = {}
    for start in range(0, len(ids), _REDACT_CHUNK):
        condition = where_text_names(columns, ids[start : start + _REDACT_CHUNK])
        for found, *texts in connection.execute(sa.select(key, *columns).where(condition)):
            if found in changed:
                continue  # found for an id of an earlier chunk, and redacted for all of them
            redacted = [_redacted(text, tokens, dumps) for text in texts]
            if any(new is not None for new in redacted):
                changed[found] = {"old_key": found} | {
                    f"new_{column.name}": text if new is None else new
                    for column, text, new in zip(columns, texts, redacted, strict=True)
                }
    if changed:
        statement = (
            table.update()
            .where(key == sa.bindparam("old_key"))
            .values({column.name: sa.bindparam(f"new_{column.name}") for column in columns})
        )
        connection.execute(statement, list(changed.values()))
    return len(changed)


def _redacted(
    text: str | None, tokens: Mapping[str, str], dumps: Callable[[Any], str]
) -> str | None:
    """The JSON ``text`` with the ids of ``tokens`` replaced; ``None`` when it names none."""
    if text is None:
        return None
    before = json.loads(text)
    after = redact_value(before, tokens)
    return None if after == before else dumps(after)
