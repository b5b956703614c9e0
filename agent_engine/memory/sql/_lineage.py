"""Forks as tables (``ae_forks``, ``ae_fork_hidden``), beside the items.

A fork is recorded by an insert that does nothing on a taken scope (``ON CONFLICT``), so two
processes forking one scope at once end with one record and one
:class:`~agent_engine.errors.ValidationError`, never a driver's integrity error. Hiding ids
locks the fork's row before it reads whether the fork is attached, and detaching updates that
row, so a detach and a hide of one fork take turns: no hidden id is left behind a detach.
Unhiding (what an erase calls) deletes an id's rows of every fork, found by the item id's index.
Dropping a fork deletes its row before its hidden rows, in one transaction: a concurrent hide
holding the row's lock finishes first (and its rows go too), or waits and finds no fork.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from agent_engine.memory.lineage import (
    Fork,
    check_hidden,
    check_record,
    check_scope,
    check_unhidden,
    fork_taken,
)
from agent_engine.memory.sql._audit import Runner
from agent_engine.memory.sql._meta import upsert_into
from agent_engine.memory.sql._rows import decode_time, encode_time
from agent_engine.memory.sql._schema import fork_hidden, forks
from agent_engine.models import Tier

__all__ = ["SQLLineageStore"]

_CHUNK = 500
"""Hidden ids inserted (or unhidden) per statement (a fork may come to hide a large scope)."""


def _fork(row: Any) -> Fork:
    return Fork(
        namespace=row.namespace,
        tier=Tier(row.tier),
        parent=row.parent,
        forked_at=decode_time(row.forked_at),
        checkpoint=row.checkpoint,
        detached=bool(row.detached),
    )


def _of(table: sa.Table, namespace: str, tier: Tier) -> tuple[sa.ColumnElement[bool], ...]:
    return (table.c.namespace == namespace, table.c.tier == tier.value)


class SQLLineageStore:
    """Implements :class:`~agent_engine.memory.lineage.LineageStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def record(self, fork: Fork) -> None:
        """Store a new fork record (as given: a detached one stays detached)."""
        fork = check_record(fork)
        row = {
            "namespace": fork.namespace,
            "tier": fork.tier.value,
            "parent": fork.parent,
            "forked_at": encode_time(fork.forked_at),
            "checkpoint": fork.checkpoint,
            "detached": fork.detached,
        }

        def work(connection: sa.Connection) -> None:
            statement = upsert_into(connection)(forks).values(**row)
            added = statement.on_conflict_do_nothing().returning(forks.c.namespace)
            if connection.execute(added).first() is None:
                raise fork_taken(fork)

        self._write(work)

    def get(self, namespace: str, tier: Tier) -> Fork | None:
        """The scope's fork record, or ``None``."""
        query = sa.select(forks).where(*_of(forks, *check_scope(namespace, tier)))
        row = self._read(lambda connection: connection.execute(query).first())
        return None if row is None else _fork(row)

    def children(self, namespace: str, tier: Tier) -> list[Fork]:
        """The attached forks of the scope, by namespace."""
        namespace, tier = check_scope(namespace, tier)
        query = (
            sa.select(forks)
            .where(
                forks.c.parent == namespace,
                forks.c.tier == tier.value,
                forks.c.detached == sa.false(),
            )
            .order_by(forks.c.namespace)
        )
        rows = self._read(lambda connection: connection.execute(query).all())
        return [_fork(row) for row in rows]

    def all(self) -> list[Fork]:
        """Every fork record, by tier and namespace."""
        query = sa.select(forks).order_by(forks.c.tier, forks.c.namespace)
        rows = self._read(lambda connection: connection.execute(query).all())
        return [_fork(row) for row in rows]

    def detach(self, namespace: str, tier: Tier) -> bool:
        """Mark the fork detached, forgetting its hidden ids; whether it was attached."""
        namespace, tier = check_scope(namespace, tier)
        attached = (*_of(forks, namespace, tier), forks.c.detached == sa.false())

        def work(connection: sa.Connection) -> bool:
            updated = connection.execute(forks.update().where(*attached).values(detached=True))
            if updated.rowcount == 0:
                return False
            connection.execute(fork_hidden.delete().where(*_of(fork_hidden, namespace, tier)))
            return True

        return self._write(work)

    def hide(self, namespace: str, tier: Tier, item_ids: Sequence[str]) -> None:
        """Add ``item_ids`` to the attached fork's hidden ids (unknown or detached: nothing)."""
        namespace, tier = check_scope(namespace, tier)
        ids = check_hidden(item_ids)
        if not ids:
            return
        # Locked (PostgreSQL; SQLite's write transactions take the database), so a concurrent
        # detach waits for these rows and deletes them, or this sees the fork detached.
        state = sa.select(forks.c.detached).where(*_of(forks, namespace, tier)).with_for_update()
        rows = [{"namespace": namespace, "tier": tier.value, "item_id": i} for i in ids]

        def work(connection: sa.Connection) -> None:
            detached = connection.execute(state).scalar()
            if detached is None or detached:
                return
            insert = upsert_into(connection)(fork_hidden).on_conflict_do_nothing()
            for start in range(0, len(rows), _CHUNK):
                connection.execute(insert, rows[start : start + _CHUNK])

        self._write(work)

    def hidden(self, namespace: str, tier: Tier) -> frozenset[str]:
        """The fork's hidden ids (none if it is detached or not a fork)."""
        scope = _of(fork_hidden, *check_scope(namespace, tier))
        query = sa.select(fork_hidden.c.item_id).where(*scope)
        found = self._read(lambda connection: connection.execute(query).scalars().all())
        return frozenset(found)

    def unhide(self, item_ids: Sequence[str]) -> int:
        """Forget ``item_ids`` wherever a fork hides them; how many entries went (one write)."""
        ids = check_unhidden(item_ids)
        if not ids:
            return 0

        def work(connection: sa.Connection) -> int:
            removed = 0
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                statement = fork_hidden.delete().where(fork_hidden.c.item_id.in_(chunk))
                removed += connection.execute(statement).rowcount
            return removed

        return self._write(work)

    def drop(self, namespace: str, tier: Tier) -> bool:
        """Forget the scope's fork record and its hidden ids; whether there was one (one write)."""
        namespace, tier = check_scope(namespace, tier)

        def work(connection: sa.Connection) -> bool:
            # The record first: it takes the row's lock that ``hide`` takes (see the module).
            deleted = connection.execute(forks.delete().where(*_of(forks, namespace, tier)))
            connection.execute(fork_hidden.delete().where(*_of(fork_hidden, namespace, tier)))
            return deleted.rowcount > 0

        return self._write(work)
