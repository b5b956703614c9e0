"""Opening a store from a URL, and the embedder to go with it.

URLs: whatever the backends in :mod:`agent_engine.memory.registry` open: ``memory://`` (in
this process only, gone when the command exits), ``sqlite:///PATH`` (an embedded file) and
``postgresql+psycopg://USER@HOST/DB`` built in. Without ``--db`` the command uses
``AGENT_ENGINE_DB`` or else the embedded SQLite default in the user's data directory.

A backend is imported only when a URL of its scheme is opened, so ``memory://`` works (and a
wrong URL is reported) without the SQL backend's dependencies. A SQLite file named explicitly
must exist unless the command creates stores (``memory add``, ``db upgrade``, ``demo``): a
typo in a path should say "no database there", not silently start an empty one.

Only those commands create anything (:class:`Access`). The others leave a store that was
never written to (the default file before its first use, a database without a schema)
exactly as it is, and see it empty; the ones that only read open it read-only. The backend's
opener says when a store was never written to (the SQL backend's: no schema revision).
"""

from __future__ import annotations

import enum
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import attrs

import agent_engine
from agent_engine import (
    BackendUnavailableError,
    Embedder,
    EmbeddingError,
    HashingEmbedder,
    InMemoryBackend,
    MemoryBackend,
    SentenceTransformerEmbedder,
    ValidationError,
)
from agent_engine.errors import UnknownBackendError
from agent_engine.memory import OpenOptions, backend_for_scheme, backends, get_backend

__all__ = [
    "DB_ENV",
    "MEMORY_URL",
    "Access",
    "Location",
    "Store",
    "default_url",
    "locate",
    "make_embedder",
    "open_store",
    "sql_api",
    "url_forms",
]

MEMORY_URL = "memory://"
DB_ENV = "AGENT_ENGINE_DB"
_SQL_MODULE = "agent_engine.memory.sql"
SQL = "sql"
"""The registered backend whose schema the ``db`` commands migrate."""
_EMBEDDERS = ("auto", "minilm", "hashing")


class Access(enum.Enum):
    """What a command does with the store it opens."""

    READ = "read"
    """Only reads: the connection cannot write; a store never written to reads as empty."""
    WRITE = "write"
    """Changes items that exist: a store never written to has none, and stays as it is."""
    CREATE = "create"
    """May create the database, its folder and its schema (``memory add``, ``demo``)."""


@attrs.frozen
class SqlApi:
    """The SQL backend's entry points (present once its module imports)."""

    backend: Callable[..., MemoryBackend]
    default_url: Callable[[], str]
    upgrade: Callable[[str], Any]
    revision: Callable[[str], str | None]


@attrs.frozen
class Store:
    """An open backend and what the commands report about it."""

    url: str
    backend: MemoryBackend
    scheme: str
    kind: str
    """The name the backend is registered under (:mod:`agent_engine.memory.registry`)."""
    path: Path | None = None
    """The SQLite file, when there is one."""
    empty: bool = False
    """Nothing was ever written here (no file yet, or a database without a schema). The
    commands then see an empty in-memory stand-in, and the database stays untouched."""

    @property
    def backend_name(self) -> str:
        """The class of the backend the URL opens (for an empty store: the one it would)."""
        if self.empty:
            return get_backend(self.kind).class_name
        return type(self.backend).__name__

    def size_bytes(self) -> int | None:
        """Bytes on disk (the SQLite file and its write-ahead log); ``None`` when unknown."""
        if self.path is None or not self.path.exists():
            return None
        files = [self.path, self.path.with_name(self.path.name + "-wal")]
        return sum(file.stat().st_size for file in files if file.exists())

    def revision(self) -> str | None:
        """The schema revision of a SQL database (``None`` for other backends)."""
        if self.kind != SQL or self.empty:
            return None
        return sql_api().revision(self.url)


def sql_api() -> SqlApi:
    """The SQL backend's functions, or a typed error saying it is unavailable."""
    try:
        module = importlib.import_module(_SQL_MODULE)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the SQL backend is unavailable in this installation ({exc}); "
            f"use --db {MEMORY_URL} or install agent-engine with its SQL dependencies"
        ) from exc

    def find(name: str) -> Any:
        found = getattr(agent_engine, name, None) or getattr(module, name, None)
        if found is None:
            raise BackendUnavailableError(f"the SQL backend does not provide {name}()")
        return found

    return SqlApi(
        backend=find("SQLAlchemyBackend"),
        default_url=find("default_database_url"),
        upgrade=find("upgrade_database"),
        revision=find("database_revision"),
    )


def default_url() -> str:
    """``AGENT_ENGINE_DB``, else the embedded SQLite default in the user data directory."""
    if os.environ.get(DB_ENV):
        return os.environ[DB_ENV]
    return sql_api().default_url()


