"""Conflict detection end to end: what tier stores record as they write, against labels.

The pair classifier (:func:`~agent_engine.retrieval.contradiction.contradicts`) has its own
labelled pairs; this measures what a *store* records, which also depends on which items each
write is set against (:class:`~agent_engine.tiers.conflicts.ConflictDetection`: the newest of
its kind, of its tags, its nearest by meaning). Every memory is written one ``add`` at a time
through the tier stores, as an agent writes, and the conflicts the stores list at the end are
scored against the labels.

**The labelled set** (``data/conflicts.jsonl``, one memory per line, in write order) was
written by hand for this benchmark, not taken from a dataset: 139 memories in three scopes of
one backend, a web shop's project memory (70), a data pipeline's (40) and one user's global
memory (29), each with a kind and tags as an application would store them. A line names the
earlier memories it ``contradicts`` (the positives: 40 pairs) and those it was written to be
``compatible`` with (23 hard negatives: agreeing paraphrases, double negations, the same cue
words about another subject, narrower statements, exceptions), with a ``note`` where the
judgement needs one. A pair is a contradiction when following one memory means violating the
other. Of the 40 positives, 33 share a kind or a tag and 7 share neither (only the search by
meaning can bring them together); 10 are beyond the pair classifier, so they cost recall by
design: 6 contradict without any cue it reads (a swapped value, "upper case" then "lower
case", or a paraphrase) and 4 carry a cue but share too few terms ("Never log card numbers or
CVV codes." / "Log card numbers in full to debug payment failures."). Two memories contradict
a memory of *another* scope and must never be paired. Every pair of memories of one scope not
labelled a contradiction counts as a negative: a pair recorded and not labelled is a false
positive.

**Fillers.** :mod:`agent_engine.bench.synthetic` memories (``fillers`` per project scope,
deterministic from ``seed``) are interleaved at random places, so the newest items of a kind
are not only labelled ones and the search by meaning has neighbours to rank.

**Modes.** The same stream is written once per named :class:`ConflictDetection` setting
(``MODES``), each into a fresh backend, and with detection off, whose write time is the
baseline of the cost ratio: the wall time of all the adds, same backend, same run, after one
untimed warm-up write of the stream (which also fills the embedder's cache, so no timed run
pays for embedding). Every timed figure is the fastest of ``repeats`` runs (what the machine
can do when nothing else runs on it: on shared cores a single run is mostly noise).
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final

import attrs

from agent_engine.bench import synthetic
from agent_engine.embeddings import Embedder
from agent_engine.memory import registry
from agent_engine.memory.backend import MemoryBackend
from agent_engine.retrieval.contradiction import contradicts
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.project import ProjectMemoryStore

__all__ = [
    "MODES",
    "ConflictsConfig",
    "Figures",
    "Memory",
    "classifier_only",
    "load",
    "measure",
    "run_conflicts",
    "stream",
]

MODES: Final[Mapping[str, ConflictDetection]] = {
    "default": DEFAULT_DETECTION,
    "kind and tags only": attrs.evolve(DEFAULT_DETECTION, neighbours=0),
    "meaning only": attrs.evolve(DEFAULT_DETECTION, related=0),
}
"""The detection settings measured, by name: the default, and each half of its candidates."""

_PROJECTS: Final = ("shop", "pipeline")
_USER: Final = "ana"
_DATA: Final = "data/conflicts.jsonl"


@attrs.frozen
class Memory:
    """One labelled memory: its scope (a project, or the user), what it says, its labels."""

    scope: str
    id: str
    kind: str
    tags: tuple[str, ...]
    text: str
    contradicts: tuple[str, ...] = ()
    compatible: tuple[str, ...] = ()
    note: str = ""


@attrs.frozen
class ConflictsConfig:
    """What to write: ``fillers`` synthetic memories per project scope, placed by ``seed``.

    ``repeats``: timed runs per mode (and of the baseline), the fastest reported.
    """

    fillers: int = 300
    seed: int = 0
    modes: tuple[str, ...] = tuple(MODES)
    repeats: int = 3


@attrs.frozen
class Figures:
    """What one mode recorded, scored: counts, precision, recall, and the pairs behind them."""

    recorded: int
    true_positives: int
    positives: int
    found_by_meaning_only: int
    positives_by_meaning_only: int
    false_positives: tuple[tuple[str, str], ...]
    missed: tuple[tuple[str, str], ...]
    seconds: float

    @property
    def precision(self) -> float:
        """Recorded pairs that are labelled contradictions (1.0 when none was recorded)."""
        return self.true_positives / self.recorded if self.recorded else 1.0

    @property
    def recall(self) -> float:
        """Labelled contradictions that were recorded."""
        return self.true_positives / self.positives if self.positives else 1.0


def load(path: Path | None = None) -> list[Memory]:
    """The labelled memories, in write order (``path``: another file of the same form)."""
    if path is None:
        text = resources.files("agent_engine.bench").joinpath(_DATA).read_text(encoding="utf-8")
    else:
        text = path.read_text(encoding="utf-8")
    memories = []
    for line in text.splitlines():
        row = json.loads(line)
        memories.append(
            Memory(
                scope=row["scope"],
                id=row["id"],
                kind=row["kind"],
                tags=tuple(row["tags"]),
                text=row["text"],
                contradicts=tuple(row.get("contradicts", ())),
                compatible=tuple(row.get("compatible", ())),
                note=row.get("note", ""),
            )
        )
    return memories


def stream(memories: Sequence[Memory], config: ConflictsConfig) -> list[Memory]:
    """``memories`` with ``config.fillers`` synthetic ones per project interleaved, in order.

    Labelled memories keep their order; a filler's id is ``<scope>-filler-<n>``.
    """
    rng = random.Random(config.seed)  # noqa: S311 - reproducible placement, not security
    out = list(memories)
    for number, project in enumerate(_PROJECTS):
        fillers = synthetic.generate(
            config.fillers, namespace=f"project:{project}", seed=config.seed + number
        )
        for n, item in enumerate(fillers):
            filler = Memory(project, f"{project}-filler-{n}", item.kind, item.tags, item.text)
            out.insert(rng.randint(0, len(out)), filler)
    return out


def measure(
    backend: MemoryBackend,
    memories: Sequence[Memory],
    settings: ConflictDetection | None,
) -> Figures:
    """Write ``memories`` (one add each) through tier stores on ``backend``; score the result.

    ``backend`` must be empty. ``settings=None`` writes with detection off (the cost baseline).
    """
    stores: dict[str, TierStore] = {
        project: ProjectMemoryStore(project, backend, max_items=None, conflict_detection=settings)
        for project in _PROJECTS
    }
    stores[_USER] = GlobalMemoryStore(
        backend, _USER, allow_unconfirmed=True, conflict_detection=settings
    )
    label: dict[str, str] = {}
    started = time.perf_counter()
    for memory in memories:
        store = stores[memory.scope]
        (outcome,) = store.add_outcomes(
            [store.new_item(memory.kind, memory.text, tags=memory.tags)]
        )
        # A memory merged into a held one is that memory from now on: it keeps its label.
        label.setdefault(outcome.item.id, memory.id)
    seconds = time.perf_counter() - started
    recorded = {
        frozenset((label[c.item_a], label[c.item_b]))
        for store in stores.values()
        for c in store.conflicts(limit=None)
    }
    return _score(memories, recorded, seconds)


def _score(memories: Sequence[Memory], recorded: set[frozenset[str]], seconds: float) -> Figures:
    by_id = {memory.id: memory for memory in memories}
    positives = {frozenset((m.id, other)) for m in memories for other in m.contradicts}
    meaning_only = {pair for pair in positives if not _related(*(by_id[i] for i in pair))}
    hits = recorded & positives
    return Figures(
        recorded=len(recorded),
        true_positives=len(hits),
        positives=len(positives),
        found_by_meaning_only=len(hits & meaning_only),
        positives_by_meaning_only=len(meaning_only),
        false_positives=_pairs(recorded - positives),
        missed=_pairs(positives - recorded),
        seconds=seconds,
    )


def _pairs(pairs: set[frozenset[str]]) -> tuple[tuple[str, str], ...]:
    """``pairs`` as sorted id pairs, sorted."""
    return tuple(sorted((min(pair), max(pair)) for pair in pairs))


def _related(a: Memory, b: Memory) -> bool:
    """Whether two memories share a kind or a tag (what detection reads without meaning)."""
    return a.kind == b.kind or bool(set(a.tags) & set(b.tags))


def classifier_only(memories: Sequence[Memory]) -> dict[str, Any]:
    """The pair classifier on every pair of one scope's labelled memories, candidates aside.

    What detection would record if every pair were looked at: the ceiling the candidate
    reads can reach, and the false positives no candidate bound prevents.
    """
    labelled = [m for m in memories if "-filler-" not in m.id]
    positives = {frozenset((m.id, other)) for m in labelled for other in m.contradicts}
    flagged = {
        frozenset((a.id, b.id))
        for i, a in enumerate(labelled)
        for b in labelled[i + 1 :]
        if a.scope == b.scope and contradicts(a.text, b.text) is not None
    }
    hits = len(flagged & positives)
    return {
        "flagged": len(flagged),
        "true_positives": hits,
        "precision": hits / len(flagged) if flagged else 1.0,
        "recall": hits / len(positives) if positives else 1.0,
    }


def run_conflicts(
    backends: Iterable[str],
    embedder: Embedder,
    *,
    config: ConflictsConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Measure every mode of ``config`` on each named backend configuration (the registry's).

    Each run writes the whole stream into a fresh backend in a temporary folder; the run
    with detection off gives each backend's baseline write time.
    """
    config = config or ConflictsConfig()
    memories = load()
    written = stream(memories, config)
    rows: list[dict[str, Any]] = []
    for name in backends:
        _run(name, embedder, written, DEFAULT_DETECTION)  # warm-up: caches, embeddings
        repeats = range(max(1, config.repeats))
        baseline = min(_run(name, embedder, written, None).seconds for _ in repeats)
        for mode in config.modes:
            runs = [_run(name, embedder, written, MODES[mode]) for _ in repeats]
            figures = min(runs, key=lambda run: run.seconds)
            rows.append(
                {
                    "backend": name,
                    "mode": mode,
                    "recorded": figures.recorded,
                    "true_positives": figures.true_positives,
                    "positives": figures.positives,
                    "precision": round(figures.precision, 3),
                    "recall": round(figures.recall, 3),
                    "found_by_meaning_only": figures.found_by_meaning_only,
                    "positives_by_meaning_only": figures.positives_by_meaning_only,
                    "false_positives": [list(pair) for pair in figures.false_positives],
                    "missed": [list(pair) for pair in figures.missed],
                    "add_cost_ratio": round(figures.seconds / baseline, 2) if baseline else None,
                    "add_ms": round(1000 * figures.seconds / len(written), 3),
                    "baseline_add_ms": round(1000 * baseline / len(written), 3),
                }
            )
            if progress is not None:
                progress(1)
    return {
        "config": attrs.asdict(config),
        "set": {
            "memories": len(memories),
            "written": len(written),
            "positives": sum(len(m.contradicts) for m in memories),
            "hard_negatives": sum(len(m.compatible) for m in memories),
            "embedder": embedder.name,
        },
        "classifier_only": classifier_only(memories),
        "modes": {mode: attrs.asdict(MODES[mode]) for mode in config.modes},
        "rows": rows,
    }


def _run(
    name: str, embedder: Embedder, written: Sequence[Memory], settings: ConflictDetection | None
) -> Figures:
    with tempfile.TemporaryDirectory(prefix="agent-engine-conflicts-") as work:
        backend = registry.configuration(name).build(Path(work), embedder)
        try:
            return measure(backend, written, settings)
        finally:
            backend.close()
