"""The initial schema: items, their tags, and the audit journal.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _text(length=None):
    base = sa.String(length) if length else sa.Text()
    exact = sa.String(length, collation="C") if length else sa.Text(collation="C")
    return base.with_variant(exact, "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_items",
        sa.Column("id", _text(255), nullable=False),
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
        sa.PrimaryKeyConstraint("id", name="pk_ae_items"),
    )
    op.create_index(
        "ix_ae_items_namespace_kind_importance",
        "ae_items",
        ["namespace", "kind", "importance", "id"],
    )
    op.create_index(
        "ix_ae_items_namespace_importance", "ae_items", ["namespace", "importance", "id"]
    )
    op.create_index("ix_ae_items_namespace_timestamp", "ae_items", ["namespace", "timestamp", "id"])
    op.create_index("ix_ae_items_namespace_tier", "ae_items", ["namespace", "tier"])
    op.create_index("ix_ae_items_expires_at", "ae_items", ["expires_at"])
    op.create_index("ix_ae_items_fingerprint", "ae_items", ["fingerprint"])

    op.create_table(
        "ae_item_tags",
        sa.Column("item_id", _text(255), nullable=False),
        sa.Column("tag", _text(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"],
            ["ae_items.id"],
            name="fk_ae_item_tags_item_id_ae_items",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("item_id", "tag", name="pk_ae_item_tags"),
    )
    op.create_index("ix_ae_item_tags_tag", "ae_item_tags", ["tag", "item_id"])

    op.create_table(
        "ae_audit_events",
        sa.Column("id", _text(255), nullable=False),
        sa.Column("action", _text(32), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("item_ids", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ae_audit_events"),
    )
    op.create_index("ix_ae_audit_events_at", "ae_audit_events", ["at", "id"])
    op.create_index("ix_ae_audit_events_namespace_at", "ae_audit_events", ["namespace", "at", "id"])


def downgrade() -> None:
    op.drop_index("ix_ae_audit_events_namespace_at", table_name="ae_audit_events")
    op.drop_index("ix_ae_audit_events_at", table_name="ae_audit_events")
    op.drop_table("ae_audit_events")
    op.drop_index("ix_ae_item_tags_tag", table_name="ae_item_tags")
    op.drop_table("ae_item_tags")
    op.drop_index("ix_ae_items_fingerprint", table_name="ae_items")
    op.drop_index("ix_ae_items_expires_at", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_tier", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_timestamp", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_importance", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_kind_importance", table_name="ae_items")
    op.drop_table("ae_items")
