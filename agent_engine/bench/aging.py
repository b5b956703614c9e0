"""Aging at scale: what compacting a large store costs, against one full read of it.

Compaction reads a store's working set once, in bounded pages, and moves what aged out to the
archive in batched writes (:mod:`agent_engine.tiers.aging`). This measures it where it is
heaviest: a project store of ``size`` items, most of which have aged out, compacted with the
seed's policy (its 3000 -> 2700 soft limit included, so nearly everything moves). The
baseline in the same process is the cheapest thing that looks at every item: one read of the
whole working set (``store.query(None, limit=None)``). Reported: that read, the plan alone
(``compact(dry_run=True)``) and the whole compaction (plan, then moves), and their ratios to
the read.

Items come from :mod:`agent_engine.bench.synthetic` (kinds, texts, tags and sessions shaped
like agent memory, 384-dimension hashing vectors stored with them), aged deterministically
from a seed against a fixed clock: written over the half year before it, a share read since
(the more often read, the later), a few read in the last day (which the soft limit spares),
a few unconfirmed candidates. Each (backend, size) cell runs in a fresh process, as the cost
benchmark's do, so neither memory nor caches carry over.
"""

from __future__ import annotations

import random
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from agent_engine.bench._cells import Which, configuration_of, in_fresh_processes
from agent_engine.bench.synthetic import generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import ValidationError
from agent_engine.models import ContextItem, Status
from agent_engine.tiers.aging import AgingPolicy
from agent_engine.tiers.project import ProjectMemoryStore

__all__ = ["AgingBenchConfig", "aged_items", "run_aging", "run_cell"]

NOW = datetime(2024, 9, 1, tzinfo=UTC)
"""The clock of every cell: the synthetic items were written in the half year before it."""
CHUNK = 5000
PROJECT = "aging"
_SYNTHETIC = (datetime(2024, 1, 1, tzinfo=UTC), timedelta(days=180))
"""When the synthetic generator's half year of writes starts, and how long it runs."""
_SPREAD = timedelta(days=300)


@attrs.frozen
class AgingBenchConfig:
    """Which sizes and backends (names of the backend registry's configurations) to measure."""

    sizes: tuple[int, ...] = (100_000,)
    backends: tuple[str, ...] = ("memory", "sqlite")
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.sizes or any(isinstance(n, bool) or n < 1 for n in self.sizes):
            raise ValidationError(
                f"sizes must be positive item counts, got {self.sizes!r}",
                field="sizes",
                value=self.sizes,
            )


def aged_items(size: int, seed: int = 0) -> list[ContextItem]:
    """``size`` synthetic project items, aged against :data:`NOW` (deterministic from ``seed``).

    Items read ``n`` times were last read at a point between their writing and NOW that moves
    later as ``n`` grows; one in fifty read items was read within the last day; one item in
    twenty is an unconfirmed candidate.
    """
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not security
    items = []
    for item in generate(size, namespace=f"project:{PROJECT}", seed=seed):
        # The generator writes over half a year; spread that over the 300 days before NOW,
        # so some items are younger than their kind's time to live and some far older.
        start, span = _SYNTHETIC
        written = NOW - _SPREAD * max(0.0, 1 - (item.timestamp - start) / span)
        read = None
        if item.access_count:
            share = 1 - 0.5 ** (item.access_count + rng.random())
            read = written + (NOW - written) * share
            if rng.random() < 0.02:  # noqa: PLR2004 - one in fifty read in the last day
                read = NOW - timedelta(hours=rng.uniform(0, 23))
        status = item.status
        if status is Status.CONFIRMED and rng.random() < 0.05:  # noqa: PLR2004
            status = Status.CANDIDATE
        items.append(attrs.evolve(item, timestamp=written, last_accessed_at=read, status=status))
    return items


def run_cell(which: Which, size: int, seed: int = 0) -> dict[str, Any]:
    """Measure one backend configuration (or its name) at one size, in a process of its own."""
    configuration = configuration_of(which)
    embedder = HashingEmbedder(dim=384)
    policy = AgingPolicy()
    with tempfile.TemporaryDirectory() as work:
        backend = configuration.build(Path(work), embedder)
        store = ProjectMemoryStore(PROJECT, backend, max_items=None, clock=lambda: NOW)
        items = aged_items(size, seed)
        started = time.perf_counter()
        for offset in range(0, size, CHUNK):
            store.add_many(items[offset : offset + CHUNK])
        ingest = time.perf_counter() - started
        del items
        scans = []
        for _ in range(2):
            started = time.perf_counter()
            read = store.query(None, limit=None)
            scans.append(time.perf_counter() - started)
            del read
        started = time.perf_counter()
        plan = store.compact(dry_run=True, policy=policy)
        planned = time.perf_counter() - started
        started = time.perf_counter()
        done = store.compact(policy=policy)
        compacted = time.perf_counter() - started
        remaining = store.count()
        archived = store.count(view="archived")
        backend.close()
    scan = min(scans)
    return {
        "backend": configuration.name,
        "size": size,
        "ingest_items_per_s": size / ingest,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "scan_s": scan,
        "plan_s": planned,
        "compact_s": compacted,
        "plan_over_scan": planned / scan,
        "compact_over_scan": compacted / scan,
        "planned": len(plan.moves),
        "moved": done.moved,
        "skipped": len(done.skipped),
        "counts": done.counts(),
        "pinned": done.pinned,
        "protected": done.protected,
        "remaining": remaining,
        "archived": archived,
    }


def run_aging(
    config: AgingBenchConfig = AgingBenchConfig(),
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (backend, size) cell, each in a fresh process.

    An unknown backend raises :class:`~agent_engine.errors.UnknownBackendError` before
    anything runs.
    """
    return in_fresh_processes(
        run_cell, config.backends, config.sizes, config.seed, progress=progress
    )


def table(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The cells as a Markdown table: the baseline read, plan and compaction, their ratios."""
    lines = [
        (
            "| backend | items | moved | full read s | plan s | compact s | plan / read | "
            "compact / read | left | peak RSS MB |"
        ),
        "|---" * 10 + "|",
    ]
    lines.extend(
        f"| {c['backend']} | {c['size']:,} | {c['moved']:,} | {c['scan_s']:.2f} | "
        f"{c['plan_s']:.2f} | {c['compact_s']:.2f} | {c['plan_over_scan']:.2f}x | "
        f"{c['compact_over_scan']:.2f}x | {c['remaining']:,} | {c['peak_rss_mb']:.0f} |"
        for c in cells
    )
    lines.append("")
    lines.extend(
        f"- {c['backend']} at {c['size']:,}: moved "
        + ", ".join(f"{n:,} {reason}" for reason, n in c["counts"].items())
        + f"; {c['pinned']} pinned and {c['protected']} read in the last day stay"
        for c in cells
    )
    return [*lines, ""]
