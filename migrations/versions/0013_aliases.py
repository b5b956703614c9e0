"""Each namespace's aliases, the words a project's people use for what its memory names.

``ae_aliases`` holds a row per namespace, term and expansion
(``agent_engine/memory/aliases.py``). It starts empty; the downgrade drops it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_ALIAS_LENGTH = 200


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_aliases",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("term", _text(_ALIAS_LENGTH), nullable=False),
        sa.Column("expansion", _text(_ALIAS_LENGTH), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "term", "expansion", name="pk_ae_aliases"),
    )


def downgrade() -> None:
    op.drop_table("ae_aliases")
