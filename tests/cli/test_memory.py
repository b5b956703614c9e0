"""Memory and db commands on a SQLite file: each command is its own process, the file persists.

These need the SQL backend; the ``sql_cli`` fixture skips them where it cannot be imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_engine import ProjectMemoryStore, SQLAlchemyBackend, Task, TaskMemoryStore
from agent_engine.cli._errors import EXIT_DECLINED, EXIT_ERROR


def add(cli, text, *args):
    result = cli("--json", "--embedder", "hashing", "memory", "add", text, *args)
    assert result.code == 0, result.err
    return result.json()["id"]


class TestMemoryCommands:
    def test_add_list_show_search(self, sql_cli):
        """What add stores, list, show and search find in a later process."""
        decision = add(sql_cli, "Prices are stored in cents", "--kind", "decision")
        add(sql_cli, "Snake case for every module name", "--kind", "convention")
        add(sql_cli, "Other project's secret", "--project", "billing")

        listed = sql_cli("--json", "memory", "list").json()
        assert [item["text"] for item in listed] == [
            "Snake case for every module name",
            "Prices are stored in cents",
        ]
        only = sql_cli("memory", "list", "--kind", "decision", "--json").json()
        assert [item["id"] for item in only] == [decision]

        shown = sql_cli("--json", "memory", "show", decision).json()
        assert shown["text"] == "Prices are stored in cents"
        assert sql_cli("memory", "show", decision).out.count(decision) >= 1

        hits = sql_cli("--json", "--embedder", "hashing", "memory", "search", "prices cents")
        assert hits.code == 0, hits.err
        assert hits.json()[0]["id"] == decision
        assert 0 < hits.json()[0]["score"] <= 1

        table = sql_cli("memory", "list")
        assert "Prices are stored in cents" in table.out
        assert "secret" not in table.out

    def test_adding_what_is_held_says_so(self, sql_cli):
        """A second add of a memory strengthens the first and names it, in both outputs."""
        first = add(sql_cli, "Prices are stored in cents", "--kind", "decision")
        again = sql_cli(
            "--embedder",
            "hashing",
            "memory",
            "add",
            "prices are stored in  cents",
            "-k",
            "decision",
        )
        assert again.code == 0, again.err
        assert f"merged into {first}" in again.out
        assert "similarity 1.00" in again.out
        data = sql_cli(
            "--json",
            "--embedder",
            "hashing",
            "memory",
            "add",
            "Prices are stored in cents.",
            "--kind",
            "decision",
        ).json()
        assert (data["id"], data["merged_into"]) == (first, first)
        assert 0.92 <= data["similarity"] <= 1
        shown = sql_cli("--json", "memory", "show", first).json()
        assert len(shown["merged_from"]) == 2
        assert [item["id"] for item in sql_cli("--json", "memory", "list").json()] == [first]
        fresh = sql_cli("--json", "--embedder", "hashing", "memory", "add", "Ship on Mondays")
        assert fresh.json()["merged_into"] is None

    def test_pin_and_unpin(self, sql_cli):
        """pin and unpin change the stored status."""
        item = add(sql_cli, "Deploy on Tuesdays")
        assert sql_cli("memory", "pin", item).code == 0
        assert sql_cli("--json", "memory", "show", item).json()["status"] == "pinned"
        assert sql_cli("memory", "unpin", item).code == 0
        assert sql_cli("--json", "memory", "show", item).json()["status"] == "confirmed"

    def test_forget_one_by_id(self, sql_cli):
        """forget ID erases that item without asking; a second forget does not find it."""
        item = add(sql_cli, "Temporary note")
        result = sql_cli("memory", "forget", item)
        assert result.code == 0, result.err
        assert f"forgot {item}" in result.out
        again = sql_cli("memory", "forget", item)
        assert again.code == EXIT_ERROR
        assert "no item with id" in again.err

    def test_forget_erases_from_the_store_files(self, sql_cli, tmp_path):
        """After forget, no file of the store holds the memory's text or id (journal included)."""
        keep = add(sql_cli, "Deploy on Tuesdays")
        item = add(sql_cli, "Vault passphrase is hunter2-okapi-1984", "--tag", "secret")
        assert sql_cli("memory", "pin", item).code == 0
        store = tmp_path / "store"

        def betrayed() -> list[str]:
            return [
                path.name
                for path in store.rglob("*")
                if path.is_file()
                and (b"hunter2-okapi-1984" in (data := path.read_bytes()) or item.encode() in data)
            ]

        assert betrayed() == ["memory.db"]
        assert sql_cli("memory", "forget", item).code == 0
        assert betrayed() == []
        assert [listed["id"] for listed in sql_cli("--json", "memory", "list").json()] == [keep]

    def test_forget_many_asks_first(self, sql_cli):
        """forget --query asks before erasing several; declined keeps them, --yes erases."""
        first = add(sql_cli, "Flaky login test on CI")
        second = add(sql_cli, "The login test is flaky on Mondays")
        keep = add(sql_cli, "Login page uses OAuth")

        declined = sql_cli("memory", "forget", "--query", "flaky login")
        assert declined.code == EXIT_DECLINED
        assert "Forget these 2 memories? [y/N]" in declined.err
        assert len(sql_cli("--json", "memory", "list").json()) == 3

        confirmed = sql_cli("--json", "memory", "forget", "--query", "flaky login", input="y\n")
        assert confirmed.code == 0, confirmed.err
        assert sorted(confirmed.json()["forgotten"]) == sorted([first, second])
        assert [item["id"] for item in sql_cli("--json", "memory", "list").json()] == [keep]

        nothing = sql_cli("memory", "forget", "--query", "flaky")
        assert nothing.code == EXIT_ERROR
        assert "no memory contains every word of 'flaky'" in nothing.err

    def test_promote_to_global_asks(self, sql_cli):
        """promote --to global asks: declined writes nothing, a piped yes promotes."""
        item = add(sql_cli, "Reproduce before fixing", "--kind", "pattern")
        declined = sql_cli("--embedder", "hashing", "memory", "promote", item, "--to", "global")
        assert declined.code == EXIT_DECLINED
        assert sql_cli("--json", "memory", "list", "--tier", "global").json() == []

        promoted = sql_cli(
            "--json", "--embedder", "hashing", "memory", "promote", item, "--to", "global",
            "--reason", "holds everywhere", input="yes\n",
        )  # fmt: skip
        assert promoted.code == 0, promoted.err
        copy = promoted.json()
        assert copy["namespace"] == "global:ada"
        assert copy["provenance"]["source_item_id"] == item
        assert copy["provenance"]["reason"] == "holds everywhere"
        assert copy["duplicate"] is False

    def test_promote_to_project_needs_a_task_item(self, sql_cli):
        """--to project promotes a task's item; a project item is refused with a hint."""
        item = add(sql_cli, "Already project memory")
        result = sql_cli("--embedder", "hashing", "memory", "promote", item, "--to", "project")
        assert result.code == EXIT_ERROR
        assert "--to project promotes a task's item" in result.err

    def test_status_counts_and_revision(self, sql_cli, sqlite_url):
        """status counts the scope per kind and reports the file's size and schema revision."""
        add(sql_cli, "One decision", "--kind", "decision")
        add(sql_cli, "Another decision", "--kind", "decision")
        add(sql_cli, "A convention", "--kind", "convention")
        status = sql_cli("--json", "memory", "status").json()
        assert status["store"] == sqlite_url
        assert status["size_bytes"] > 0
        assert status["schema_revision"]
        assert {(c["kind"], c["items"]) for c in status["counts"]} == {
            ("decision", 2),
            ("convention", 1),
        }
        assert status["totals"]["project"] == 3
        shown = sql_cli("memory", "status")
        assert "schema revision:" in shown.out
        assert "decision" in shown.out


