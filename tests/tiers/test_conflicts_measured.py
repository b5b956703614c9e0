"""Conflict detection end to end, measured: what stores record as they write, against labels.

The labelled memories are ``agent_engine/bench/data/conflicts.jsonl`` (how they were written:
the module docstring of :mod:`agent_engine.bench.conflicts` and ``docs/benchmarks.md``). Each
is written by one ``add`` through the tier stores of the backend under test, among synthetic
fillers, and the conflicts the stores list are scored. The floors sit a little below what was
measured (precision 0.789, 30 of 38 recorded; recall 0.750, 30 of 40; 6 of the 7 contradictions
sharing neither kind nor tag found by meaning), the same on every backend.
"""

from __future__ import annotations

from agent_engine.bench.conflicts import ConflictsConfig, load, measure, stream
from agent_engine.tiers.conflicts import DEFAULT_DETECTION


class TestMeasured:
    def test_precision_and_recall_floors(self, backend):
        """Default detection keeps the precision and recall it was measured at, on every backend.

        If recall falls while the pair classifier's own test passes, the candidate reads (kind,
        tags, search by meaning) stopped reaching the contradicting items.
        """
        labelled = load()
        figures = measure(
            backend, stream(labelled, ConflictsConfig(fillers=100)), DEFAULT_DETECTION
        )
        assert figures.positives == 40
        assert figures.precision >= 0.75
        assert figures.recall >= 0.7
        assert figures.found_by_meaning_only >= 5

    def test_other_scopes_are_never_paired(self, backend):
        """The two memories that contradict one of another scope are in no recorded pair."""
        labelled = load()
        traps = {m.id for m in labelled if "another scope" in m.note}
        assert len(traps) == 2
        figures = measure(backend, labelled, DEFAULT_DETECTION)
        assert not {i for pair in figures.false_positives for i in pair} & traps

    def test_the_set_holds_what_its_description_says(self):
        """139 memories in three scopes; 40 contradictions, 7 of them sharing no kind or tag."""
        labelled = load()
        by_id = {m.id: m for m in labelled}
        assert len(labelled) == 139
        assert sorted({m.scope for m in labelled}) == ["ana", "pipeline", "shop"]
        pairs = [(m, by_id[other]) for m in labelled for other in m.contradicts]
        assert len(pairs) == 40
        assert all(a.scope == b.scope for a, b in pairs)
        unrelated = [(a, b) for a, b in pairs if a.kind != b.kind and not set(a.tags) & set(b.tags)]
        assert len(unrelated) == 7
        assert sum(len(m.compatible) for m in labelled) == 23
