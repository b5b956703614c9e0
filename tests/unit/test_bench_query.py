"""The query part: each mode on the same stores, and follow-ups with history and without."""

from __future__ import annotations

import json

from agent_engine.bench import locomo
from agent_engine.bench.querying import MODES, QueryBenchConfig, run_query_building, table
from agent_engine.embeddings import HashingEmbedder

from .test_bench import SAMPLE


def test_modes_and_follow_ups_are_measured_and_tabled(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    results = run_query_building(
        locomo.load(path), HashingEmbedder(dim=64), config=QueryBenchConfig(budget=256)
    )
    assert set(results["modes"]) == set(MODES)
    (split,) = results["modes"]["request"]
    # No question of the sample is vague: the default builder asks each as it stands.
    assert results["modes"]["history"][split] == results["modes"]["request"][split]
    follow = results["follow_up"]
    assert follow["history"][split]["n"] == results["modes"]["request"][split]["n"]
    assert follow["history"][split]["recall"]["256"] >= follow["request"][split]["recall"]["256"]
    lines = table(results)
    assert lines[0] == "Policy hybrid, budget 256 tokens; evidence recall (categories 1-4):"
    assert any(line.startswith("| tuning (0-4) | history-always |") for line in lines)
    assert 'Follow-ups: "What about that?" after each question:' in lines
