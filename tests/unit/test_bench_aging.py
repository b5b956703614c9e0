"""The aging benchmark: its aged stream, a tiny cell, and its part of the suite."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_engine import ValidationError
from agent_engine.bench.aging import NOW, AgingBenchConfig, aged_items, run_cell
from agent_engine.bench.report import write_report
from agent_engine.bench.runner import main, parse_options
from agent_engine.models import Status


class TestStream:
    def test_deterministic_and_aged(self):
        """The same seed ages the same way; items span the 300 days before the bench's clock."""
        items = aged_items(500)
        assert items == aged_items(500)
        assert items != aged_items(500, seed=1)
        ages = [NOW - item.timestamp for item in items]
        assert min(ages) >= timedelta(0)
        assert max(ages) <= timedelta(days=300)
        assert max(ages) - min(ages) > timedelta(days=200)

    def test_reads_come_after_writes_and_some_are_recent(self):
        """Read items were read after they were written; a few in the last day; some candidates."""
        items = aged_items(2000)
        read = [item for item in items if item.last_accessed_at is not None]
        assert read
        assert all(item.timestamp <= item.last_accessed_at <= NOW for item in read)
        assert any(NOW - item.last_accessed_at < timedelta(days=1) for item in read)
        assert any(item.status is Status.CANDIDATE for item in items)
        assert all(item.access_count > 0 for item in read)

    def test_sizes_are_positive(self):
        """A size of no items is refused."""
        with pytest.raises(ValidationError):
            AgingBenchConfig(sizes=(0,))


class TestCell:
    def test_a_small_cell_adds_up(self):
        """What moved, what is left and the ratios to the baseline read are consistent."""
        cell = run_cell("memory", 400)
        assert cell["size"] == 400
        assert cell["moved"] == cell["planned"] == sum(cell["counts"].values()) > 0
        assert cell["archived"] == cell["moved"]
        assert cell["remaining"] + cell["archived"] == 400
        assert cell["compact_over_scan"] == pytest.approx(cell["compact_s"] / cell["scan_s"])
        assert cell["plan_over_scan"] == pytest.approx(cell["plan_s"] / cell["scan_s"])
        assert cell["compact_s"] > 0

    def test_the_report_shows_the_cells(self, tmp_path):
        """The report has an aging section with the table of cells."""
        cell = run_cell("memory", 200)
        report = write_report({"aging": [cell]}, tmp_path).read_text(encoding="utf-8")
        assert "## Aging: compaction against one full read" in report
        assert "| memory | 200 |" in report


class TestRunner:
    def test_aging_is_a_part_with_its_own_sizes_and_backends(self):
        """`bench aging --aging-sizes ... --aging-backends ...` configures the part."""
        options = parse_options(["aging", "--aging-sizes", "300,600", "--aging-backends", "sqlite"])
        assert options.parts == frozenset({"aging"})
        assert options.aging == AgingBenchConfig(sizes=(300, 600), backends=("sqlite",))

    def test_an_unknown_backend_is_a_usage_error(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["aging", "--aging-backends", "memory,nope"])
        assert exit_info.value.code == 2
        assert "unknown backend(s): nope" in capsys.readouterr().err
