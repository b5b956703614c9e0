"""Forks: each forked scope's parent, and the items of its ancestors it no longer sees.

``ae_forks`` holds a row per forked scope: its parent, when and from what checkpoint it was
forked, and whether it is detached; ``ae_fork_hidden`` a row per attached fork and hidden
item id (``agent_engine/memory/lineage.py``), indexed by item id too (what an erase deletes
by). Both start empty; the downgrade drops them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_ID_LENGTH = 1024


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_forks",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("parent", _text(255), nullable=False),
        sa.Column("forked_at", sa.BigInteger(), nullable=False),
        sa.Column("checkpoint", _text(255), nullable=False),
        sa.Column("detached", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "tier", name="pk_ae_forks"),
    )
    op.create_index("ix_ae_forks_parent_tier", "ae_forks", ["parent", "tier"])
    op.create_table(
        "ae_fork_hidden",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("item_id", _text(_ID_LENGTH), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "tier", "item_id", name="pk_ae_fork_hidden"),
    )
    op.create_index("ix_ae_fork_hidden_item_id", "ae_fork_hidden", ["item_id"])


def downgrade() -> None:
    op.drop_index("ix_ae_fork_hidden_item_id", table_name="ae_fork_hidden")
    op.drop_table("ae_fork_hidden")
    op.drop_index("ix_ae_forks_parent_tier", table_name="ae_forks")
    op.drop_table("ae_forks")