class TestDbCommands:
    def test_upgrade_creates_then_current_reports(self, sql_cli, sqlite_url):
        """db upgrade creates a new database at the current revision; db current shows it."""
        path = Path(sqlite_url.removeprefix("sqlite:///"))
        assert not path.exists()
        upgraded = sql_cli("--json", "db", "upgrade")
        assert upgraded.code == 0, upgraded.err
        assert upgraded.json()["before"] is None
        assert upgraded.json()["after"]
        assert path.exists()
        current = sql_cli("--json", "db", "current")
        assert current.json()["revision"] == upgraded.json()["after"]
        again = sql_cli("db", "upgrade")
        assert "already at revision" in again.out

    def test_current_of_a_missing_database(self, sql_cli, tmp_path):
        """db current on a file that does not exist is an error, and creates nothing."""
        missing = tmp_path / "missing.db"
        result = sql_cli("--db", f"sqlite:///{missing}", "db", "current")
        assert result.code == EXIT_ERROR
        assert "no database at" in result.err
        assert not missing.exists()

    def test_reembed_moves_a_store_to_another_embedder(self, sql_cli):
        """A store filled by hashing refuses MiniLM until db reembed moves it, with progress."""
        prices = add(sql_cli, "Prices are stored as integer cents")
        add(sql_cli, "Deploys happen on Tuesdays")
        refused = sql_cli("--embedder", "minilm", "memory", "search", "how are prices stored")
        assert refused.code == EXIT_ERROR
        assert "hashing-256-bigrams" in refused.err
        assert "agent-engine db reembed" in refused.err

        moved = sql_cli("--json", "--embedder", "minilm", "db", "reembed", "--batch-size", "1")
        assert moved.code == 0, moved.err
        assert moved.json()["before"] == {"name": "hashing-256-bigrams", "dim": 256}
        assert moved.json()["after"]["dim"] == 384
        assert moved.json()["reembedded"] == 2

        hits = sql_cli(
            "--json", "--embedder", "minilm", "memory", "search", "how are prices stored"
        )
        assert hits.code == 0, hits.err
        assert hits.json()[0]["id"] == prices

        back = sql_cli("--embedder", "hashing", "db", "reembed")
        assert back.code == 0, back.err
        assert "re-embedded 2 memories with hashing-256-bigrams" in back.out
        assert "Re-embedding with hashing-256-bigrams" in back.err


