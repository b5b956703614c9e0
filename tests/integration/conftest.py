"""Empty SQL databases on both dialects for the SQL backend's integration tests."""

from __future__ import annotations

import pytest

from agent_engine.testing.databases import postgres_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request, tmp_path):
    """The URL of an empty database (no schema yet): a new SQLite file, or a new PG schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'memory.db'}"
    else:
        with postgres_schema() as url:
            yield url
