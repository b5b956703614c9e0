"""Many executors on one store: small rounds on a pgvector server and a SQLite file.

Each round spawns real worker processes on a real store, so the checks the benchmark makes
(nothing lost, every committed write seen by the other process's next build) are what these
tests assert; no figure is timed against a bound.
"""

from __future__ import annotations

import pytest

from agent_engine import BackendError, ValidationError
from agent_engine.bench.processes import ProcessesConfig, check, run_processes
from agent_engine.bench.report import write_report
from agent_engine.bench.runner import DEFAULT_PARTS, PARTS, parse_options
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.testing.databases import postgres_schema

ITEMS = 300
STEPS = 4
FIGURES = (
    "builds_per_s",
    "writes_per_s",
    "builds_per_s_per_process",
    "writes_per_s_per_process",
    "build_p50_ms",
    "build_p95_ms",
    "write_p50_ms",
    "write_p95_ms",
)


def _assert_checks_hold(results):
    """Two processes of four steps each: every write stored, found, and seen by the other."""
    (round_,) = results["rounds"]
    assert results["failures"] == []
    assert round_["processes"] == 2
    assert round_["steps"] == 2 * STEPS
    assert round_["stored"] + round_["merged"] == 2 * STEPS
    assert round_["items_before"] == ITEMS
    assert round_["items_after"] == ITEMS + round_["stored"]
    assert (round_["lost"], round_["unaccounted"], round_["misses"]) == (0, 0, 0)
    # A build after the other's first write looks for it, whenever the two overlap (on a
    # loaded machine one may run most of its steps before the other's first write).
    assert round_["visibility_checks"] >= 1
    for figure in FIGURES:
        assert round_[figure] > 0, figure
    assert round_["build_p95_ms"] >= round_["build_p50_ms"]
    assert round_["write_p95_ms"] >= round_["write_p50_ms"]
    check(results)  # passes: nothing to raise


@pytest.fixture(scope="module", name="sqlite_results")
def _sqlite_results():
    return run_processes(ProcessesConfig(store="sqlite", items=ITEMS, processes=(2,), steps=STEPS))


class TestOnOneStore:
    def test_two_processes_on_a_pgvector_server(self, pgvector_server_url):
        """On PostgreSQL with pgvector no write is lost and each process sees the other's."""
        with postgres_schema(pgvector_server_url) as url:
            results = run_processes(
                ProcessesConfig(url=url, items=ITEMS, processes=(2,), steps=STEPS)
            )
            _assert_checks_hold(results)
            assert (results["store"], results["backend"]) == ("url", "SQLAlchemyBackend")
            backend = SQLAlchemyBackend(url)
            try:
                assert backend.count() == 0  # the bench's project is gone from a given store
            finally:
                backend.close()

    def test_two_processes_on_a_sqlite_file(self, sqlite_results):
        """On one SQLite file no write is lost and each process sees the other's."""
        _assert_checks_hold(sqlite_results)
        assert sqlite_results["store"] == "sqlite"

    def test_the_report_shows_the_rounds_and_the_verdict(self, sqlite_results, tmp_path):
        report = write_report({"processes": sqlite_results}, tmp_path).read_text("utf-8")
        assert "## Many executors, one store" in report
        assert f"| sqlite | {ITEMS} | 2 | {2 * STEPS} |" in report
        assert "every build saw the others' committed writes" in report

    def test_a_failed_check_fails_the_run(self, sqlite_results):
        """A lost write or a miss raises, naming the round (the figures were kept)."""
        failed = sqlite_results | {"failures": ["2 processes: 1 writes lost"]}
        with pytest.raises(BackendError, match="2 processes: 1 writes lost"):
            check(failed)


class TestOptions:
    def test_processes_runs_only_when_named(self):
        """It starts a database server, so the suite's default run leaves it out."""
        assert "processes" in PARTS
        assert "processes" not in DEFAULT_PARTS
        assert parse_options([]).parts == frozenset(DEFAULT_PARTS)

    def test_processes_is_a_part_with_its_own_options(self):
        argv = "processes --store sqlite --items 500 --processes 1,3 --steps 7"
        options = parse_options(argv.split())
        assert options.parts == frozenset({"processes"})
        assert options.processes == ProcessesConfig(
            store="sqlite", items=500, processes=(1, 3), steps=7
        )

    def test_a_url_replaces_the_store(self):
        options = parse_options(["processes", "--url", "sqlite:///x.db", "--duration", "5"])
        assert options.processes.url == "sqlite:///x.db"
        assert options.processes.label == "url"
        assert options.processes.duration == 5.0

    @pytest.mark.parametrize(
        "fields",
        [
            {"store": "oracle"},
            {"items": 0},
            {"processes": ()},
            {"processes": (2, 0)},
            {"steps": 0},
            {"duration": 0},
        ],
    )
    def test_bad_settings_are_refused(self, fields):
        with pytest.raises(ValidationError):
            ProcessesConfig(**fields)


class TestTheChecksCanFail:
    def test_processes_that_share_nothing_are_caught(self):
        """``memory://`` gives each process a store of its own: misses and lost writes."""
        results = run_processes(ProcessesConfig(url="memory://", items=50, processes=(2,), steps=3))
        (round_,) = results["rounds"]
        assert round_["misses"] == round_["visibility_checks"] > 0
        assert round_["lost"] == round_["stored"] == 6
        with pytest.raises(BackendError, match="2 processes: 6 writes lost"):
            check(results)
