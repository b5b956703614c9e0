"""``agent-engine memory compact`` on a SQLite file: what would move and why, then moving it.

The store is written with the library first (items written weeks ago, as time would leave
them), then each command runs in its own process.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_engine import GlobalMemoryStore, ProjectMemoryStore, SQLAlchemyBackend, Task
from agent_engine import TaskMemoryStore as TaskStore
from agent_engine.cli._errors import EXIT_ERROR

NOW = datetime.now(UTC)


def seed(url):
    """Three items of project webshop aged out (one per rule), one kept; another project's."""
    with SQLAlchemyBackend(url) as backend:
        store = ProjectMemoryStore("webshop", backend)

        def aged(kind, text, days, importance=0.5, **fields):
            written = NOW - timedelta(days=days)
            return store.add(
                store.new_item(kind, text, importance=importance, timestamp=written, **fields)
            ).id

        ids = {
            "expired": aged("tool_output", "pytest: 3 passed, 1 failed", 30),
            "decayed": aged("note", "The staging DB was slow on Tuesday", 10, importance=0.1),
            "stale": aged(
                "fact",
                "Nobody reads this low-rated fact",
                120,
                importance=0.2,
                access_count=10,
                last_accessed_at=NOW - timedelta(days=95),
            ),
            "kept": aged("decision", "Prices are integer cents", 30, importance=0.9),
        }
        billing = ProjectMemoryStore("billing", backend)
        billing.add(
            billing.new_item("tool_output", "billing's old output", timestamp=NOW - timedelta(60))
        )
    return ids


def working(url, project="webshop"):
    with SQLAlchemyBackend(url) as backend:
        return {item.id for item in ProjectMemoryStore(project, backend).list_all()}


class TestCompact:
    def test_dry_run_lists_what_would_move_and_why(self, sql_cli, sqlite_url):
        """--dry-run names each item with its reason and numbers, and changes nothing."""
        ids = seed(sqlite_url)
        before = working(sqlite_url)
        result = sql_cli("memory", "compact", "--dry-run")
        assert result.code == 0, result.err
        for reason in ("expired", "decayed", "stale"):
            assert ids[reason] in result.out
        assert ids["kept"] not in result.out
        assert "age 30.0 d > ttl 21 d" in result.out
        assert "< floor 0.05" in result.out
        assert "would move 3 of 4 (1 expired, 1 decayed, 1 stale); 1 stay" in result.out
        assert "billing" not in result.out
        assert working(sqlite_url) == before

    def test_json_lists_every_move(self, sql_cli, sqlite_url):
        """--json gives each store's summary and every move with its numbers."""
        ids = seed(sqlite_url)
        result = sql_cli("--json", "memory", "compact", "--dry-run", "--tier", "project")
        assert result.code == 0, result.err
        document = result.json()
        assert document["dry_run"] is True
        (report,) = document["stores"]
        assert (report["namespace"], report["working"], report["planned"]) == (
            "project:webshop",
            4,
            3,
        )
        assert report["counts"] == {"expired": 1, "decayed": 1, "stale": 1, "compacted": 0}
        moves = {move["id"]: move for move in report["moves"]}
        assert {move["reason"] for move in moves.values()} == {"expired", "decayed", "stale"}
        expired = moves[ids["expired"]]
        assert (expired["ttl_days"], round(expired["age_days"])) == (21, 30)
        assert moves[ids["decayed"]]["decayed"] < 0.05
        assert moves[ids["stale"]]["idle_days"] > 90

    def test_applying_archives_and_reports(self, sql_cli, sqlite_url):
        """Without --dry-run the same items go to the archive; a second run finds nothing."""
        ids = seed(sqlite_url)
        result = sql_cli("--json", "memory", "compact")
        assert result.code == 0, result.err
        (project, user) = result.json()["stores"]
        assert (project["moved"], project["skipped"], user["moves"]) == (3, [], [])
        assert working(sqlite_url) == {ids["kept"]}
        assert working(sqlite_url, "billing") != set()
        with SQLAlchemyBackend(sqlite_url) as backend:
            archived = ProjectMemoryStore("webshop", backend).list_all(view="archived")
        assert {item.id: item.archived_reason.value for item in archived} == {
            ids[reason]: reason for reason in ("expired", "decayed", "stale")
        }
        again = sql_cli("memory", "compact", "--dry-run")
        assert "project:webshop: nothing has aged out (1 item(s) stay)" in again.out

    def test_a_tasks_memory(self, sql_cli, sqlite_url):
        """--task compacts one task's memory of the scope's project and user."""
        with SQLAlchemyBackend(sqlite_url) as backend:
            store = TaskStore(Task(id="t-1", project_id="webshop", user_id="ada"), backend)
            old = store.add(
                store.new_item("reasoning", "an old step", timestamp=NOW - timedelta(days=20))
            )
            GlobalMemoryStore(backend, "ada")  # another tier, left alone
        result = sql_cli("--json", "memory", "compact", "--task", "t-1")
        assert result.code == 0, result.err
        (report,) = result.json()["stores"]
        assert [move["id"] for move in report["moves"]] == [old.id]
        assert sql_cli("memory", "compact", "--task", "t-1", "--tier", "project").code == (
            EXIT_ERROR
        )

    def test_limit_shortens_the_table(self, sql_cli, sqlite_url):
        """--limit N lists N moves and says how many more there are."""
        seed(sqlite_url)
        result = sql_cli("memory", "compact", "--dry-run", "--limit", "1")
        assert result.code == 0, result.err
        assert "... and 2 more" in result.out

    def test_a_dry_run_on_a_fresh_store_creates_nothing(self, sql_cli, sqlite_url, tmp_path):
        """A dry run only reads: a store that does not exist is not created."""
        result = sql_cli("memory", "compact", "--dry-run")
        assert result.code == EXIT_ERROR
        assert not (tmp_path / "store" / "memory.db").exists()
