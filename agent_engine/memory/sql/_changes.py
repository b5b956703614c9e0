"""The change log of an embedded store: what changed since an index file was saved.

Index files beside a SQLite database (:mod:`._sidecar`) are caches of it, and several
processes may write the database. Triggers on ``ae_items`` record every insert, delete and
update in ``ae_changes`` within the writing transaction, so a change and its log entry commit
together or not at all, whichever program writes (this package, an older one, a migration, a
``db copy``). Every update counts, an access count's too: the process also caches items it
read, and an index skips what did not change its content. An index stamped with the log
position it reflects catches up by reading the entries after it: a crash between a commit
and an index save costs a catch-up, never a wrong answer.

An item keeps one entry, renumbered at each change (``INSERT OR REPLACE`` on its unique
id), so the log holds at most one row per item id ever written. An erase removes the erased
ids' entries with them (an erased id must not survive anywhere) and counts the erasure in
``ae_store_meta`` instead: a reader that sees the count move checks which of its rows still
exist. ``store_id``, set when the log is created, tells an index file of this store from one
of another database at the same path.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import attrs
import sqlalchemy as sa

from agent_engine.memory.sql._schema import changes, store_meta

__all__ = [
    "Position",
    "changed_since",
    "create_log",
    "drop_log",
    "forget",
    "position",
]

STORE_ID_KEY = "store_id"
ERASURES_KEY = "erasures"

_TRIGGERS = {
    "ae_items_logged_insert": (
        "AFTER INSERT ON ae_items BEGIN "
        "INSERT OR REPLACE INTO ae_changes (item_id) VALUES (NEW.id); END"
    ),
    "ae_items_logged_delete": (
        "AFTER DELETE ON ae_items BEGIN "
        "INSERT OR REPLACE INTO ae_changes (item_id) VALUES (OLD.id); END"
    ),
    "ae_items_logged_update": (
        "AFTER UPDATE ON ae_items BEGIN "
        "INSERT OR REPLACE INTO ae_changes (item_id) SELECT OLD.id WHERE OLD.id IS NOT NEW.id; "
        "INSERT OR REPLACE INTO ae_changes (item_id) VALUES (NEW.id); END"
    ),
}


def create_log(connection: sa.Connection) -> None:
    """Install the triggers and the store's id (SQLite; called by the migration)."""
    for name, body in _TRIGGERS.items():
        connection.execute(sa.text(f"CREATE TRIGGER IF NOT EXISTS {name} {body}"))
    present = connection.execute(
        sa.select(store_meta.c.key).where(store_meta.c.key == STORE_ID_KEY)
    ).first()
    if present is None:
        connection.execute(
            store_meta.insert().values(key=STORE_ID_KEY, value=f'"{uuid.uuid4().hex}"')
        )


def drop_log(connection: sa.Connection) -> None:
    """Remove the triggers (the migration's downgrade)."""
    for name in _TRIGGERS:
        connection.execute(sa.text(f"DROP TRIGGER IF EXISTS {name}"))


@attrs.frozen
class Position:
    """Where the log stands: its last ``seq``, the erasures counted, and whose log it is."""

    seq: int
    erasures: int
    store_id: str


_POSITION = sa.select(
    sa.select(sa.func.coalesce(sa.func.max(changes.c.seq), 0)).scalar_subquery(),
    sa.select(store_meta.c.value).where(store_meta.c.key == ERASURES_KEY).scalar_subquery(),
    sa.select(store_meta.c.value).where(store_meta.c.key == STORE_ID_KEY).scalar_subquery(),
)


def position(connection: sa.Connection) -> Position:
    """The log's position: one read of three primary-key lookups."""
    seq, erasures, store_id = connection.execute(_POSITION).one()
    return Position(int(seq), int(erasures or 0), str(store_id or "").strip('"'))


def changed_since(connection: sa.Connection, seq: int) -> list[tuple[int, str]]:
    """``(seq, item id)`` of every entry after ``seq``, in log order."""
    query = (
        sa.select(changes.c.seq, changes.c.item_id)
        .where(changes.c.seq > seq)
        .order_by(changes.c.seq)
    )
    return [(int(row.seq), str(row.item_id)) for row in connection.execute(query)]


def forget(connection: sa.Connection, item_ids: Iterable[str]) -> None:
    """Drop erased ids' entries and count the erasure (in the erasing transaction)."""
    ids = list(item_ids)
    for start in range(0, len(ids), 500):
        connection.execute(changes.delete().where(changes.c.item_id.in_(ids[start : start + 500])))
    count = int(position(connection).erasures) + 1
    updated = connection.execute(
        store_meta.update().where(store_meta.c.key == ERASURES_KEY).values(value=str(count))
    ).rowcount
    if not updated:
        connection.execute(store_meta.insert().values(key=ERASURES_KEY, value=str(count)))
