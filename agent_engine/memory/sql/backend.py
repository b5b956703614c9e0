"""The SQL backend: SQLAlchemy Core on an embedded SQLite file or a PostgreSQL server.

Every public write is one transaction, so a batch is stored whole or not at all and a crash
mid-batch leaves what was committed before it intact. Filters, ordering and limits run in the
database (:mod:`._filters`). On PostgreSQL with pgvector (:mod:`._pgvector`) vector search is
one SQL statement over an HNSW index. On SQLite, vector and BM25 search run on indexes held
in the process and saved in files beside the database (:mod:`._sidecar`), which follow the
database's change log, so they see every writer's changes; plain PostgreSQL (and SQLite with
``indexed=False``) streams the matching vectors in bounded, SQL-filtered chunks through the
inherited scan, so no call loads a whole table. On PostgreSQL lexical search is an
in-process BM25 index per scope, kept in step through the scope log (:mod:`._scope_log`) and
restored from the index saved in the database (:mod:`._snapshots`), or (``fulltext=True``)
the database's full-text search (:mod:`._fulltext`).

Other processes write the same database, so what a backend object knows is checked where it
matters, in the database (:mod:`._meta`): every write that carries vectors reads the store's
recorded embedder in its own transaction (and records it with the first vector), every
vector search reads it before scanning, and every write bumps its scopes' change counters in
its own transaction and logs what it changed (:mod:`._scope_log`), which in-process
lexical indexes compare and catch up with on every use.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.pool import StaticPool

from agent_engine._log import get_logger
from agent_engine.embeddings import Embedder, EmbedderIdentity, Matrix, normalize_rows
from agent_engine.errors import (
    BackendError,
    BackendUnavailableError,
    DuplicateItemError,
    ItemNotFoundError,
    QueryTimeoutError,
    ReembedRequiredError,
    ValidationError,
)
from agent_engine.filters import Filter, Order
from agent_engine.memory._vector_search import search_rows
from agent_engine.memory.aliases import AliasStore
from agent_engine.memory.audit import AuditStore
from agent_engine.memory.backend import (
    REEMBED_COMMAND,
    AsyncReads,
    BaseBackend,
    ScopeVersions,
    SearchHit,
    Written,
    binding_identity,
    check_identity,
    check_vectors,
    in_scope,
    mixed_sizes,
    scope_filter,
)
from agent_engine.memory.checkpoints import CheckpointStore
from agent_engine.memory.conflicts import ConflictStore
from agent_engine.memory.grants import GrantStore
from agent_engine.memory.lineage import LineageStore
from agent_engine.memory.queue import QueueStore
from agent_engine.memory.sql import _pgvector
from agent_engine.memory.sql import _snapshots as snapshots
from agent_engine.memory.sql._aliases import SQLAliasStore
from agent_engine.memory.sql._audit import SQLAuditStore, redact_events, redact_json
from agent_engine.memory.sql._changes import forget as forget_changes
from agent_engine.memory.sql._checkpoints import SQLCheckpointStore
from agent_engine.memory.sql._conflicts import SQLConflictStore
from agent_engine.memory.sql._engine import (
    IMMEDIATE,
    SNAPSHOT_FREE,
    TIMEOUT_ENV,
    PlannerStatistics,
    create_async_engine,
    create_engine,
    default_database_url,
    flush_erased,
    resolve_statement_timeout,
    retrying,
    sqlite_file,
    timed_out,
)
from agent_engine.memory.sql._filters import (
    chunks,
    count_items,
    items_by_id,
    select_items,
    where_clause,
)
from agent_engine.memory.sql._fulltext import FullTextScope
from agent_engine.memory.sql._grants import SQLGrantStore
from agent_engine.memory.sql._lineage import SQLLineageStore
from agent_engine.memory.sql._meta import (
    Reembedding,
    StoreMeta,
    bump_versions,
    holds_vectors,
    read_meta,
    read_versions,
    write_identity,
    write_reembedding,
)
from agent_engine.memory.sql._migrate import check_revision, current_revision, upgrade
from agent_engine.memory.sql._queue import SQLQueueStore
from agent_engine.memory.sql._rows import (
    encode_json,
    encode_time,
    encode_vector,
    item_row,
    row_item,
    tag_rows,
)
from agent_engine.memory.sql._schema import (
    audit_events,
    checkpoints,
    conflicts,
    fork_hidden,
    item_tags,
    items,
    lexical_snapshots,
    scope_log,
)
from agent_engine.memory.sql._scope_log import Changed, changed_since, record, record_erased
from agent_engine.memory.sql._sidecar import IndexFiles, ScopeKey
from agent_engine.models import MAX_COUNT, ArchiveReason, ContextItem, Tier, Vector
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.lexical import LexicalScope

__all__ = ["SQLAlchemyBackend"]

T = TypeVar("T")

_WALK_LIMIT = 16_384
"""Ranked rows a filtered search walks before asking the database for the matches."""


class SQLAlchemyBackend(BaseBackend):
    """Items in a SQL database: ``sqlite:///PATH``, ``sqlite://`` (in memory) or PostgreSQL.

    ``url`` defaults to :func:`default_database_url` (``$AGENT_ENGINE_DB``, else a SQLite file
    in the user's data directory). A database without a schema gets one (``create``); one at
    an older schema revision is refused with the command that upgrades it, unless
    ``upgrade`` is true; one written by a newer agent_engine is always refused and never
    written to. ``embedder`` and ``dim`` are as for
    :class:`~agent_engine.memory.inmemory.InMemoryBackend`; a store whose vectors another
    embedder made is refused (:class:`~agent_engine.errors.DimensionMismatchError`, or
    :class:`~agent_engine.errors.EmbedderMismatchError` for another model of the same
    dimension) until it is re-embedded. Without either, the backend takes the store's.

    ``read_only`` opens the database without ever writing to it: no schema is created or
    upgraded (a database without one raises :class:`~agent_engine.errors.SchemaVersionError`
    with ``current=None``), the connections cannot write, and every write method raises
    :class:`~agent_engine.errors.BackendError` before reaching the database. Tools that
    only look (the command's ``memory list``) open stores this way.

    ``statement_timeout`` bounds every statement, in seconds: ``None`` takes
    ``$AGENT_ENGINE_STATEMENT_TIMEOUT``, else 30; ``0`` sets no limit. A statement that runs
    past it is cancelled, its transaction rolled back, and the call raises
    :class:`~agent_engine.errors.QueryTimeoutError`.

    On SQLite, ``indexed`` (the default) searches vectors and text through indexes kept in
    files beside the database, in ``index_path`` (default: the database file's path plus
    ``.indexes``; an in-memory database keeps them in memory only): loaded on first use,
    caught up with every writer's changes before each search, rebuilt from the records when
    missing, damaged or another store's, and saved after a rebuild and by :meth:`close`.
    ``indexed=False`` scans the database instead. On PostgreSQL both are ignored.

    On PostgreSQL, text is searched by an in-process BM25 index per scope (the default):
    restored from the index the database keeps saved (:mod:`._snapshots`), then caught up
    with every writer's changes before each use through the scope log (:mod:`._scope_log`).
    ``fulltext=True`` answers from the database's full-text search instead: nothing built or
    held in the process, at the price of scoring every match in SQL (seconds a query once a
    scope holds 100k items whose words are common). The URL may say it too, for commands
    that take only a URL: ``?fulltext=on`` (or ``off``); the argument, when given, wins.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        embedder: Embedder | None = None,
        dim: int | None = None,
        upgrade: bool = False,
        create: bool = True,
        read_only: bool = False,
        statement_timeout: float | None = None,
        indexed: bool = True,
        index_path: str | Path | None = None,
        fulltext: bool | None = None,
    ) -> None:
        self.url, from_url = _fulltext_option(url if url is not None else default_database_url())
        self.embedder = embedder
        self.dim = dim
        self.read_only = read_only
        self.statement_timeout = resolve_statement_timeout(statement_timeout)
        self._engine = create_engine(
            self.url, read_only=read_only, timeout_s=self.statement_timeout
        )
        self._dialect = self._engine.dialect.name
        self._statistics = PlannerStatistics()
        # One shared connection (an in-memory SQLite database) must not interleave threads.
        shared = isinstance(self._engine.pool, StaticPool)
        self._guard: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if shared else contextlib.nullcontext()
        )
        self._closed = False
        self._log = get_logger(backend="sql", dialect=self._engine.dialect.name)
        self._pgvector = False
        try:
            self._open(upgrade=upgrade and not read_only, create=create and not read_only)
            self._detect_vectors()
        except BaseException:
            self._engine.dispose()
            raise
        self._audit_store: AuditStore = SQLAuditStore(self._read, self._write)
        self._conflict_store: ConflictStore = SQLConflictStore(self._read, self._write)
        self._alias_store: AliasStore = SQLAliasStore(self._read, self._write)
        self._grant_store: GrantStore = SQLGrantStore(self._read, self._write)
        self._lineage_store: LineageStore = SQLLineageStore(self._read, self._write)
        self._checkpoint_store: CheckpointStore = SQLCheckpointStore(self._read, self._write)
        self._queue_store = SQLQueueStore(self._read, self._write)
        self._files = self._index_files(index_path) if indexed else None
        wanted = next((f for f in (fulltext, from_url) if f is not None), False)
        self.fulltext = wanted and self._dialect == "postgresql"

    def __repr__(self) -> str:
        return f"SQLAlchemyBackend({self._engine.url.render_as_string(hide_password=True)!r})"

    @property
    def ingest_queue(self) -> QueueStore:
        """The ingestion queue's tables in this database (:mod:`agent_engine.ingest`)."""
        return self._queue_store

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (for inspection and maintenance; writes go through the API)."""
        return self._engine

    def _open(self, *, upgrade: bool, create: bool) -> None:
        current = self._read(current_revision)
        if current is None and create:
            self._migrate()
        else:
            try:
                check_revision(current, url=self.url)
            except BackendError as error:
                if not (upgrade and getattr(error, "current", None) is not None):
                    raise
                self._migrate()
        meta, bound = self._read(self._bound_meta)
        if meta.reembedding is not None:
            # Opening stays possible (reembed() needs it); vector search and writes refuse.
            self._log.warning("store awaits a re-embedding", detail=_reembed_message(meta))
            return
        check_identity(bound, self._identity())

    def _detect_vectors(self) -> None:
        """On PostgreSQL: find out (and log) whether vectors live in a pgvector column."""
        if self._dialect != "postgresql":
            return
        self._pgvector = self._read(_pgvector.holds_pgvector)
        if self._pgvector and not _pgvector.package_installed():
            raise BackendUnavailableError(
                f"{self!r} keeps its vectors in a pgvector column, and the pgvector package "
                f"is not installed: `{_pgvector.PGVECTOR_PACKAGE}`",
                backend="SQLAlchemyBackend",
            )
        if self._pgvector:
            _pgvector.register_adapters(self._engine)
            self._log.info("vector_search", search="pgvector", index="hnsw")
        else:
            self._log.info(
                "vector_search",
                search="scan",
                detail="vectors are blobs here and search scans them in Python; to search in "
                f"the database, {_pgvector.PGVECTOR_HOWTO}",
            )

    def _migrate(self) -> None:
        upgrade(self._engine, url=self.url)
        self._log.info("schema upgraded")

    def _index_files(self, index_path: str | Path | None) -> IndexFiles | None:
        """The indexes of a SQLite store (``None`` elsewhere), in files beside a file's."""
        if self._dialect != "sqlite":
            return None
        # The file the user named, not the engine's URL: a read-only engine connects through
        # a URI and its URL names no database, yet reads the same files.
        database = sqlite_file(self.url)
        folder: Path | None = None
        if index_path is not None:
            folder = Path(index_path)
        elif database is not None and not str(database).startswith("file:"):
            folder = Path(f"{database}.indexes")
        return IndexFiles(
            folder,
            read=self._read,
            read_one=self._read_one,
            fetch=self._fetch_rows,
            scope_items=lambda key: self._select(
                scope_filter(key), Order("id", descending=False), None
            ),
            scope_count=self._current_count,
            in_scope=in_scope,
            identity=self._stored_identity,
            read_only=self.read_only,
        )

    # ------------------------------------------------------------------ embedder identity

    def _bound(
        self, connection: sa.Connection, recorded: EmbedderIdentity | None, sizes: list[int]
    ) -> EmbedderIdentity | None:
        """The recorded identity if it binds (:func:`binding_identity`), read in ``connection``.

        Whether the store holds vectors is asked only when the recorded identity disagrees
        with this backend's or with one of ``sizes`` (of the vectors about to be written).
        """
        own = self._identity()

        def fits(identity: EmbedderIdentity) -> bool:
            agrees = own is None or identity.matches(own)
            return agrees and all(size == identity.dim for size in sizes)

        return binding_identity(recorded, lambda: holds_vectors(connection), fits)

    def _bound_meta(self, connection: sa.Connection) -> tuple[StoreMeta, EmbedderIdentity | None]:
        """The store's meta, and its identity if it binds this backend: one transaction's reads.

        A store being re-embedded binds to nothing yet: its users refuse it.
        """
        meta = read_meta(connection)
        if meta.reembedding is not None:
            return meta, None
        return meta, self._bound(connection, meta.identity, [])

    def _stored_identity(self) -> EmbedderIdentity | None:
        def work(connection: sa.Connection) -> EmbedderIdentity | None:
            recorded = read_meta(connection).identity
            return binding_identity(recorded, lambda: holds_vectors(connection))

        return self._read(work)

    def _search_identity(self) -> EmbedderIdentity | None:
        """The store's identity, read in the database on every search (in one transaction).

        Another process may have re-embedded the store since it was opened; a store being
        re-embedded is refused.
        """
        meta, bound = self._read(self._bound_meta)
        if meta.reembedding is not None:
            raise _reembed_required(meta)
        own = self._identity()
        check_identity(bound, own)
        return bound if bound is not None else own

    def _guard_vectors(self, connection: sa.Connection, batch: list[ContextItem]) -> None:
        """Check a write's vectors against the store's identity; record it with the first.

        Runs inside the write's transaction, so two processes cannot both record theirs.
        """
        sizes = [item.embedding.shape[0] for item in batch if item.embedding is not None]
        if not sizes:
            return
        meta = read_meta(connection)
        if meta.reembedding is not None:
            raise _reembed_required(meta)
        own = self._identity()
        expected = self._bound(connection, meta.identity, sizes)
        check_identity(expected, own)
        check_vectors(batch, expected if expected is not None else own)
        new = own if own is not None else EmbedderIdentity(None, sizes[0])
        if expected is None or (expected.name is None and new.name is not None):
            write_identity(connection, new)
            if self._pgvector:
                _pgvector.index_vectors(connection, new.dim)

    def _reembed_begin(self, target: EmbedderIdentity) -> str | None:
        def work(connection: sa.Connection) -> str | None:
            current = read_meta(connection).reembedding
            if current is not None and current.target == target:
                return current.after
            write_reembedding(connection, Reembedding(target))
            if self._pgvector:
                # Empty now; the batches fill it. The old dimension's goes when it is done.
                _pgvector.index_vectors(connection, target.dim, keep_others=True)
            return None

        after = self._write(work)
        self._log.info("re-embedding", embedder=target.name, dim=target.dim, resume_after=after)
        return after

    def _reembed_write(self, batch: list[ContextItem], target: EmbedderIdentity) -> None:
        # The vector is written only if what it was made from is still the item's: an edit
        # that landed since the batch was read keeps its own (vector-less) state. The text,
        # kind and fingerprint (which covers the payload of an item without text) say so
        # without comparing re-encoded JSON, whose bytes an older writer may have laid out
        # differently.
        statement = (
            items.update()
            .where(
                items.c.id == sa.bindparam("old_id"),
                items.c.text == sa.bindparam("was_text"),
                items.c.kind == sa.bindparam("was_kind"),
                items.c.fingerprint == sa.bindparam("was_fingerprint"),
            )
            .values(embedding=sa.bindparam("vector"))
        )
        rows = [
            {
                "old_id": item.id,
                "was_text": item.text,
                "was_kind": item.kind,
                "was_fingerprint": item.fingerprint,
                "vector": None if item.embedding is None else encode_vector(item.embedding),
            }
            for item in batch
        ]

        def work(connection: sa.Connection) -> None:
            _check_reembedding(connection, target)
            connection.execute(statement, rows)
            write_reembedding(connection, Reembedding(target, batch[-1].id))

        self._write(work)

    def _reembed_finish(self, target: EmbedderIdentity) -> None:
        other_size = (
            sa.func.vector_dims(items.c.embedding) != target.dim
            if self._pgvector
            else sa.func.length(items.c.embedding) != target.dim * 4
        )

        def work(connection: sa.Connection) -> str | None:
            _check_reembedding(connection, target)
            left: str | None = connection.execute(
                sa.select(items.c.id).where(items.c.embedding.is_not(None), other_size).limit(1)
            ).scalar()
            if left is None:
                write_identity(connection, target)
                write_reembedding(connection, None)
                if self._pgvector:
                    _pgvector.index_vectors(connection, target.dim)
            else:
                # Resuming after the last batch would never reach it again: start over.
                write_reembedding(connection, Reembedding(target))
            return left

        left = self._write(work)
        if left is not None:
            raise ReembedRequiredError(
                f"item {left!r} still holds a vector of another size after re-embedding; "
                f"run `{REEMBED_COMMAND}` again (it starts over)",
                target=target,
                backend="SQLAlchemyBackend",
            )
        self._log.info("re-embedded", embedder=target.name, dim=target.dim)

    # ------------------------------------------------------------------ transactions

    def _transaction(
        self, work: Callable[[sa.Connection], T], *, write: bool, single: bool = False
    ) -> T:
        self._check_open()
        if write and self.read_only:
            raise BackendError(
                f"{self!r} was opened read-only; open it without read_only to write",
                backend="SQLAlchemyBackend",
            )

        def attempt() -> T:
            with self._guard, self._engine.connect() as connection:
                if write:
                    connection.execution_options(**{IMMEDIATE: True})
                elif single:
                    connection.execution_options(**{SNAPSHOT_FREE: True})
                with connection.begin():
                    done = work(connection)
                    if write:
                        self._statistics.refresh(connection)
                    return done

        with self._translating():
            return retrying(attempt, "write" if write else "read")

    def _check_open(self) -> None:
        if self._closed:
            raise BackendError("this SQLAlchemyBackend is closed", backend="SQLAlchemyBackend")

    @contextlib.contextmanager
    def _translating(self) -> Iterator[None]:
        """Turn driver errors into this library's (integrity errors pass: callers decide)."""
        try:
            yield
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

    def _insert(self, batch: list[ContextItem]) -> Written:
        return self._insert_and_replace(batch, [])

    def _insert_and_replace(
        self, inserts: list[ContextItem], replaces: list[ContextItem]
    ) -> Written:
        """Insert and replace in one transaction: all of it commits, or none of it."""
        ids = [item.id for item in inserts]

        def work(connection: sa.Connection) -> ScopeVersions:
            changed = self._insert_in(connection, inserts)
            if replaces:
                changed += self._replace_in(connection, replaces)
            return _logged(connection, changed)

        try:
            return Written(len(inserts) + len(replaces), self._write(work))
        except exc.IntegrityError as error:
            # Another process stored one of these ids between our check and our insert.
            existing = self._read(lambda connection: _existing(connection, ids))
            if existing:
                raise DuplicateItemError(next(i for i in ids if i in existing)) from None
            raise BackendError(
                f"database error: {error.orig}", backend="SQLAlchemyBackend"
            ) from error

    def _insert_in(self, connection: sa.Connection, batch: list[ContextItem]) -> list[Changed]:
        """Insert ``batch`` (every id new); return what changed, for the scope log."""
        if not batch:
            return []
        rows = [item_row(item) for item in batch]
        ids = [item.id for item in batch]
        self._guard_vectors(connection, batch)
        existing = _existing(connection, ids)
        if existing:
            raise DuplicateItemError(next(i for i in ids if i in existing))
        self._bulk_insert(connection, rows, tag_rows(batch))
        return [(row["namespace"], row["tier"], row["id"]) for row in rows]

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
        """Items by id: on SQLite from the index files' cache, kept in step by the change log."""
        if self._files is not None:
            return self._files.fetch(item_ids)
        return self._fetch_rows(item_ids)

    def _fetch_rows(self, item_ids: list[str]) -> dict[str, ContextItem]:
        def work(connection: sa.Connection) -> list[Any]:
            found: list[Any] = []
            for chunk in chunks(item_ids):
                found.extend(connection.execute(items_by_id(chunk)))
            return found

        return {row.id: row_item(row) for row in self._read(work)}

    def _replace(self, batch: list[ContextItem]) -> Written:
        def work(connection: sa.Connection) -> ScopeVersions:
            return _logged(connection, self._replace_in(connection, batch))

        return Written(len(batch), self._write(work))

    def _replace_in(self, connection: sa.Connection, batch: list[ContextItem]) -> list[Changed]:
        """Replace stored items (every id stored); return them in the scopes left and entered."""
        ids = [item.id for item in batch]
        rows = []
        for item in batch:
            row = item_row(item)
            row["old_id"] = row.pop("id")
            rows.append(row)
        tags = tag_rows(batch)
        statement = items.update().where(items.c.id == sa.bindparam("old_id"))
        # Locked as read (on PostgreSQL): the scopes left are the ones these rows were in.
        before = _scopes(connection, ids)
        missing = next((i for i in ids if i not in before), None)
        if missing is not None:
            raise ItemNotFoundError(missing)
        self._guard_vectors(connection, batch)
        connection.execute(statement, rows)
        for chunk in chunks(ids):
            connection.execute(item_tags.delete().where(item_tags.c.item_id.in_(chunk)))
        if tags:
            connection.execute(item_tags.insert(), tags)
        return [
            *((namespace, tier, item_id) for item_id, (namespace, tier) in before.items()),
            *((row["namespace"], row["tier"], row["old_id"]) for row in rows),
        ]

    def _remove(self, item_ids: list[str]) -> Written:
        return self._write(lambda connection: self._remove_in(connection, item_ids))

    @staticmethod
    def _remove_in(connection: sa.Connection, item_ids: list[str]) -> Written:
        changed: list[Changed] = []
        for chunk in chunks(item_ids):
            statement = items.delete().where(items.c.id.in_(chunk)).returning(*_CHANGED)
            changed.extend(tuple(row) for row in connection.execute(statement))
        return Written(len(changed), _logged(connection, changed))

    def _erase(self, item_ids: list[str], tokens: dict[str, str]) -> Written:
        """Delete, and redact the journal, provenance and merged origins, in one transaction.

        The items' conflicts go with them (the foreign keys cascade).

        ``secure_delete`` (always on) zeroes the freed bytes in the database file; the flush
        that follows empties SQLite's write-ahead log, or vacuums the tables on PostgreSQL
        (:func:`~agent_engine.memory.sql._engine.flush_erased`).
        """

        def work(connection: sa.Connection) -> Written:
            removed = self._remove_in(connection, item_ids)
            record_erased(connection, item_ids, removed.versions or {})
            snapshots.drop(connection, ((ns, tier.value) for ns, tier in removed.versions or {}))
            redact_json(connection, [items.c.provenance, items.c.merged_from], tokens, encode_json)
            redact_events(connection, tokens)
            if self._dialect == "sqlite":
                forget_changes(connection, item_ids)
            return removed

        written = self._write(work)
        if self._files is not None:
            self._files.erased()
        return written

    def _flush_erased(self) -> None:
        with self._guard, self._translating():
            tables = (
                items,
                item_tags,
                audit_events,
                conflicts,
                scope_log,
                lexical_snapshots,
                checkpoints,
                fork_hidden,
            )
            flush_erased(self._engine, [table.name for table in tables])

    def _select(self, where: Filter, order: Order, limit: int | None) -> list[ContextItem]:
        query = select_items(where, order, limit, self._dialect)
        rows = self._read_one(lambda connection: connection.execute(query).all())
        return [row_item(row) for row in rows]

    def _current_count(self, key: ScopeKey) -> int:
        """How many current (not superseded) items a scope holds, from two small indexes.

        The scope's items less its history: the first count is covered by the scope's index,
        the second reads the partial index of superseded items (revision 0010). Counting the
        current items directly read every row (70 ms at 100k), on every new process's first
        build, which checks a loaded BM25 file against it.
        """
        scope = where_clause(scope_filter(key), self._dialect)
        total = sa.select(sa.func.count()).select_from(items).where(scope)
        history = total.where(items.c.valid_to.is_not(None))
        query = sa.select(total.scalar_subquery() - history.scalar_subquery())
        return int(self._read_one(lambda connection: connection.execute(query).scalar_one()))

    def _count(self, where: Filter) -> int:
        query = count_items(where, self._dialect)
        return int(self._read_one(lambda connection: connection.execute(query).scalar_one()))

    def _delete_where(self, where: Filter) -> Written:
        # RETURNING names exactly the rows deleted, whatever else commits.
        statement = items.delete().where(where_clause(where, self._dialect)).returning(*_CHANGED)

        def work(connection: sa.Connection) -> Written:
            changed: list[Changed] = [tuple(row) for row in connection.execute(statement)]
            return Written(len(changed), _logged(connection, changed))

        return self._write(work)

    def _scope_versions(self, key: tuple[str | None, Tier | None]) -> ScopeVersions:
        namespace, tier = key
        return self._read_one(lambda connection: read_versions(connection, namespace, tier))

    def _scope_changes(self, key: ScopeKey, held: ScopeVersions) -> list[str] | None:
        """The ids the scope log (:mod:`._scope_log`) names in ``key`` since ``held``.

        Only for a scope of one namespace and tier (what tier stores ask for): the log is kept
        per scope.
        """
        namespace, tier = key
        if namespace is None or tier is None:
            return None
        version = held.get((namespace, tier), 0)
        return self._read_one(
            lambda connection: changed_since(connection, namespace, tier, version)
        )

    def _load_scope_index(self, key: ScopeKey) -> tuple[LexicalIndex, ScopeVersions] | None:
        """The scope's index saved in the database (:mod:`._snapshots`), if any."""
        namespace, tier = key
        if namespace is None or tier is None:
            return None
        loaded = self._read_one(
            lambda connection: snapshots.load(connection, namespace, tier.value)
        )
        if loaded is None:
            return None
        index, version = loaded
        return index, {(namespace, tier): version}

    def _save_scope_index(
        self, key: ScopeKey, index: LexicalIndex, versions: ScopeVersions
    ) -> bool:
        """Save the index of a scope of at least :data:`._snapshots.MIN_ITEMS` items."""
        namespace, tier = key
        if self.read_only or namespace is None or tier is None:
            return False
        version = versions.get((namespace, tier))
        if version is None or len(index) < snapshots.MIN_ITEMS:
            return False
        data = snapshots.encode(index)
        if data is None:
            return False
        try:
            return self._write(
                lambda connection: snapshots.save(connection, namespace, tier.value, version, data)
            )
        except BackendError as error:  # a saved index only spares the next process a rebuild
            self._log.warning("scope_index_not_saved", namespace=namespace, error=str(error))
            return False

    def _lexical_scope(self, key: tuple[str | None, Tier | None]) -> LexicalScope:
        """With ``fulltext=True``, the database's full-text search (:mod:`._fulltext`); else BM25.

        Full text builds or caches nothing in the process: each question is a statement over
        the GIN-indexed table, so other processes' writes show at once.
        """
        if not self.fulltext:
            return super()._lexical_scope(key)
        namespace, tier = key
        return FullTextScope(self._read, namespace, tier)

    def _touch(self, item_ids: list[str], at: datetime) -> int:
        """One ``UPDATE ... SET access_count = access_count + 1``: concurrent counts add up.

        Access counts are not indexed text, so a touch leaves the scope counters alone.
        The count stops at the largest one the column holds, as in every backend.
        """
        stamp = encode_time(at)
        bumped = sa.case(
            (items.c.access_count < MAX_COUNT, items.c.access_count + 1),
            else_=items.c.access_count,
        )

        def work(connection: sa.Connection) -> int:
            touched = 0
            for chunk in chunks(item_ids):
                statement = (
                    items.update()
                    .where(items.c.id.in_(chunk))
                    .values(access_count=bumped, last_accessed_at=stamp)
                )
                touched += connection.execute(statement).rowcount
            return touched

        return self._write(work)

    def _set_archived(
        self, item_ids: list[str], at: datetime | None, reason: ArchiveReason | None
    ) -> int:
        """One ``UPDATE ... SET archived_at, archived_reason`` per chunk of ids, in one write.

        The archive mark is not indexed text (the archive is searched like the working set),
        so, as for a touch, the scope counters stay.
        """
        values = {
            "archived_at": None if at is None else encode_time(at),
            "archived_reason": None if reason is None else reason.value,
        }

        def work(connection: sa.Connection) -> int:
            marked = 0
            for chunk in chunks(item_ids):
                statement = items.update().where(items.c.id.in_(chunk)).values(**values)
                marked += connection.execute(statement).rowcount
            return marked

        return self._write(work)

    def _search_many(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """pgvector: a statement per query; SQLite: the index file's rows; else one scan."""
        if self._pgvector:
            return self._pgvector_search(queries, k, where)
        if self._files is not None:
            with self._files.lock:  # the rows stay as they are while the walk reads them
                return search_rows(
                    self._files.vectors(),
                    queries,
                    k,
                    where,
                    fetch=self._fetch,
                    matching=lambda w: self._select(w, Order("id", descending=False), None),
                    walk_limit=_WALK_LIMIT,
                )
        return self._scan_search(queries, k, where)

    def _search(self, query: Vector, k: int, where: Filter) -> list[SearchHit]:
        """On pgvector: one statement over the HNSW index (exact again if it finds too few).

        Elsewhere the inherited exact scan. The statement's filter is the ``WHERE`` of every
        read; see :mod:`._pgvector` for the index, the candidates beyond ``k`` and why a
        short answer is asked again.
        """
        if self._files is not None:
            return self._search_many(query.reshape(1, -1), k, where)[0]
        if not self._pgvector:
            return super()._search(query, k, where)
        return self._pgvector_search(query.reshape(1, -1), k, where)[0]

    def _pgvector_search(self, queries: Matrix, k: int, where: Filter) -> list[list[SearchHit]]:
        """A statement per query over the HNSW index, all in one read transaction.

        A batch (a write's near-duplicate check, say) pays one transaction and one
        ``SET LOCAL``, not one per query.
        """
        condition = where_clause(where, self._dialect)
        limit = _pgvector.candidates(k)

        def work(connection: sa.Connection) -> list[list[Any]]:
            ef_search = _pgvector.ef_search(limit)
            connection.execute(sa.text(f"SET LOCAL hnsw.ef_search = {ef_search}"))
            found = []
            for query in queries:
                statement = _pgvector.search_statement(condition, query, limit, exact=False)
                rows = list(connection.execute(statement).all())
                if len(rows) < limit:
                    statement = _pgvector.search_statement(condition, query, limit, exact=True)
                    rows = list(connection.execute(statement).all())
                found.append(rows)
            return found

        return [
            _rescored([row_item(row[:-1]) for row in rows], query, k)
            for rows, query in zip(self._read(work), queries, strict=True)
        ]

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
            sizes = {len(row.embedding) for row in rows}
            if len(sizes) > 1:
                raise mixed_sizes(size // 4 for size in sizes)
            size = sizes.pop()
            matrix = np.frombuffer(b"".join(row.embedding for row in rows), dtype="<f4")
            yield ids, matrix.reshape(len(rows), size // 4)
            if len(rows) < chunk:
                return
            after = ids[-1]

    # ------------------------------------------------------------------ lexical indexes

    def _scope_index(self, key: tuple[str | None, Tier | None]) -> LexicalIndex:
        """On SQLite the index file's scope, caught up from the change log."""
        if self._files is None:
            return super()._scope_index(key)
        return self._files.lexical(key)

    def _lexical_changed(self, items: list[ContextItem], written: Written) -> None:
        if self._files is None:  # with index files, the change log carries every write
            super()._lexical_changed(items, written)

    def _lexical_removed(self, item_ids: list[str], written: Written) -> None:
        if self._files is None:
            super()._lexical_removed(item_ids, written)

    def _lexical_cleared(self, where: Filter, written: Written) -> None:
        if self._files is None:
            super()._lexical_cleared(where, written)

    def save_indexes(self) -> None:
        """Save the indexes held now, as :meth:`close` does.

        SQLite's index files; elsewhere the in-process BM25 indexes of scopes, in the
        database (:mod:`._snapshots`). A long-running process calls it to bound what the next
        process must catch up on.
        """
        if self._files is not None:
            self._files.save()
        else:
            self._save_scope_indexes()

    def async_reads(self) -> AsyncReads | None:
        """On PostgreSQL, reads through psycopg's asyncio API (see :mod:`._async`).

        A new asyncio engine with this backend's settings (read-only, statement timeout,
        pgvector's adapters) each call; ``None`` on SQLite, whose driver has none.
        """
        self._check_open()
        engine = create_async_engine(
            self.url, read_only=self.read_only, timeout_s=self.statement_timeout
        )
        if engine is None:
            return None
        if self._pgvector:
            _pgvector.register_adapters(engine.sync_engine)
        from agent_engine.memory.sql._async import AsyncSQLReads  # noqa: PLC0415

        return AsyncSQLReads(
            engine,
            dialect=self._dialect,
            translating=self._translating,
            check_open=self._check_open,
        )

    @property
    def remote(self) -> bool:
        """A server's database (PostgreSQL) is remote; an embedded SQLite file is not."""
        return self._dialect != "sqlite"

    def close(self) -> None:
        """Save the indexes (:meth:`save_indexes`), release the connection pool.

        The backend is unusable after.
        """
        if not self._closed:
            with contextlib.suppress(BackendError):
                if self._files is not None:
                    self._files.close()
                else:
                    self._save_scope_indexes()
        self._closed = True
        self._engine.dispose()


_FULLTEXT_VALUES = {"on": True, "true": True, "1": True, "off": False, "false": False, "0": False}


def _fulltext_option(url: str) -> tuple[str, bool | None]:
    """``url`` without its ``fulltext`` query parameter, and what that said (``None``: none)."""
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError:
        return url, None  # the engine says what is wrong with it
    given = parsed.query.get("fulltext")
    if given is None:
        return url, None
    value = given if isinstance(given, str) else given[-1]
    if value.lower() not in _FULLTEXT_VALUES:
        raise ValidationError(
            f"fulltext in a database URL is on or off, got {value!r}", field="fulltext", value=value
        )
    stripped = parsed.difference_update_query(["fulltext"])
    return stripped.render_as_string(hide_password=False), _FULLTEXT_VALUES[value.lower()]


_CHANGED = (items.c.namespace, items.c.tier, items.c.id)
"""What a deletion returns of each row: its entry in the scope log."""


def _logged(connection: sa.Connection, changed: list[Changed]) -> ScopeVersions:
    """Bump the counters of the scopes ``changed`` touched, then log it at their new versions.

    In this order: the bump locks each scope's counter until commit, which keeps the log's
    versions in commit order (:mod:`._scope_log`).
    """
    versions = bump_versions(connection, [(namespace, tier) for namespace, tier, _ in changed])
    record(connection, changed, versions)
    return versions


def _rescored(found: list[ContextItem], query: Vector, k: int) -> list[SearchHit]:
    """The ``k`` best of ``found`` scored as the scan scores them (float32 cosines, ties by id).

    So near-ties break the same way on every backend.
    """
    if not found:
        return []
    vectors = np.vstack([item.embedding for item in found if item.embedding is not None])
    scores = normalize_rows(vectors) @ query
    hits = [SearchHit(item, float(score)) for item, score in zip(found, scores, strict=True)]
    hits.sort(key=lambda hit: (-hit.score, hit.item.id))
    return hits[:k]


def _fetch_all(query: sa.Select[Any]) -> Callable[[sa.Connection], list[Any]]:
    return lambda connection: list(connection.execute(query).all())


def _reembed_message(meta: StoreMeta) -> str:
    reembedding = meta.reembedding
    if reembedding is None or reembedding.target is None:
        return (
            "this store holds vectors of several sizes, written before agent_engine recorded "
            f"which embedder made them: run `{REEMBED_COMMAND}` to re-embed it with one "
            "embedder (until then vector search and writes of vectors are refused)"
        )
    return (
        f"this store is being re-embedded with {reembedding.target.describe()}, or a "
        f"re-embedding was interrupted: run `{REEMBED_COMMAND}` to finish it (until then "
        "vector search and writes of vectors are refused)"
    )


def _reembed_required(meta: StoreMeta) -> ReembedRequiredError:
    target = meta.reembedding.target if meta.reembedding is not None else None
    return ReembedRequiredError(_reembed_message(meta), target=target, backend="SQLAlchemyBackend")


def _check_reembedding(connection: sa.Connection, target: EmbedderIdentity) -> None:
    """Refuse to go on when another re-embedding (to another embedder) took the store over."""
    current = read_meta(connection).reembedding
    if current is None or current.target != target:
        moved = "none" if current is None or current.target is None else current.target.name
        raise ReembedRequiredError(
            f"another re-embedding took this store over (to {moved}) while re-embedding "
            f"with {target.describe()}; run `{REEMBED_COMMAND}` again once it is done",
            target=target,
            backend="SQLAlchemyBackend",
        )


def _scopes(connection: sa.Connection, ids: list[str]) -> dict[str, tuple[str, str]]:
    """The ``(namespace, tier)`` of each stored id among ``ids``, its row locked for the write."""
    found: dict[str, tuple[str, str]] = {}
    for chunk in chunks(ids):
        query = (
            sa.select(items.c.id, items.c.namespace, items.c.tier)
            .where(items.c.id.in_(chunk))
            .with_for_update()
        )
        found.update({row.id: (row.namespace, row.tier) for row in connection.execute(query)})
    return found


def _existing(connection: sa.Connection, ids: list[str]) -> set[str]:
    found: set[str] = set()
    for chunk in chunks(ids):
        found.update(
            connection.execute(sa.select(items.c.id).where(items.c.id.in_(chunk))).scalars()
        )
    return found
