"""Full-text search without diacritics: the ``tsvector`` column regenerated, folded.

``ae_items.fulltext`` (PostgreSQL only, revision 0009) indexed words as written, so a query
for "Zurich" missed a memory of "Zürich", while the in-process index of every other backend
now reads them alike (:data:`agent_engine.retrieval.text.ACCENTED`). The column's expression
gains the same fold (``translate``, :func:`agent_engine.memory.sql._fulltext.document_sql`).
PostgreSQL before 17 cannot change a generated column's expression, so the column and its
GIN index are dropped and added again: the table is rewritten once, computing every stored
item's ``tsvector``. SQLite is untouched. The downgrade puts back the expression of 0009.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agent_engine.memory.sql import _fulltext

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_AS_WRITTEN = (
    "to_tsvector('simple'::regconfig, regexp_replace(left(text, 100000), "
    r"'[[:punct:]\u00a0\u00a1\u00ab\u00b4\u00b7\u00bb\u00bf\u2000-\u206f\u3000-\u303f]+', "
    "' ', 'g'))"
)
"""The expression of revision 0009, as it was."""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.drop_column(bind)
    _fulltext.add_column(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _fulltext.drop_column(bind)
    bind.execute(
        sa.text(
            f"ALTER TABLE ae_items ADD COLUMN {_fulltext.COLUMN} tsvector "
            f"GENERATED ALWAYS AS ({_AS_WRITTEN}) STORED"
        )
    )
    bind.execute(
        sa.text(f"CREATE INDEX {_fulltext.INDEX_NAME} ON ae_items USING gin ({_fulltext.COLUMN})")
    )
