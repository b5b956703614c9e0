"""Recorded conflicts: pairs of items of one scope that likely disagree.

Adds ``ae_conflicts`` (``docs/conflicts.md``): one row per conflict, naming its two items (with
the versions it was found between), its type and reason, when it was found and, once someone
decided, when and which item was kept. Both items are foreign keys that cascade, so deleting,
clearing or erasing an item removes its conflicts in the same statement. Indexes serve a
scope's unresolved conflicts, newest first, and the cascade's lookup of an item's conflicts.
Nothing existing is rewritten; a store upgraded to this revision starts with no conflicts.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_ID_LENGTH = 1024


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_conflicts",
        sa.Column("id", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("item_a", _text(_ID_LENGTH), nullable=False),
        sa.Column("item_b", _text(_ID_LENGTH), nullable=False),
        sa.Column("version_a", sa.Integer(), nullable=False),
        sa.Column("version_b", sa.Integer(), nullable=False),
        sa.Column("type", _text(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("detected_at", sa.BigInteger(), nullable=False),
        sa.Column("resolved_at", sa.BigInteger(), nullable=True),
        sa.Column("kept", _text(_ID_LENGTH), nullable=True),
        sa.ForeignKeyConstraint(
            ["item_a"], ["ae_items.id"], name="fk_ae_conflicts_item_a_ae_items", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["item_b"], ["ae_items.id"], name="fk_ae_conflicts_item_b_ae_items", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_ae_conflicts"),
    )
    op.create_index(
        "ix_ae_conflicts_namespace_tier_resolved_at_detected_at",
        "ae_conflicts",
        ["namespace", "tier", "resolved_at", "detected_at", "id"],
    )
    op.create_index("ix_ae_conflicts_item_a", "ae_conflicts", ["item_a"])
    op.create_index("ix_ae_conflicts_item_b", "ae_conflicts", ["item_b"])


def downgrade() -> None:
    op.drop_index("ix_ae_conflicts_item_b", table_name="ae_conflicts")
    op.drop_index("ix_ae_conflicts_item_a", table_name="ae_conflicts")
    op.drop_index(
        "ix_ae_conflicts_namespace_tier_resolved_at_detected_at", table_name="ae_conflicts"
    )
    op.drop_table("ae_conflicts")
