"""The near-duplicate benchmark: a tiny cell, its report section and its runner options."""

from __future__ import annotations

import pytest

from agent_engine import ValidationError
from agent_engine.bench.dedup import DedupBenchConfig, run_cell
from agent_engine.bench.report import write_report
from agent_engine.bench.runner import main, parse_options

TINY = DedupBenchConfig(sizes=(300,), backends=("memory",), adds=4, batch=3)


class TestCell:
    def test_a_small_cell_adds_up(self):
        """Both store settings, both add modes, with ratios consistent with their times."""
        cell = run_cell("memory", 300, TINY)
        assert (cell["backend"], cell["size"], cell["embedder"]) == ("memory", 300, "hashing")
        for label in ("defaults", "no conflicts"):
            for mode in ("one", "batch"):
                figures = cell[label][mode]
                assert figures["without_p50_ms"] > 0
                assert figures["with_p50_ms"] > 0
                assert figures["ratio_p50"] == pytest.approx(
                    figures["with_p50_ms"] / figures["without_p50_ms"]
                )
                assert 0 <= figures["merged"] <= (TINY.adds if mode == "one" else 2 * TINY.batch)

    def test_the_report_shows_the_cells(self, tmp_path):
        cell = run_cell("memory", 300, TINY)
        report = write_report({"dedup": [cell]}, tmp_path).read_text(encoding="utf-8")
        assert "## Near-duplicate check: add cost with and without it" in report
        assert "| memory | 300 | hashing | defaults | one at a time |" in report


class TestConfig:
    @pytest.mark.parametrize(
        "fields", [{"sizes": (0,)}, {"adds": 0}, {"batch": True}, {"embedder": "bert"}]
    )
    def test_bad_settings_are_refused(self, fields):
        with pytest.raises(ValidationError):
            DedupBenchConfig(**fields)

    def test_dedup_is_a_part_with_its_own_options(self):
        options = parse_options(
            [
                "dedup",
                "--dedup-sizes",
                "500",
                "--dedup-backends",
                "sqlite,faiss",
                "--dedup-adds",
                "9",
            ]
        )
        assert options.parts == frozenset({"dedup"})
        assert options.dedup == DedupBenchConfig(sizes=(500,), backends=("sqlite", "faiss"), adds=9)

    def test_an_unknown_backend_is_a_usage_error(self, capsys):
        with pytest.raises(SystemExit) as exit_info:
            main(["dedup", "--dedup-backends", "memory,nope"])
        assert exit_info.value.code == 2
        assert "unknown backend(s): nope" in capsys.readouterr().err
