"""Wider item ids: a tier store's ids carry its namespace, so they outgrow 255 characters.

Ids are unique per scope (``docs/tiers.md``): a store qualifies every id it writes with its
escaped namespace, so no id chosen in one scope can meet an item of another. The qualified
form is at most 1,024 characters (an escaped 255-character namespace, a separator and a
255-character local id). Widening a varchar is a catalogue change on PostgreSQL; SQLite does
not enforce lengths, but batch mode rebuilds both tables to change the declared type, and
dropping the old ``ae_items`` cascades to its tags: they are set aside and put back.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_WIDE = 1024
_NARROW = 255


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def _resize(length: int, was: int) -> None:
    rebuilt = op.get_bind().dialect.name == "sqlite"
    if rebuilt:
        op.execute("CREATE TEMP TABLE ae_tags_kept AS SELECT item_id, tag FROM ae_item_tags")
    with op.batch_alter_table("ae_items") as batch:
        batch.alter_column("id", type_=_text(length), existing_type=_text(was))
    with op.batch_alter_table("ae_item_tags") as batch:
        batch.alter_column("item_id", type_=_text(length), existing_type=_text(was))
    if rebuilt:
        op.execute("INSERT INTO ae_item_tags (item_id, tag) SELECT item_id, tag FROM ae_tags_kept")
        op.execute("DROP TABLE ae_tags_kept")


def upgrade() -> None:
    _resize(_WIDE, _NARROW)


def downgrade() -> None:
    _resize(_NARROW, _WIDE)
