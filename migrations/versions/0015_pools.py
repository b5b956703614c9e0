"""Shared pools: each project's agents, their grants, and the agent that wrote each item.

``ae_agents`` holds a row per realm (a project's namespace) and registered agent;
``ae_grants`` a row per pool and agent granted access to it
(``agent_engine/memory/grants.py``). Both start empty. ``ae_items.agent`` names the agent
that wrote an item (``''`` for every item written before). The downgrade drops them.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    # A plain ADD COLUMN (SQLite adds it in place; a batch migration would copy the table,
    # and dropping the old one would cascade to every tag row). The default fills the rows
    # already there; the model gives every value it writes.
    op.add_column(
        "ae_items",
        sa.Column("agent", _text(255), nullable=False, server_default=sa.text("''")),
    )
    op.create_table(
        "ae_agents",
        sa.Column("realm", _text(255), nullable=False),
        sa.Column("agent", _text(255), nullable=False),
        sa.PrimaryKeyConstraint("realm", "agent", name="pk_ae_agents"),
    )
    op.create_table(
        "ae_grants",
        sa.Column("pool", _text(255), nullable=False),
        sa.Column("agent", _text(255), nullable=False),
        sa.Column("realm", _text(255), nullable=False),
        sa.Column("access", _text(16), nullable=False),
        sa.Column("granted_by", _text(255), nullable=False),
        sa.Column("granted_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("pool", "agent", name="pk_ae_grants"),
    )


def downgrade() -> None:
    op.drop_table("ae_grants")
    op.drop_table("ae_agents")
    op.drop_column("ae_items", "agent")
