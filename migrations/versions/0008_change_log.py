"""The change log of an embedded store, which its index files catch up from.

Adds ``ae_changes`` (one row per item whose indexed content last changed, numbered by an
ever-growing ``seq``) and, on SQLite, the triggers on ``ae_items`` that fill it in the
writing transaction, and the store's id in ``ae_store_meta``
(:mod:`agent_engine.memory.sql._changes`). The index files beside a SQLite database
(``docs/backends.md``) reflect a log position and catch up from it. A store upgraded to this
revision has an empty log, so its first open builds the files from the records. PostgreSQL
gets the table, kept empty: its indexes live in the server.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agent_engine.memory.sql import _changes

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID_LENGTH = 1024


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_changes",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("item_id", _text(_ID_LENGTH), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_ae_changes"),
        sa.UniqueConstraint("item_id", name="uq_ae_changes_item_id"),
        sqlite_autoincrement=True,
    )
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _changes.create_log(bind)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        _changes.drop_log(bind)
    statement = sa.text("DELETE FROM ae_store_meta WHERE key IN (:store_id, :erasures)")
    op.execute(statement.bindparams(store_id=_changes.STORE_ID_KEY, erasures=_changes.ERASURES_KEY))
    op.drop_table("ae_changes")
