"""The scope log and saved BM25 indexes: what an in-process index of a scope starts from.

``ae_scope_log`` holds a row per scope and item id with the scope's version at the item's
last change, so a process's BM25 index of a scope catches up by reading what changed instead
of rebuilding from a full scan (``agent_engine/memory/sql/_scope_log.py``). It starts empty:
a process builds its index at the version it reads, and every write from then on is logged.
``ae_lexical_snapshots`` holds a scope's index as saved at one of its versions, so a new
process restores it and catches up instead of building it (``_snapshots.py``). The downgrade
drops both.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_ID_LENGTH = 1024


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_scope_log",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("item_id", _text(_ID_LENGTH), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "tier", "item_id", name="pk_ae_scope_log"),
    )
    op.create_table(
        "ae_lexical_snapshots",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "tier", name="pk_ae_lexical_snapshots"),
    )
    op.create_index(
        "ix_ae_scope_log_namespace_tier_version",
        "ae_scope_log",
        ["namespace", "tier", "version"],
    )


def downgrade() -> None:
    op.drop_index("ix_ae_scope_log_namespace_tier_version", table_name="ae_scope_log")
    op.drop_table("ae_scope_log")
    op.drop_table("ae_lexical_snapshots")
