"""Throwaway databases for tests of the server backends: PostgreSQL schemas, Redis servers.

Each PostgreSQL test run works in a schema of its own (``ae_test_<random>``, selected through
the connection's ``search_path``) that is dropped afterwards, so concurrent runs on one server
never see each other; Redis tests work under a key prefix of their own. When a server is
unreachable the tests are skipped on a developer's machine and fail under ``CI=true``, where a
skipped database test would hide a regression (:func:`unreachable`).

:func:`pgvector_server` starts a PostgreSQL server with the pgvector extension in a temporary
folder (the ``pgserver`` package, extra ``test``), with the extension created in its
``public`` schema; the schemas of :func:`postgres_schema` on it keep ``public`` on their
``search_path``, so the ``vector`` type is found there. It fails or skips as above when the
server cannot start.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import NoReturn
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from agent_engine.errors import BackendUnavailableError
from agent_engine.memory.sql._pgserver import pgvector_server_process
from agent_engine.memory.sql._schema import metadata

__all__ = [
    "PG_ENV",
    "REDIS_ENV",
    "pgvector_server",
    "postgres_schema",
    "postgres_server_url",
    "redis_server_url",
    "sql_delete_all",
    "unreachable",
]

PG_ENV = "AGENT_ENGINE_TEST_PG"
"""Names the PostgreSQL server tests use (default: the local server's ``test`` database)."""
_DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS_ENV = "AGENT_ENGINE_TEST_REDIS"
"""Names the Redis server tests use (default: the local server's database 0)."""
_DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def unreachable(message: str) -> NoReturn:
    """Skip the test for a server that does not answer, or fail it under ``CI=true``."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def postgres_server_url() -> str:
    """The server's URL, after checking it answers (skip, or fail under ``CI=true``)."""
    url = os.environ.get(PG_ENV, _DEFAULT_PG)
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
        unreachable(f"PostgreSQL is unreachable at {url} ({error.orig})")
    finally:
        engine.dispose()
    return url


def redis_server_url() -> str:
    """The Redis server's URL, after checking it answers (skip, or fail under ``CI=true``)."""
    import redis  # noqa: PLC0415 - only Redis tests need the driver

    url = os.environ.get(REDIS_ENV, _DEFAULT_REDIS)
    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.exceptions.RedisError as error:
        unreachable(f"Redis is unreachable at {url} ({error})")
    finally:
        client.close()
    return url


@contextmanager
def pgvector_server() -> Iterator[str]:
    """Start a PostgreSQL server with pgvector in a temporary folder; yield its URL; stop it.

    The server is :func:`~agent_engine.memory.sql._pgserver.pgvector_server_process`'s; one that
    cannot start skips the test, or fails it under ``CI=true``.
    """
    stack = ExitStack()
    try:
        url = stack.enter_context(pgvector_server_process())
    except BackendUnavailableError as error:
        unreachable(str(error))
    with stack:
        yield url


@contextmanager
def postgres_schema(server: str | None = None) -> Iterator[str]:
    """Yield the URL of a new, empty schema on the test server; drop it afterwards.

    ``server`` names another server than the default one (:func:`pgvector_server`'s): its
    schemas also search ``public``, where that server's extension lives.
    """
    path = "" if server is None else ",public"
    server = postgres_server_url() if server is None else server
    schema = f"ae_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server)
    try:
        with admin.begin() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        separator = "&" if "?" in server else "?"
        yield f"{server}{separator}options={quote(f'-csearch_path={schema}{path}')}"
    finally:
        with admin.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def sql_delete_all(url: str) -> None:
    """Empty the backend's tables (faster than a new schema per test).

    Every table of the schema, read from it (a new table is emptied too), children first.
    """
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for table in reversed(metadata.sorted_tables):
                connection.execute(table.delete())
    finally:
        engine.dispose()
