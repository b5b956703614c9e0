"""The currentness benchmark: its stream, its scorer and its part of the suite."""

from __future__ import annotations

import json
from collections import Counter

import attrs
import pytest

from agent_engine import ValidationError
from agent_engine.assembler.package import (
    ContextPackage,
    Selection,
    SelectionReason,
)
from agent_engine.assembler.render import Layout
from agent_engine.bench.currentness import (
    CurrentnessConfig,
    SlotHistory,
    generate,
    run_currentness,
    score,
)
from agent_engine.bench.runner import main, parse_options
from agent_engine.embeddings import HashingEmbedder
from agent_engine.models import ContextItem, Tier

TINY = CurrentnessConfig(slots=20, updated=0.5, contradicted=0.25, keyed=0.4, filler=60)


class TestStream:
    def test_deterministic(self):
        """The same config gives the same stream; another seed another one."""
        assert generate(TINY) == generate(TINY)
        other = generate(CurrentnessConfig(slots=20, filler=60, seed=1))
        assert other.items != generate(TINY).items

    def test_shares_are_as_configured(self):
        """Updated, contradicted and keyed slots come in the configured shares."""
        stream = generate(TINY)
        changes = Counter(history.change for history in stream.histories)
        assert changes == {"update": 10, "contradiction": 5}
        assert sum(history.keyed for history in stream.histories) == 6
        assert stream.stable == 5
        facts = [item for item in stream.items if not item.id.startswith("syn-")]
        assert len(stream.items) - len(facts) == 60

    def test_versions_are_written_in_order_with_their_key(self):
        """Versions follow each other in time; keyed slots carry the key on every version."""
        stream = generate(CurrentnessConfig(slots=60, filler=200, max_changes=3))
        times = [item.timestamp for item in stream.items]
        assert times == sorted(times)
        assert len(set(times)) == len(times)
        by_id = {item.id: item for item in stream.items}
        assert max(len(history.versions) for history in stream.histories) > 2
        for history in stream.histories:
            versions = [by_id[version] for version in history.versions]
            assert [v.timestamp for v in versions] == sorted(v.timestamp for v in versions)
            assert len({v.text for v in versions}) == len(versions)
            keys = {v.payload.get("key") for v in versions}
            assert keys == ({history.key} if history.keyed else {None})
            assert all(v.tier is history.tier for v in versions)

    def test_a_contradiction_negates_what_held_last(self):
        """The last version of a contradicted slot negates the value stated before it."""
        stream = generate(TINY)
        by_id = {item.id: item.text for item in stream.items}
        contradicted = next(h for h in stream.histories if h.change == "contradiction")
        last = by_id[contradicted.current]
        assert any(w in last for w in ("no longer", "not", "Never", "stop", "left"))

    def test_bad_shares_are_refused(self):
        with pytest.raises(ValidationError):
            CurrentnessConfig(updated=0.7, contradicted=0.5)
        with pytest.raises(ValidationError):
            CurrentnessConfig(slots=10_000)


def _package(*item_ids: str) -> ContextPackage:
    selections = tuple(
        Selection(
            item=ContextItem(id=item_id, kind="fact", text=item_id),
            tier=Tier.PROJECT,
            score=1.0,
            reason=SelectionReason.RANKED,
            tokens=3,
            body=item_id,
        )
        for item_id in item_ids
    )
    return ContextPackage(
        id="p",
        task_id="t",
        budget_tokens=100,
        policy="hybrid",
        layout=Layout(),
        selections=selections,
        omissions=(),
        usage=(),
    )


class TestScore:
    HISTORY = SlotHistory(
        key="person:alice:city",
        change="update",
        keyed=False,
        tier=Tier.PROJECT,
        question="Where does Alice live?",
        versions=("v1", "v2", "v3"),
    )

    @pytest.mark.parametrize(
        ("selected", "current", "stale_out"),
        [
            (("v3", "other"), True, True),
            (("v3", "v1"), True, False),
            (("v2",), False, False),
            (("other",), False, True),
        ],
    )
    def test_hand_made_packages(self, selected, current, stale_out):
        """Current in, stale out and both follow from the selected versions alone."""
        outcome = score(_package(*selected), self.HISTORY)
        assert (outcome.current_included, outcome.stale_excluded) == (current, stale_out)
        assert outcome.both == (current and stale_out)


class TestRun:
    def test_baseline_on_tiny_data(self):
        """Every changed slot is asked at every budget, and the rates are their means."""
        config = CurrentnessConfig(
            slots=12, updated=0.5, contradicted=0.25, filler=30, budgets=(128, 1024)
        )
        config = attrs.evolve(config, modes=("baseline",))
        result = run_currentness(HashingEmbedder(dim=64), config=config)
        assert len(result["records"]) == 9 * 2
        overall = result["summary"]["baseline"]["1024"]["overall"]
        mine = [r for r in result["records"] if r["budget"] == 1024]
        assert overall["n"] == 9
        assert overall["both"] == pytest.approx(sum(r["both"] for r in mine) / 9)
        # Today nothing marks a version as replaced: a large budget holds the stale ones too.
        assert overall["current_included"] == 1.0
        assert overall["stale_excluded"] < 1.0

    def test_keys_keep_stale_versions_out(self):
        """With slots declared, a keyed change's stale versions never reach the context."""
        config = CurrentnessConfig(
            slots=24, updated=0.5, contradicted=0.25, keyed=1.0, filler=30, budgets=(1024,)
        )
        result = run_currentness(HashingEmbedder(dim=64), config=config)
        summary = result["summary"]
        assert summary["lifecycle"]["1024"]["overall"]["stale_excluded"] == 1.0
        assert summary["lifecycle"]["1024"]["overall"]["current_included"] == 1.0
        assert summary["baseline"]["1024"]["overall"]["stale_excluded"] < 1.0

    def test_unknown_mode_is_refused(self):
        with pytest.raises(ValidationError, match="nope"):
            run_currentness(HashingEmbedder(dim=16), config=CurrentnessConfig(modes=("nope",)))


class TestRunnerPart:
    def test_the_part_writes_its_table(self, tmp_path):
        """``bench currentness`` runs alone, with the hashing embedder by default."""
        out = tmp_path / "out"
        assert main(["currentness", "--slots", "12", "--out", str(out)]) == 0
        report = (out / "report.md").read_text(encoding="utf-8")
        assert "## Currentness: changed facts" in report
        assert "| baseline | 512 |" in report
        assert "| baseline | update, keyed |" in report
        results = json.loads((out / "results.json").read_text(encoding="utf-8"))
        assert set(results) == {"meta", "currentness"}
        assert results["currentness"]["stream"]["embedder"].startswith("hashing")

    def test_options(self, capsys):
        """Slots and modes parse; an unknown mode is a usage error."""
        options = parse_options(["currentness", "--slots", "30"])
        assert options.currentness.slots == 30
        assert options.currentness.modes == ("baseline", "lifecycle")
        assert options.embedder is None
        with pytest.raises(SystemExit) as exit_info:
            parse_options(["currentness", "--modes", "baseline,nope"])
        assert exit_info.value.code == 2
        assert "unknown currentness mode(s): nope" in capsys.readouterr().err
