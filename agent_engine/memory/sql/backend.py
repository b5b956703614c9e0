"""The SQL backend: SQLAlchemy Core on an embedded SQLite file or a PostgreSQL server.

Every public write is one transaction, so a batch is stored whole or not at all and a crash
mid-batch leaves what was committed before it intact. Filters, ordering and limits run in the
database (:mod:`._filters`); exact vector search streams the matching vectors in bounded,
SQL-filtered chunks through the inherited scan, so no call loads a whole table.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.pool import StaticPool

from agent_engine._log import get_logger
from agent_engine.embeddings import Embedder, Matrix
from agent_engine.errors import (
    BackendError,
    BackendUnavailableError,
    DimensionMismatchError,
    DuplicateItemError,
    ItemNotFoundError,
    QueryTimeoutError,
)
from agent_engine.filters import Filter, Order
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import BaseBackend, Capabilities
from agent_engine.memory.sql._audit import SQLAuditStore
from agent_engine.memory.sql._engine import (
    IMMEDIATE,
    SNAPSHOT_FREE,
    TIMEOUT_ENV,
    create_engine,
    default_database_url,
    resolve_statement_timeout,
    retrying,
    timed_out,
)
from agent_engine.memory.sql._filters import select_items, where_clause
from agent_engine.memory.sql._migrate import check_revision, current_revision, upgrade
from agent_engine.memory.sql._rows import encode_time, item_row, row_item, tag_rows
from agent_engine.memory.sql._schema import item_tags, items
from agent_engine.models import ContextItem

__all__ = ["SQLAlchemyBackend"]

T = TypeVar("T")

_ID_CHUNK = 5000
"""Ids per ``IN (...)`` list: far below SQLite's and PostgreSQL's parameter limits."""


class SQLAlchemyBackend(BaseBackend):
    """Items in a SQL database: ``sqlite:///PATH``, ``sqlite://`` (in memory) or PostgreSQL.

    ``url`` defaults to :func:`default_database_url` (``$AGENT_ENGINE_DB``, else a SQLite file
    in the user's data directory). A database without a schema gets one (``create``); one at
    an older schema revision is refused with the command that upgrades it, unless
    ``upgrade`` is true; one written by a newer agent_engine is always refused and never
    written to. ``embedder`` and ``dim`` are as for
    :class:`~agent_engine.memory.inmemory.InMemoryBackend`.

    ``statement_timeout`` bounds every statement, in seconds: ``None`` takes
    ``$AGENT_ENGINE_STATEMENT_TIMEOUT``, else 30; ``0`` sets no limit. A statement that runs
    past it is cancelled, its transaction rolled back, and the call raises
    :class:`~agent_engine.errors.QueryTimeoutError`.
    """

    capabilities = Capabilities(vector_search=True, persistent=True, atomic_batches=True)

    def __init__(
        self,
        url: str | None = None,
        *,
        embedder: Embedder | None = None,
        dim: int | None = None,
        upgrade: bool = False,
        create: bool = True,
        statement_timeout: float | None = None,
    ) -> None:
        self.url = url if url is not None else default_database_url()
        self.embedder = embedder
        self.dim = dim
        self.statement_timeout = resolve_statement_timeout(statement_timeout)
        self._engine = create_engine(self.url, timeout_s=self.statement_timeout)
        self._dialect = self._engine.dialect.name
        # One shared connection (an in-memory SQLite database) must not interleave threads.
        shared = isinstance(self._engine.pool, StaticPool)
        self._guard: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if shared else contextlib.nullcontext()
        )
        self._stored_dim: int | None = None
        self._closed = False
        self._log = get_logger(backend="sql", dialect=self._engine.dialect.name)
        try:
            self._open(upgrade=upgrade, create=create)
        except BaseException:
            self._engine.dispose()
            raise
        self._audit_store: AuditStore = SQLAuditStore(self._read, self._write)

    def __repr__(self) -> str:
        return f"SQLAlchemyBackend({self._engine.url.render_as_string(hide_password=True)!r})"

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (for inspection and maintenance; writes go through the API)."""
        return self._engine

    def _open(self, *, upgrade: bool, create: bool) -> None:
        current = self._read(current_revision)
        if current is None and create:
            self._migrate()
            return
        try:
            check_revision(current, url=self.url)
        except BackendError as error:
            if upgrade and getattr(error, "current", None) is not None:
                self._migrate()
                return
            raise

    def _migrate(self) -> None:
        upgrade(self._engine, url=self.url)
        self._log.info("schema upgraded")

    # ------------------------------------------------------------------ transactions

    def _transaction(
        self, work: Callable[[sa.Connection], T], *, write: bool, single: bool = False
    ) -> T:
        if self._closed:
            raise BackendError("this SQLAlchemyBackend is closed", backend="SQLAlchemyBackend")

        def attempt() -> T:
            with self._guard, self._engine.connect() as connection:
                if write:
                    connection.execution_options(**{IMMEDIATE: True})
                elif single:
                    connection.execution_options(**{SNAPSHOT_FREE: True})
                with connection.begin():
                    return work(connection)

        try:
            return retrying(attempt, "write" if write else "read")
        except exc.OperationalError as error:
            if self.statement_timeout and timed_out(error):
                raise QueryTimeoutError(
                    f"a statement ran past the statement timeout of {self.statement_timeout:g} s "
                    "and was cancelled; its transaction was rolled back (raise the limit with "
                    f"statement_timeout= or ${TIMEOUT_ENV})",
                    timeout=self.statement_timeout,
                    backend="SQLAlchemyBackend",
                ) from error
            raise BackendUnavailableError(
                f"database error: {error.orig}", backend="SQLAlchemyBackend"
            ) from error
        except exc.SQLAlchemyError as error:
            if isinstance(error, exc.IntegrityError):
                raise
            raise BackendError(f"database error: {error}", backend="SQLAlchemyBackend") from error

    def _read(self, work: Callable[[sa.Connection], T]) -> T:
        return self._transaction(work, write=False)

    def _read_one(self, work: Callable[[sa.Connection], T]) -> T:
        """A read of one statement (atomic by itself; no transaction round trip on SQLite)."""
        return self._transaction(work, write=False, single=True)

    def _write(self, work: Callable[[sa.Connection], T]) -> T:
        return self._transaction(work, write=True)

    # ------------------------------------------------------------------ primitives

    def _insert(self, batch: list[ContextItem]) -> None:
        rows = [item_row(item) for item in batch]
        tags = tag_rows(batch)
        ids = [item.id for item in batch]

        def work(connection: sa.Connection) -> None:
            self._check_dims(connection, batch)
            existing = _existing(connection, ids)
            if existing:
                raise DuplicateItemError(next(i for i in ids if i in existing))
            self._bulk_insert(connection, rows, tags)

        try:
            self._write(work)
        except exc.IntegrityError as error:
            # Another process stored one of these ids between our check and our insert.
            existing = self._read(lambda connection: _existing(connection, ids))
            if existing:
                raise DuplicateItemError(next(i for i in ids if i in existing)) from None
            raise BackendError(
                f"database error: {error.orig}", backend="SQLAlchemyBackend"
            ) from error

    def _bulk_insert(
        self, connection: sa.Connection, rows: list[dict[str, Any]], tags: list[dict[str, str]]
    ) -> None:
        """Insert rows; on SQLite straight through the driver's ``executemany``.

        SQLAlchemy's per-row parameter processing would cost a third of a bulk insert there;
        the statement is still compiled from the table, so columns cannot drift.
        """
        if connection.dialect.name != "sqlite":
            connection.execute(items.insert(), rows)
            if tags:
                connection.execute(item_tags.insert(), tags)
            return
        for table, batch in ((items, rows), (item_tags, tags)):
            if batch:
                columns = list(table.c.keys())
                statement = str(table.insert().compile(dialect=connection.dialect))
                connection.exec_driver_sql(
                    statement, [tuple(row[c] for c in columns) for row in batch]
                )

    def _fetch(self, item_ids: list[str]) -> dict[str, ContextItem]:
        def work(connection: sa.Connection) -> list[Any]:
            found: list[Any] = []
            for chunk in _chunks(item_ids):
                found.extend(connection.execute(sa.select(items).where(items.c.id.in_(chunk))))
            return found

        return {row.id: row_item(row) for row in self._read(work)}

    def _replace(self, batch: list[ContextItem]) -> None:
        ids = [item.id for item in batch]
        rows = []
        for item in batch:
            row = item_row(item)
            row["key"] = row.pop("id")
            rows.append(row)
        tags = tag_rows(batch)
        statement = items.update().where(items.c.id == sa.bindparam("key"))

        def work(connection: sa.Connection) -> None:
            existing = _existing(connection, ids)
            missing = next((i for i in ids if i not in existing), None)
            if missing is not None:
                raise ItemNotFoundError(missing)
            self._check_dims(connection, batch)
            connection.execute(statement, rows)
            for chunk in _chunks(ids):
                connection.execute(item_tags.delete().where(item_tags.c.item_id.in_(chunk)))
            if tags:
                connection.execute(item_tags.insert(), tags)

        self._write(work)

    def _remove(self, item_ids: list[str]) -> int:
        def work(connection: sa.Connection) -> int:
            removed = 0
            for chunk in _chunks(item_ids):
                removed += connection.execute(items.delete().where(items.c.id.in_(chunk))).rowcount
            return removed

        return self._write(work)

    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        query = select_items(where, order, limit, self._dialect)
        rows = self._read_one(lambda connection: connection.execute(query).all())
        return [row_item(row) for row in rows]

    def _count(self, where: Filter) -> int:
        query = (
            sa.select(sa.func.count()).select_from(items).where(where_clause(where, self._dialect))
        )
        return int(self._read_one(lambda connection: connection.execute(query).scalar_one()))

    def _delete_where(self, where: Filter) -> int:
        statement = items.delete().where(where_clause(where, self._dialect))
        return self._write(lambda connection: connection.execute(statement).rowcount)

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        """One ``UPDATE ... SET access_count = access_count + 1``: concurrent counts add up."""
        stamp = encode_time(at)

        def work(connection: sa.Connection) -> int:
            touched = 0
            for chunk in _chunks(item_ids):
                statement = (
                    items.update()
                    .where(items.c.id.in_(chunk))
                    .values(access_count=items.c.access_count + 1, last_accessed_at=stamp)
                )
                touched += connection.execute(statement).rowcount
            return touched

        return self._write(work)

    def _scan_vectors(self, where: Filter, chunk: int) -> Iterator[tuple[list[str], Matrix]]:
        """Matching vectors in id order, one keyset-paginated query per chunk.

        Each chunk is its own short read, so a long search holds no transaction open between
        chunks and never more than ``chunk`` vectors in memory.
        """
        condition = sa.and_(where_clause(where, self._dialect), items.c.embedding.is_not(None))
        after: str | None = None
        while True:
            query = sa.select(items.c.id, items.c.embedding).where(condition)
            if after is not None:
                query = query.where(items.c.id > after)
            query = query.order_by(items.c.id).limit(chunk)
            rows = self._read_one(_fetch_all(query))
            if not rows:
                return
            ids = [row.id for row in rows]
            size = len(rows[0].embedding)
            same = [row for row in rows if len(row.embedding) == size]
            matrix = np.frombuffer(b"".join(row.embedding for row in same), dtype="<f4")
            yield [row.id for row in same], matrix.reshape(len(same), size // 4)
            if len(rows) < chunk:
                return
            after = ids[-1]

    def _check_dims(self, connection: sa.Connection, batch: list[ContextItem]) -> None:
        """Vectors share one size: the embedder's, ``dim``, or that of the vectors stored."""
        expected = self._vector_dim() or self._stored_dim
        if expected is None:
            stored = connection.execute(
                sa.select(sa.func.length(items.c.embedding))
                .where(items.c.embedding.is_not(None))
                .limit(1)
            ).scalar()
            if stored is not None:
                expected = self._stored_dim = int(stored) // 4
        for item in batch:
            if item.embedding is None:
                continue
            expected = expected or item.embedding.shape[0]
            if item.embedding.shape[0] != expected:
                raise DimensionMismatchError(
                    f"item {item.id!r} has a {item.embedding.shape[0]}-dimensional vector; "
                    f"this store holds {expected}-dimensional vectors",
                    field="embedding",
                    value=item.id,
                )

    def close(self) -> None:
        """Release the connection pool; the backend is unusable afterwards."""
        self._closed = True
        self._engine.dispose()


def _fetch_all(query: sa.Select[Any]) -> Callable[[sa.Connection], list[Any]]:
    return lambda connection: list(connection.execute(query).all())


def _chunks(values: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), _ID_CHUNK):
        yield values[start : start + _ID_CHUNK]


def _existing(connection: sa.Connection, ids: list[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(ids):
        found.update(
            connection.execute(sa.select(items.c.id).where(items.c.id.in_(chunk))).scalars()
        )
    return found
