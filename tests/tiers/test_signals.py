"""Promotion presets and signals: what each preset promotes, and bad settings refused."""

from __future__ import annotations

import math

import attrs
import pytest

from agent_engine import ContextItem, PromotionPreset, Status, ValidationError
from agent_engine.tiers import PRESETS, Signal
from agent_engine.tiers.signals import (
    AGGRESSIVE,
    BALANCED,
    CONSERVATIVE,
    DEFAULT_WEIGHTS,
    evidence,
    hard_filter,
    resolve_preset,
)

LONG = "Retry the flaky login test once before failing the build on CI"


def item(text=LONG, **fields):
    return ContextItem.create("reasoning", text, **fields)


def points(preset, thing, sessions=1):
    return preset.score(evidence(thing, preset, sessions))


class TestPresets:
    def test_the_seed_presets_by_name(self):
        """The three presets of the seed are known by name, balanced at 3 points."""
        assert list(PRESETS) == ["conservative", "balanced", "aggressive"]
        assert resolve_preset("balanced") is BALANCED
        assert (BALANCED.threshold, BALANCED.min_content_length, BALANCED.min_importance) == (
            3.0,
            30,
            0.25,
        )
        assert dict(BALANCED.weights) == DEFAULT_WEIGHTS

    @pytest.mark.parametrize(
        ("accesses", "promoted_by"),
        [
            pytest.param(1, set(), id="once"),
            pytest.param(2, {"aggressive"}, id="twice"),
            pytest.param(3, {"aggressive", "balanced"}, id="three-times"),
        ],
    )
    def test_presets_differ_in_how_much_evidence_they_ask(self, accesses, promoted_by):
        """The same item qualifies under fewer presets the less it was used."""
        thing = item(access_count=accesses, importance=0.6)
        qualifies = {
            name
            for name, preset in PRESETS.items()
            if hard_filter(thing, preset) is None and points(preset, thing) >= preset.threshold
        }
        assert qualifies == promoted_by

    def test_conservative_wants_several_signals(self):
        """Five accesses alone are not enough for conservative; with high importance they are."""
        used = item(access_count=5, importance=0.6)
        assert points(CONSERVATIVE, used) == 3.0 < CONSERVATIVE.threshold
        assert points(CONSERVATIVE, attrs.evolve(used, importance=0.9)) == 4.0
        assert points(CONSERVATIVE, attrs.evolve(used, status=Status.PINNED)) >= 5.0

    def test_hard_filters(self):
        """Short content and low importance are filtered out before scoring, saying which."""
        assert hard_filter(item("too short"), BALANCED) == "content of 9 characters, under 30"
        assert hard_filter(item(importance=0.1), BALANCED) == "importance 0.10, under 0.25"
        assert hard_filter(item("too short"), AGGRESSIVE) is not None
        assert hard_filter(item("ten chars!"), AGGRESSIVE) is None
        assert hard_filter(item(importance=0.4), CONSERVATIVE) == "importance 0.40, under 0.50"

    def test_custom_preset_from_a_seed_one(self):
        """A preset derived with attrs.evolve keeps the weights it does not change."""
        mine = attrs.evolve(BALANCED, name="mine", threshold=4, weights={"explicit-pin": 10})
        assert mine.points(Signal.EXPLICIT_PIN) == 10.0
        assert mine.points(Signal.FREQUENT_ACCESS) == 3.0
        assert attrs.evolve(mine, min_access=4).weights == mine.weights


class TestEvidence:
    def test_every_observed_signal_says_what_was_seen(self):
        """Each signal an item carries comes with the fact behind it and its points."""
        thing = item(
            access_count=4, importance=0.8, status=Status.PINNED, tags=("failure",), session="s1"
        )
        found = {e.signal: (e.points, e.detail) for e in evidence(thing, BALANCED, 2)}
        assert found == {
            Signal.FREQUENT_ACCESS: (3.0, "accessed 4 times (>= 3)"),
            Signal.MULTI_SESSION: (2.0, "recorded in 2 sessions"),
            Signal.ERROR_RESOLUTION: (2.0, "a failure finding"),
            Signal.HIGH_IMPORTANCE: (1.0, "importance 0.80 (>= 0.70)"),
            Signal.EXPLICIT_PIN: (5.0, "pinned"),
        }

    def test_a_plain_item_carries_none(self):
        """An unused, unremarkable item has no evidence and scores 0."""
        assert evidence(item(), BALANCED, 1) == ()
        assert points(BALANCED, item()) == 0


class TestBadSettings:
    def test_unknown_preset_name(self):
        """An unknown name is refused, naming the known presets."""
        with pytest.raises(ValidationError, match="conservative, balanced, aggressive") as caught:
            resolve_preset("reckless")
        assert (caught.value.field, caught.value.value) == ("promotion", "reckless")

    @pytest.mark.parametrize(
        ("settings", "field"),
        [
            pytest.param({"threshold": 0}, "threshold", id="threshold-zero"),
            pytest.param({"threshold": -1}, "threshold", id="threshold-negative"),
            pytest.param({"threshold": math.inf}, "threshold", id="threshold-infinite"),
            pytest.param({"threshold": True}, "threshold", id="threshold-bool"),
            pytest.param({"weights": {"explicit-pin": -1}}, "weights", id="weight-negative"),
            pytest.param(
                {"weights": {"explicit-pin": math.nan}}, "weights[explicit-pin]", id="weight-nan"
            ),
            pytest.param({"weights": {"user-intent": 5}}, "weights", id="unobservable-signal"),
            pytest.param({"weights": [1, 2]}, "weights", id="weights-not-a-mapping"),
            pytest.param({"min_importance": 1.5}, "min_importance", id="min-importance"),
            pytest.param({"high_importance": -0.1}, "high_importance", id="high-importance"),
            pytest.param({"min_access": 0}, "min_access", id="min-access"),
            pytest.param({"min_content_length": -1}, "min_content_length", id="min-length"),
            pytest.param({"failure_kinds": "failure"}, "failure_kinds", id="kinds-as-text"),
            pytest.param({"name": " "}, "name", id="blank-name"),
        ],
    )
    def test_out_of_range(self, settings, field):
        """Weights, thresholds and filters out of range are refused, naming the setting."""
        with pytest.raises(ValidationError) as caught:
            PromotionPreset(**{"name": "mine", **settings})
        assert caught.value.field == field
