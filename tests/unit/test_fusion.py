"""Score fusion: Reciprocal Rank Fusion and min-max linear fusion."""

from __future__ import annotations

import pytest

from agent_engine.retrieval.fusion import RRF_K, minmax, minmax_fusion, rrf


class TestRRF:
    def test_one_ranking(self):
        """Each id gets 1 / (k + rank), ranks counted from 1."""
        assert rrf([["a", "b", "c"]]) == pytest.approx({"a": 1 / 61, "b": 1 / 62, "c": 1 / 63})

    def test_rankings_add_up(self):
        """An id found by several rankings sums its contributions."""
        fused = rrf([["a", "b"], ["b", "c"]])
        assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 62})
        assert max(fused, key=fused.__getitem__) == "b"

    def test_k(self):
        """k = 60 by default (the seed's); a smaller k weighs top ranks more."""
        assert RRF_K == 60
        assert rrf([["a", "b"]], k=1) == pytest.approx({"a": 1 / 2, "b": 1 / 3})

    def test_empty(self):
        """No rankings, or empty ones, fuse to nothing."""
        assert rrf([]) == {}
        assert rrf([[], []]) == {}


class TestMinmax:
    def test_scales_to_unit_interval(self):
        """The lowest score becomes 0, the highest 1, the rest in proportion."""
        assert minmax({"a": 2.0, "b": 4.0, "c": 3.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}

    def test_negative_scores(self):
        """Negative scores (cosines) scale the same way."""
        assert minmax({"a": -0.5, "b": 0.5}) == {"a": 0.0, "b": 1.0}

    def test_all_equal_scores_tell_nothing(self):
        """When every score is the same, every normalized score is 0."""
        assert minmax({"a": 0.7, "b": 0.7}) == {"a": 0.0, "b": 0.0}
        assert minmax({"a": 3.0}) == {"a": 0.0}

    def test_empty(self):
        """No scores, no normalized scores."""
        assert minmax({}) == {}


class TestMinmaxFusion:
    def test_weighted_sum_of_normalized_signals(self):
        """Each signal is min-max normalized, then weighted and summed."""
        fused = minmax_fusion(
            [({"a": 10.0, "b": 0.0, "c": 5.0}, 0.4), ({"a": 0.2, "b": 0.6, "c": 0.4}, 0.6)],
            ["a", "b", "c"],
        )
        assert fused == pytest.approx({"a": 0.4, "b": 0.6, "c": 0.5})

    def test_missing_score_is_the_minimum(self):
        """An id a signal did not score counts as that signal's lowest score."""
        fused = minmax_fusion([({"a": 4.0, "b": 2.0}, 1.0)], ["a", "b", "c"])
        assert fused == {"a": 1.0, "b": 0.0, "c": 0.0}

    def test_missing_below_all_present_scores(self):
        """Scoring the minimum, a missing id ties with the lowest present one, not below it."""
        fused = minmax_fusion([({"a": 0.9, "b": 0.3}, 0.5), ({"c": 2.0}, 0.5)], ["a", "b", "c"])
        assert fused == pytest.approx({"a": 0.5, "b": 0.0, "c": 0.0})

    def test_all_equal_signal_contributes_nothing(self):
        """A signal that scores every id the same adds 0 to each."""
        fused = minmax_fusion([({"a": 1.0, "b": 1.0}, 0.5), ({"a": 0.0, "b": 2.0}, 0.5)], "ab")
        assert fused == {"a": 0.0, "b": 0.5}

    def test_ids_decide_the_universe(self):
        """Scores of ids outside ``ids`` are ignored; every id in ``ids`` gets a score."""
        fused = minmax_fusion([({"a": 1.0, "z": 100.0, "b": 0.0}, 1.0)], ["a", "b", "a"])
        assert fused == {"a": 1.0, "b": 0.0}

    def test_zero_weight_and_empty_signals_are_skipped(self):
        """A signal with weight 0, or that scores none of the ids, changes nothing."""
        fused = minmax_fusion(
            [({"a": 1.0, "b": 0.0}, 1.0), ({"a": 0.0, "b": 9.0}, 0.0), ({"x": 1.0}, 1.0)],
            ["a", "b"],
        )
        assert fused == {"a": 1.0, "b": 0.0}

    def test_no_signals(self):
        """Without signals every id scores 0."""
        assert minmax_fusion([], ["a", "b"]) == {"a": 0.0, "b": 0.0}
