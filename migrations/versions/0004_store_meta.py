"""The store's embedder and its scopes' change counters.

``ae_store_meta`` records which embedder made the stored vectors, so a store is never searched
with vectors of another model, and a re-embedding under way. ``ae_scope_versions`` holds one
change counter per (namespace, tier), bumped by every write, so a process sees that another
one changed a scope (even when its item count stayed the same) with one primary-key read.

A database written before this revision does not say which embedder made its vectors, so the
upgrade infers what it can from them and logs it (``store_identity_inferred``): their
dimension, recorded without a name. The first backend with an embedder of that dimension to
write a vector records its name. If the vectors have several sizes (a store that was given
another embedder before the identity was recorded), the most common size is recorded and
the store is marked as due for a re-embedding: vector search and writes of vectors are refused
until ``agent-engine db reembed`` has run. Counters start absent, which reads as zero.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from agent_engine._log import get_logger

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _text(length: int) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


def _infer_identity() -> None:
    """Record the stored vectors' dimension (and a re-embedding when sizes are mixed)."""
    bind = op.get_bind()
    size = sa.func.length(sa.column("embedding"))
    sizes = bind.execute(
        sa.select(size.label("size"), sa.func.count().label("vectors"))
        .select_from(sa.table("ae_items"))
        .where(sa.column("embedding").is_not(None))
        .group_by(size)
    ).all()
    if not sizes:
        return
    counts = {int(row.size) // 4: int(row.vectors) for row in sizes}
    dim = max(counts, key=lambda d: (counts[d], d))
    meta = sa.table("ae_store_meta", sa.column("key"), sa.column("value"))
    rows = [{"key": "embedder", "value": json.dumps({"name": None, "dim": dim})}]
    if len(counts) > 1:
        rows.append({"key": "reembed", "value": json.dumps({"target": None, "after": None})})
    op.bulk_insert(meta, rows)
    log = get_logger(component="sql", revision=revision)
    report = log.warning if len(counts) > 1 else log.info
    report(
        "store_identity_inferred",
        dim=dim,
        vectors_by_dim=counts,
        reembed_required=len(counts) > 1,
    )


def upgrade() -> None:
    op.create_table(
        "ae_store_meta",
        sa.Column("key", _text(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_ae_store_meta"),
    )
    op.create_table(
        "ae_scope_versions",
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("namespace", "tier", name="pk_ae_scope_versions"),
    )
    _infer_identity()


def downgrade() -> None:
    op.drop_table("ae_scope_versions")
    op.drop_table("ae_store_meta")
