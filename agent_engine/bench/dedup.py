"""What the near-duplicate check costs an add, against the same add without it, at scale.

Every add to a project or global store looks for a held item of its kind that it nearly
repeats (:mod:`agent_engine.tiers.dedup`): a fingerprint lookup, then one vector search.
This measures that price where it is highest: a project store of ``size`` items, to which
new items are added one at a time (what an agent does after each step) and in batches of
``batch`` (an import). The baseline in the same run is the same add by a store over the same
backend and scope with merging off, alternating with the checked one add by add, so both see
the same store and the same machine load. Both run with the store's other defaults
(conflict detection included) and, in a second configuration, with conflict detection off,
which is the add at its cheapest.

Items come from :mod:`agent_engine.bench.synthetic` (kinds, texts and tags shaped like agent
memory), the store's with 384-dimension hashing vectors stored with them. The added items are
embedded by the add, by the ``embedder`` chosen: ``hashing`` costs next to nothing, so the
check is as large a share of an add as it can be; ``model`` (all-MiniLM-L6-v2, 384
dimensions) is what a user's add pays. Either way the searches scan or walk the same
100k-item index, so their cost is what it would be over the model's own vectors. Each
(backend, size) cell runs in a fresh process.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_engine.bench._cells import Which, configuration_of, in_fresh_processes
from agent_engine.bench.synthetic import generate
from agent_engine.embeddings import Embedder, HashingEmbedder, SentenceTransformerEmbedder
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.dedup import DEFAULT_MERGE
from agent_engine.tiers.project import ProjectMemoryStore

__all__ = ["DedupBenchConfig", "run_cell", "run_dedup", "table"]

PROJECT = "dedup"
CHUNK = 5000
EMBEDDERS = ("hashing", "model")
"""What embeds the added items (the store's items come with hashing vectors either way)."""


@attrs.frozen
class DedupBenchConfig:
    """Store sizes, backends (the registry's configuration names), adds and batch size."""

    sizes: tuple[int, ...] = (100_000,)
    backends: tuple[str, ...] = ("memory", "faiss", "faiss-hnsw", "sqlite", "faiss-sqlite")
    adds: int = 200
    batch: int = 100
    embedder: str = "hashing"
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.embedder not in EMBEDDERS:
            raise ValidationError(
                f"embedder must be one of {', '.join(EMBEDDERS)}, got {self.embedder!r}",
                field="embedder",
                value=self.embedder,
            )
        for name in ("adds", "batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(
                    f"{name} must be a positive count, got {value!r}", field=name, value=value
                )
        if not self.sizes or any(isinstance(n, bool) or n < 1 for n in self.sizes):
            raise ValidationError(
                f"sizes must be positive item counts, got {self.sizes!r}",
                field="sizes",
                value=self.sizes,
            )


def _fresh(count: int, seed: int) -> list[ContextItem]:
    """New items to add: the generator's, with other ids and no vectors (the add embeds)."""
    return [
        attrs.evolve(item, id=f"new-{seed}-{n}", embedding=None)
        for n, item in enumerate(generate(count, namespace=f"project:{PROJECT}", seed=seed))
    ]


def _stores(
    backend: Any, detection: ConflictDetection | None
) -> tuple[ProjectMemoryStore, ProjectMemoryStore]:
    def store(merge: Any) -> ProjectMemoryStore:
        return ProjectMemoryStore(
            PROJECT, backend, max_items=None, conflict_detection=detection, merge=merge
        )

    return store(None), store(DEFAULT_MERGE)


def _timed_pairs(
    plain: ProjectMemoryStore,
    checked: ProjectMemoryStore,
    items: list[ContextItem],
    step: int,
) -> tuple[list[float], list[float], int]:
    """Alternate ``step``-item adds between the two stores; their seconds and the merges."""
    without: list[float] = []
    with_check: list[float] = []
    merged = 0
    for start in range(0, len(items) - 2 * step + 1, 2 * step):
        first = items[start : start + step]
        second = items[start + step : start + 2 * step]
        began = time.perf_counter()
        plain.add_many(first)
        without.append(time.perf_counter() - began)
        began = time.perf_counter()
        outcomes = checked.add_outcomes(second)
        with_check.append(time.perf_counter() - began)
        merged += sum(outcome.merged for outcome in outcomes)
    return without, with_check, merged


def _figures(without: list[float], with_check: list[float], per: int) -> dict[str, float]:
    def ms(values: list[float], share: float) -> float:
        ordered = sorted(values)
        return 1000 * ordered[min(len(ordered) - 1, int(share * len(ordered)))] / per

    return {
        "without_p50_ms": ms(without, 0.5),
        "without_p95_ms": ms(without, 0.95),
        "with_p50_ms": ms(with_check, 0.5),
        "with_p95_ms": ms(with_check, 0.95),
        "ratio_mean": statistics.fmean(with_check) / statistics.fmean(without),
        "ratio_p50": ms(with_check, 0.5) / ms(without, 0.5),
    }


def _embedder(name: str) -> Embedder:
    if name == "model":
        return SentenceTransformerEmbedder()
    return HashingEmbedder(dim=384)


def run_cell(which: Which, size: int, config: DedupBenchConfig) -> dict[str, Any]:
    """Measure one backend configuration (or its name) at one size, in a process of its own."""
    configuration = configuration_of(which)
    cell: dict[str, Any] = {
        "backend": configuration.name,
        "size": size,
        "embedder": config.embedder,
    }
    with tempfile.TemporaryDirectory() as work:
        backend = configuration.build(Path(work), _embedder(config.embedder))
        loader = ProjectMemoryStore(
            PROJECT, backend, max_items=None, conflict_detection=None, merge=None
        )
        items = list(generate(size, namespace=f"project:{PROJECT}", seed=config.seed))
        for offset in range(0, size, CHUNK):
            loader.add_many(items[offset : offset + CHUNK])
        del items
        settings = (("defaults", DEFAULT_DETECTION), ("no conflicts", None))
        for round_, (label, detection) in enumerate(settings, start=1):
            plain, checked = _stores(backend, detection)
            seed = config.seed + 1000 * round_
            one = _fresh(2 * config.adds, seed)
            without, with_check, merged = _timed_pairs(plain, checked, one, 1)
            batches = _fresh(4 * config.batch, seed + 100)
            b_without, b_with, b_merged = _timed_pairs(plain, checked, batches, config.batch)
            cell[label] = {
                "one": _figures(without, with_check, 1) | {"merged": merged},
                "batch": _figures(b_without, b_with, config.batch) | {"merged": b_merged},
            }
        backend.close()
    return cell


def run_dedup(
    config: DedupBenchConfig = DedupBenchConfig(),
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (backend, size) cell, each in a fresh process.

    An unknown backend raises :class:`~agent_engine.errors.UnknownBackendError` before
    anything runs.
    """
    return in_fresh_processes(run_cell, config.backends, config.sizes, config, progress=progress)


def table(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The cells as a Markdown table: per-item add cost without and with the check."""
    lines = [
        (
            "| backend | items | embedder | stores | adds | without p50 / p95 ms | "
            "with p50 / p95 ms | with / without (mean) | merged |"
        ),
        "|---" * 9 + "|",
    ]
    for c in cells:
        for label in ("defaults", "no conflicts"):
            for mode, name in (("one", "one at a time"), ("batch", "in batches")):
                f = c[label][mode]
                lines.append(
                    f"| {c['backend']} | {c['size']:,} | {c['embedder']} | {label} | {name} | "
                    f"{f['without_p50_ms']:.2f} / {f['without_p95_ms']:.2f} | "
                    f"{f['with_p50_ms']:.2f} / {f['with_p95_ms']:.2f} | "
                    f"{f['ratio_mean']:.2f}x | {f['merged']} |"
                )
    return [*lines, ""]