class TestDemoOnSqlite:
    def test_demo_leaves_project_memory_and_reruns_cleanly(self, sql_cli):
        """The demo's memories persist; a second run resets them and ends the same."""
        for _ in range(2):
            result = sql_cli("--embedder", "hashing", "demo")
            assert result.code == 0, result.err
            scope = ("--project", "ledgerline-demo", "--user", "demo-user")
            status = sql_cli("--json", "memory", "status", *scope).json()
            assert status["totals"] == {"task": 0, "session": 0, "project": 17, "global": 4}


class TestAddInput:
    @pytest.mark.parametrize("text", ["", "   ", "\n\t"], ids=["empty", "spaces", "newline"])
    def test_empty_text_is_refused(self, sql_cli, text):
        """An empty or blank memory is refused with one line naming the text; nothing is stored."""
        assert sql_cli("db", "upgrade").code == 0
        result = sql_cli("--embedder", "hashing", "memory", "add", text)
        assert result.code == EXIT_ERROR
        line = result.err.strip()
        assert line == "error: the memory's text is empty; give TEXT, - (stdin) or --file PATH"
        assert sql_cli("--json", "memory", "list").json() == []

    def test_dash_reads_stdin(self, sql_cli):
        """memory add - stores what stdin holds, without the surrounding blank lines."""
        result = sql_cli(
            "--json", "--embedder", "hashing", "memory", "add", "-", "--kind", "decision",
            input="Prices are integer cents.\nNever floats.\n\n",
        )  # fmt: skip
        assert result.code == 0, result.err
        assert result.json()["text"] == "Prices are integer cents.\nNever floats."
        listed = sql_cli("--json", "memory", "list").json()
        assert [item["kind"] for item in listed] == ["decision"]

    def test_empty_stdin_is_refused(self, sql_cli, sqlite_url):
        """memory add - with nothing on stdin is the same error, and creates no store."""
        result = sql_cli("--embedder", "hashing", "memory", "add", "-", input="")
        assert result.code == EXIT_ERROR
        assert "text is empty" in result.err
        assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()

    def test_file_option_reads_a_file(self, sql_cli, tmp_path):
        """memory add --file PATH stores the file's text."""
        notes = tmp_path / "lesson.md"
        notes.write_text("Retry the flaky login test once.\n", encoding="utf-8")
        result = sql_cli("--json", "--embedder", "hashing", "memory", "add", "--file", str(notes))
        assert result.code == 0, result.err
        assert result.json()["text"] == "Retry the flaky login test once."

    def test_missing_file_is_an_error(self, sql_cli, tmp_path):
        """A --file that cannot be read is one line naming the file; nothing is stored."""
        missing = tmp_path / "nowhere.md"
        result = sql_cli("--embedder", "hashing", "memory", "add", "--file", str(missing))
        assert result.code == EXIT_ERROR
        assert f"cannot read {missing}" in result.err
        assert "Traceback" not in result.err

    @pytest.mark.parametrize(
        "args",
        [pytest.param((), id="neither"), pytest.param(("text", "--file", "x.md"), id="both")],
    )
    def test_text_or_file_not_both(self, sql_cli, args):
        """TEXT and --file exclude each other, and one of them is needed."""
        result = sql_cli("--embedder", "hashing", "memory", "add", *args)
        assert result.code == EXIT_ERROR
        assert "give TEXT, - (stdin) or --file PATH" in result.err


