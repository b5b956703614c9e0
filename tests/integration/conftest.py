"""Empty SQL databases on both dialects for the SQL backend's integration tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from agent_engine.testing.databases import postgres_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request, tmp_path):
    """The URL of an empty database (no schema yet): a new SQLite file, or a new PG schema."""
    with empty_database(request, request.param, tmp_path) as url:
        yield url


SQL_KINDS = ["sqlite", "postgresql", "pgvector"]
"""The kinds of empty database a module's own ``sql_url`` can take, pgvector's server included."""


@contextmanager
def empty_database(request, kind: str, tmp_path) -> Iterator[str]:
    """An empty database of ``kind`` (one of :data:`SQL_KINDS`): its URL, dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'memory.db'}"
        return
    server = request.getfixturevalue("pgvector_server_url") if kind == "pgvector" else None
    with postgres_schema(server) as url:
        yield url


@contextmanager
def statements(engine: sa.Engine, keep: Callable[[str], bool]) -> Iterator[list[str]]:
    """The SQL statements ``keep`` accepts, sent while the block runs (an executemany once)."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, _parameters, _context, _executemany):
        if keep(statement):
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


DAMAGES = ["truncated", "flipped-bytes", "garbage", "empty"]
"""The ways real files get damaged, for :func:`damage_file`."""


def damage_file(path: Path, damage: str) -> None:
    """Damage ``path`` one of the :data:`DAMAGES` ways: a torn copy, flipped bytes, another
    file's bytes over it, or nothing left."""
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped-bytes":
        middle = len(data) // 2
        data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
