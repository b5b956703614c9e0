"""The tables of the SQL backend, shared by the backend and the alembic migrations.

Every name starts with ``ae_`` so the schema can live beside an application's own tables, and a
naming convention fixes constraint and index names, so migrations can refer to them by name
on every dialect. Text columns compare in code-point order (``COLLATE "C"`` on PostgreSQL,
SQLite's default), as Python does, so ordering by a text field gives the in-memory backend's
order. Times are integer microseconds since the Unix epoch (UTC): exact, index-friendly and
compared the same way on every dialect. Tags are stored twice: as a JSON list on the item (its
order is part of the item) and one row per tag in ``ae_item_tags``, which the tag filters use.
``ae_items`` has a column per :class:`~agent_engine.models.ContextItem` field, in field order;
:mod:`._rows` derives the columns from the fields, with the conversion of each.

``ae_store_meta`` holds facts about the store as a whole, as JSON values by key: which
embedder made its vectors, and a re-embedding under way. ``ae_scope_versions`` holds one
change counter per (namespace, tier), bumped by every write to the scope in the write's own
transaction, so a process can tell from one primary-key read that its cached lexical index
of a scope is still the store's.

``ae_changes`` is the change log of an embedded (SQLite) store: one row per item inserted,
updated or deleted, numbered by an ever-growing ``seq``. Triggers fill it in the transaction
of the write (:mod:`._changes`), whatever program writes, so the index files beside the
database can catch up on exactly what changed since they were saved. An item keeps one row,
its latest change. PostgreSQL keeps the table empty (its indexes live in the server).

``ae_ingest_queue`` holds the events of the ingestion queue (:mod:`agent_engine.ingest`) in the
store's own database, so nothing new has to run beside it: pending ones, leased to a worker
until ``lease_until``, and those done or dropped by the decider, kept a while for the status
and so a re-sent event (same tier, namespace and idempotency key) is taken once.
``ae_ingest_dead`` holds what could not be stored, with the reason: events that failed too
often or were refused, and lines of a backfill that were no event at all.

``ae_aliases`` holds each namespace's aliases (:mod:`agent_engine.memory.aliases`), a row per
term and expansion: user-edited words, not memory, so no item's removal touches them.
``ae_checkpoints`` holds each scope's checkpoints (:mod:`agent_engine.memory.checkpoints`):
the saved state as export text, and what lists it (scope, label, time, item count).
``ae_agents`` and ``ae_grants`` hold each project's agents and their grants on its shared
pools (:mod:`agent_engine.memory.grants`): access rules, not memory, so no item's removal
touches them.
``ae_forks`` holds a row per forked scope (:mod:`agent_engine.memory.lineage`): its parent,
when and from what checkpoint it was forked, and whether it is detached; ``ae_fork_hidden``
a row per attached fork and item id of its ancestors it no longer sees. Lineage, not memory:
no item's removal touches them either, except an erase, which deletes the hidden rows naming
its ids.
``ae_conflicts`` holds the conflicts recorded between items of one scope
(:mod:`agent_engine.memory.conflicts`). Both items are foreign keys that cascade, so whatever
deletes an item (a delete, a clear, an erase) removes its conflicts in the same statement.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from agent_engine.memory.aliases import MAX_ALIAS_LENGTH
from agent_engine.memory.sql._rows import item_columns, text_type
from agent_engine.models import MAX_ITEM_ID_LENGTH

__all__ = [
    "agents",
    "aliases",
    "audit_events",
    "changes",
    "checkpoints",
    "conflicts",
    "fork_hidden",
    "forks",
    "grants",
    "ingest_dead",
    "ingest_queue",
    "item_tags",
    "items",
    "lexical_snapshots",
    "metadata",
    "scope_log",
    "scope_versions",
    "store_meta",
]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

items = sa.Table("ae_items", metadata, *item_columns())

# The access paths of tiers and the assembler: a namespace's items by kind and importance,
# by importance (eviction), by time (the default order), its pinned items (every build asks
# for them; they are few, so equality on status must be indexed) and the expiry sweep.
sa.Index(
    "ix_ae_items_namespace_kind_importance",
    items.c.namespace,
    items.c.kind,
    items.c.importance,
    items.c.id,
)
sa.Index("ix_ae_items_namespace_importance", items.c.namespace, items.c.importance, items.c.id)
sa.Index("ix_ae_items_namespace_timestamp", items.c.namespace, items.c.timestamp, items.c.id)
sa.Index("ix_ae_items_namespace_tier", items.c.namespace, items.c.tier)
sa.Index(
    "ix_ae_items_namespace_status_importance",
    items.c.namespace,
    items.c.status,
    items.c.importance,
    items.c.id,
)
sa.Index("ix_ae_items_expires_at", items.c.expires_at)
sa.Index("ix_ae_items_fingerprint", items.c.fingerprint)


def _partial_index(name: str, where: sa.ColumnElement[bool], *columns: sa.Column[Any]) -> None:
    """An index of the rows ``where`` holds, on both dialects."""
    sa.Index(name, *columns, sqlite_where=where, postgresql_where=where)


# The lifecycle's reads: a scope's slot, an item's history, and a scope's working set by time
# (the archive's rows are skipped by the index, not row by row). Most items have no key and
# were never superseded: partial indexes hold only the rest, which also keeps SQLite's
# planner from judging a lookup unselective by the statistics of all those nulls.
_partial_index(
    "ix_ae_items_namespace_key", items.c.key.is_not(None), items.c.namespace, items.c.key
)
_partial_index(
    "ix_ae_items_superseded_by", items.c.superseded_by.is_not(None), items.c.superseded_by
)
sa.Index(
    "ix_ae_items_namespace_archived_at_timestamp",
    items.c.namespace,
    items.c.archived_at,
    items.c.timestamp,
    items.c.id,
)
# What an opened index file is checked against before it is trusted (``_sidecar``): the
# vectors stored, and a scope's current items, counted as the scope's items (covered by
# ix_ae_items_namespace_tier) less its history. Partial, so counting reads a small index
# instead of every row (60-80 ms each at 100k items, on every new process's first build;
# under 10 ms with these). Not an index of the current items: SQLite's planner took one for
# the reads of every build and made them three times slower.
_partial_index("ix_ae_items_namespace_embedded", items.c.embedding.is_not(None), items.c.namespace)
_partial_index(
    "ix_ae_items_namespace_tier_history",
    items.c.valid_to.is_not(None),
    items.c.namespace,
    items.c.tier,
)

item_tags = sa.Table(
    "ae_item_tags",
    metadata,
    sa.Column(
        "item_id",
        text_type(MAX_ITEM_ID_LENGTH),
        sa.ForeignKey("ae_items.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tag", text_type(255), primary_key=True),
)
sa.Index("ix_ae_item_tags_tag", item_tags.c.tag, item_tags.c.item_id)

audit_events = sa.Table(
    "ae_audit_events",
    metadata,
    sa.Column("id", text_type(255), primary_key=True),
    sa.Column("action", text_type(32), nullable=False),
    sa.Column("tier", text_type(16), nullable=False),
    sa.Column("namespace", text_type(255), nullable=False),
    sa.Column("item_ids", sa.Text(), nullable=False),
    sa.Column("detail", sa.Text(), nullable=False),
    sa.Column("at", sa.BigInteger(), nullable=False),
)
sa.Index("ix_ae_audit_events_at", audit_events.c.at, audit_events.c.id)
sa.Index(
    "ix_ae_audit_events_namespace_at",
    audit_events.c.namespace,
    audit_events.c.at,
    audit_events.c.id,
)

store_meta = sa.Table(
    "ae_store_meta",
    metadata,
    sa.Column("key", text_type(64), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)

scope_versions = sa.Table(
    "ae_scope_versions",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), primary_key=True),
    sa.Column("version", sa.BigInteger(), nullable=False),
)

# Which items of a scope changed at which of its versions (:mod:`._scope_log`): one row per
# scope and item id, renumbered at each change; read by the scope and version.
scope_log = sa.Table(
    "ae_scope_log",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), primary_key=True),
    sa.Column("item_id", text_type(MAX_ITEM_ID_LENGTH), primary_key=True),
    sa.Column("version", sa.BigInteger(), nullable=False),
)
sa.Index(
    "ix_ae_scope_log_namespace_tier_version",
    scope_log.c.namespace,
    scope_log.c.tier,
    scope_log.c.version,
)

# A saved BM25 index of a scope, at a version of it (:mod:`._snapshots`).
lexical_snapshots = sa.Table(
    "ae_lexical_snapshots",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), primary_key=True),
    sa.Column("version", sa.BigInteger(), nullable=False),
    sa.Column("data", sa.LargeBinary(), nullable=False),
)

changes = sa.Table(
    "ae_changes",
    metadata,
    sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("item_id", text_type(MAX_ITEM_ID_LENGTH), nullable=False, unique=True),
    sqlite_autoincrement=True,
)

conflicts = sa.Table(
    "ae_conflicts",
    metadata,
    sa.Column("id", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), nullable=False),
    sa.Column("namespace", text_type(255), nullable=False),
    sa.Column(
        "item_a",
        text_type(MAX_ITEM_ID_LENGTH),
        sa.ForeignKey("ae_items.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column(
        "item_b",
        text_type(MAX_ITEM_ID_LENGTH),
        sa.ForeignKey("ae_items.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("version_a", sa.Integer(), nullable=False),
    sa.Column("version_b", sa.Integer(), nullable=False),
    sa.Column("type", text_type(16), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    sa.Column("detected_at", sa.BigInteger(), nullable=False),
    sa.Column("resolved_at", sa.BigInteger(), nullable=True),
    sa.Column("kept", text_type(MAX_ITEM_ID_LENGTH), nullable=True),
)
# A scope's unresolved conflicts, newest first (what every build and `memory conflicts` ask);
# each item's conflicts, which the cascade looks up on every delete of an item.
sa.Index(
    "ix_ae_conflicts_namespace_tier_resolved_at_detected_at",
    conflicts.c.namespace,
    conflicts.c.tier,
    conflicts.c.resolved_at,
    conflicts.c.detected_at,
    conflicts.c.id,
)
sa.Index("ix_ae_conflicts_item_a", conflicts.c.item_a)
sa.Index("ix_ae_conflicts_item_b", conflicts.c.item_b)

aliases = sa.Table(
    "ae_aliases",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("term", text_type(MAX_ALIAS_LENGTH), primary_key=True),
    sa.Column("expansion", text_type(MAX_ALIAS_LENGTH), primary_key=True),
)

checkpoints = sa.Table(
    "ae_checkpoints",
    metadata,
    sa.Column("id", text_type(255), primary_key=True),
    sa.Column("namespace", text_type(255), nullable=False),
    sa.Column("tier", text_type(16), nullable=False),
    sa.Column("label", sa.Text(), nullable=False),
    sa.Column("items", sa.Integer(), nullable=False),
    sa.Column("created_at", sa.BigInteger(), nullable=False),
    sa.Column("data", sa.Text(), nullable=False),
)
# A scope's checkpoints, newest first (what listing and rolling back read).
sa.Index(
    "ix_ae_checkpoints_namespace_tier_created_at",
    checkpoints.c.namespace,
    checkpoints.c.tier,
    checkpoints.c.created_at,
    checkpoints.c.id,
)

agents = sa.Table(
    "ae_agents",
    metadata,
    sa.Column("realm", text_type(255), primary_key=True),
    sa.Column("agent", text_type(255), primary_key=True),
)

grants = sa.Table(
    "ae_grants",
    metadata,
    sa.Column("pool", text_type(255), primary_key=True),
    sa.Column("agent", text_type(255), primary_key=True),
    sa.Column("realm", text_type(255), nullable=False),
    sa.Column("access", text_type(16), nullable=False),
    sa.Column("granted_by", text_type(255), nullable=False),
    sa.Column("granted_at", sa.BigInteger(), nullable=False),
)

forks = sa.Table(
    "ae_forks",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), primary_key=True),
    sa.Column("parent", text_type(255), nullable=False),
    sa.Column("forked_at", sa.BigInteger(), nullable=False),
    sa.Column("checkpoint", text_type(255), nullable=False, default=""),
    sa.Column("detached", sa.Boolean(), nullable=False),
)
# A scope's forks, by parent (what ``children`` reads).
sa.Index("ix_ae_forks_parent_tier", forks.c.parent, forks.c.tier)

fork_hidden = sa.Table(
    "ae_fork_hidden",
    metadata,
    sa.Column("namespace", text_type(255), primary_key=True),
    sa.Column("tier", text_type(16), primary_key=True),
    sa.Column("item_id", text_type(MAX_ITEM_ID_LENGTH), primary_key=True),
)
# Each id's rows, of every fork (what an erase deletes: ``SQLLineageStore.unhide``).
sa.Index("ix_ae_fork_hidden_item_id", fork_hidden.c.item_id)

ingest_queue = sa.Table(
    "ae_ingest_queue",
    metadata,
    sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("tier", text_type(16), nullable=False),
    sa.Column("namespace", text_type(255), nullable=False),
    sa.Column("idempotency_key", text_type(255), nullable=False),
    sa.Column("event", sa.Text(), nullable=False),
    sa.Column("state", text_type(16), nullable=False),
    sa.Column("outcome", sa.Text(), nullable=True),
    sa.Column("claims", sa.Integer(), nullable=False),
    sa.Column("failures", sa.Integer(), nullable=False),
    sa.Column("available_at", sa.BigInteger(), nullable=False),
    sa.Column("lease_owner", text_type(64), nullable=True),
    sa.Column("lease_until", sa.BigInteger(), nullable=True),
    sa.Column("enqueued_at", sa.BigInteger(), nullable=False),
    sa.Column("finished_at", sa.BigInteger(), nullable=True),
    sa.Column("last_error", sa.Text(), nullable=True),
    sa.UniqueConstraint("tier", "namespace", "idempotency_key"),
    sqlite_autoincrement=True,
)
# What a worker claims next (pending, due, oldest first), and what the purge of finished
# events reads.
sa.Index(
    "ix_ae_ingest_queue_state_available_at",
    ingest_queue.c.state,
    ingest_queue.c.available_at,
    ingest_queue.c.seq,
)
sa.Index("ix_ae_ingest_queue_finished_at", ingest_queue.c.finished_at)

ingest_dead = sa.Table(
    "ae_ingest_dead",
    metadata,
    sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("tier", text_type(16), nullable=True),
    sa.Column("namespace", text_type(255), nullable=True),
    sa.Column("idempotency_key", text_type(255), nullable=True),
    sa.Column("event", sa.Text(), nullable=False),
    sa.Column("reason", sa.Text(), nullable=False),
    sa.Column("origin", sa.Text(), nullable=False),
    sa.Column("failures", sa.Integer(), nullable=False),
    sa.Column("failed_at", sa.BigInteger(), nullable=False),
    sqlite_autoincrement=True,
)
