"""Commands that only read never write: an empty or missing store reads as empty, untouched.

A read (``memory list/search/show/status/conflicts``, ``memory compact --dry-run``, ``db
current``) must not create a database, its folder or its schema: pointing a read at the wrong
database, or reading before the first write, leaves everything as it was and says the store is
empty.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agent_engine.cli._errors import EXIT_ERROR
from agent_engine.testing.databases import postgres_schema

READS = [
    pytest.param(("memory", "list"), 0, id="list"),
    pytest.param(("memory", "search", "prices"), 0, id="search"),
    pytest.param(("memory", "show", "no-such-id"), EXIT_ERROR, id="show"),
    pytest.param(("memory", "status"), 0, id="status"),
    pytest.param(("memory", "list", "--task", "t-1"), 0, id="list-task"),
    pytest.param(("memory", "compact", "--dry-run"), 0, id="compact-dry-run"),
    pytest.param(("memory", "conflicts"), 0, id="conflicts"),
    pytest.param(("db", "current"), 0, id="db-current"),
]


class TestEmptySqliteFile:
    @pytest.mark.parametrize(("command", "code"), READS)
    def test_a_read_leaves_the_file_as_it_was(self, cli, tmp_path, command, code):
        """An existing file without a schema is read as empty and not written to."""
        path = tmp_path / "empty.db"
        path.touch()
        result = cli("--db", f"sqlite:///{path}", "--embedder", "hashing", *command)
        assert result.code == code, result.err
        assert path.stat().st_size == 0
        assert "Traceback" not in result.err

    def test_list_and_status_say_the_store_is_empty(self, cli, tmp_path):
        """The JSON of a read on an empty store is the empty answer; status says no schema."""
        path = tmp_path / "empty.db"
        path.touch()
        url = f"sqlite:///{path}"
        assert cli("--db", url, "--json", "memory", "list").json() == []
        status = cli("--db", url, "--json", "memory", "status").json()
        assert status["schema_revision"] is None
        assert status["totals"] == {"task": 0, "session": 0, "project": 0, "global": 0}
        shown = cli("--db", url, "memory", "status")
        assert "no agent_engine schema yet" in shown.out


class TestDefaultLocation:
    @pytest.mark.parametrize(("command", "code"), READS)
    def test_a_read_creates_nothing(self, default_cli, tmp_path, command, code):
        """Before the first write, a read finds nothing and creates no folder or file."""
        result = default_cli("--embedder", "hashing", *command)
        assert result.code == code, result.err
        assert not (tmp_path / "data" / "agent_engine").exists()

    def test_the_first_write_creates_it(self, default_cli, tmp_path):
        """memory add creates the default store; a read then finds what it wrote."""
        added = default_cli("--json", "--embedder", "hashing", "memory", "add", "Prices in cents")
        assert added.code == 0, added.err
        assert (tmp_path / "data" / "agent_engine" / "memory.db").exists()
        listed = default_cli("--json", "memory", "list").json()
        assert [item["text"] for item in listed] == ["Prices in cents"]


class TestEmptyPostgresql:
    def test_reads_create_no_tables(self, cli):
        """Reads on an empty PostgreSQL schema create no tables; add then creates them."""
        with postgres_schema() as url:
            for command in (
                ("memory", "list"),
                ("memory", "status"),
                ("memory", "search", "prices"),
                ("db", "current"),
            ):
                result = cli("--db", url, "--embedder", "hashing", *command)
                assert result.code == 0, result.err
                assert _tables(url) == [], command
            added = cli("--db", url, "--embedder", "hashing", "memory", "add", "Prices in cents")
            assert added.code == 0, added.err
            assert "ae_items" in _tables(url)
            listed = cli("--db", url, "--json", "memory", "list").json()
            assert [item["text"] for item in listed] == ["Prices in cents"]


def _tables(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            schema = connection.execute(sa.text("SELECT current_schema()")).scalar_one()
            return sorted(sa.inspect(connection).get_table_names(schema=schema))
    finally:
        engine.dispose()
