"""The command's shape: help, JSON output, and delegation to the benchmark runner."""

from __future__ import annotations

import gc
import importlib.metadata
import re
import sys

import pytest

import agent_engine
from agent_engine.bench.runner import PARTS
from agent_engine.cli import main


class TestCommands:
    def test_help_lists_every_command(self, cli):
        """--help names the demo, the memory and db groups and bench."""
        result = cli("--help")
        assert result.code == 0
        for name in ("demo", "memory", "db", "bench", "--db", "--json", "--debug", "--yes"):
            assert name in result.out

    def test_memory_help_lists_subcommands(self, cli):
        """memory --help names every memory command."""
        result = cli("memory", "--help")
        assert result.code == 0
        for name in ("add", "list", "search", "show", "forget", "pin", "unpin", "promote"):
            assert name in result.out
        assert "status" in result.out

    def test_add_prints_the_item_as_json(self, cli):
        """memory add --json prints the stored item, scoped to the project, without its vector."""
        result = cli(
            "--json", "--embedder", "hashing", "memory", "add", "Prices include VAT",
            "--kind", "decision", "--importance", "0.9", "--tag", "money", "--pin",
        )  # fmt: skip
        assert result.code == 0, result.err
        item = result.json()
        assert item["text"] == "Prices include VAT"
        assert item["kind"] == "decision"
        assert item["namespace"] == "project:webshop"
        assert item["status"] == "pinned"
        assert item["tags"] == ["money"]
        assert "embedding" not in item

    def test_project_option_beats_the_environment(self, cli):
        """--project names the scope, over $AGENT_ENGINE_PROJECT."""
        result = cli("--json", "--embedder", "hashing", "memory", "add", "x", "--project", "blog")
        assert result.json()["namespace"] == "project:blog"

    def test_status_on_an_empty_store(self, cli):
        """status --json reports the store, its scope and zero counts."""
        result = cli("memory", "status", "--json")
        assert result.code == 0, result.err
        status = result.json()
        assert status["store"] == "memory://"
        assert status["project"] == "webshop"
        assert status["user"] == "ada"
        assert status["totals"] == {"task": 0, "session": 0, "project": 0, "global": 0}
        assert status["schema_revision"] is None

    def test_bench_delegates_to_the_runner(self, cli):
        """bench passes its arguments to the benchmark runner (here: its help)."""
        result = cli("bench", "--help")
        assert result.code == 0
        assert "--conversations" in result.out
        assert "--budgets" in result.out

    def test_bench_rejects_what_the_runner_rejects(self, cli):
        """A wrong benchmark argument exits with the runner's usage error."""
        result = cli("bench", "--counter", "nonsense")
        assert result.code == 2
        assert "invalid choice" in result.err

    def test_project_defaults_to_the_current_directory(self, cli):
        """Without --project or $AGENT_ENGINE_PROJECT, the scope is the current directory's name."""
        env = {key: value for key, value in cli.env.items() if key != "AGENT_ENGINE_PROJECT"}
        status = type(cli)(env, cli.cwd)("memory", "status", "--json").json()
        assert status["project"] == cli.cwd.name


class TestMain:
    def test_main_returns_the_exit_code(self, capsys, monkeypatch):
        """main(argv) returns the exit code rather than exiting, for callers in Python."""
        from agent_engine.cli import main  # noqa: PLC0415

        monkeypatch.setenv("AGENT_ENGINE_DB", "memory://")
        assert main(["memory", "status", "--json"]) == 0
        assert '"store": "memory://"' in capsys.readouterr().out
        assert main(["memory", "show", "nothing"]) == 1
        assert capsys.readouterr().err.startswith("error: no item with id 'nothing'")
        assert main(["no-such-command"]) == 2


class TestVersion:
    def test_version_option(self, cli):
        """--version prints the installed package's version and exits 0."""
        result = cli("--version")
        assert result.code == 0, result.err
        assert result.out == f"agent-engine {agent_engine.__version__}\n"

    def test_version_is_the_package_metadata(self):
        """agent_engine.__version__ is the installed distribution's version."""
        assert agent_engine.__version__ == importlib.metadata.version("agent-engine")


class TestOneCommandProcess:
    """The console script runs one command per process and settles its collector for it."""

    def test_console_script_freezes_what_it_loaded(self, monkeypatch, capsys):
        """Run as the process's own command line, main exempts what exists from collection."""
        monkeypatch.setattr(sys, "argv", ["agent-engine", "--version"])
        gc.unfreeze()
        try:
            assert main() == 0
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
        assert "agent-engine" in capsys.readouterr().out

    def test_a_program_calling_main_keeps_its_collector(self, capsys):
        gc.unfreeze()
        assert main(["--version"]) == 0
        assert gc.get_freeze_count() == 0
        assert "agent-engine" in capsys.readouterr().out


class TestHelp:
    @pytest.mark.parametrize(
        "command",
        [
            pytest.param((), id="root"),
            pytest.param(("memory", "add"), id="add"),
            pytest.param(("memory", "forget"), id="forget"),
            pytest.param(("demo",), id="demo"),
        ],
    )
    def test_flags_and_values_read_plainly(self, cli, command):
        """Help shows flags without a value placeholder and option values by name, not type."""
        result = cli(*command, "--help")
        assert result.code == 0, result.err
        assert "--json" in result.out
        for internal in ("<bool>", "list[", "{text}", "╭"):
            assert internal not in result.out, internal
        assert re.search(r"--[\w-]+ <(str|int|float)>", result.out) is None, result.out

    def test_add_help_names_its_inputs(self, cli):
        """memory add --help shows TEXT (or - for stdin) and --file PATH."""
        result = cli("memory", "add", "--help")
        assert "[TEXT]" in result.out
        assert "--file PATH" in result.out
        assert "--tag TAG" in result.out


class TestBenchArguments:
    def test_parts_may_be_left_out(self, cli, tmp_path):
        """bench without naming a part runs all (here: fails on the missing data, not argv)."""
        missing = tmp_path / "missing.json"
        result = cli("bench", "--data", str(missing), "--out", str(tmp_path / "out"))
        assert result.code == 1, result.err
        assert "invalid choice" not in result.err
        assert (
            result.err.strip()
            .splitlines()[-1]
            .startswith(f"error: LoCoMo data not found at {missing}")
        )

    def test_an_unknown_part_is_a_usage_error(self, cli):
        """A part that does not exist is refused by the runner's parser (exit 2)."""
        result = cli("bench", "speed")
        assert result.code == 2
        assert f"'speed' is not a part of the suite ({', '.join(PARTS)})" in result.err
