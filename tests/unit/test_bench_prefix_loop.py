"""The prefix and loop parts: each measured, its figures in range, its table written."""

from __future__ import annotations

import json

from agent_engine.bench import locomo
from agent_engine.bench.loop import FROZEN, SYNC, LoopBenchConfig, run_loop
from agent_engine.bench.loop import table as loop_table
from agent_engine.bench.prefix import FILLS, PrefixBenchConfig, prefix_share, run_prefix
from agent_engine.bench.prefix import table as prefix_table
from agent_engine.embeddings import HashingEmbedder
from agent_engine.tokens import DEFAULT_COUNTER

from .test_bench import SAMPLE


class TestPrefixShare:
    def test_unchanged_render_is_all_prefix(self):
        assert prefix_share("a\nb\nc", "a\nb\nc") == 1.0

    def test_a_change_cuts_back_to_the_last_shared_line(self):
        """Up to the end of the last line both renders share, not into the changed one."""
        current = "alpha beta\ngamma epsilon\n"
        share = prefix_share("alpha beta\ngamma delta\n", current)
        assert share == DEFAULT_COUNTER.count("alpha beta") / DEFAULT_COUNTER.count(current)

    def test_a_change_on_the_first_line_shares_nothing(self):
        assert prefix_share("one two", "one three") == 0.0


def test_prefix_part_measures_both_fills_on_the_demo_and_locomo(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    config = PrefixBenchConfig(demo_budgets=(320,), budgets=(256,), questions=1)
    results = run_prefix(locomo.load(path), HashingEmbedder(dim=64), config=config)
    assert set(results["demo"]) == set(FILLS)
    for by_budget in results["demo"].values():
        kinds = by_budget["320"]
        assert kinds["same query"]["n"] > 0
        assert kinds["next query"]["n"] > 0
        assert all(0 <= kind["share"] <= 1 for kind in kinds.values())
    (split,) = results["locomo"]
    for fill in FILLS:
        entry = results["locomo"][split][fill]["256"]
        assert entry["n"] > 0
        assert 0 <= entry["share_p10"] <= entry["share"] <= 1
    lines = prefix_table(results)
    assert any(line.startswith("| demo, same query | stable_prefix | 320 |") for line in lines)
    assert any(line.startswith(f"| {split} | default | 256 |") for line in lines)


def test_loop_part_measures_the_sync_api_and_the_twin():
    config = LoopBenchConfig(items=40, concurrency=2, builds=2, workers=(1, 2))
    results = run_loop(HashingEmbedder(dim=32), config)
    assert list(results["modes"]) == [
        SYNC,
        "async twin, 1 worker",
        "async twin, 2 workers",
        f"async twin, 2 workers, {FROZEN}",
    ]
    for figures in results["modes"].values():
        assert figures["builds_per_s"] > 0
        assert 0 <= figures["stall_p50_ms"] <= figures["stall_p99_ms"] <= figures["stall_max_ms"]
    assert any(line.startswith("| async twin, 2 workers |") for line in loop_table(results))


def test_loop_part_measures_the_backend_twins_reads_on_threads_and_on_asyncio():
    config = LoopBenchConfig(
        items=40, concurrency=2, builds=2, workers=(), reads_on=("sqlite", "redis")
    )
    results = run_loop(HashingEmbedder(dim=32), config)
    # SQLite's driver has no asyncio API; Redis's has.
    assert list(results["reads"]) == ["sqlite, threads", "redis, threads", "redis, asyncio driver"]
    for figures in results["reads"].values():
        assert figures["reads_per_s"] > 0
        assert 0 <= figures["stall_p50_ms"] <= figures["stall_p99_ms"] <= figures["stall_max_ms"]
    assert any(line.startswith("| redis, asyncio driver |") for line in loop_table(results))
