"""The default policy keeps beating the simple baselines on real conversations (LoCoMo subset).

Deterministic (feature-hashing embedder, default token counter) and small (two tuning-split
conversations, two budgets), so it runs in every CI build; the full suite lives in
``agent-engine bench``. No timings are asserted.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from agent_engine.bench import locomo
from agent_engine.bench.quality import OVERALL, QualityConfig, run_quality
from agent_engine.embeddings import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get(locomo.DATA_ENV, ROOT.parent / "shared/data/locomo/locomo10.json"))


@pytest.fixture(scope="module")
def summary():
    path = DATA / "locomo10.json" if DATA.is_dir() else DATA
    if not path.is_file():
        message = f"LoCoMo data not found at {path} (set {locomo.DATA_ENV} to its location)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    conversations = [
        attrs.evolve(c, questions=tuple(q for q in c.questions if q.category in OVERALL))
        for c in locomo.load(path)[:2]
    ]
    config = QualityConfig(budgets=(512, 1024), policies=("recency", "importance", "hybrid"))
    result = run_quality(conversations, HashingEmbedder(dim=1024), config=config)
    return result["summary"]["tuning (0-4)"]


class TestQualityRegression:
    @pytest.mark.parametrize("budget", ["512", "1024"])
    @pytest.mark.parametrize("baseline", ["recency", "importance"])
    def test_default_beats_baselines(self, summary, budget, baseline):
        """hybrid recalls more evidence than the recency and importance baselines."""
        hybrid = summary["hybrid"]["overall"]["recall"][budget]
        other = summary[baseline]["overall"]["recall"][budget]
        assert hybrid > other, f"hybrid {hybrid:.3f} <= {baseline} {other:.3f} at {budget}"

    def test_default_keeps_its_level(self, summary):
        """hybrid stays near its measured recall (0.78 at 1024 tokens on conversation 0)."""
        assert summary["hybrid"]["overall"]["recall"]["1024"] >= 0.65
