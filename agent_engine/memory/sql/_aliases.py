"""Each namespace's aliases as a table (``ae_aliases``), one row per term and expansion.

A write reads the namespace's terms, checks the limits and writes, in one transaction. On
PostgreSQL it first takes a transaction-scoped advisory lock on the namespace, so two
processes adding to one namespace at once cannot both pass the limits on what each read;
SQLite's write transactions are serialized already.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from agent_engine.memory.aliases import (
    check_add,
    check_namespace,
    check_remove,
    merged,
    ordered,
)
from agent_engine.memory.sql._audit import Runner
from agent_engine.memory.sql._schema import aliases

__all__ = ["SQLAliasStore"]


def _held(connection: sa.Connection, namespace: str) -> dict[str, list[str]]:
    rows = connection.execute(
        sa.select(aliases.c.term, aliases.c.expansion).where(aliases.c.namespace == namespace)
    )
    terms: dict[str, list[str]] = {}
    for term, expansion in rows:
        terms.setdefault(term, []).append(expansion)
    return terms


def _lock(connection: sa.Connection, namespace: str) -> None:
    """Serialize the namespace's alias writes on PostgreSQL (see the module)."""
    if connection.dialect.name == "postgresql":
        key = sa.func.hashtext(sa.literal(f"ae_aliases:{namespace}"))
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))


class SQLAliasStore:
    """Implements :class:`~agent_engine.memory.aliases.AliasStore` on the backend's database.

    ``read``/``write`` run a function in a (retried) read or write transaction of the backend.
    """

    def __init__(self, read: Runner, write: Runner) -> None:
        self._read = read
        self._write = write

    def add(self, namespace: str, term: str, expansions: Sequence[str]) -> tuple[str, ...]:
        """Give ``term`` these expansions too; return all of its expansions."""
        namespace, key, added = check_add(namespace, term, expansions)

        def work(connection: sa.Connection) -> tuple[str, ...]:
            _lock(connection, namespace)
            terms = _held(connection, namespace)
            held = terms.get(key, [])
            result = merged(key, held, added, terms=len(terms))
            new = [e for e in result if e not in held]
            if new:
                connection.execute(
                    aliases.insert(),
                    [{"namespace": namespace, "term": key, "expansion": e} for e in new],
                )
            return result

        return self._write(work)

    def remove(self, namespace: str, term: str, expansions: Sequence[str] | None = None) -> int:
        """Take expansions (``None``: all) from ``term``; return how many were removed."""
        namespace, key, taken = check_remove(namespace, term, expansions)
        statement = aliases.delete().where(aliases.c.namespace == namespace, aliases.c.term == key)
        if taken is not None:
            statement = statement.where(aliases.c.expansion.in_(taken))

        def work(connection: sa.Connection) -> int:
            _lock(connection, namespace)
            return int(connection.execute(statement).rowcount)

        return self._write(work)

    def of_namespace(self, namespace: str) -> dict[str, tuple[str, ...]]:
        """A namespace's terms and their expansions."""
        namespace = check_namespace(namespace)
        terms = self._read(lambda connection: _held(connection, namespace))
        return {term: ordered(terms[term]) for term in sorted(terms)}

    def namespaces(self) -> list[str]:
        """The namespaces that hold aliases."""
        query = sa.select(aliases.c.namespace).distinct().order_by(aliases.c.namespace)
        return list(self._read(lambda connection: connection.execute(query).scalars().all()))
