"""``memory conflicts`` on a SQLite file: list what the stores recorded, resolve by keeping one.

Each command is its own process; the file persists between them (the ``sql_cli`` fixture).
"""

from __future__ import annotations

from agent_engine import ContextAssembler, ContextRequest, InMemoryBackend, Task
from agent_engine.cli._errors import EXIT_ERROR
from agent_engine.cli._output import package_json

ALWAYS = "Always rebase feature branches on main."
NEVER = "Never rebase feature branches on main."


def add(cli, text, *args):
    result = cli("--json", "--embedder", "hashing", "memory", "add", text, *args)
    assert result.code == 0, result.err
    return result.json()["id"]


def conflicts(cli, *args):
    result = cli("--json", "memory", "conflicts", *args)
    assert result.code == 0, result.err
    return result.json()


class TestList:
    def test_open_conflicts_with_their_memories(self, sql_cli):
        """A contradiction added in two commands is listed once, with both memories' texts."""
        older = add(sql_cli, ALWAYS, "--kind", "convention")
        newer = add(sql_cli, NEVER, "--kind", "convention")
        add(sql_cli, "Squash small fixes.", "--kind", "convention")
        (listed,) = conflicts(sql_cli)
        assert (listed["item_a"], listed["item_b"]) == (older, newer)
        assert (listed["type"], listed["reason"], listed["resolved_at"]) == (
            "contradictory",
            "always/never",
            None,
        )
        assert [item["text"] for item in listed["items"]] == [ALWAYS, NEVER]
        table = sql_cli("memory", "conflicts")
        assert table.code == 0, table.err
        assert "1 open conflict(s) in project:webshop, global:ada" in table.out
        assert listed["id"] in table.out
        assert "always/never" in table.out

    def test_tiers_and_projects_are_apart(self, sql_cli):
        """A project's conflict is not the user's, nor another project's."""
        add(sql_cli, ALWAYS, "--kind", "convention")
        add(sql_cli, NEVER, "--kind", "convention", "--project", "billing")
        assert conflicts(sql_cli) == []
        add(sql_cli, NEVER, "--kind", "convention")
        assert len(conflicts(sql_cli, "--tier", "project")) == 1
        assert conflicts(sql_cli, "--tier", "global") == []
        assert conflicts(sql_cli, "--project", "billing") == []


class TestResolve:
    def test_keep_one_and_the_other_is_superseded(self, sql_cli):
        """Resolving keeps the named memory; the other leaves every listing; --all shows it."""
        older = add(sql_cli, ALWAYS, "--kind", "convention")
        newer = add(sql_cli, NEVER, "--kind", "convention")
        (listed,) = conflicts(sql_cli)
        result = sql_cli("memory", "conflicts", "--resolve", listed["id"], "--keep", newer)
        assert result.code == 0, result.err
        assert f"resolved {listed['id']}: kept {newer}, superseded {older}" in " ".join(
            result.out.split()
        )
        assert conflicts(sql_cli) == []
        (resolved,) = conflicts(sql_cli, "--all")
        assert resolved["kept"] == newer
        assert resolved["resolved_at"] is not None
        texts = [item["text"] for item in sql_cli("--json", "memory", "list").json()]
        assert texts == [NEVER]

    def test_json_gives_the_resolved_conflict(self, sql_cli):
        """With --json, resolving prints the conflict as resolved."""
        older = add(sql_cli, ALWAYS, "--kind", "convention")
        add(sql_cli, NEVER, "--kind", "convention")
        (listed,) = conflicts(sql_cli)
        resolved = conflicts(sql_cli, "--resolve", listed["id"], "--keep", older)
        assert (resolved["id"], resolved["kept"]) == (listed["id"], older)

    def test_mistakes_are_one_line_and_change_nothing(self, sql_cli):
        """Unknown id, a memory of neither side, a second resolve, --resolve without --keep."""
        older = add(sql_cli, ALWAYS, "--kind", "convention")
        add(sql_cli, NEVER, "--kind", "convention")
        bystander = add(sql_cli, "Use Postgres.", "--kind", "decision")
        (listed,) = conflicts(sql_cli)
        cases = [
            (("--resolve", "no-such-conflict", "--keep", older), "no conflict with id"),
            (("--resolve", listed["id"], "--keep", bystander), "keep must name one of"),
            (("--resolve", listed["id"]), "--resolve ID and --keep ITEM go together"),
        ]
        for args, message in cases:
            result = sql_cli("memory", "conflicts", *args)
            assert result.code == EXIT_ERROR, args
            assert message in result.err
            assert "Traceback" not in result.err
        assert conflicts(sql_cli) == [listed]
        assert sql_cli("memory", "conflicts", "--resolve", listed["id"], "--keep", older).code == 0
        again = sql_cli("memory", "conflicts", "--resolve", listed["id"], "--keep", older)
        assert again.code == EXIT_ERROR
        assert "resolved already" in again.err


class TestPackageJson:
    def test_a_package_lists_the_conflicts_it_marks(self):
        """The JSON of a package (demo, run) names each marked conflict and its two sides."""
        assembler = ContextAssembler(InMemoryBackend())
        project = assembler.project_store("p")
        older = project.add_convention(ALWAYS, "git")
        newer = project.add_convention(NEVER, "git")
        package = assembler.build_context(
            Task(id="t", project_id="p"), ContextRequest(budget_tokens=300, query="rebase")
        )
        (marked,) = package_json(package)["conflicts"]
        assert marked == {
            "number": 1,
            "id": project.conflicts()[0].id,
            "newer": newer.id,
            "older": older.id,
            "reason": "always/never",
        }