class TestTaskMemory:
    def _tasks(self, sqlite_url):
        """Two tasks of the scope's project and user, built as a pipeline executor would."""
        with SQLAlchemyBackend(sqlite_url) as backend:
            mine = TaskMemoryStore(Task(id="t-1", project_id="webshop", user_id="ada"), backend)
            other = TaskMemoryStore(Task(id="t-2", project_id="webshop", user_id="ada"), backend)
            first = mine.add_reasoning("Checked the invoice totals", "s1")
            second = mine.add_tool_output("pytest", "3 passed", stage_id="s1")
            kept = other.add_reasoning("Another task's step", "s1")
        return [second.id, first.id], kept.id

    def test_list_shows_one_tasks_memory(self, sql_cli, sqlite_url):
        """memory list --task TASK lists that task's items and nothing else."""
        mine, _ = self._tasks(sqlite_url)
        listed = sql_cli("--json", "memory", "list", "--task", "t-1")
        assert listed.code == 0, listed.err
        assert sorted(item["id"] for item in listed.json()) == sorted(mine)
        assert {item["tier"] for item in listed.json()} == {"task"}
        table = sql_cli("memory", "list", "--task", "t-1")
        assert "Checked the invoice totals" in table.out
        assert "Another" not in table.out

    def test_clear_asks_then_clears_one_task(self, sql_cli, sqlite_url):
        """memory clear --task asks first: declined keeps the items, --yes clears only them."""
        mine, kept = self._tasks(sqlite_url)
        declined = sql_cli("memory", "clear", "--task", "t-1")
        assert declined.code == EXIT_DECLINED
        assert "[y/N]" in declined.err
        assert len(sql_cli("--json", "memory", "list", "--task", "t-1").json()) == len(mine)

        cleared = sql_cli("--json", "memory", "clear", "--task", "t-1", "--yes")
        assert cleared.code == 0, cleared.err
        assert sorted(cleared.json()["cleared"]) == sorted(mine)
        assert sql_cli("--json", "memory", "list", "--task", "t-1").json() == []
        other = sql_cli("--json", "memory", "list", "--task", "t-2").json()
        assert [item["id"] for item in other] == [kept]

    def test_one_task_id_in_another_project_is_another_memory(self, sql_cli, sqlite_url):
        """--task names a task of the scope's project: another project's task of that id is
        neither listed, cleared nor promoted from."""
        mine, _ = self._tasks(sqlite_url)
        with SQLAlchemyBackend(sqlite_url) as backend:
            task = Task(id="t-1", project_id="billing", user_id="ada")
            theirs = TaskMemoryStore(task, backend).add_reasoning("billing's step", "s1")
        listed = sql_cli("--json", "memory", "list", "--task", "t-1").json()
        assert sorted(item["id"] for item in listed) == sorted(mine)
        promoted = sql_cli("memory", "promote", theirs.id, "--to", "project")
        assert promoted.code == EXIT_ERROR
        assert "not in a task memory of project 'webshop'" in promoted.err
        assert sql_cli("memory", "clear", "--task", "t-1", "--yes").code == 0
        with SQLAlchemyBackend(sqlite_url) as backend:
            assert TaskMemoryStore(task, backend).get(theirs.id) is not None

    def test_clear_of_an_empty_task_is_an_error(self, sql_cli, sqlite_url):
        """Clearing a task with no items says so (a mistyped id must not look like success)."""
        self._tasks(sqlite_url)
        result = sql_cli("memory", "clear", "--task", "no-such-task", "--yes")
        assert result.code == EXIT_ERROR
        assert "no items in the task memory of 'no-such-task'" in result.err


