"""Engines for the SQL backend: the default location, SQLite settings and retry on contention.

SQLite runs in WAL mode (readers never wait for the writer) with a busy timeout, foreign keys
on, ``secure_delete`` on (freed bytes are zeroed when they are freed, whatever the build's
default), and every write transaction opened with ``BEGIN IMMEDIATE``: a writer takes the
write lock up front instead of upgrading a read lock mid-transaction, which SQLite answers
with an immediate "database is locked" that the busy timeout cannot help. What contention
remains (a timeout under heavy load, a PostgreSQL serialization failure or deadlock) is
retried with a bounded exponential backoff, logged, before it reaches the caller.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import platformdirs
import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.pool import QueuePool, StaticPool

from agent_engine._log import get_logger
from agent_engine.errors import BackendUnavailableError

__all__ = [
    "DB_ENV",
    "IMMEDIATE",
    "POSTGRES_INSTALL",
    "SNAPSHOT_FREE",
    "create_engine",
    "default_database_url",
    "flush_erased",
    "is_sqlite",
    "retrying",
    "sqlite_file",
]

DB_ENV = "AGENT_ENGINE_DB"
"""The environment variable naming the default database URL."""
POSTGRES_INSTALL = "pip install 'agent-engine[postgres]'"
"""What installs the PostgreSQL driver (psycopg) the backend uses."""
IMMEDIATE = "ae_immediate"
"""Execution option: begin the transaction with ``BEGIN IMMEDIATE`` on SQLite (a write)."""
SNAPSHOT_FREE = "ae_snapshot_free"
"""Execution option: a single-statement read on SQLite needs no ``BEGIN``/``COMMIT`` round trip
(each statement is atomic on its own)."""
BUSY_TIMEOUT_S = 10.0
RETRIES = 8
_BACKOFF_S = 0.05
_CONTENTION = ("database is locked", "database table is locked", "database is busy")
_PG_RETRYABLE = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected

T = TypeVar("T")


def default_database_url() -> str:
    """The store used when none is named: ``$AGENT_ENGINE_DB``, else a per-user SQLite file.

    The file is ``agent_engine/memory.db`` in the platform's user data directory
    (``~/.local/share/agent_engine/memory.db`` on Linux).
    """
    from_env = os.environ.get(DB_ENV)
    if from_env:
        return from_env
    folder = Path(platformdirs.user_data_dir("agent_engine", appauthor=False))
    return f"sqlite:///{folder / 'memory.db'}"


def is_sqlite(engine: sa.Engine) -> bool:
    """Whether ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


def create_engine(url: str, *, read_only: bool = False) -> sa.Engine:
    """An engine for ``url`` with this backend's connection settings.

    ``read_only``: connections that cannot write (SQLite opened ``mode=ro``, PostgreSQL
    sessions with ``default_transaction_read_only``), and no file or folder is created.
    A PostgreSQL URL whose driver is not installed raises
    :class:`~agent_engine.errors.BackendUnavailableError` saying what to install.
    """
    if not isinstance(url, str) or not url:
        raise BackendUnavailableError(f"not a database URL: {url!r}")
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError as error:
        raise BackendUnavailableError(f"not a database URL: {url!r} ({error})") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, read_only=read_only)
    if backend == "postgresql":
        return _postgresql_engine(parsed, read_only=read_only)
    raise BackendUnavailableError(
        f"unsupported database URL {url!r}: expected sqlite:///PATH or postgresql://..."
    )


