"""Partial indexes that count what an index file is checked against.

A SQLite store's index files are trusted only once they hold as many entries as the
database (``agent_engine/memory/sql/_sidecar.py``): the stored vectors, and a scope's current
(not superseded) items. Counting either read every row, 60-80 ms each at 100k items on every
new process's first build. ``ix_ae_items_namespace_embedded`` holds the items with a vector,
and ``ix_ae_items_namespace_tier_history`` a scope's superseded items, which the scope's count
(covered by ``ix_ae_items_namespace_tier``) less theirs gives the current ones: each count
reads a small index (under 10 ms). Both dialects get them, for one schema. The downgrade
drops them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    embedded = sa.text("embedding IS NOT NULL")
    history = sa.text("valid_to IS NOT NULL")
    op.create_index(
        "ix_ae_items_namespace_embedded",
        "ae_items",
        ["namespace"],
        sqlite_where=embedded,
        postgresql_where=embedded,
    )
    op.create_index(
        "ix_ae_items_namespace_tier_history",
        "ae_items",
        ["namespace", "tier"],
        sqlite_where=history,
        postgresql_where=history,
    )


def downgrade() -> None:
    op.drop_index("ix_ae_items_namespace_tier_history", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_embedded", table_name="ae_items")
