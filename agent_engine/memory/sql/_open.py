"""The SQL backend as the registry opens it: from a command's URL, or as a benchmark store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent_engine.embeddings import Embedder
from agent_engine.memory.sql._migrate import database_revision
from agent_engine.memory.sql.backend import SQLAlchemyBackend

if TYPE_CHECKING:
    from agent_engine.memory.registry import OpenOptions

__all__ = ["open_url", "sqlite_file"]


def open_url(url: str, options: OpenOptions) -> SQLAlchemyBackend | None:
    """Open ``url`` as a command asks; ``None`` for a store never written to (unless creating).

    The revision is read without writing (a missing file has none), so a store that was never
    written to is not touched, not even by a connection's settings. A schema older or newer
    than the code is refused by the backend, with the command that upgrades it.
    """
    if not options.create and database_revision(url) is None:
        return None
    return SQLAlchemyBackend(
        url,
        embedder=options.embedder,
        create=options.create,
        read_only=options.read_only,
        statement_timeout=options.statement_timeout,
    )


def sqlite_file(work: Path, embedder: Embedder) -> SQLAlchemyBackend:
    """``sqlite``: a migrated SQLite file in ``work``."""
    return SQLAlchemyBackend(f"sqlite:///{work / 'bench.db'}", embedder=embedder, upgrade=True)
