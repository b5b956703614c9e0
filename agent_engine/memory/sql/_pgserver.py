"""A throwaway PostgreSQL server with pgvector, for tests and benchmarks alike.

:func:`pgvector_server_process` starts PostgreSQL (with the pgvector extension created in its
``public`` schema) in a temporary folder through the ``pgserver`` package (extra ``test``),
yields its URL and stops it, deleting the folder. It needs no pytest: the benchmark's
``pgvector`` store configuration (:func:`temporary_pgvector`) and ``bench processes`` start
one; :func:`agent_engine.testing.databases.pgvector_server` wraps it for tests, turning a
server that cannot start into a skip (or a failure under ``CI=true``).
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import sqlalchemy as sa

from agent_engine.embeddings import Embedder
from agent_engine.errors import BackendUnavailableError
from agent_engine.memory.sql.backend import SQLAlchemyBackend

__all__ = ["pgvector_server_process", "temporary_pgvector", "temporary_pgvector_fulltext"]


@contextmanager
def pgvector_server_process() -> Iterator[str]:
    """Start a PostgreSQL server with pgvector in a temporary folder; yield its URL; stop it.

    A server that cannot start, or starts without pgvector, raises
    :class:`~agent_engine.errors.BackendUnavailableError` saying why.
    """
    folder = str(Path(tempfile.gettempdir()) / "ae-pgvector-...")
    try:
        folder = tempfile.mkdtemp(prefix="ae-pgvector-")
        with warnings.catch_warnings():
            # platformdirs, asked for a runtime folder, warns where XDG_RUNTIME_DIR is unset.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
            from pgserver.postgres_server import get_server  # noqa: PLC0415 - optional package

            server = get_server(folder, cleanup_mode="delete")
    except Exception as error:  # any failure to start means no server
        shutil.rmtree(folder, ignore_errors=True)
        raise BackendUnavailableError(
            f"cannot start a PostgreSQL server with pgvector in {folder}: {error}"
            " (it needs the pgserver package: pip install 'agent-engine[test]')",
            backend="SQLAlchemyBackend",
        ) from error
    try:
        url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
        engine = sa.create_engine(url)
        try:
            with engine.begin() as connection:
                connection.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"))
        except sa.exc.DBAPIError as error:
            raise BackendUnavailableError(
                f"the server in {folder} has no pgvector: {error.orig}",
                backend="SQLAlchemyBackend",
            ) from error
        finally:
            engine.dispose()
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


class _Served(SQLAlchemyBackend):
    """A store on a server of its own, which :meth:`close` stops."""

    def __init__(self, server: ExitStack, url: str, embedder: Embedder, *, fulltext: bool) -> None:
        super().__init__(url, embedder=embedder, upgrade=True, fulltext=fulltext)
        self._server = server

    def close(self) -> None:
        """Close the store, then stop its server and delete its folder."""
        try:
            super().close()
        finally:
            self._server.close()


def temporary_pgvector(work: Path, embedder: Embedder) -> SQLAlchemyBackend:  # noqa: ARG001
    """The ``pgvector`` configuration: an empty store on a new pgvector server, stopped on close.

    Text is searched by in-process BM25 indexes (the backend's default).
    """
    return _served(embedder, fulltext=False)


def temporary_pgvector_fulltext(work: Path, embedder: Embedder) -> SQLAlchemyBackend:  # noqa: ARG001
    """``pgvector-fulltext``: as ``pgvector``, text searched by PostgreSQL's full text."""
    return _served(embedder, fulltext=True)


def _served(embedder: Embedder, *, fulltext: bool) -> SQLAlchemyBackend:
    server = ExitStack()
    url = server.enter_context(pgvector_server_process())
    try:
        return _Served(server, url, embedder, fulltext=fulltext)
    except BaseException:
        server.close()
        raise