def url_forms() -> str:
    """The URL forms the registered backends open, for help texts and errors."""
    *forms, last = [form for entry in backends() for form in entry.urls] or ["none"]
    return f"{', '.join(forms)} or {last}" if forms else last


def scheme_of(url: str) -> str:
    """The URL's scheme, once a registered backend opens it; a typed error for anything else.

    Driver suffixes are dropped (``sqlite+pysqlite`` is ``sqlite``) and ``postgres`` reads as
    ``postgresql``.
    """
    if not isinstance(url, str) or ":" not in url:
        raise BackendUnavailableError(f"not a database URL: {url!r}; expected {url_forms()}")
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    try:
        backend_for_scheme(scheme)
    except UnknownBackendError as exc:
        raise UnknownBackendError(
            f"unsupported database URL scheme {scheme!r} in {url!r}; expected {url_forms()}",
            name=scheme,
            known=exc.known,
        ) from None
    return "postgresql" if scheme == "postgres" else scheme


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (``None`` for an in-memory SQLite database)."""
    rest = url.split(":", 1)[1]
    if not rest.startswith("//"):
        raise BackendUnavailableError(f"malformed SQLite URL {url!r}; expected sqlite:///PATH")
    database = rest[2:].split("?", 1)[0]
    database = database.removeprefix("/")
    if database in {"", ":memory:"}:
        return None
    return Path(database)


@attrs.frozen
class Location:
    """Where a URL points: the URL, its scheme, its backend, and its SQLite file if it has one."""

    url: str
    scheme: str
    kind: str
    """The name the backend of the scheme is registered under."""
    path: Path | None = None


def locate(url: str | None, *, create: bool = False) -> Location:
    """Resolve ``url`` (``None``: the default) and check that it can be opened.

    ``create``: a missing SQLite file's folder is made (the backend makes the file).
    Otherwise a file named explicitly (``--db`` or ``AGENT_ENGINE_DB``) must exist, and the
    default may be missing (nothing was written yet); nothing is created either way.
    """
    explicit = url is not None or bool(os.environ.get(DB_ENV))
    target = url if url is not None else default_url()
    scheme = scheme_of(target)
    path = sqlite_path(target) if scheme == "sqlite" else None
    if path is not None and not path.exists():
        if explicit and not create:
            raise BackendUnavailableError(
                f"no database at {path}: check --db or ${DB_ENV}, or create it with "
                "`agent-engine db upgrade`"
            )
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
    return Location(target, scheme, backend_for_scheme(scheme).name, path)


def open_store(
    url: str | None,
    *,
    embedder: Embedder | None = None,
    access: Access = Access.READ,
    statement_timeout: float | None = None,
) -> Store:
    """Open the store at ``url`` (``None``: the default) for what a command does with it.

    ``Access.CREATE`` gives an empty database the current schema. Otherwise a store never
    written to (the default file before its first use, a database without a schema) is
    left as it is and opened :attr:`~Store.empty`. A schema older or newer than the code is
    refused with the command that upgrades it, whatever the access. ``statement_timeout`` is
    the SQL backend's (``None``: its default). The backend's registered opener opens it.
    """
    where = locate(url, create=access is Access.CREATE)
    options = OpenOptions(
        embedder=embedder,
        create=access is Access.CREATE,
        read_only=access is Access.READ,
        statement_timeout=statement_timeout,
    )
    backend = get_backend(where.kind).open(where.url, options)
    if backend is None:
        return _empty(where, embedder)
    return Store(where.url, backend, where.scheme, where.kind, where.path)


def _empty(where: Location, embedder: Embedder | None) -> Store:
    """A store nothing was written to: read through an empty stand-in, never touched."""
    backend = InMemoryBackend(embedder=embedder)
    return Store(where.url, backend, where.scheme, where.kind, where.path, empty=True)


def make_embedder(name: str) -> Embedder:
    """``minilm`` (the bundled all-MiniLM-L6-v2), ``hashing`` (fast, no model) or ``auto``.

    ``auto`` takes MiniLM when its package is installed and says so when it falls back.
    """
    if name not in _EMBEDDERS:
        raise ValidationError(
            f"unknown embedder {name!r}; choose one of {', '.join(_EMBEDDERS)}",
            field="embedder",
            value=name,
        )
    if name == "hashing":
        return HashingEmbedder()
    # The command is the application: the model loads quietly, without progress bars.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        return cast("Embedder", SentenceTransformerEmbedder())
    except EmbeddingError as exc:
        if name == "minilm":
            raise
        sys.stderr.write(f"note: using the hashing embedder ({exc})\n")
        return HashingEmbedder()
