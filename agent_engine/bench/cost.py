"""Cost at scale: ingestion throughput, peak memory and ``build_context`` latency per backend.

Each (backend, size) cell runs in a fresh process, so its peak resident memory is its own and
nothing cached by an earlier cell flatters a later one. Items come from
:mod:`agent_engine.bench.synthetic`. Latency is measured on warm indexes (the first builds,
which load the BM25 index, are reported separately as ``first_build_ms``, and builds that
follow one stored memory as ``build_after_write_p50_ms``) and the query
embedding is timed apart from assembly (a build is handed the vector the bench embedded, so it
is not embedded twice). Beside each build the raw backend searches it issues
(vector search and BM25 scoring for the same query, in the project's and the task's memory;
the empty global memory is not searched) are timed in the same process, so the assembler's own
cost reads as a ratio; so are all its reads (those searches, fetching the project's BM25-only
candidates, the pinned query), a second baseline. Each query is also built with
``GatherLimits(widening_rounds=0)``: the default widens a spent pool while budget is left,
which costs a few builds several times the rest, and this shows what it costs.
"""

from __future__ import annotations

import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.assembler.candidates import GatherLimits
from agent_engine.bench._cells import Which, configuration_of, in_fresh_processes
from agent_engine.bench.synthetic import _WORDS, generate
from agent_engine.embeddings import Embedder, HashingEmbedder, Matrix
from agent_engine.memory import registry
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextRequest, Task, Vector
from agent_engine.tiers.stores import MemoryStores

__all__ = ["backend_names", "default_backend_names", "run_cell", "run_cost"]

PROJECT = "bench"
CHUNK = 5000
WRITES = 5


def backend_names() -> tuple[str, ...]:
    """The backends the bench can measure: every configuration in the backend registry."""
    return tuple(configuration.name for configuration in registry.configurations())


def default_backend_names() -> tuple[str, ...]:
    """What the bench measures when no backend is named: the registry's default configurations."""
    return tuple(c.name for c in registry.configurations() if c.default)


class _PrimedEmbedder:
    """An embedder that hands back the query vectors the bench already embedded and timed.

    The cost target excludes the query embedding from a build; without this, every timed build
    would embed its query again. Texts it was not primed with are embedded as usual.
    """

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._primed: dict[str, Vector] = {}

    @property
    def name(self) -> str:
        """The wrapped embedder's name (stored vectors stay matched to it)."""
        return self._inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self._inner.dim

    def prime(self, text: str) -> Vector:
        """Embed ``text`` now and keep its vector for the build that follows."""
        vector: Vector = self._inner.embed([text])[0]
        self._primed[text] = vector
        return vector

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Primed vectors when every text was primed, else the wrapped embedder's."""
        if texts and all(text in self._primed for text in texts):
            return np.stack([self._primed[text] for text in texts])
        return self._inner.embed(texts)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _queries(count: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)  # noqa: S311 - reproducible queries, not security
    return [" ".join(rng.choices(_WORDS[20:], k=rng.randint(3, 7))) for _ in range(count)]


def _builds_after_writes(
    assembler: ContextAssembler,
    embedder: _PrimedEmbedder,
    task: Task,
    texts: list[str],
    budget: int,
) -> list[float]:
    """An agent stores a memory between steps: the next build must not pay to re-index."""
    store = assembler.project_store(PROJECT)
    timings = []
    for n, fresh in enumerate(generate(WRITES, namespace=f"project:{PROJECT}", seed=7)):
        store.add(attrs.evolve(fresh, id=f"written-{n}"))
        embedder.prime(texts[n])
        started = time.perf_counter()
        assembler.build_context(task, ContextRequest(budget_tokens=budget, query=texts[n]))
        timings.append(time.perf_counter() - started)
    return timings


def _load(backend: MemoryBackend, task_backend: MemoryBackend, size: int, *, bulk: bool) -> float:
    """Write ``size`` synthetic items to the project; return the seconds it took.

    Through the project store, as a user would write (token costs are filled on the way),
    with the store's write-time checks unless ``bulk``.
    """
    checks: dict[str, Any] = {"conflict_detection": None, "merge": None} if bulk else {}
    stores = MemoryStores(backend, task_backend=task_backend, max_project_items=None, **checks)
    store = ContextAssembler(stores).project_store(PROJECT)
    items = list(generate(size, namespace=f"project:{PROJECT}"))
    started = time.perf_counter()
    for offset in range(0, size, CHUNK):
        store.add_many(items[offset : offset + CHUNK])
    return time.perf_counter() - started


