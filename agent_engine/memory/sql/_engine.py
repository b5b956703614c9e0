"""Engines for the SQL backend: default location, SQLite settings, retries, statement timeout.

SQLite runs in WAL mode (readers never wait for the writer) with a busy timeout, foreign keys
on, ``secure_delete`` on (freed bytes are zeroed when they are freed, whatever the build's
default), and every write transaction opened with ``BEGIN IMMEDIATE``: a writer takes the
write lock up front instead of upgrading a read lock mid-transaction, which SQLite answers
with an immediate "database is locked" that the busy timeout cannot help. What contention
remains (a timeout under heavy load, a PostgreSQL serialization failure or deadlock) is
retried with a bounded exponential backoff, logged, before it reaches the caller.

Every statement has a deadline (:func:`resolve_statement_timeout`). PostgreSQL enforces it
itself: each new connection sets ``statement_timeout`` for its session, once (a startup
``options`` entry would save that round trip, but PgBouncer refuses startup options it does
not know, so connecting would fail behind it). SQLite has no such setting, so each
connection gets a progress handler, which SQLite calls every few thousand virtual-machine
steps while a statement runs and which aborts the statement once its deadline has passed.
The deadline is set when a statement starts and lifted before ``COMMIT`` or ``ROLLBACK``,
which are never cut short. Either way the driver reports the abort (:func:`timed_out`) and
the transaction is rolled back. Migrations run without the deadline (:data:`UNTIMED`):
rebuilding a large table may take longer, and it is an operator's deliberate act.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import os
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import platformdirs
import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.pool import QueuePool, StaticPool

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

from agent_engine._log import get_logger
from agent_engine.errors import BackendUnavailableError, ValidationError

__all__ = [
    "ANALYSIS_LIMIT",
    "DB_ENV",
    "MIN_ANALYZED_ROWS",
    "DEFAULT_STATEMENT_TIMEOUT_S",
    "IMMEDIATE",
    "POSTGRES_INSTALL",
    "PlannerStatistics",
    "SNAPSHOT_FREE",
    "TIMEOUT_ENV",
    "UNTIMED",
    "aretrying",
    "create_async_engine",
    "create_engine",
    "default_database_url",
    "flush_erased",
    "is_sqlite",
    "retrying",
    "resolve_statement_timeout",
    "sqlite_file",
    "timed_out",
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
UNTIMED = "ae_untimed"
"""Execution option: the connection's statements have no deadline (schema migrations)."""
TIMEOUT_ENV = "AGENT_ENGINE_STATEMENT_TIMEOUT"
"""The environment variable giving the default statement timeout, in seconds (``0``: none)."""
DEFAULT_STATEMENT_TIMEOUT_S = 30.0
"""The statement timeout when neither the caller nor the environment sets one."""
BUSY_TIMEOUT_S = 10.0
RETRIES = 8
_BACKOFF_S = 0.05
_CONTENTION = ("database is locked", "database table is locked", "database is busy")
_PG_RETRYABLE = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected
_PG_QUERY_CANCELED = "57014"
_PROGRESS_STEPS = 10_000
"""Virtual-machine steps between two looks at the deadline: a few milliseconds of work at
most, and a negligible cost (one Python call per step batch)."""
_DEADLINE = "ae_deadline"

T = TypeVar("T")


ANALYSIS_LIMIT = 1000
"""Rows SQLite samples per index when it gathers planner statistics."""
MIN_ANALYZED_ROWS = 1000
"""Below this many items the planner's default guesses serve: no statistics are gathered."""


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