def _postgresql_engine(url: sa.URL, *, read_only: bool) -> sa.Engine:
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    where = url.render_as_string(hide_password=True)
    driver = url.get_driver_name()
    if read_only:
        # Appended to the URL's own `options` (a search_path, say), which connect_args
        # would replace.
        given = url.query.get("options", ())
        options = [given] if isinstance(given, str) else list(given)
        url = url.update_query_dict(
            {"options": " ".join([*options, "-c default_transaction_read_only=on"])}
        )
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except exc.NoSuchModuleError:
        raise BackendUnavailableError(
            f"cannot open {where}: unknown PostgreSQL driver {driver!r}; use "
            f"postgresql+psycopg://USER@HOST/DB (install it with `{POSTGRES_INSTALL}`)"
        ) from None
    except ImportError as error:
        hint = (
            f"install it with `{POSTGRES_INSTALL}`"
            if driver == "psycopg"
            else f"install it, or use postgresql+psycopg:// after `{POSTGRES_INSTALL}`"
        )
        raise BackendUnavailableError(
            f"cannot open {where}: the PostgreSQL driver {driver!r} is not installed "
            f"({error}); {hint}"
        ) from None
    except exc.ArgumentError as error:
        raise BackendUnavailableError(f"cannot open {where}: {error}") from None


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; ``None`` for an in-memory database or another kind."""
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError:
        return None
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or _in_memory(database):
        return None
    return Path(database)


def _in_memory(database: str) -> bool:
    return database in {"", ":memory:"} or "mode=memory" in database


def _sqlite_engine(url: sa.URL, *, read_only: bool = False) -> sa.Engine:
    database = url.database or ""
    in_memory = _in_memory(database)
    if in_memory:
        engine = sa.create_engine(
            url,
            poolclass=StaticPool,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
        )
    elif read_only:
        # The URI form opens the file read-only, and never creates it.
        uri = f"{Path(database).resolve().as_uri()}?mode=ro"
        engine = sa.create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S),
            poolclass=QueuePool,  # a file's pool; "sqlite://" alone would mean in memory
        )
    else:
        path = Path(database)
        if not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own transaction handling is off; the "begin" hook below opens them.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory and not read_only:
                _with_retry(lambda: cursor.execute("PRAGMA journal_mode=WAL"), "journal_mode")
                cursor.execute("PRAGMA synchronous=NORMAL")
                cursor.execute("PRAGMA cache_size=-65536")
                cursor.execute("PRAGMA mmap_size=268435456")
            cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            # Zero what a delete or update frees, so the file keeps no old row content in free
            # pages or cell gaps. Erasing one item afterwards is not enough on its own: an
            # update made while this was off left the item's earlier bytes behind. Measured
            # within noise on adds, updates, touches and deletes of 20k items, and already the
            # compiled default of many distributions' SQLite.
            cursor.execute("PRAGMA secure_delete=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        options = connection.get_execution_options()
        if options.get(SNAPSHOT_FREE, False):
            return
        connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(IMMEDIATE) else "BEGIN")

    return engine


def flush_erased(engine: sa.Engine, tables: list[str]) -> None:
    """Push what a committed erase removed out of the files the database keeps it in.

    SQLite: a ``TRUNCATE`` checkpoint copies the write-ahead log into the database (whose
    freed bytes ``secure_delete`` zeroed) and empties the log file, which otherwise keeps the
    old page images until they are overwritten. It waits for readers up to the busy timeout;
    if one still holds the log then, :class:`~agent_engine.errors.BackendUnavailableError`
    says so. PostgreSQL: a plain ``VACUUM`` of ``tables`` (outside any transaction) removes
    the dead rows from the tables and their indexes; what the server keeps after that is its
    own (``docs/backends.md``), so a failed vacuum is logged, not raised.
    """
    log = get_logger(component="sql", operation="flush_erased")
    if is_sqlite(engine):
        database = engine.url.database or ""
        if database in {"", ":memory:"} or "mode=memory" in database:
            return
        # The checkpoint itself waits for readers through the busy handler (the busy timeout).
        with engine.connect() as connection:
            connection.execution_options(**{SNAPSHOT_FREE: True})
            busy, _, _ = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if not busy:
            return
        raise BackendUnavailableError(
            "the items are erased from the tables, but other connections kept reading the "
            "write-ahead log, which still holds their old pages: it is emptied by the next "
            "erase, or when the last connection to the database closes",
            backend="SQLAlchemyBackend",
        )
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM " + ", ".join(tables))
    except exc.DBAPIError as error:
        log.warning("vacuum after erase failed", error=str(error.orig))


def _retryable(error: BaseException) -> bool:
    if not isinstance(error, exc.OperationalError | exc.DBAPIError):
        return False
    message = str(error.orig).lower() if error.orig is not None else str(error).lower()
    if any(text in message for text in _CONTENTION):
        return True
    code = getattr(error.orig, "sqlstate", None)
    return code in _PG_RETRYABLE


def _with_retry(operation: Callable[[], T], what: str) -> T:
    """Run ``operation``, retrying the driver's own "locked" errors (used while connecting)."""
    for attempt in range(RETRIES):
        try:
            return operation()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == RETRIES - 1:
                raise
            _sleep(attempt, what, error)
    raise AssertionError  # pragma: no cover - the loop returns or raises


def retrying(operation: Callable[[], T], what: str) -> T:
    """Run one transaction, retrying it on contention with a bounded exponential backoff.

    The transaction was rolled back when the error surfaced, so running it again is safe.
    """
    for attempt in range(RETRIES):
        try:
            return operation()
        except exc.DBAPIError as error:
            if not _retryable(error) or attempt == RETRIES - 1:
                raise
            _sleep(attempt, what, error)
    raise AssertionError  # pragma: no cover - the loop returns or raises


def _sleep(attempt: int, what: str, error: BaseException) -> None:
    delay = _BACKOFF_S * (2**attempt) * (0.5 + random.random())  # noqa: S311 - jitter
    get_logger(component="sql", operation=what).warning(
        "database busy; retrying", attempt=attempt + 1, delay_s=round(delay, 3), error=str(error)
    )
    time.sleep(delay)
