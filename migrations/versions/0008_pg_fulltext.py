"""Full-text search in PostgreSQL: a GIN index over each item's ``tsvector``.

On PostgreSQL this creates ``ix_ae_items_fulltext``, a GIN index of the expression
:func:`agent_engine.memory.sql._fulltext.document_sql` spells (the item's text, punctuation
turned into spaces, through the ``simple`` configuration), which lexical search filters by
(see :mod:`agent_engine.memory.sql._fulltext` for why this configuration). Building it reads
every item once. SQLite is untouched: its lexical search stays the in-process BM25 index.
The downgrade drops the index.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from agent_engine.memory.sql import _fulltext

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.create_index(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.drop_index(bind)