def run_cell(
    which: Which, size: int, queries: int, budget: int, bulk: bool = False
) -> dict[str, Any]:
    """Measure one backend configuration at one size (meant to run in its own process).

    ``which`` is a configuration or its registered name; :func:`run_cost` hands the worker
    the configuration itself, so one registered only in the parent process is measured too.
    ``bulk`` loads the store as an import would, without the write-time checks (near-duplicate
    merge, conflict detection): each is a search per item, which at 1M items makes loading
    take hours; the builds measured afterwards are the same either way, except that no
    conflict is recorded for them to mark.
    """
    configuration = configuration_of(which)
    embedder = _PrimedEmbedder(HashingEmbedder(dim=384))
    with tempfile.TemporaryDirectory() as work:
        backend = configuration.build(Path(work), embedder)
        task_backend = InMemoryBackend(embedder=embedder)
        assembler = ContextAssembler(
            MemoryStores(backend, task_backend=task_backend, max_project_items=None),
            config=AssemblerConfig(track_access=False),
        )
        # The same memory, without the wider second gathers (GatherLimits.widening_rounds).
        steady = ContextAssembler(
            MemoryStores(backend, task_backend=task_backend, max_project_items=None),
            config=AssemblerConfig(track_access=False, limits=GatherLimits(widening_rounds=0)),
        )
        ingest = _load(backend, task_backend, size, bulk=bulk)
        task = Task(id="t", project_id=PROJECT, description="fix the flaky deploy pipeline")
        steps = assembler.task_store(task)
        for n in range(20):
            steps.add_reasoning(f"step {n}: looked at the deploy logs and retry config", "work")
        project = assembler.project_store(PROJECT)
        texts = _queries(queries + 3)
        started = time.perf_counter()
        assembler.build_context(task, ContextRequest(budget_tokens=budget, query=texts[0]))
        first_build = time.perf_counter() - started
        for text in texts[1:3]:
            assembler.build_context(task, ContextRequest(budget_tokens=budget, query=text))
        builds, raws, reads, embeds, unwidened = [], [], [], [], []
        k = assembler.config.limits.per_source  # what each of a build's searches asks for
        for text in texts[3:]:
            started = time.perf_counter()
            vector = embedder.prime(text)
            embeds.append(time.perf_counter() - started)
            # BM25 keeps each term's weights until the next write: warm them for this query
            # first, so the raw reads and the builds after them all find them computed.
            project.lexical().hits(text)
            started = time.perf_counter()
            dense = project.search(vector, k=k)
            lexical = project.lexical().hits(text).best(k)
            steps.search(vector, k=k)
            steps.lexical().hits(text).best(k)
            raws.append(time.perf_counter() - started)
            # The other project reads a build issues: the BM25-only candidates, pinned items.
            found = {hit.item.id for hit in dense}
            project.get_many(i for i in lexical if i not in found)
            project.query({"status": "pinned"}, limit=50, order_by="-importance")
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            assembler.build_context(task, ContextRequest(budget_tokens=budget, query=text))
            builds.append(time.perf_counter() - started)
            started = time.perf_counter()
            steady.build_context(task, ContextRequest(budget_tokens=budget, query=text))
            unwidened.append(time.perf_counter() - started)
        after_write = _builds_after_writes(assembler, embedder, task, texts, budget)
        backend.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ms = 1000.0
    return {
        "backend": configuration.name,
        "size": size,
        "bulk": bulk,
        "ingest_items_per_s": size / ingest,
        "peak_rss_mb": peak_kib / 1024,
        "first_build_ms": first_build * ms,
        "build_after_write_p50_ms": statistics.median(after_write) * ms,
        "build_p50_ms": statistics.median(builds) * ms,
        "build_p95_ms": _percentile(builds, 0.95) * ms,
        "raw_search_p50_ms": statistics.median(raws) * ms,
        "raw_search_p95_ms": _percentile(raws, 0.95) * ms,
        "query_embed_p50_ms": statistics.median(embeds) * ms,
        "build_over_raw_p95": _percentile(builds, 0.95) / max(_percentile(raws, 0.95), 1e-9),
        "raw_reads_p95_ms": _percentile(reads, 0.95) * ms,
        "unwidened_build_p50_ms": statistics.median(unwidened) * ms,
        "unwidened_build_p95_ms": _percentile(unwidened, 0.95) * ms,
        "unwidened_over_raw_p95": _percentile(unwidened, 0.95) / max(_percentile(raws, 0.95), 1e-9),
        "build_over_reads_p95": _percentile(builds, 0.95) / max(_percentile(reads, 0.95), 1e-9),
    }


def run_cost(
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
    backends: tuple[str, ...] = ("memory",),
    *,
    queries: int = 50,
    budget: int = 2048,
    bulk: bool = False,
    progress: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every (backend, size) cell, each in a fresh process.

    ``backends`` are configuration names of the backend registry; an unknown one raises
    :class:`~agent_engine.errors.UnknownBackendError` before anything runs. ``bulk``: see
    :func:`run_cell`.
    """
    return in_fresh_processes(run_cell, backends, sizes, queries, budget, bulk, progress=progress)
