"""Recorded conflicts as a table (``ae_conflicts``), beside the items they name.

Both items are foreign keys of ``ae_items`` with ``ON DELETE CASCADE``: a delete, a clear or
an erase of an item removes its conflicts in the same transaction, on every dialect (SQLite
connections turn foreign keys on), so this store has no removal of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from agent_engine.errors import BackendError, ItemNotFoundError, ValidationError
from agent_engine.memory.conflicts import (
    Conflict,
    check_id,
    check_item_ids,
    check_record,
    check_resolve,
    check_scope_read,
    newest_first,
)
from agent_engine.memory.sql._audit import Runner
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import conflicts, items
from agent_engine.models import Tier

__all__ = ["SQLConflictStore"]

_CHUNK = 400
"""Item ids per lookup (twice that many bound parameters, within every dialect's limit)."""


class SQLConflictStore:
    """Implements :class:`~agent_engine.memory.conflicts.ConflictStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def record(self, conflicts_: Sequence[Conflict]) -> None:
        """Store new conflicts, all or none, in one transaction."""
        batch = check_record(conflicts_)
        if not batch:
            return
        named = list(dict.fromkeys(i for c in batch for i in c.item_ids))
        rows = [_row(conflict) for conflict in batch]

        def work(connection: sa.Connection) -> None:
            _require_items(connection, named)
            ids = [row["id"] for row in rows]
            taken = connection.execute(
                sa.select(conflicts.c.id).where(conflicts.c.id.in_(ids)).limit(1)
            ).scalar()
            if taken is not None:
                raise ValidationError(
                    f"a conflict with id {taken!r} is already recorded", field="id", value=taken
                )
            connection.execute(conflicts.insert(), rows)

        try:
            self._write(work)
        except exc.IntegrityError as error:
            # An item was deleted by another process between the check and the insert.
            self._read(lambda connection: _require_items(connection, named))
            raise BackendError(
                f"database error: {error.orig}", backend="SQLAlchemyBackend"
            ) from error

    def get(self, conflict_id: str) -> Conflict | None:
        """The conflict with this id, or ``None``."""
        query = sa.select(conflicts).where(conflicts.c.id == check_id(conflict_id))
        row = self._read(lambda connection: connection.execute(query).first())
        return None if row is None else _conflict(row)

    def of_scope(
        self,
        namespace: str,
        tier: Tier,
        *,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[Conflict]:
        """One scope's conflicts, newest first (ties by id, newest first)."""
        wanted = check_scope_read(namespace, tier, limit)
        query = sa.select(conflicts).where(
            conflicts.c.namespace == namespace, conflicts.c.tier == wanted.value
        )
        if not include_resolved:
            query = query.where(conflicts.c.resolved_at.is_(None))
        query = query.order_by(conflicts.c.detected_at.desc(), conflicts.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        rows = self._read(lambda connection: connection.execute(query).all())
        return [_conflict(row) for row in rows]

    def of_items(
        self, item_ids: Iterable[str], *, include_resolved: bool = False
    ) -> list[Conflict]:
        """The conflicts naming any of ``item_ids``, newest first (unresolved unless asked).

        Both item columns are indexed: a lookup per chunk of ids, whatever the scope holds.
        """
        ids = check_item_ids(item_ids)
        found: dict[str, Conflict] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            query = sa.select(conflicts).where(
                sa.or_(conflicts.c.item_a.in_(chunk), conflicts.c.item_b.in_(chunk))
            )
            if not include_resolved:
                query = query.where(conflicts.c.resolved_at.is_(None))
            found.update((row.id, _conflict(row)) for row in self._read(_rows(query)))
        return newest_first(found.values())

    def resolve(self, conflict_id: str, *, kept: str, at: datetime) -> Conflict | None:
        """Mark an unresolved conflict resolved with ``kept``; ``None`` if it was not.

        One conditional ``UPDATE``: of two processes resolving one conflict, one changes the
        row and the other finds nothing to change.
        """
        check_resolve(conflict_id, kept, at)
        statement = (
            conflicts.update()
            .where(
                conflicts.c.id == conflict_id,
                conflicts.c.resolved_at.is_(None),
                sa.or_(conflicts.c.item_a == kept, conflicts.c.item_b == kept),
            )
            .values(resolved_at=encode_time(at), kept=kept)
        )

        def work(connection: sa.Connection) -> Any:
            if connection.execute(statement).rowcount != 1:
                return None
            return connection.execute(
                sa.select(conflicts).where(conflicts.c.id == conflict_id)
            ).one()

        row = self._write(work)
        return None if row is None else _conflict(row)


def _rows(query: sa.Select[Any]) -> Callable[[sa.Connection], list[Any]]:
    return lambda connection: list(connection.execute(query).all())


def _require_items(connection: sa.Connection, item_ids: list[str]) -> None:
    """Raise :class:`ItemNotFoundError` for the first of ``item_ids`` not stored."""
    held = set(connection.execute(sa.select(items.c.id).where(items.c.id.in_(item_ids))).scalars())
    missing = next((item_id for item_id in item_ids if item_id not in held), None)
    if missing is not None:
        raise ItemNotFoundError(missing)


def _row(conflict: Conflict) -> dict[str, Any]:
    return {
        "id": conflict.id,
        "tier": conflict.tier.value,
        "namespace": conflict.namespace,
        "item_a": conflict.item_a,
        "item_b": conflict.item_b,
        "version_a": conflict.version_a,
        "version_b": conflict.version_b,
        "type": conflict.type.value,
        "reason": conflict.reason,
        "detected_at": encode_time(conflict.detected_at),
        "resolved_at": None if conflict.resolved_at is None else encode_time(conflict.resolved_at),
        "kept": conflict.kept,
    }


def _conflict(row: Any) -> Conflict:
    return Conflict(
        id=row.id,
        tier=row.tier,
        namespace=row.namespace,
        item_a=row.item_a,
        item_b=row.item_b,
        version_a=row.version_a,
        version_b=row.version_b,
        type=row.type,
        reason=row.reason,
        detected_at=decode_time(row.detected_at),
        resolved_at=None if row.resolved_at is None else decode_time(row.resolved_at),
        kept=row.kept,
    )
