"""Vector search in PostgreSQL, where the server has the pgvector extension.

On PostgreSQL, when the server offers the ``vector`` extension, this enables it (``CREATE
EXTENSION IF NOT EXISTS vector``) and turns ``ae_items.embedding`` from a blob into an
untyped pgvector ``vector`` column in place, carrying every stored vector over, then creates
the HNSW index of the store's recorded dimension (``ix_ae_items_embedding_hnsw_<dim>``, see
:mod:`agent_engine.memory.sql._pgvector`). Without the extension, or without the right to
create it, nothing changes: vectors stay blobs and search stays a scan, which is logged with
the way to get pgvector (``agent-engine db upgrade`` converts the store once it is there).
SQLite is untouched. The downgrade turns the column back into a blob, vectors included, and
leaves the extension installed (other tables may use it).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

from agent_engine.memory.sql import _pgvector

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _pgvector.blobs_to_vectors(bind, _pgvector.recorded_dim(bind))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    _pgvector.vectors_to_blobs(bind)
