"""Item lifecycle: slots, versions, supersession, the archive and merged duplicates.

Adds the columns of an item's lifecycle (``docs/lifecycle.md``): ``key`` (the slot a newer item
of the same key supersedes), ``version`` with ``valid_from``/``valid_to`` and ``superseded_by``
(the history of an item), ``archived_at``/``archived_reason`` (the archive, which eviction and
aging move items to instead of deleting them) and ``merged_from`` (near-duplicates merged into
an item). Existing items become what they were: the first version of themselves, valid since
they were written (``valid_from`` null: since the item's timestamp), in the working set.
Nothing is rewritten but the new columns.

Indexes serve the lifecycle's reads: a scope's slot (``key``) and an item's history
(``superseded_by``), both partial (most rows have neither), and a scope's working set by time,
which every build and eviction reads.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_ID_LENGTH = 1024


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def upgrade() -> None:
    # Plain ADD COLUMNs: SQLite adds them in place. A batch migration would copy the table,
    # and dropping the old one would cascade to every tag row.
    op.add_column("ae_items", sa.Column("key", _text(255), nullable=True))
    op.add_column(
        "ae_items",
        sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("1")),
    )
    op.add_column("ae_items", sa.Column("valid_from", sa.BigInteger(), nullable=True))
    op.add_column("ae_items", sa.Column("valid_to", sa.BigInteger(), nullable=True))
    op.add_column("ae_items", sa.Column("superseded_by", _text(_ID_LENGTH), nullable=True))
    op.add_column("ae_items", sa.Column("archived_at", sa.BigInteger(), nullable=True))
    op.add_column("ae_items", sa.Column("archived_reason", _text(16), nullable=True))
    # The defaults fill the rows already there (the model gives every value it writes).
    op.add_column(
        "ae_items",
        sa.Column("merged_from", sa.Text(), nullable=False, server_default=sa.text("'[]'")),
    )
    # Partial: most items have no key and were never superseded (see _schema).
    keyed = sa.text('"key" IS NOT NULL')
    superseded = sa.text("superseded_by IS NOT NULL")
    op.create_index(
        "ix_ae_items_namespace_key",
        "ae_items",
        ["namespace", "key"],
        sqlite_where=keyed,
        postgresql_where=keyed,
    )
    op.create_index(
        "ix_ae_items_superseded_by",
        "ae_items",
        ["superseded_by"],
        sqlite_where=superseded,
        postgresql_where=superseded,
    )
    op.create_index(
        "ix_ae_items_namespace_archived_at_timestamp",
        "ae_items",
        ["namespace", "archived_at", "timestamp", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_ae_items_namespace_archived_at_timestamp", table_name="ae_items")
    op.drop_index("ix_ae_items_superseded_by", table_name="ae_items")
    op.drop_index("ix_ae_items_namespace_key", table_name="ae_items")
    for column in (
        "merged_from",
        "archived_reason",
        "archived_at",
        "superseded_by",
        "valid_to",
        "valid_from",
        "version",
        "key",
    ):
        op.drop_column("ae_items", column)