class TestLifecycleCommands:
    def test_archive_search_restore(self, sql_cli):
        """An archived memory leaves list and search, comes back with --archived and restore."""
        item = add(sql_cli, "Prices are stored in integer cents", "--kind", "decision")
        other = add(sql_cli, "Snake case for every module name")
        moved = sql_cli("--json", "memory", "archive", item)
        assert moved.code == 0, moved.err
        assert moved.json() == {"archived": [item]}

        assert [i["id"] for i in sql_cli("--json", "memory", "list").json()] == [other]
        archived = sql_cli("--json", "memory", "list", "--view", "archived").json()
        assert [(i["id"], i["archived_reason"]) for i in archived] == [(item, "manual")]
        search = ("--json", "--embedder", "hashing", "memory", "search", "integer cents")
        assert item not in {hit["id"] for hit in sql_cli(*search).json()}
        assert sql_cli(*search, "--archived").json()[0]["id"] == item
        shown = sql_cli("memory", "list", "--archived").out
        assert "archived" in shown
        assert "(manual)" in shown  # the table may wrap the state column

        status = sql_cli("--json", "memory", "status").json()
        assert status["states"]["project:webshop"] == {
            "working": 1,
            "archived": 1,
            "history": 0,
        }
        assert sql_cli("--json", "memory", "restore", item).json() == {"restored": [item]}
        assert len(sql_cli("--json", "memory", "list").json()) == 2
        again = sql_cli("memory", "restore", item)
        assert again.code == 0
        assert "nothing restored" in again.out

    def test_archive_refuses_unknown_ids_and_changes_nothing(self, sql_cli):
        item = add(sql_cli, "Deploy on Tuesdays")
        result = sql_cli("memory", "archive", item, "no-such-id")
        assert result.code == EXIT_ERROR
        assert "no item with id 'no-such-id'" in result.err
        assert [i["id"] for i in sql_cli("--json", "memory", "list").json()] == [item]

    def test_conflicting_view_options_are_refused(self, sql_cli):
        result = sql_cli("memory", "list", "--archived", "--view", "all")
        assert result.code != 0
        assert "--archived is --view current" in result.err

    def test_history_and_as_of(self, sql_cli, tmp_path):
        """A superseded memory is history: listed by history and --as-of, not by list."""
        add(sql_cli, "Snake case for every module name")  # makes the store
        with SQLAlchemyBackend(sql_cli.env["AGENT_ENGINE_DB"]) as backend:
            store = ProjectMemoryStore("webshop", backend)
            first = store.add(store.new_item("decision", "ship on fridays", key="ship-day"))
            second = store.add(store.new_item("decision", "ship on tuesdays", key="ship-day"))
        listed = sql_cli("--json", "memory", "list", "--kind", "decision").json()
        assert [i["text"] for i in listed] == ["ship on tuesdays"]
        versions = sql_cli("--json", "memory", "history", second.id).json()
        assert [(v["text"], v["version"]) for v in versions] == [
            ("ship on fridays", 1),
            ("ship on tuesdays", 2),
        ]
        then = (first.timestamp + (second.timestamp - first.timestamp) / 2).isoformat()
        back_then = sql_cli("--json", "memory", "list", "--kind", "decision", "--as-of", then)
        assert back_then.code == 0, back_then.err
        back_then = back_then.json()
        assert [i["text"] for i in back_then] == ["ship on fridays"]
        table = sql_cli("memory", "history", second.id).out
        assert "superseded" in table
        assert "(v1)" in table
