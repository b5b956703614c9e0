"""What a SQL store knows about itself: its embedder, a re-embedding under way, change counters.

Every function takes a connection inside the caller's transaction and never commits, so these
facts change in the same transaction as the items they describe: the identity is recorded with
the first vector, the re-embedding mark moves with each batch of new vectors, and a scope's
counter is bumped by the write that changes the scope.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from agent_engine.embeddings import EmbedderIdentity
from agent_engine.memory.backend import ScopeVersions
from agent_engine.memory.sql._schema import items, scope_versions, store_meta
from agent_engine.models import Tier

__all__ = [
    "EMBEDDER_KEY",
    "REEMBED_KEY",
    "Reembedding",
    "StoreMeta",
    "bump_versions",
    "holds_vectors",
    "read_meta",
    "read_versions",
    "upsert_into",
    "write_identity",
    "write_reembedding",
]

EMBEDDER_KEY = "embedder"
"""``{"name": str | null, "dim": int}``: the embedder that made the stored vectors."""
REEMBED_KEY = "reembed"
"""``{"target": identity | null, "after": id | null}``: a re-embedding under way (or due)."""


@attrs.frozen
class Reembedding:
    """A re-embedding under way: where it goes and the last item id it wrote.

    ``target`` is ``None`` when no re-embedding has started yet but one is due: the store
    holds vectors of several sizes (found when the identity was first recorded).
    """

    target: EmbedderIdentity | None
    after: str | None = None


@attrs.frozen
class StoreMeta:
    """The store's recorded identity (``None``: none yet) and its re-embedding, if any."""

    identity: EmbedderIdentity | None
    reembedding: Reembedding | None


def _identity(data: Any) -> EmbedderIdentity | None:
    return None if data is None else EmbedderIdentity(data["name"], int(data["dim"]))


def _identity_data(identity: EmbedderIdentity | None) -> dict[str, Any] | None:
    return None if identity is None else {"name": identity.name, "dim": identity.dim}


_META_QUERY = sa.select(store_meta.c.key, store_meta.c.value).where(
    store_meta.c.key.in_([EMBEDDER_KEY, REEMBED_KEY])
)


def read_meta(connection: sa.Connection) -> StoreMeta:
    """The identity and re-embedding recorded in the store (one read of at most two rows)."""
    values = {key: json.loads(value) for key, value in connection.execute(_META_QUERY)}
    reembed = values.get(REEMBED_KEY)
    return StoreMeta(
        identity=_identity(values.get(EMBEDDER_KEY)),
        reembedding=None
        if reembed is None
        else Reembedding(_identity(reembed["target"]), reembed["after"]),
    )


def upsert_into(connection: sa.Connection) -> Any:
    """The dialect's ``INSERT`` with ``ON CONFLICT`` (SQLite and PostgreSQL spell it alike)."""
    return postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert


def _put(connection: sa.Connection, key: str, value: Any) -> None:
    encoded = json.dumps(value, separators=(",", ":"))
    statement = (
        upsert_into(connection)(store_meta)
        .values(key=key, value=encoded)
        .on_conflict_do_update(index_elements=[store_meta.c.key], set_={"value": encoded})
    )
    connection.execute(statement)


def write_identity(connection: sa.Connection, identity: EmbedderIdentity) -> None:
    """Record ``identity`` as the embedder of the stored vectors."""
    _put(connection, EMBEDDER_KEY, _identity_data(identity))


def write_reembedding(connection: sa.Connection, reembedding: Reembedding | None) -> None:
    """Record a re-embedding under way, or (``None``) that none is."""
    if reembedding is None:
        connection.execute(store_meta.delete().where(store_meta.c.key == REEMBED_KEY))
        return
    data = {"target": _identity_data(reembedding.target), "after": reembedding.after}
    _put(connection, REEMBED_KEY, data)


def holds_vectors(connection: sa.Connection) -> bool:
    """Whether any item has a vector (a store without one accepts any embedder)."""
    query = sa.select(sa.literal(1)).where(items.c.embedding.is_not(None)).limit(1)
    return connection.execute(query).first() is not None


_BUMP_CHUNK = 300
"""Scopes per upsert: three parameters each, under SQLite's oldest limit of 999."""


def bump_versions(
    connection: sa.Connection, scopes: Iterable[tuple[str, str]]
) -> dict[tuple[str, Tier], int]:
    """Add one to the counter of each ``(namespace, tier)`` scope; return the new values.

    One multi-row upsert (per few hundred scopes), whatever the number of scopes a write
    touched. Its rows are listed in sorted order, so two writers bumping the same scopes
    lock them in the same order and cannot deadlock.
    """
    ordered = sorted(set(scopes))
    versions: dict[tuple[str, Tier], int] = {}
    insert = upsert_into(connection)
    for start in range(0, len(ordered), _BUMP_CHUNK):
        rows = [
            {"namespace": namespace, "tier": tier, "version": 1}
            for namespace, tier in ordered[start : start + _BUMP_CHUNK]
        ]
        statement = (
            insert(scope_versions)
            .values(rows)
            .on_conflict_do_update(
                index_elements=[scope_versions.c.namespace, scope_versions.c.tier],
                set_={"version": scope_versions.c.version + 1},
            )
            .returning(scope_versions.c.namespace, scope_versions.c.tier, scope_versions.c.version)
        )
        for row in connection.execute(statement):
            versions[row.namespace, Tier(row.tier)] = int(row.version)
    return versions


def read_versions(
    connection: sa.Connection, namespace: str | None, tier: Tier | None
) -> ScopeVersions:
    """The counters of the scopes inside ``(namespace, tier)`` (``None``: any).

    With both given, as tier stores always do, this is one primary-key read.
    """
    query = sa.select(scope_versions.c.namespace, scope_versions.c.tier, scope_versions.c.version)
    if namespace is not None:
        query = query.where(scope_versions.c.namespace == namespace)
    if tier is not None:
        query = query.where(scope_versions.c.tier == tier.value)
    return {(row.namespace, Tier(row.tier)): int(row.version) for row in connection.execute(query)}
