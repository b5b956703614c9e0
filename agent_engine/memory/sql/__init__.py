"""The SQL backend: an embedded SQLite file by default, PostgreSQL to scale out.

See ``docs/backends.md`` for choosing a store, the default location and migrations.
"""

from agent_engine.memory.sql._engine import DB_ENV, default_database_url
from agent_engine.memory.sql._migrate import database_revision, head_revision, upgrade_database
from agent_engine.memory.sql.backend import SQLAlchemyBackend

__all__ = [
    "DB_ENV",
    "SQLAlchemyBackend",
    "database_revision",
    "default_database_url",
    "head_revision",
    "upgrade_database",
]
