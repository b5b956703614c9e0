"""alembic environment of agent_engine's SQL backend.

Run through :mod:`agent_engine.memory.sql._migrate`, which passes an open connection (inside
the transaction that holds the upgrade lock). The ``alembic`` command line works too, with
``-x url=...`` naming the database.
"""

from __future__ import annotations

from alembic import context

from agent_engine.memory.sql._engine import create_engine
from agent_engine.memory.sql._pgvector import include_name
from agent_engine.memory.sql._schema import metadata

VERSION_TABLE = "ae_alembic_version"


def _run(connection):
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,  # the per-dimension HNSW indexes are made at run time
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        msg = "pass the database with -x url=..."
        raise SystemExit(msg)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    msg = "offline (--sql) migrations are not supported"
    raise SystemExit(msg)
run_migrations_online()