def resolve_statement_timeout(seconds: float | None = None) -> float:
    """The statement timeout in seconds (``0``: no limit).

    ``seconds`` if given, else ``$AGENT_ENGINE_STATEMENT_TIMEOUT``, else
    :data:`DEFAULT_STATEMENT_TIMEOUT_S`. Raises :class:`~agent_engine.errors.ValidationError`
    for anything but a finite, non-negative number (from the environment: a decimal number).
    """
    if seconds is None:
        raw = os.environ.get(TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_STATEMENT_TIMEOUT_S
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds < 0:
            raise ValidationError(
                f"${TIMEOUT_ENV} must be a number of seconds (0: no limit), got {raw!r}",
                field="statement_timeout",
                value=raw,
            )
        return seconds
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise ValidationError(
            f"statement_timeout must be a number of seconds (0: no limit), got {seconds!r}",
            field="statement_timeout",
            value=seconds,
        )
    return float(seconds)


def timed_out(error: exc.DBAPIError) -> bool:
    """Whether the driver error reports a statement cut off by its deadline."""
    orig = error.orig
    if getattr(orig, "sqlstate", None) == _PG_QUERY_CANCELED:
        return True
    return getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT


def is_sqlite(engine: sa.Engine) -> bool:
    """Whether ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


def create_engine(url: str, *, read_only: bool = False, timeout_s: float = 0.0) -> sa.Engine:
    """An engine for ``url`` with this backend's connection settings.

    ``read_only``: connections that cannot write (SQLite opened ``mode=ro``, PostgreSQL
    sessions with ``default_transaction_read_only``), and no file or folder is created.
    ``timeout_s`` is the statement timeout in seconds (``0``: none).
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
        return _sqlite_engine(parsed, read_only=read_only, timeout_s=timeout_s)
    if backend == "postgresql":
        return _postgresql_engine(parsed, read_only=read_only, timeout_s=timeout_s)
    raise BackendUnavailableError(
        f"unsupported database URL {url!r}: expected sqlite:///PATH or postgresql://..."
    )


def _postgresql_engine(url: sa.URL, *, read_only: bool, timeout_s: float) -> sa.Engine:
    url = _postgresql_url(url, read_only=read_only)
    with _driver_errors(url):
        engine = sa.create_engine(url, pool_pre_ping=True)
    _set_statement_timeout(engine, timeout_s)
    return engine


def create_async_engine(
    url: str, *, read_only: bool = False, timeout_s: float = 0.0
) -> AsyncEngine | None:
    """An asyncio engine for the PostgreSQL ``url``, set up as :func:`create_engine`'s.

    Through psycopg's asyncio API, so a coroutine awaits the server without a thread.
    ``None`` for SQLite (its driver has no asyncio API: the async twins use threads) and
    where SQLAlchemy's asyncio bridge (greenlet, in the ``postgres`` extra) is missing.
    """
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "postgresql" or importlib.util.find_spec("greenlet") is None:
        return None
    from sqlalchemy.ext.asyncio import create_async_engine as create  # noqa: PLC0415

    parsed = _postgresql_url(parsed, read_only=read_only)
    with _driver_errors(parsed):
        engine = create(parsed, pool_pre_ping=True)
    _set_statement_timeout(engine.sync_engine, timeout_s)
    return engine


def _postgresql_url(url: sa.URL, *, read_only: bool) -> sa.URL:
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    if read_only:
        # Appended to the URL's own `options` (a search_path, say), which connect_args
        # would replace.
        given = url.query.get("options", ())
        options = [given] if isinstance(given, str) else list(given)
        url = url.update_query_dict(
            {"options": " ".join([*options, "-c default_transaction_read_only=on"])}
        )
    return url


@contextlib.contextmanager
def _driver_errors(url: sa.URL) -> Iterator[None]:
    """Creating an engine: a missing or unknown driver becomes a BackendUnavailableError."""
    where = url.render_as_string(hide_password=True)
    driver = url.get_driver_name()
    try:
        yield
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


def _set_statement_timeout(engine: sa.Engine, timeout_s: float) -> None:
    """Each new PostgreSQL connection of ``engine`` sets its session's statement timeout."""
    if not timeout_s:
        return
    milliseconds = max(1, round(timeout_s * 1000))

    @event.listens_for(engine, "connect")
    def _set_timeout(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"SET statement_timeout = {milliseconds}")
        finally:
            cursor.close()
        dbapi_connection.commit()


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


class _Deadline:
    """When the statement running on one SQLite connection must stop (``None``: never)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at: float | None = None

    def passed(self) -> bool:
        """The progress handler: a true result makes SQLite abort the running statement."""
        return self.at is not None and time.monotonic() > self.at


def _sqlite_engine(url: sa.URL, *, read_only: bool = False, timeout_s: float = 0.0) -> sa.Engine:
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
            # Statistics for the query planner are gathered from a sample this size per
            # index (see PlannerStatistics), so keeping them current stays cheap.
            cursor.execute(f"PRAGMA analysis_limit={ANALYSIS_LIMIT}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        options = connection.get_execution_options()
        if options.get(SNAPSHOT_FREE, False):
            return
        connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(IMMEDIATE) else "BEGIN")

    if timeout_s:
        _add_deadlines(engine, timeout_s)
    return engine


class PlannerStatistics:
    """Keeps SQLite's query planner statistics of the items table in step with its growth.

    Without statistics SQLite reads ``namespace = ? AND fingerprint IN (...) ORDER BY
    timestamp`` through the (namespace, timestamp) index, to spare a sort, and so scans a
    whole namespace for what the fingerprint, key or superseded_by index finds at once
    (duplicates on add, a slot's holders, an item's history). ``ANALYZE`` fixes the choice;
    run whenever the table has doubled since it last ran (from :data:`MIN_ANALYZED_ROWS`
    rows on), it costs a few milliseconds at 100k items (:data:`ANALYSIS_LIMIT` samples per
    index) a logarithmic number of times. PostgreSQL keeps its own statistics.
    """

    def __init__(self) -> None:
        self._analyzed: int | None = None  # rows when last analyzed (None: not read yet)

    def refresh(self, connection: sa.Connection) -> None:
        """Analyze the items table if it outgrew its statistics; run inside a write."""
        if connection.dialect.name != "sqlite":
            return
        rows = connection.exec_driver_sql("SELECT max(rowid) FROM ae_items").scalar() or 0
        if self._analyzed is None:
            self._analyzed = _analyzed_rows(connection)
        if rows >= MIN_ANALYZED_ROWS and rows >= 2 * self._analyzed:
            connection.exec_driver_sql("ANALYZE ae_items")
            self._analyzed = rows


def _analyzed_rows(connection: sa.Connection) -> int:
    """The items table's row count as of its last ``ANALYZE`` (0: never analyzed)."""
    exists = connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_stat1'"
    ).first()
    if exists is None:
        return 0
    stat = connection.exec_driver_sql(
        "SELECT stat FROM sqlite_stat1 WHERE tbl = 'ae_items' LIMIT 1"
    ).scalar()
    head = str(stat or "0").split(" ", 1)[0]
    return int(head) if head.isdigit() else 0


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
        if _in_memory(database):
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


