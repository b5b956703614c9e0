"""Full-text search in PostgreSQL: each item's ``tsvector``, stored and GIN-indexed.

On PostgreSQL this adds ``ae_items.fulltext``, a ``tsvector`` column generated from the
item's text (:func:`agent_engine.memory.sql._fulltext.document_sql`: punctuation turned into
spaces, the ``simple`` configuration) and stored, and ``ix_ae_items_fulltext``, its GIN
index, which lexical search reads (see :mod:`agent_engine.memory.sql._fulltext` for why this
configuration, and why stored). Adding the column rewrites the table once, computing every
stored item's ``tsvector``. SQLite is untouched: its lexical search stays the in-process BM25
index. The downgrade drops the index and the column.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from agent_engine.memory.sql import _fulltext

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.add_column(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.drop_column(bind)
