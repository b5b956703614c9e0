"""Many executors, one store: builds and writes by several processes sharing a project's memory.

An executor builds a context once per step and an agent stores a memory between steps. When
several executors (processes) work on one project they share its store, and two things must
hold besides speed: **nothing is lost** (every write a process was told succeeded is in the
store afterwards) and **every process sees the others' writes** (a write committed before a
build starts is among that build's candidates).

Set-up: a store (a PostgreSQL server with pgvector started in a temporary folder, a SQLite
file, or a URL given) is loaded with ``items`` synthetic memories of one project
(:mod:`agent_engine.bench.synthetic`, 384-dimension hashing vectors, as the cost benchmark
uses). Then, for each process count, that many worker processes (``spawn``) open the store
each with its own connection, warm up (two builds; the first loads the full-text index and
is reported as ``first_build_ms``), wait for one another and loop for ``duration`` seconds
(or ``steps`` steps): build a context for a query
(:meth:`~agent_engine.assembler.assembler.ContextAssembler.build_context`, default settings,
the task's own memory in the process), then add one memory to the project
(:meth:`~agent_engine.tiers.base.TierStore.add_outcomes`, the store's defaults: the
near-duplicate check and conflict detection on).

The visibility check: every written memory carries a term no other memory has (its marker).
Once its add returns, the writer publishes its sequence number in shared memory; before each
build a worker reads the latest number every other worker published and puts those markers
in its query, and after the build it looks for each of those items among the build's
candidates (selected or omitted): one not there is a miss. The loss check: after each round
the project holds exactly what it held before plus every write the workers reported stored
(a write merged into a held near-duplicate is reported as merged, not stored), and each of
those ids reads back. Either check failing fails the run
(:func:`check` raises :class:`~agent_engine.errors.BackendError`), after the report is written.

The rounds run one after the other on the same project, so a later round's store also holds
the earlier rounds' writes (a few percent of ``items``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import attrs

from agent_engine.assembler.assembler import ContextAssembler
from agent_engine.bench.synthetic import _WORDS, generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.errors import BackendError, ValidationError
from agent_engine.memory import registry
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextRequest, Task
from agent_engine.tiers.project import ProjectMemoryStore
from agent_engine.tiers.stores import MemoryStores

__all__ = ["STORES", "ProcessesConfig", "check", "run_processes", "table"]

STORES = ("pgvector", "pgvector-fulltext", "sqlite")
"""Stores the bench makes itself: a pgvector server in a temporary folder (text searched by
in-process BM25 indexes, or by PostgreSQL's full text: ``?fulltext=on``), a SQLite file."""
DIM = 384
CHUNK = 5000
WARM_UP = 2
SET_UP_S = 900
"""How long workers may take to open the store and warm up before the round is given up."""
_NO_WRITE = -1


@attrs.frozen
class ProcessesConfig:
    """The store, its size, the process counts and how long each round runs.

    ``url`` names a store to use instead of making one (``store`` is then ignored); the bench
    writes to a project of its own there and deletes it afterwards. ``steps``, when given,
    is the number of steps each worker makes, instead of running for ``duration`` seconds.
    """

    store: str = "pgvector"
    url: str | None = None
    items: int = 10_000
    processes: tuple[int, ...] = (1, 2, 4)
    duration: float = 20.0
    steps: int | None = None
    budget: int = 2048

    def __attrs_post_init__(self) -> None:
        if self.url is None and self.store not in STORES:
            raise ValidationError(
                f"store must be one of {', '.join(STORES)} (or give a URL), got {self.store!r}",
                field="store",
                value=self.store,
            )
        counts = (self.items, self.budget, *self.processes)
        if not self.processes or any(isinstance(n, bool) or n < 1 for n in counts):
            raise ValidationError(
                "items, budget and process counts must be positive, got "
                f"{self.items!r}, {self.budget!r}, {self.processes!r}",
                field="processes",
                value=self.processes,
            )
        if self.steps is not None and self.steps < 1:
            raise ValidationError(
                f"steps must be positive, got {self.steps!r}", field="steps", value=self.steps
            )
        if self.duration <= 0:
            raise ValidationError(
                f"duration must be positive, got {self.duration!r}",
                field="duration",
                value=self.duration,
            )

    @property
    def label(self) -> str:
        """The store as the report names it."""
        return "url" if self.url is not None else self.store


@attrs.frozen
class _Round:
    """What every worker of one round is told: where, who, how long, and how it is named."""

    url: str
    project: str
    workers: int
    number: int
    """The round's place in the run: its markers, ids, queries and texts are its own."""
    duration: float
    steps: int | None
    budget: int


def _marker(number: int, worker: int, sequence: int) -> str:
    """The term only the worker's ``sequence``-th memory of round ``number`` holds."""
    return f"markr{number}w{worker}n{sequence}"


def _local_id(number: int, worker: int, sequence: int) -> str:
    return f"exec-r{number}-{worker}-{sequence}"


def _open(url: str) -> MemoryBackend:
    """The store at ``url``, created if new, embedding with the bench's hashing embedder."""
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    options = registry.OpenOptions(embedder=HashingEmbedder(dim=DIM), create=True)
    backend = registry.backend_for_scheme(scheme).open(url, options)
    if backend is None:  # create=True: an opener always opens
        raise BackendError(f"{url} did not open", backend=scheme)
    return backend


def _queries(seed: int) -> Iterator[str]:
    rng = random.Random(seed)  # noqa: S311 - reproducible queries, not security
    while True:
        yield " ".join(rng.choices(_WORDS[20:], k=rng.randint(3, 7)))


def _worker(
    spec: _Round,
    me: int,
    ready: Any,
    committed: Any,
    results: Any,
) -> None:
    """One executor: build, check what it saw, write; report its timings and what it wrote.

    ``ready`` is the barrier every worker and the parent wait at before the timed loop;
    ``committed`` the shared array of each worker's last stored sequence number; ``results``
    the queue the worker's figures go to (an error is sent as its text).
    """
    try:
        results.put(_work(spec, me, ready, committed))
    except Exception as error:  # noqa: BLE001 - the parent reports it and fails the round
        ready.abort()
        results.put({"worker": me, "error": f"{type(error).__name__}: {error}"})


def _work(spec: _Round, me: int, ready: Any, committed: Any) -> dict[str, Any]:
    backend = _open(spec.url)
    assembler = ContextAssembler(
        MemoryStores(
            backend,
            task_backend=InMemoryBackend(embedder=HashingEmbedder(dim=DIM)),
            max_project_items=None,
        )
    )
    project = assembler.project_store(spec.project)
    task = Task(id=f"executor-{me}", project_id=spec.project, description="ship the release")
    steps = assembler.task_store(task)
    for n in range(5):
        steps.add_reasoning(f"step {n}: read the deploy logs and the retry config", "work")
    queries = _queries(seed=1000 * spec.number + me)
    # Texts of their own in every round: the same text twice would merge as a near-duplicate.
    texts = (item.text for item in generate(10**9, seed=1000 * spec.number + 500 + me))
    warm_up = []
    for _ in range(WARM_UP):
        began = time.perf_counter()
        assembler.build_context(
            task, ContextRequest(budget_tokens=spec.budget, query=next(queries))
        )
        warm_up.append(time.perf_counter() - began)
    builds: list[float] = []
    writes: list[float] = []
    stored: list[str] = []
    merged = misses = checks = 0
    ready.wait()
    started = time.perf_counter()
    sequence = 0
    while (
        sequence < spec.steps
        if spec.steps is not None
        else time.perf_counter() - started < spec.duration
    ):
        others = [
            (other, last)
            for other in range(spec.workers)
            if other != me and (last := committed[other]) != _NO_WRITE
        ]
        query = " ".join([next(queries), *(_marker(spec.number, o, n) for o, n in others)])
        began = time.perf_counter()
        package = assembler.build_context(
            task, ContextRequest(budget_tokens=spec.budget, query=query)
        )
        builds.append(time.perf_counter() - began)
        seen = {s.item.id for s in package.selections} | {o.item_id for o in package.omissions}
        checks += len(others)
        misses += sum(
            project.scoped_id(_local_id(spec.number, o, n)) not in seen for o, n in others
        )
        item = project.new_item(
            "note",
            f"{next(texts)} {_marker(spec.number, me, sequence)}",
            id=_local_id(spec.number, me, sequence),
            source=f"executor-{me}",
        )
        began = time.perf_counter()
        (outcome,) = project.add_outcomes([item])
        writes.append(time.perf_counter() - began)
        if outcome.merged:
            merged += 1
        else:
            stored.append(outcome.item.id)
            committed[me] = sequence  # only once the add has returned: it is committed
        sequence += 1
    elapsed = time.perf_counter() - started
    backend.close()
    return {
        "worker": me,
        "elapsed_s": elapsed,
        "first_build": warm_up[0],
        "builds": builds,
        "writes": writes,
        "stored": stored,
        "merged": merged,
        "checks": checks,
        "misses": misses,
    }


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _run_round(spec: _Round, project: ProjectMemoryStore) -> dict[str, Any]:
    """Start ``spec.workers`` processes on the store, wait for them, check and sum up."""
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(spec.workers + 1)
    committed = context.Array("q", [_NO_WRITE] * spec.workers)
    results = context.Queue()
    before = project.count()
    workers = [
        context.Process(target=_worker, args=(spec, me, ready, committed, results))
        for me in range(spec.workers)
    ]
    for process in workers:
        process.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a worker failed: its error follows
        ready.wait(timeout=SET_UP_S)
    reports = _collect(results, workers)
    # The worker that failed first, not the others it left waiting at a broken barrier.
    errors = sorted(
        (r["error"] for r in reports if "error" in r),
        key=lambda error: error.startswith("BrokenBarrierError"),
    )
    if errors:
        raise BackendError(f"a worker failed: {errors[0]}")
    after = project.count()
    stored = [item_id for r in reports for item_id in r["stored"]]
    found = {item.id for item in project.get_many(stored)}
    builds = [t for r in reports for t in r["builds"]]
    writes = [t for r in reports for t in r["writes"]]
    wall = max(r["elapsed_s"] for r in reports)
    ms = 1000.0
    return {
        "processes": spec.workers,
        "items_before": before,
        "items_after": after,
        "steps": len(builds),
        "wall_s": wall,
        "builds_per_s": len(builds) / wall,
        "writes_per_s": len(writes) / wall,
        "builds_per_s_per_process": len(builds) / wall / spec.workers,
        "writes_per_s_per_process": len(writes) / wall / spec.workers,
        "build_p50_ms": statistics.median(builds) * ms,
        "build_p95_ms": _percentile(builds, 0.95) * ms,
        "write_p50_ms": statistics.median(writes) * ms,
        "write_p95_ms": _percentile(writes, 0.95) * ms,
        "first_build_ms": statistics.median(r["first_build"] for r in reports) * ms,
        "stored": len(stored),
        "merged": sum(r["merged"] for r in reports),
        "lost": len(set(stored) - found),
        "unaccounted": after - before - len(stored),
        "visibility_checks": sum(r["checks"] for r in reports),
        "misses": sum(r["misses"] for r in reports),
    }


def _collect(results: Any, workers: Sequence[Any]) -> list[dict[str, Any]]:
    """Every worker's report; a worker that died without one is an error, not a hang."""
    reports: list[dict[str, Any]] = []
    while len(reports) < len(workers):
        try:
            reports.append(results.get(timeout=5))
        except queue.Empty:
            if not any(process.is_alive() for process in workers) and results.empty():
                reports.append({"worker": None, "error": "a worker exited without a report"})
    for process in workers:
        process.join()
    return reports


@contextmanager
def _store(config: ProcessesConfig) -> Iterator[str]:
    """The URL to run on: the one given, or a store made for the run and removed after it."""
    if config.url is not None:
        yield config.url
    elif config.store.startswith("pgvector"):
        from agent_engine.memory.sql._pgserver import pgvector_server_process  # noqa: PLC0415

        with pgvector_server_process() as url:
            joint = "&" if "?" in url else "?"
            yield url if config.store == "pgvector" else f"{url}{joint}fulltext=on"
    else:
        with tempfile.TemporaryDirectory() as work:
            yield f"sqlite:///{work}/processes.db"


def run_processes(
    config: ProcessesConfig = ProcessesConfig(),
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Load the store, run a round per process count; the figures and the checks' outcome.

    The figures are returned even when a check failed (``failures`` says which); the caller
    decides what a failure does (:func:`check` raises).
    """
    with ExitStack() as stack:
        url = stack.enter_context(_store(config))
        project_id = f"processes-{uuid.uuid4().hex[:8]}"
        backend = stack.enter_context(_closing(_open(url)))
        project = ProjectMemoryStore(
            project_id, backend, max_items=None, conflict_detection=None, merge=None
        )
        if config.url is not None:
            stack.callback(project.clear)
        items = generate(config.items, namespace=f"project:{project_id}")
        started = time.perf_counter()
        batch = []
        for item in items:
            batch.append(item)
            if len(batch) == CHUNK:
                project.add_many(batch)
                batch = []
        project.add_many(batch)
        load = time.perf_counter() - started
        rounds = []
        for number, workers in enumerate(config.processes):
            spec = _Round(
                url=url,
                project=project_id,
                workers=workers,
                number=number,
                duration=config.duration,
                steps=config.steps,
                budget=config.budget,
            )
            rounds.append(_run_round(spec, project))
            if progress is not None:
                progress(1)
    failures = [
        f"{r['processes']} processes: {r['lost']} writes lost, "
        f"{r['unaccounted']} items unaccounted for, {r['misses']} misses"
        for r in rounds
        if r["lost"] or r["unaccounted"] or r["misses"]
    ]
    return {
        "store": config.label,
        "backend": type(backend).__name__,
        "items": config.items,
        "load_items_per_s": config.items / load,
        "cpus": os.cpu_count(),
        "duration_s": config.duration if config.steps is None else None,
        "steps_per_worker": config.steps,
        "rounds": rounds,
        "failures": failures,
    }


@contextmanager
def _closing(backend: MemoryBackend) -> Iterator[MemoryBackend]:
    try:
        yield backend
    finally:
        backend.close()


def check(results: dict[str, Any]) -> None:
    """Raise :class:`~agent_engine.errors.BackendError` when a round failed a check.

    A lost write, an item the workers did not report, or a build that missed a write
    another process had committed before it started: the store broke what it promises.
    """
    if results["failures"]:
        raise BackendError(
            f"many executors on one {results['store']} store: " + "; ".join(results["failures"])
        )


def table(results: dict[str, Any]) -> list[str]:
    """The rounds as a Markdown table, with the checks' outcome under it."""
    length = (
        f"{results['duration_s']:g} s"
        if results["steps_per_worker"] is None
        else f"{results['steps_per_worker']} steps per process"
    )
    lines = [
        (
            f"{results['items']:,} memories loaded ({results['load_items_per_s']:,.0f} per "
            f"second), then rounds of {length} on {results['cpus']} CPUs."
        ),
        "",
        (
            "| store | items | processes | steps | builds/s | writes/s | builds/s per process | "
            "build p50 / p95 ms | first build ms | write p50 / p95 ms | lost / unaccounted | "
            "misses / checks |"
        ),
        "|---" * 12 + "|",
    ]
    lines.extend(
        f"| {results['store']} | {results['items']:,} | {r['processes']} | {r['steps']} | "
        f"{r['builds_per_s']:.1f} | {r['writes_per_s']:.1f} | "
        f"{r['builds_per_s_per_process']:.1f} | "
        f"{r['build_p50_ms']:.1f} / {r['build_p95_ms']:.1f} | {r['first_build_ms']:.0f} | "
        f"{r['write_p50_ms']:.1f} / {r['write_p95_ms']:.1f} | "
        f"{r['lost']} / {r['unaccounted']} | {r['misses']} / {r['visibility_checks']} |"
        for r in results["rounds"]
    )
    verdict = (
        "Every write is in the store and every build saw the others' committed writes."
        if not results["failures"]
        else "FAILED: " + "; ".join(results["failures"])
    )
    return [*lines, "", verdict, ""]
