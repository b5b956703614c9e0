"""Forks at scale: what forking a large task costs, and a build over the fork, against copies.

A fork is copy-on-write (:mod:`agent_engine.tiers.forks`): forking records one line, and the
fork reads through to its parent. This measures both halves where they matter, on a task
holding ``size`` items:

* **the fork** against the baseline in the same process, an eager deep copy of the task into
  a new one (what seed 001's "child gets a deep copy" does: every item read, renamed and
  written again), with how many items each wrote;
* **a build over the fork** (``build_context`` of the forked task, a query per build) against
  the same builds over the parent, right after the fork and again after the two have
  diverged: the fork changed ``changes`` of its inherited items and the parent added as many
  new ones (which the fork must not see, so every read of the fork skips them).

Items come from :mod:`agent_engine.bench.synthetic` (384-dimension hashing vectors stored with
them). Each (backend, size) cell runs in a fresh process, as the other scale benchmarks do.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.bench._cells import Which, configuration_of, in_fresh_processes
from agent_engine.bench.synthetic import _WORDS, generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import ValidationError
from agent_engine.models import ContextRequest, Task, Tier
from agent_engine.tiers._forks import renamed
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.task import TaskMemoryStore

__all__ = ["ForkBenchConfig", "run_cell", "run_forks", "table"]

PROJECT = "forks"
CHUNK = 5000
BUDGET = 2000
BUILDS = 9
FORKS = 5


@attrs.frozen
class ForkBenchConfig:
    """Which sizes and backends (names of the backend registry's configurations) to measure.

    ``changes``: how many inherited items the fork changes, and new items the parent adds,
    before the second round of builds.
    """

    sizes: tuple[int, ...] = (10_000, 100_000)
    backends: tuple[str, ...] = ("memory", "sqlite")
    changes: int = 100

    def __attrs_post_init__(self) -> None:
        if not self.sizes or any(isinstance(n, bool) or n < 1 for n in self.sizes):
            raise ValidationError(
                f"sizes must be positive item counts, got {self.sizes!r}",
                field="sizes",
                value=self.sizes,
            )


def _queries(count: int) -> list[str]:
    rng = random.Random(3)  # noqa: S311 - reproducible queries, not security
    return [" ".join(rng.choices(_WORDS[20:], k=rng.randint(3, 7))) for _ in range(count)]


def _median_build_ms(assembler: ContextAssembler, task: Task, texts: list[str]) -> float:
    assembler.build_context(task, ContextRequest(budget_tokens=BUDGET, query=texts[0]))
    timings = []
    for text in texts:
        started = time.perf_counter()
        assembler.build_context(task, ContextRequest(budget_tokens=BUDGET, query=text))
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def run_cell(which: Which, size: int, changes: int = 100) -> dict[str, Any]:
    """Measure one backend configuration (or its name) at one size, in a process of its own."""
    configuration = configuration_of(which)
    embedder = HashingEmbedder(dim=384)
    parent_task = Task(id="parent", project_id=PROJECT)
    child_task = Task(id="child", project_id=PROJECT)
    texts = _queries(BUILDS)
    with tempfile.TemporaryDirectory() as work:
        backend = configuration.build(Path(work), embedder)
        stores = MemoryStores(backend, task_backend=backend, conflict_detection=None, merge=None)
        assembler = ContextAssembler(stores, config=AssemblerConfig(track_access=False))
        parent = stores.task_store(parent_task)
        items = list(generate(size, namespace=parent.namespace, tier=Tier.TASK))
        for offset in range(0, size, CHUNK):
            parent.add_many(items[offset : offset + CHUNK])
        del items
        forks = []
        for n in range(FORKS):
            started = time.perf_counter()
            parent.fork(child_task if n == 0 else f"spare-{n}")
            forks.append(time.perf_counter() - started)
        child = stores.task_store(child_task)
        written_by_fork = backend.count(child.scope)
        copy = TaskMemoryStore("copy", backend, project_id=PROJECT, conflict_detection=None)
        started = time.perf_counter()
        held = parent.query(None, limit=None, view="all")
        copies = renamed(held, parent.namespace, copy.namespace)
        for offset in range(0, len(copies), CHUNK):
            backend.add_many(copies[offset : offset + CHUNK])
        eager = time.perf_counter() - started
        del held, copies
        parent_ms = _median_build_ms(assembler, parent_task, texts)
        fork_ms = _median_build_ms(assembler, child_task, texts)
        inherited = child.query(None, limit=changes, order_by="+id")
        started = time.perf_counter()
        for item in inherited:
            child.update(attrs.evolve(item, text=item.text + " (changed in the fork)"))
        later = generate(changes, namespace=parent.namespace, seed=9, tier=Tier.TASK)
        for n, fresh in enumerate(later):
            parent.add(attrs.evolve(fresh, id=f"later-{n}"))
        diverging = time.perf_counter() - started
        parent_after_ms = _median_build_ms(assembler, parent_task, texts)
        fork_after_ms = _median_build_ms(assembler, child_task, texts)
        written_after = backend.count(child.scope)
        backend.close()
    fork_s = statistics.median(forks)
    return {
        "backend": configuration.name,
        "size": size,
        "fork_ms": fork_s * 1000,
        "written_by_fork": written_by_fork,
        "eager_copy_s": eager,
        "written_by_copy": size,
        "copy_over_fork": eager / fork_s,
        "build_parent_ms": parent_ms,
        "build_fork_ms": fork_ms,
        "fork_over_parent": fork_ms / parent_ms,
        "changes": changes,
        "diverging_s": diverging,
        "build_parent_after_ms": parent_after_ms,
        "build_fork_after_ms": fork_after_ms,
        "fork_over_parent_after": fork_after_ms / parent_after_ms,
        "written_by_fork_after": written_after,
    }


def run_forks(
    config: ForkBenchConfig = ForkBenchConfig(),
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (backend, size) cell, each in a fresh process.

    An unknown backend raises :class:`~agent_engine.errors.UnknownBackendError` before
    anything runs.
    """
    return in_fresh_processes(
        run_cell, config.backends, config.sizes, config.changes, progress=progress
    )


def table(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The cells as a Markdown table: the fork against a deep copy, builds against the parent."""
    lines = [
        (
            "| backend | items | fork ms | deep copy s | copy / fork | items written by fork | "
            "build parent ms | build fork ms | fork / parent | after changes: parent ms | "
            "fork ms | fork / parent | items the fork holds |"
        ),
        "|---" * 13 + "|",
    ]
    lines.extend(
        f"| {c['backend']} | {c['size']:,} | {c['fork_ms']:.2f} | {c['eager_copy_s']:.2f} | "
        f"{c['copy_over_fork']:,.0f}x | {c['written_by_fork']} | {c['build_parent_ms']:.1f} | "
        f"{c['build_fork_ms']:.1f} | {c['fork_over_parent']:.2f}x | "
        f"{c['build_parent_after_ms']:.1f} | {c['build_fork_after_ms']:.1f} | "
        f"{c['fork_over_parent_after']:.2f}x | {c['written_by_fork_after']:,} |"
        for c in cells
    )
    return [*lines, ""]
