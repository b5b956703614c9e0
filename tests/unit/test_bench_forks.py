"""The forks benchmark: a tiny cell, and its part of the suite."""

from __future__ import annotations

import pytest

from agent_engine import ValidationError
from agent_engine.bench.forks import ForkBenchConfig, run_cell
from agent_engine.bench.report import write_report
from agent_engine.bench.runner import parse_options


def test_a_small_cell_forks_without_copying():
    """The fork writes nothing, the deep copy writes every item; the ratios are the figures'."""
    cell = run_cell("memory", 300, changes=5)
    assert (cell["size"], cell["written_by_fork"], cell["written_by_copy"]) == (300, 0, 300)
    assert cell["copy_over_fork"] == pytest.approx(cell["eager_copy_s"] * 1000 / cell["fork_ms"])
    assert cell["fork_over_parent"] == pytest.approx(
        cell["build_fork_ms"] / cell["build_parent_ms"]
    )
    # Five changed items (each with the version it keeps), copied in before they changed.
    assert cell["written_by_fork_after"] == 10


def test_the_report_shows_the_cells(tmp_path):
    cell = run_cell("memory", 100, changes=2)
    report = write_report({"forks": [cell]}, tmp_path).read_text(encoding="utf-8")
    assert "## Forks: a fork against a deep copy" in report
    assert "| memory | 100 |" in report


def test_forks_is_a_part_with_its_own_sizes_and_backends():
    options = parse_options(["forks", "--fork-sizes", "300", "--fork-backends", "sqlite"])
    assert options.parts == frozenset({"forks"})
    assert options.forks == ForkBenchConfig(sizes=(300,), backends=("sqlite",))
    with pytest.raises(ValidationError):
        ForkBenchConfig(sizes=(0,))
