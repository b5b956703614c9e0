"""``agent-engine db copy``: the real command moving a store to another file or server."""

from __future__ import annotations

import pytest

from agent_engine import SQLAlchemyBackend
from agent_engine.cli._errors import EXIT_ERROR, EXIT_USAGE
from agent_engine.testing.databases import postgres_schema


def _filled(sql_cli) -> list[str]:
    """Two project memories, one archived, and a global one; their ids."""
    ids = []
    for text, scope in (
        ("Prices are stored as integer cents", "project"),
        ("The old billing service was retired", "project"),
        ("Ada prefers short answers", "global"),
    ):
        added = sql_cli("--json", "--embedder", "hashing", "memory", "add", text, "--tier", scope)
        assert added.code == 0, added.err
        ids.append(added.json()["id"])
    archived = sql_cli("--yes", "memory", "archive", ids[1])
    assert archived.code == 0, archived.err
    return ids


def _listing(cli, url: str) -> list[dict]:
    shown = cli("--json", "--db", url, "memory", "list", "--view", "all", "--limit", "100")
    assert shown.code == 0, shown.err
    return sorted(shown.json(), key=lambda item: item["id"])


@pytest.fixture
def postgres_target():
    """The URL of an empty schema on the test server (fails under CI=true if unreachable)."""
    with postgres_schema() as url:
        yield url


class TestDbCopy:
    def test_copies_a_sqlite_store_to_another_file(self, sql_cli, sqlite_url, tmp_path):
        """Everything arrives, the report is verified, and the copy searches like the source."""
        _filled(sql_cli)
        target = f"sqlite:///{tmp_path / 'moved' / 'memory.db'}"
        done = sql_cli("db", "copy", sqlite_url, target, "--batch-size", "2")
        assert done.code == 0, done.err
        assert "copied 3 memories" in done.out
        assert "verified" in done.out
        assert "Copying to" in done.err
        assert _listing(sql_cli, target) == _listing(sql_cli, sqlite_url)
        with SQLAlchemyBackend(target) as moved, SQLAlchemyBackend(sqlite_url) as source:
            # The embedder's name too: the copy refuses another model as the source does.
            assert moved.stored_identity() == source.stored_identity()
            assert moved.audit.events(limit=None) == source.audit.events(limit=None)
        found = sql_cli(
            "--json", "--embedder", "hashing", "--db", target, "memory", "search", "prices"
        )
        assert found.code == 0, found.err
        assert found.json()[0]["text"] == "Prices are stored as integer cents"

    def test_json_report_into_postgresql(self, sql_cli, sqlite_url, postgres_target):
        """--json prints the verified report; the PostgreSQL schema is created on the way."""
        _filled(sql_cli)
        done = sql_cli("--json", "db", "copy", sqlite_url, postgres_target)
        assert done.code == 0, done.err
        report = done.json()
        assert report["items"] == 3
        assert report["verified"] is True
        assert report["states"] == {"working": 2, "archived": 1, "history": 0}
        assert report["embedder"] == {"name": "hashing-256-bigrams", "dim": 256}
        assert {scope["tier"] for scope in report["scopes"]} == {"project", "global"}
        assert report["events"] >= 4
        assert _listing(sql_cli, postgres_target) == _listing(sql_cli, sqlite_url)

    def test_a_target_with_memories_is_refused(self, sql_cli, sqlite_url, tmp_path):
        """A filled target is an error naming it, and it keeps only what it had."""
        _filled(sql_cli)
        target = f"sqlite:///{tmp_path / 'other.db'}"
        own = sql_cli("--db", target, "--embedder", "hashing", "memory", "add", "Already here")
        assert own.code == 0, own.err
        refused = sql_cli("db", "copy", sqlite_url, target)
        assert refused.code == EXIT_ERROR
        assert "other.db" in refused.err
        assert "already holds 1 items" in refused.err
        assert "Copying" not in refused.err
        assert [item["text"] for item in _listing(sql_cli, target)] == ["Already here"]

    def test_a_store_is_not_copied_onto_itself(self, sql_cli, sqlite_url, tmp_path):
        """The same file under another spelling is still the same store."""
        _filled(sql_cli)
        same = f"sqlite:///{tmp_path / 'store' / '.' / 'memory.db'}"
        refused = sql_cli("db", "copy", sqlite_url, same)
        assert refused.code == EXIT_ERROR
        assert "the same store" in refused.err

    def test_a_missing_source_file_is_an_error(self, sql_cli, tmp_path):
        """A typo in the source path says there is no database, and creates nothing."""
        refused = sql_cli(
            "db", "copy", f"sqlite:///{tmp_path / 'nope.db'}", f"sqlite:///{tmp_path / 'to.db'}"
        )
        assert refused.code == EXIT_ERROR
        assert "no database at" in refused.err
        assert not (tmp_path / "to.db").exists()

    def test_both_urls_are_required(self, sql_cli, sqlite_url):
        """The target is not optional: the usage says so."""
        refused = sql_cli("db", "copy", sqlite_url)
        assert refused.code == EXIT_USAGE
