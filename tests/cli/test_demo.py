"""The demo, the README's main job: runs to completion, shows every context, asks before global."""

from __future__ import annotations

import sys

import pexpect
import pytest

STEPS = 4
REASONS = {"duplicate", "expired", "below_threshold", "lower_score", "over_budget"}


class TestDemo:
    def test_runs_with_the_default_embedder(self, default_cli):
        """With its defaults (MiniLM, the default store) and --yes, the demo runs to the end."""
        result = default_cli("demo", "--yes")
        assert result.code == 0, result.err
        assert "embedder sentence-transformers/all-MiniLM-L6-v2" in result.out
        assert "Ingesting the sample project" in result.err
        for step in range(1, STEPS + 1):
            assert f"Step {step}/{STEPS}" in result.out
        for part in ("Selected items", "Budget:", "Left out:", "Prompt block", "## Task memory"):
            assert result.out.count(part) == STEPS, part
        assert "project -> global: confirmed" in result.out
        assert "Traceback" not in result.err

    def test_default_store_is_a_file_in_the_user_data_directory(self, default_cli, tmp_path):
        """Without --db the demo's store is the embedded SQLite default, under the user's data."""
        result = default_cli("--json", "--embedder", "hashing", "demo")
        assert result.code == 0, result.err
        url = result.json()["store"]
        assert url.startswith("sqlite:///")
        assert url.removeprefix("sqlite:///").startswith(str(tmp_path))

    def test_json_describes_every_step(self, cli):
        """--json prints one document: each step's package within budget, explained."""
        result = cli("--json", "--embedder", "hashing", "demo", "--budget", "200")
        assert result.code == 0, result.err
        demo = result.json()
        assert demo["ingested"] == 20
        assert [step["step"] for step in demo["steps"]] == list(range(1, STEPS + 1))
        for step in demo["steps"]:
            package = step["package"]
            assert package["tokens_used"] <= package["budget_tokens"] == 200
            assert [u["tier"] for u in package["usage"]] == ["global", "project", "task"]
            assert {s["reason"] for s in package["selections"]} <= {
                "pinned",
                "head",
                "tail",
                "ranked",
            }
            assert {o["reason"] for o in package["omissions"]} <= REASONS
            assert all(o["text"] for o in package["omissions"])
            assert package["prompt"].startswith("## Global memory")
        # Each step's context holds the steps before it: the task timeline grows by two.
        task_candidates = [
            next(u["candidates"] for u in step["package"]["usage"] if u["tier"] == "task")
            for step in demo["steps"]
        ]
        assert task_candidates == [1, 3, 5, 7]
        assert demo["task_memories_cleared"] == 10

    def test_declines_with_nobody_to_answer(self, cli):
        """stdin closed (CI): the global write is declined, reported, and the demo exits 0."""
        result = cli("--embedder", "hashing", "demo")
        assert result.code == 0, result.err
        assert "[y/N]" in result.err
        assert "no answer (stdin is closed): declined" in result.err
        assert "project -> global: declined" in result.out

    @pytest.mark.parametrize(("answer", "confirmed"), [("y", True), ("no", False)])
    def test_answer_from_a_pipe(self, cli, answer, confirmed):
        """A piped answer is read like a typed one."""
        result = cli("--json", "--embedder", "hashing", "demo", input=f"{answer}\n")
        assert result.code == 0, result.err
        assert result.json()["promotions"][1]["confirmed"] is confirmed

    @pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
    @pytest.mark.parametrize(("answer", "outcome"), [("y", "confirmed"), ("n", "declined")])
    def test_answer_at_a_terminal(self, cli, answer, outcome):
        """At a terminal the demo asks, waits for the answer and acts on it."""
        child = pexpect.spawn(
            cli.command[0],
            [*cli.command[1:], "--embedder", "hashing", "demo"],
            env=cli.env,
            cwd=str(cli.cwd),
            encoding="utf-8",
            timeout=60,
            dimensions=(50, 200),
        )
        child.expect(r"Promote global memory: .*\[y/N\] ")
        child.sendline(answer)
        child.expect(f"project -> global: {outcome}")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0

    def test_yes_after_the_command_too(self, cli):
        """demo --yes approves like the global --yes."""
        result = cli("--json", "--embedder", "hashing", "demo", "--yes")
        assert result.json()["promotions"][1]["confirmed"] is True
        assert "yes (--yes)" in result.err
