"""Checkpoints as a table (``ae_checkpoints``): each scope's saved states, beside its items.

A checkpoint's data is its scope's export text (:mod:`agent_engine.memory.export`), stored
whole in the row: one read gives it back. Listing a scope reads the small columns only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from agent_engine.errors import ValidationError
from agent_engine.memory.checkpoints import (
    Checkpoint,
    check_checkpoint_id,
    check_save,
    check_scope,
    mentions,
)
from agent_engine.memory.sql._audit import Runner, where_text_names
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import checkpoints
from agent_engine.models import Tier

__all__ = ["SQLCheckpointStore"]

_META = [c for c in checkpoints.c if c.name != "data"]
_CHUNK = 100
"""Ids looked for per statement (each is a LIKE: SQLite bounds an expression's depth)."""


def _checkpoint(row: Any) -> Checkpoint:
    return Checkpoint(
        id=row.id,
        namespace=row.namespace,
        tier=Tier(row.tier),
        label=row.label,
        items=row.items,
        created_at=decode_time(row.created_at),
    )


class SQLCheckpointStore:
    """Implements :class:`~agent_engine.memory.checkpoints.CheckpointStore` in the database."""

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def save(self, checkpoint: Checkpoint, data: str) -> None:
        """Store a new checkpoint with its data."""
        checkpoint, data = check_save(checkpoint, data)
        row = {
            "id": checkpoint.id,
            "namespace": checkpoint.namespace,
            "tier": checkpoint.tier.value,
            "label": checkpoint.label,
            "items": checkpoint.items,
            "created_at": encode_time(checkpoint.created_at),
            "data": data,
        }
        try:
            self._write(lambda connection: connection.execute(checkpoints.insert(), [row]))
        except exc.IntegrityError as error:
            raise ValidationError(
                f"a checkpoint with id {checkpoint.id!r} is saved already",
                field="id",
                value=checkpoint.id,
            ) from error

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""
        query = sa.select(*_META).where(checkpoints.c.id == check_checkpoint_id(checkpoint_id))
        row = self._read(lambda connection: connection.execute(query).first())
        return None if row is None else _checkpoint(row)

    def data(self, checkpoint_id: str) -> str | None:
        """The saved memory of a checkpoint, or ``None``."""
        query = sa.select(checkpoints.c.data).where(
            checkpoints.c.id == check_checkpoint_id(checkpoint_id)
        )
        found = self._read(lambda connection: connection.execute(query).scalar())
        return None if found is None else str(found)

    def of_scope(self, namespace: str, tier: Tier) -> list[Checkpoint]:
        """One scope's checkpoints, newest first."""
        namespace, tier = check_scope(namespace, tier)
        query = (
            sa.select(*_META)
            .where(checkpoints.c.namespace == namespace, checkpoints.c.tier == tier.value)
            .order_by(checkpoints.c.created_at.desc(), checkpoints.c.id.desc())
        )
        rows = self._read(lambda connection: connection.execute(query).all())
        return [_checkpoint(row) for row in rows]

    def all(self) -> list[Checkpoint]:
        """Every scope's checkpoints, newest first."""
        query = sa.select(*_META).order_by(checkpoints.c.created_at.desc(), checkpoints.c.id.desc())
        return [_checkpoint(row) for row in self._read(lambda c: c.execute(query).all())]

    def delete(self, checkpoint_id: str) -> bool:
        """Forget a checkpoint; whether there was one."""
        statement = checkpoints.delete().where(
            checkpoints.c.id == check_checkpoint_id(checkpoint_id)
        )
        return bool(self._write(lambda connection: connection.execute(statement).rowcount))

    def drop_holding(self, item_ids: Sequence[str]) -> int:
        """Delete the checkpoints naming any of ``item_ids``; how many (one transaction).

        ``LIKE`` finds the candidates a chunk of ids at a time (a superset: it ignores case on
        SQLite), and each candidate's text decides, as every store decides.
        """
        ids = list(item_ids)
        if not ids:
            return 0

        def work(connection: sa.Connection) -> int:
            doomed: set[str] = set()
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                sought = mentions(chunk)
                query = sa.select(checkpoints.c.id, checkpoints.c.data).where(
                    where_text_names([checkpoints.c.data], chunk)
                )
                doomed.update(
                    row.id
                    for row in connection.execute(query)
                    if any(m in row.data for m in sought)
                )
            if doomed:
                connection.execute(checkpoints.delete().where(checkpoints.c.id.in_(doomed)))
            return len(doomed)

        return self._write(work)
