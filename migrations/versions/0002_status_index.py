"""An index for a namespace's items by status: the pinned items every build asks for.

Without it the planner walks the namespace's importance index to find the few pinned rows,
which read the whole namespace (about 100 ms at 100k items on SQLite) on every build.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_ae_items_namespace_status_importance",
        "ae_items",
        ["namespace", "status", "importance", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_ae_items_namespace_status_importance", table_name="ae_items")
