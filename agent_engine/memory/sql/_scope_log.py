"""The scope log: which items of a scope changed at which of its versions.

A process holding a BM25 index of a scope (PostgreSQL with ``fulltext=False``, SQLite without
index files) compares the scope's change counter (:func:`._meta.bump_versions`) before every
use. The counter says *that* another writer changed the scope; before this log the index was
then rebuilt from a full scan: seconds at 100k items, in every process, after any other
process's write. The log says *what* changed: a write records, beside the counters it moved,
the id of every item it wrote, removed or moved out of a scope, with the scope's new version.
A follower reads the entries past the version it holds, re-reads those items and is current
(:meth:`~agent_engine.memory.backend.BaseBackend._scope_index`).

**Order.** A write bumps the counters before it logs, and the bump locks each scope's counter
row until the transaction ends, so two writers of one scope log and commit their versions in
order: an entry never commits behind a version a reader has passed. (A sequence would not do
on PostgreSQL, whose numbers are handed out at insert and committed in any order.)

**Size.** One row per scope and item id, renumbered at each change (an upsert), so the log
holds at most a row per id ever written to a scope.

**Erasure.** An erased id must survive nowhere, so an erase deletes its rows and leaves a row
with an empty id (:data:`PRUNED`) at the scope's new version instead: a follower that has not
seen it rebuilds its index from the records, and the erased items are gone from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import sqlalchemy as sa

from agent_engine.memory.backend import ScopeVersions
from agent_engine.memory.sql._meta import upsert_into
from agent_engine.memory.sql._schema import scope_log
from agent_engine.models import Tier

__all__ = ["PRUNED", "Changed", "changed_since", "record", "record_erased"]

PRUNED: Final = ""
"""The item id of the entry an erase leaves: a follower behind it must rebuild."""

Changed = tuple[str, str, str]
"""A logged change: the scope's namespace and tier, and the item's id."""

_ID_CHUNK = 500


def record(connection: sa.Connection, changed: Iterable[Changed], versions: ScopeVersions) -> None:
    """Log each changed ``(namespace, tier, item id)`` at its scope's version in ``versions``."""
    rows = [
        {"namespace": namespace, "tier": tier, "item_id": item_id, "version": version}
        for namespace, tier, item_id in dict.fromkeys(changed)
        if (version := versions.get((namespace, Tier(tier)))) is not None
    ]
    if not rows:
        return
    insert = upsert_into(connection)(scope_log)
    statement = insert.on_conflict_do_update(
        index_elements=[scope_log.c.namespace, scope_log.c.tier, scope_log.c.item_id],
        set_={"version": insert.excluded.version},
    )
    connection.execute(statement, rows)


def record_erased(connection: sa.Connection, item_ids: list[str], versions: ScopeVersions) -> None:
    """Delete the erased ids' entries; leave a :data:`PRUNED` entry in each scope they left."""
    for start in range(0, len(item_ids), _ID_CHUNK):
        chunk = item_ids[start : start + _ID_CHUNK]
        connection.execute(scope_log.delete().where(scope_log.c.item_id.in_(chunk)))
    record(connection, ((namespace, tier.value, PRUNED) for namespace, tier in versions), versions)


def changed_since(
    connection: sa.Connection, namespace: str, tier: Tier, version: int
) -> list[str] | None:
    """The ids changed in a scope after ``version``; ``None`` when an erase passed since."""
    query = sa.select(scope_log.c.item_id).where(
        scope_log.c.namespace == namespace,
        scope_log.c.tier == tier.value,
        scope_log.c.version > version,
    )
    found = list(connection.execute(query).scalars())
    return None if PRUNED in found else found
