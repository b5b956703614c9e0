"""Shared fixtures: structlog reset around every test, and the migrated test databases.

``sqlite_template`` is a migrated SQLite file that backend fixtures copy per test (a fresh file
without running the migrations each time); ``postgres_url`` is one migrated schema on the test
server for the whole run, which backend fixtures empty with ``sql_delete_all`` before each test.
``pgvector_url`` is the same on a PostgreSQL server with pgvector, started once per run in a
temporary folder (``pgvector_server_url``).
Tests that need a schema of their own define a ``postgres_url`` fixture beside them.

``open_backend`` opens an empty backend of any kind in ``BACKEND_KINDS`` from them, and
``backend_kind`` runs a test on each kind in turn. The fixtures import what they use inside:
``agent_engine.testing`` must not be imported before pytest registers it for assertion
rewriting, below.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import structlog

pytest.register_assert_rewrite("agent_engine.testing")


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """A migrated SQLite file, to be copied per test."""
    from agent_engine.memory.sql import upgrade_database  # noqa: PLC0415 - see the module docstring

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_url():
    """A migrated schema on the PostgreSQL test server (fails under CI=true if unreachable)."""
    from agent_engine.memory.sql import upgrade_database  # noqa: PLC0415 - see the module docstring
    from agent_engine.testing.databases import postgres_schema  # noqa: PLC0415

    with postgres_schema() as url:
        upgrade_database(url)
        yield url


@pytest.fixture(scope="session")
def pgvector_server_url():
    """A PostgreSQL server with pgvector for the run (fails under CI=true if it cannot start)."""
    from agent_engine.testing.databases import pgvector_server  # noqa: PLC0415

    with pgvector_server() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_url(pgvector_server_url):
    """A migrated schema on the pgvector server: its vectors live in a pgvector column."""
    from agent_engine.memory.sql import upgrade_database  # noqa: PLC0415 - see the module docstring
    from agent_engine.testing.databases import postgres_schema  # noqa: PLC0415

    with postgres_schema(pgvector_server_url) as url:
        upgrade_database(url)
        yield url


# --------------------------------------------------------------------- empty backends
# One definition of "an empty backend of each kind" for every suite that runs on all of them:
# the conformance suite (tests/conformance/test_backends.py), the fuzz suite, the tier and
# assembler tests and the isolation properties. A new backend adds its kind here, once.


def _memory(request, embedder, folder):
    from agent_engine.memory.inmemory import InMemoryBackend  # noqa: PLC0415

    return InMemoryBackend(embedder=embedder)


def _sqlite(request, embedder, folder):
    from agent_engine.memory.sql import SQLAlchemyBackend  # noqa: PLC0415

    path = folder / "memory.db"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder)


def _postgresql(request, embedder, folder):
    from agent_engine.memory.sql import SQLAlchemyBackend  # noqa: PLC0415
    from agent_engine.testing.databases import sql_delete_all  # noqa: PLC0415

    url = request.getfixturevalue("postgres_url")
    sql_delete_all(url)
    return SQLAlchemyBackend(url, embedder=embedder)


def _pgvector(request, embedder, folder):
    from agent_engine.memory.sql import SQLAlchemyBackend  # noqa: PLC0415
    from agent_engine.testing.databases import sql_delete_all  # noqa: PLC0415

    url = request.getfixturevalue("pgvector_url")
    sql_delete_all(url)
    return SQLAlchemyBackend(url, embedder=embedder)


def _faiss(request, embedder, folder):
    from agent_engine.memory.faiss import FaissBackend  # noqa: PLC0415

    return FaissBackend(embedder=embedder)


def _faiss_sqlite(request, embedder, folder):
    from agent_engine.memory.faiss import FaissBackend  # noqa: PLC0415

    records = _sqlite(request, embedder, folder)
    return FaissBackend(records, embedder=embedder, index_path=folder / "vectors.faiss")


def _redis(request, embedder, folder):
    from agent_engine.memory.redis import RedisBackend  # noqa: PLC0415
    from agent_engine.testing.databases import redis_server_url  # noqa: PLC0415

    return RedisBackend(
        redis_server_url(),
        embedder=embedder,
        prefix=f"agent_engine:test:{uuid.uuid4().hex}:",
        temporary=True,
    )


@attrs.frozen
class Kind:
    """A way to open an empty backend in a test: ``open(request, embedder, folder)``."""

    backend: str
    """The name the backend is registered under (agent_engine.memory.registry)."""
    open: Callable[[pytest.FixtureRequest, Any, Path], Any]


BACKEND_KINDS = {
    "memory": Kind("memory", _memory),
    "faiss": Kind("faiss", _faiss),
    "sqlite": Kind("sql", _sqlite),
    "postgresql": Kind("sql", _postgresql),
    "pgvector": Kind("sql", _pgvector),
    "faiss-sqlite": Kind("faiss", _faiss_sqlite),
    "redis": Kind("redis", _redis),
}
"""Every kind of empty backend the suites run on. The migrated SQLite file and the PostgreSQL
schema are this file's fixtures; a PostgreSQL backend is emptied when it is opened, so two of
them in one test take turns (close one before opening the next). Each Redis backend works under
a key prefix of its own, removed when it is closed."""


@attrs.define
class BackendOpener:
    """Opens empty backends by kind, each in a folder of its own; closes them on ``close``."""

    request: pytest.FixtureRequest
    root: Path
    opened: list[Any] = attrs.field(factory=list)
    made: int = 0

    def __call__(self, kind: str, embedder: Any) -> Any:
        self.made += 1
        folder = self.root / f"{kind}-{self.made}"
        folder.mkdir(parents=True)
        backend = BACKEND_KINDS[kind].open(self.request, embedder, folder)
        self.opened.append(backend)
        return backend

    def close(self) -> None:
        """Close every backend opened so far."""
        while self.opened:
            self.opened.pop().close()


@pytest.fixture(name="backend_kinds", scope="session")
def _backend_kinds() -> dict[str, Kind]:
    """The table of kinds, for tests about the table itself."""
    return BACKEND_KINDS


@pytest.fixture
def open_backend(request, tmp_path) -> Iterator[BackendOpener]:
    """``open_backend(kind, embedder)``: a new empty backend of that kind, closed after the test."""
    opener = BackendOpener(request, tmp_path / "backends")
    yield opener
    opener.close()


@pytest.fixture(params=list(BACKEND_KINDS))
def backend_kind(request) -> str:
    """Each kind of backend in turn: a test (or fixture) that asks for it runs on every kind."""
    return request.param


def failing_aliases(backend: Any, method: str) -> Any:
    """``backend``, its alias store's ``method`` raising ``BackendError`` (the rest unchanged).

    A backend whose alias table went away mid-run: what builds and imports must survive.
    """
    from agent_engine.errors import BackendError  # noqa: PLC0415

    store = backend._alias_store

    class Failing:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise BackendError("the alias table is gone", backend="test")

    setattr(Failing, method, fail)
    backend._alias_store = Failing()
    return backend
