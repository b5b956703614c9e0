"""Checkpoints: each scope's saved states, beside its items.

``ae_checkpoints`` holds a row per checkpoint: its scope, label, time and item count, and the
saved state as export text (``agent_engine/memory/checkpoints.py``). It starts empty; the
downgrade drops it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_checkpoints",
        sa.Column("id", _text(255), nullable=False),
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ae_checkpoints"),
    )
    op.create_index(
        "ix_ae_checkpoints_namespace_tier_created_at",
        "ae_checkpoints",
        ["namespace", "tier", "created_at", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_ae_checkpoints_namespace_tier_created_at", table_name="ae_checkpoints")
    op.drop_table("ae_checkpoints")
