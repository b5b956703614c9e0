"""Saved BM25 indexes of a store's scopes, kept in the database beside the records.

A process searching a scope through an in-process BM25 index (PostgreSQL with
``fulltext=False``, SQLite without index files) must have the index first, and building it
analyses every item of the scope: 7 s at 100k items from PostgreSQL (3 s reading, 4 s
analysing), paid by every new executor process. A process that built an index therefore
saves it here (:meth:`~agent_engine.retrieval.bm25.LexicalIndex.snapshot`, one ``.npz``),
stamped with the scope's version it reflects; the next process restores it and catches up
through the scope log (:mod:`._scope_log`) from that version. In the database rather than in
a file: the processes of one PostgreSQL store share no folder, and a snapshot then goes
wherever the store goes (backups, replicas).

Saved after a rebuild of a scope of at least :data:`MIN_ITEMS` items, and by ``close`` or
``save_indexes`` when the index moved since; a save never replaces a newer snapshot, and one
past :data:`MAX_BYTES` is not saved.

**Erasure.** An erase deletes the snapshots of the scopes it touched, in its own transaction.
A save first locks the scope's counter row, as an erase's bump does, and checks that no
erase passed the version the snapshot was taken at: no snapshot keeps an erased item.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from typing import Final

import numpy as np
import sqlalchemy as sa

from agent_engine.memory.sql._meta import upsert_into
from agent_engine.memory.sql._schema import lexical_snapshots, scope_log, scope_versions
from agent_engine.memory.sql._scope_log import PRUNED
from agent_engine.retrieval.bm25 import LexicalIndex

__all__ = ["MAX_BYTES", "MIN_ITEMS", "drop", "encode", "load", "save"]

MAX_BYTES: Final = 512 * 1024 * 1024
"""The largest snapshot saved: PostgreSQL's ``bytea`` holds at most 1 GB, and a snapshot
takes about 1 KB per item (a scope past some 500k items is rebuilt by each process)."""
MIN_ITEMS: Final = 2000
"""Items a scope holds before its index is saved: a smaller one builds in a fraction of a
second (about 0.15 s at 2,000 items), and scopes that come and go (a task's) leave no row."""


def load(connection: sa.Connection, namespace: str, tier: str) -> tuple[LexicalIndex, int] | None:
    """The scope's saved index and the version it reflects; ``None`` if none is usable."""
    query = sa.select(lexical_snapshots.c.version, lexical_snapshots.c.data).where(
        lexical_snapshots.c.namespace == namespace, lexical_snapshots.c.tier == tier
    )
    row = connection.execute(query).first()
    if row is None:
        return None
    try:
        with np.load(io.BytesIO(row.data), allow_pickle=False) as data:
            index = LexicalIndex.restore({name: data[name] for name in data.files})
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return index, int(row.version)


class _PlainBytes(sa.types.TypeDecorator[bytes]):
    """Bytes handed to the driver as they are.

    A pgvector store's connections send every blob SQLAlchemy wraps for the driver as a
    ``vector`` (:func:`._pgvector.register_adapters`); plain bytes stay ``bytea``.
    """

    impl = sa.LargeBinary
    cache_ok = True

    def bind_processor(self, dialect: sa.Dialect) -> None:  # noqa: ARG002 - the same for all
        """No processing: the value goes to the driver as given."""
        return


def encode(index: LexicalIndex) -> bytes | None:
    """``index`` as saved; ``None`` past :data:`MAX_BYTES`.

    Made before the save's transaction, which holds the scope's counter row: writers of the
    scope wait while it is open.
    """
    buffer = io.BytesIO()
    np.savez(buffer, **index.snapshot())  # type: ignore[arg-type]
    return None if buffer.tell() > MAX_BYTES else buffer.getvalue()


def save(connection: sa.Connection, namespace: str, tier: str, version: int, data: bytes) -> bool:
    """Save ``data`` (:func:`encode`) as the scope's index at ``version``.

    Not if an erase passed ``version`` since (the index may hold what it erased); a newer
    snapshot is kept.
    """
    scope = (scope_versions.c.namespace == namespace, scope_versions.c.tier == tier)
    locked = sa.select(scope_versions.c.version).where(*scope).with_for_update()
    current = connection.execute(locked).scalar_one_or_none()
    if current is None or current < version:
        return False
    erased = sa.select(sa.literal(1)).where(
        scope_log.c.namespace == namespace,
        scope_log.c.tier == tier,
        scope_log.c.item_id == PRUNED,
        scope_log.c.version > version,
    )
    if connection.execute(erased).first() is not None:
        return False
    raw = sa.bindparam("data", data, type_=_PlainBytes())
    insert = upsert_into(connection)(lexical_snapshots).values(
        namespace=namespace, tier=tier, version=version, data=raw
    )
    statement = insert.on_conflict_do_update(
        index_elements=[lexical_snapshots.c.namespace, lexical_snapshots.c.tier],
        set_={"version": insert.excluded.version, "data": insert.excluded.data},
        where=lexical_snapshots.c.version <= insert.excluded.version,
    )
    connection.execute(statement)
    return True


def drop(connection: sa.Connection, scopes: Iterable[tuple[str, str]]) -> None:
    """Delete the saved indexes of ``scopes`` (an erase's, in its transaction)."""
    for namespace, tier in set(scopes):
        connection.execute(
            lexical_snapshots.delete().where(
                lexical_snapshots.c.namespace == namespace, lexical_snapshots.c.tier == tier
            )
        )
