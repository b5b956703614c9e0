"""The tables of the SQL backend, shared by the backend and the alembic migrations.

Every name starts with ``ae_`` so the schema can live beside an application's own tables, and a
naming convention fixes constraint and index names, so migrations can refer to them by name
on every dialect. Text columns compare in code-point order (``COLLATE "C"`` on PostgreSQL,
SQLite's default), as Python does, so ordering by a text field gives the in-memory backend's
order. Times are integer microseconds since the Unix epoch (UTC): exact, index-friendly and
compared the same way on every dialect. Tags are stored twice: as a JSON list on the item (its
order is part of the item) and one row per tag in ``ae_item_tags``, which the tag filters use.

``ae_store_meta`` holds facts about the store as a whole, as JSON values by key: which
embedder made its vectors, and a re-embedding under way. ``ae_scope_versions`` holds one
change counter per (namespace, tier), bumped by every write to the scope in the write's own
transaction, so a process can tell from one primary-key read that its cached lexical index
of a scope is still the store's.
"""

from __future__ import annotations

import sqlalchemy as sa

from agent_engine.models import MAX_ITEM_ID_LENGTH

__all__ = ["audit_events", "item_tags", "items", "metadata", "scope_versions", "store_meta"]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def _text(length: int | None = None) -> sa.types.TypeEngine[str]:
    """A text column that sorts by code point on every dialect."""
    base: sa.types.TypeEngine[str] = sa.String(length) if length else sa.Text()
    exact: sa.types.TypeEngine[str] = (
        sa.String(length, collation="C") if length else sa.Text(collation="C")
    )
    return base.with_variant(exact, "postgresql")


items = sa.Table(
    "ae_items",
    metadata,
    sa.Column("id", _text(MAX_ITEM_ID_LENGTH), primary_key=True),
    sa.Column("kind", _text(255), nullable=False),
    sa.Column("text", sa.Text(), nullable=False),
    sa.Column("tier", _text(16), nullable=False),
    sa.Column("namespace", _text(255), nullable=False),
    sa.Column("source", _text(255), nullable=False),
    sa.Column("session", _text(255), nullable=False),
    sa.Column("timestamp", sa.BigInteger(), nullable=False),
    sa.Column("tags", sa.Text(), nullable=False),
    sa.Column("importance", sa.Float(), nullable=False),
    sa.Column("token_cost", sa.Integer(), nullable=True),
    sa.Column("payload", sa.Text(), nullable=False),
    sa.Column("embedding", sa.LargeBinary(), nullable=True),
    sa.Column("status", _text(16), nullable=False),
    sa.Column("access_count", sa.Integer(), nullable=False),
    sa.Column("last_accessed_at", sa.BigInteger(), nullable=True),
    sa.Column("expires_at", sa.BigInteger(), nullable=True),
    sa.Column("provenance", sa.Text(), nullable=True),
    sa.Column("fingerprint", _text(64), nullable=False),
)

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

item_tags = sa.Table(
    "ae_item_tags",
    metadata,
    sa.Column(
        "item_id",
        _text(MAX_ITEM_ID_LENGTH),
        sa.ForeignKey("ae_items.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tag", _text(255), primary_key=True),
)
sa.Index("ix_ae_item_tags_tag", item_tags.c.tag, item_tags.c.item_id)

audit_events = sa.Table(
    "ae_audit_events",
    metadata,
    sa.Column("id", _text(255), primary_key=True),
    sa.Column("action", _text(32), nullable=False),
    sa.Column("tier", _text(16), nullable=False),
    sa.Column("namespace", _text(255), nullable=False),
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
    sa.Column("key", _text(64), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)

scope_versions = sa.Table(
    "ae_scope_versions",
    metadata,
    sa.Column("namespace", _text(255), primary_key=True),
    sa.Column("tier", _text(16), primary_key=True),
    sa.Column("version", sa.BigInteger(), nullable=False),
)
