"""The ingestion queue and its dead letters, in the store's own database.

``ae_ingest_queue`` holds the events written fire-and-forget for a worker to store
(``agent_engine/ingest``), unique per tier, namespace and idempotency key; ``ae_ingest_dead``
what could not be stored, with the reason. The downgrade drops both, and whatever they held.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _text(length: int | None = None) -> sa.types.TypeEngine[str]:
    base: sa.types.TypeEngine[str] = sa.String(length) if length else sa.Text()
    exact: sa.types.TypeEngine[str] = (
        sa.String(length, collation="C") if length else sa.Text(collation="C")
    )
    return base.with_variant(exact, "postgresql")


def upgrade() -> None:
    op.create_table(
        "ae_ingest_queue",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("tier", _text(16), nullable=False),
        sa.Column("namespace", _text(255), nullable=False),
        sa.Column("idempotency_key", _text(255), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("state", _text(16), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("available_at", sa.BigInteger(), nullable=False),
        sa.Column("lease_owner", _text(64), nullable=True),
        sa.Column("lease_until", sa.BigInteger(), nullable=True),
        sa.Column("enqueued_at", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("seq", name="pk_ae_ingest_queue"),
        sa.UniqueConstraint(
            "tier",
            "namespace",
            "idempotency_key",
            name="uq_ae_ingest_queue_tier_namespace_idempotency_key",
        ),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_ae_ingest_queue_state_available_at",
        "ae_ingest_queue",
        ["state", "available_at", "seq"],
    )
    op.create_index("ix_ae_ingest_queue_finished_at", "ae_ingest_queue", ["finished_at"])
    op.create_table(
        "ae_ingest_dead",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("tier", _text(16), nullable=True),
        sa.Column("namespace", _text(255), nullable=True),
        sa.Column("idempotency_key", _text(255), nullable=True),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("failed_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_ae_ingest_dead"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("ae_ingest_dead")
    op.drop_index("ix_ae_ingest_queue_finished_at", table_name="ae_ingest_queue")
    op.drop_index("ix_ae_ingest_queue_state_available_at", table_name="ae_ingest_queue")
    op.drop_table("ae_ingest_queue")
