"""memory candidates and memory confirm on a SQLite file, each command its own process.

A pipeline executor (the library, here) leaves a finished task's candidates held and a
preset's candidates quarantined in the store; the commands show them and run the
confirmation step.
"""

from __future__ import annotations

import pytest

from agent_engine import (
    HashingEmbedder,
    MemoryStores,
    ProjectMemoryStore,
    SQLAlchemyBackend,
    Status,
    Task,
    TaskMemoryStore,
    promote,
)
from agent_engine.cli._errors import EXIT_ERROR

TASK = Task(id="t-1", project_id="webshop", user_id="ada")
LESSON = "Invoice totals are rounded once, at the end, never per line"
OTHER = "Ran the invoice tests: 42 passed"


def open_backend(sqlite_url):
    return SQLAlchemyBackend(sqlite_url, embedder=HashingEmbedder())


def finished_task(sqlite_url):
    """A task whose lesson its contexts used four times, ended holding its candidates."""
    with open_backend(sqlite_url) as backend:
        stores = MemoryStores(backend, hold_candidates=True)
        memory = stores.task_store(TASK)
        lesson = memory.add_reasoning(LESSON, "s1")
        memory.add_tool_output("pytest", OTHER, stage_id="s1")
        for _ in range(4):
            memory.record_access([lesson.id], stores.clock())
        assert stores.finish_task(TASK).held == (lesson.id,)
    return lesson.id


def quarantined(sqlite_url):
    """Two candidates a preset brought into the project: one used since, one not."""
    with open_backend(sqlite_url) as backend:
        task = TaskMemoryStore(TASK, backend)
        project = ProjectMemoryStore("webshop", backend)
        used, unused = (
            promote(task, project, task.add_reasoning(text, "s").id, quarantine=True).item
            for text in (LESSON, OTHER)
        )
        project.record_access([used.id], project.clock())
    return used.id, unused.id


class TestTaskCandidates:
    def test_shows_what_a_finished_task_held(self, sql_cli, sqlite_url):
        """--task lists the held candidates with their signals and why."""
        lesson = finished_task(sqlite_url)
        result = sql_cli("--json", "memory", "candidates", "--task", "t-1")
        assert result.code == 0, result.err
        (found,) = result.json()
        assert found["id"] == lesson
        assert found["signals"] == ["frequent-access"]
        assert found["why"] == "accessed 4 times (>= 3)"
        assert (found["score"], found["qualifies"], found["filtered"]) == (3.0, True, None)
        table = sql_cli("memory", "candidates", "--task", "t-1")
        assert "accessed 4 times" in table.out
        assert "Invoice totals" in table.out

    def test_a_held_candidate_can_be_promoted(self, sql_cli, sqlite_url):
        """What the listing shows is promoted explicitly with memory promote."""
        lesson = finished_task(sqlite_url)
        promoted = sql_cli(
            "--json", "--embedder", "hashing", "memory", "promote", lesson, "--to", "project"
        )
        assert promoted.code == 0, promoted.err
        assert promoted.json()["status"] == "confirmed"

    def test_scored_as_a_preset_would(self, sql_cli, sqlite_url):
        """--preset scores with that preset: conservative asks for more than four accesses."""
        finished_task(sqlite_url)
        result = sql_cli(
            "--json", "memory", "candidates", "--task", "t-1", "--preset", "conservative"
        )
        assert result.code == 0, result.err
        assert result.json()[0]["qualifies"] is False

    def test_unknown_preset(self, sql_cli, sqlite_url):
        """An unknown preset is one line naming the known ones."""
        finished_task(sqlite_url)
        result = sql_cli("memory", "candidates", "--task", "t-1", "--preset", "reckless")
        assert result.code == EXIT_ERROR
        assert "unknown promotion preset 'reckless'" in result.err
        assert "conservative, balanced, aggressive" in result.err

    def test_preset_needs_a_task(self, sql_cli, sqlite_url):
        """--preset without --task is refused."""
        finished_task(sqlite_url)
        result = sql_cli("memory", "candidates", "--preset", "balanced")
        assert result.code == EXIT_ERROR
        assert "--task" in result.err


class TestProjectCandidates:
    def test_shows_what_the_step_would_do(self, sql_cli, sqlite_url):
        """Within the window every candidate waits; with --window 0 the step's verdicts show."""
        used, unused = quarantined(sqlite_url)
        waiting = sql_cli("--json", "memory", "candidates").json()
        assert {(c["id"], c["outcome"]) for c in waiting} == {(used, "wait"), (unused, "wait")}
        now = sql_cli("--json", "memory", "candidates", "--window", "0").json()
        assert {(c["id"], c["outcome"]) for c in now} == {(used, "confirm"), (unused, "penalise")}
        assert all(c["status"] == "candidate" for c in now)
        assert "penalise" in sql_cli("memory", "candidates", "--window", "0").out

    def test_confirm_runs_the_step(self, sql_cli, sqlite_url):
        """memory confirm confirms the used candidate, penalises the other, once."""
        used, unused = quarantined(sqlite_url)
        assert sql_cli("--json", "memory", "confirm").json()["waiting"] == [used, unused]
        result = sql_cli("--json", "memory", "confirm", "--window", "0")
        assert result.code == 0, result.err
        assert (result.json()["confirmed"], result.json()["penalised"]) == ([used], [unused])
        with open_backend(sqlite_url) as backend:
            project = ProjectMemoryStore("webshop", backend)
            assert project.require(used).status is Status.CONFIRMED
            assert project.require(unused).importance == 0.4
        again = sql_cli("memory", "confirm", "--window", "0")
        assert "0 confirmed, 0 penalised, 0 waiting" in again.out

    def test_bad_window_changes_nothing(self, sql_cli, sqlite_url):
        """A negative or impossible window is one line of error, and the step does not run."""
        used, unused = quarantined(sqlite_url)
        for window in ("-1", "nan", "1e300"):
            result = sql_cli("memory", "confirm", "--window", window)
            assert result.code == EXIT_ERROR, window
            assert "window" in result.err
        with open_backend(sqlite_url) as backend:
            project = ProjectMemoryStore("webshop", backend)
            assert {project.require(i).status for i in (used, unused)} == {Status.CANDIDATE}


class TestReadsOnly:
    @pytest.mark.parametrize(
        "command",
        [
            pytest.param(("memory", "candidates"), id="project"),
            pytest.param(("memory", "candidates", "--task", "t-1"), id="task"),
        ],
    )
    def test_candidates_leave_an_empty_file_as_it_was(self, cli, tmp_path, command):
        """Listing candidates only reads: a file without a schema reads as none, untouched."""
        path = tmp_path / "empty.db"
        path.touch()
        result = cli("--db", f"sqlite:///{path}", "--json", *command)
        assert result.code == 0, result.err
        assert result.json() == []
        assert path.stat().st_size == 0

    def test_confirm_needs_a_store(self, cli, tmp_path):
        """confirm writes, so it does not create a store that is not there."""
        missing = tmp_path / "missing.db"
        result = cli("--db", f"sqlite:///{missing}", "memory", "confirm")
        assert result.code == EXIT_ERROR
        assert "no database at" in result.err
        assert not missing.exists()
