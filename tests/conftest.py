"""Shared fixtures: structlog reset around every test, and the migrated test databases.

``sqlite_template`` is a migrated SQLite file that backend fixtures copy per test (a fresh file
without running the migrations each time); ``postgres_url`` is one migrated schema on the test
server for the whole run, which backend fixtures empty with ``sql_delete_all`` before each test.
Tests that need a schema of their own define a ``postgres_url`` fixture beside them. The
fixtures import what they use inside: ``agent_engine.testing`` must not be imported before
pytest registers it for assertion rewriting, below.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

pytest.register_assert_rewrite("agent_engine.testing")


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """A migrated SQLite file, to be copied per test."""
    from agent_engine.memory.sql import upgrade_database  # noqa: PLC0415 - see the module docstring

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def postgres_url():
    """A migrated schema on the PostgreSQL test server (fails under CI=true if unreachable)."""
    from agent_engine.memory.sql import upgrade_database  # noqa: PLC0415 - see the module docstring
    from agent_engine.testing.databases import postgres_schema  # noqa: PLC0415

    with postgres_schema() as url:
        upgrade_database(url)
        yield url