def _add_deadlines(engine: sa.Engine, timeout_s: float) -> None:
    """Give every statement on ``engine``'s SQLite connections ``timeout_s`` seconds."""

    @event.listens_for(engine, "connect")
    def _watch(dbapi_connection: Any, record: Any) -> None:
        deadline = record.info[_DEADLINE] = _Deadline()
        dbapi_connection.set_progress_handler(deadline.passed, _PROGRESS_STEPS)

    @event.listens_for(engine, "before_cursor_execute")
    def _start(connection: sa.Connection, *_args: Any) -> None:
        untimed = connection.get_execution_options().get(UNTIMED, False)
        connection.info[_DEADLINE].at = None if untimed else time.monotonic() + timeout_s

    @event.listens_for(engine, "commit")
    @event.listens_for(engine, "rollback")
    def _lift(connection: sa.Connection) -> None:
        connection.info[_DEADLINE].at = None


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


async def aretrying(operation: Callable[[], Awaitable[T]], what: str) -> T:
    """:func:`retrying` for a coroutine's transaction: the backoff is awaited, not slept."""
    for attempt in range(RETRIES):
        try:
            return await operation()
        except exc.DBAPIError as error:
            if not _retryable(error) or attempt == RETRIES - 1:
                raise
            await asyncio.sleep(_backoff(attempt, what, error))
    raise AssertionError  # pragma: no cover - the loop returns or raises


def _sleep(attempt: int, what: str, error: BaseException) -> None:
    time.sleep(_backoff(attempt, what, error))


def _backoff(attempt: int, what: str, error: BaseException) -> float:
    """How long to wait before attempt ``attempt + 2``, logged."""
    delay: float = _BACKOFF_S * (2**attempt) * (0.5 + random.random())  # noqa: S311 - jitter
    get_logger(component="sql", operation=what).warning(
        "database busy; retrying", attempt=attempt + 1, delay_s=round(delay, 3), error=str(error)
    )
    return delay
