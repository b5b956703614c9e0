"""The event loop under concurrent builds: how long the loop stalls, sync API against twin.

An asyncio executor that calls the synchronous assembler inside a coroutine blocks its loop
for each whole build; the async twin (:mod:`agent_engine.aio`) runs builds on worker threads
and the loop only awaits. The part runs ``concurrency`` coroutines that each build
``builds`` contexts (tasks of their own over shared projects, on the embedded SQLite default),
while a heartbeat coroutine asks to wake every millisecond and records how late it wakes: a
late wake-up is a stall every other coroutine of the loop suffers too. Reported per mode:
builds per second, the heartbeat's lateness (p50, p99, max) and the longest garbage
collection meanwhile (every thread waits for one). A last row runs the twin
with the most workers again after ``gc.freeze()``: the longest stalls were full garbage
collections of the whole heap (tens of milliseconds once a model and a store are loaded),
which an application avoids by freezing its heap once it has started (``docs/async.md``).

With ``reads_on`` (backend configurations), it also measures the backend twin's reads (a
namespace's newest items, a few items by id, a count) the same way, on worker threads and
on the driver's asyncio API where the backend has one (PostgreSQL, Redis).

Run it with ``agent-engine bench loop`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

from agent_engine.aio.assembler import AsyncContextAssembler
from agent_engine.aio.backend import AsyncMemoryBackend
from agent_engine.assembler.assembler import ContextAssembler
from agent_engine.assembler.package import ContextPackage
from agent_engine.embeddings import Embedder
from agent_engine.memory import registry
from agent_engine.memory.backend import BaseBackend, MemoryBackend
from agent_engine.memory.sql.backend import SQLAlchemyBackend
from agent_engine.models import ContextRequest, Task

__all__ = ["FROZEN", "SYNC", "LoopBenchConfig", "run_loop", "run_reads", "table"]

SYNC = "sync in the loop"
"""The baseline: the sync API called inside the coroutines."""
FROZEN = "heap frozen"
"""What the row measured after ``gc.freeze()`` is called."""

TOPICS = ("deploy", "billing", "search", "auth", "export", "login", "cache", "queue")


@attrs.frozen
class LoopBenchConfig:
    """The store's size, the coroutines building at once, and builds per coroutine."""

    items: int = 2_000
    concurrency: int = 8
    builds: int = 20
    workers: tuple[int, ...] = (1, 2, 4)
    """The twin's pool sizes measured, a row each."""
    budget: int = 1_024
    tick: float = 0.001
    """Seconds the heartbeat asks to sleep between wake-ups."""
    reads_on: tuple[str, ...] = ()
    """Backend configurations to measure the backend twin's reads on (none by default)."""


def run_loop(embedder: Embedder, config: LoopBenchConfig = LoopBenchConfig()) -> dict[str, Any]:
    """Both modes on one SQLite file (see the module)."""
    with tempfile.TemporaryDirectory() as folder:
        backend = SQLAlchemyBackend(f"sqlite:///{Path(folder) / 'loop.db'}", embedder=embedder)
        try:
            assembler = ContextAssembler(backend)
            tasks = _load(assembler, config)
            results = {SYNC: asyncio.run(_round(None, assembler, tasks, config))}
            for workers in config.workers:
                results[_twin(workers)] = asyncio.run(_round(workers, assembler, tasks, config))
            if config.workers:
                most = max(config.workers)
                gc.collect()
                gc.freeze()  # what the application does once started: old objects leave the GC
                try:
                    results[f"{_twin(most)}, {FROZEN}"] = asyncio.run(
                        _round(most, assembler, tasks, config)
                    )
                finally:
                    gc.unfreeze()
        finally:
            backend.close()
    reads: dict[str, Any] = {}
    for name in config.reads_on:
        reads.update(run_reads(name, embedder, config))
    return {"config": attrs.asdict(config), "modes": results, "reads": reads}


def _twin(workers: int) -> str:
    return f"async twin, {workers} worker{'s' if workers > 1 else ''}"


def _load(assembler: ContextAssembler, config: LoopBenchConfig) -> list[Task]:
    """Projects of decisions, and one task per coroutine with a few steps of its own."""
    per_project = max(config.items // len(TOPICS), 1)
    for topic in TOPICS:
        project = assembler.project_store(topic)
        project.add_many(
            project.new_item("decision", f"{topic} decision {n}: keep the {topic} retries at {n}")
            for n in range(per_project)
        )
    tasks = []
    for n in range(config.concurrency):
        topic = TOPICS[n % len(TOPICS)]
        task = Task(id=f"loop-{n}", project_id=topic, description=f"fix the {topic} retries")
        memory = assembler.task_store(task)
        for step in range(8):
            memory.add_reasoning(f"{topic} step {step}: looked at the retries", "work")
        tasks.append(task)
    return tasks


async def _round(
    workers: int | None, assembler: ContextAssembler, tasks: list[Task], config: LoopBenchConfig
) -> dict[str, float]:
    """One mode's builds (``workers``: the twin's; ``None``: the sync API), heartbeat beside."""
    twin = AsyncContextAssembler(assembler, workers=workers or 1)
    build: Callable[[Task, ContextRequest], Awaitable[ContextPackage]]
    if workers is not None:
        build = twin.build_context
    else:

        async def build(task: Task, request: ContextRequest) -> ContextPackage:
            return assembler.build_context(task, request)  # blocks the loop: what is measured

    async def builder(n: int) -> None:
        task = tasks[n]
        for step in range(config.builds):
            request = ContextRequest(
                budget_tokens=config.budget, query=f"{task.project_id} retries {step}"
            )
            await build(task, request)

    try:
        timed = await _beside_heartbeat(builder, len(tasks), config)
    finally:
        await twin.aclose()
    return {
        "builds_per_s": len(tasks) * config.builds / timed.pop("elapsed_s"),
        **timed,
    }


def run_reads(name: str, embedder: Embedder, config: LoopBenchConfig) -> dict[str, Any]:
    """The backend twin's reads on configuration ``name``: threads, then asyncio if it has it."""
    with tempfile.TemporaryDirectory() as folder:
        backend = registry.configuration(name).build(Path(folder), embedder)
        try:
            _load(ContextAssembler(backend), config)
            items = backend.list_all()
            namespaces = sorted({item.namespace for item in items})
            ids = [item.id for item in items]
            rows = {}
            for native in (False, True):
                if native and not asyncio.run(_has_async_reads(backend)):
                    break
                mode = f"{name}, {'asyncio driver' if native else 'threads'}"
                rows[mode] = asyncio.run(_reads(backend, namespaces, ids, config, native=native))
        finally:
            backend.close()
    return rows


async def _has_async_reads(backend: MemoryBackend) -> bool:
    reads = backend.async_reads() if isinstance(backend, BaseBackend) else None
    if reads is None:
        return False
    await reads.aclose()
    return True


async def _reads(
    backend: MemoryBackend,
    namespaces: list[str],
    ids: list[str],
    config: LoopBenchConfig,
    *,
    native: bool,
) -> dict[str, float]:
    """``concurrency`` coroutines each reading ``builds`` times, heartbeat beside."""
    twin = AsyncMemoryBackend(backend, workers=4, native=native)

    async def reader(n: int) -> None:
        for step in range(config.builds):
            namespace = namespaces[(n + step) % len(namespaces)]
            start = (n * config.builds + step) * 7 % max(len(ids) - 20, 1)
            await twin.query({"namespace": namespace}, limit=50)
            await twin.get_many(ids[start : start + 20])
            await twin.count({"namespace": namespace})

    try:
        timed = await _beside_heartbeat(reader, config.concurrency, config)
    finally:
        await twin.offload.aclose()  # the backend stays open; asyncio.run closes the rest
    return {"reads_per_s": config.concurrency * config.builds * 3 / timed.pop("elapsed_s"), **timed}


async def _beside_heartbeat(
    work: Callable[[int], Awaitable[None]], coroutines: int, config: LoopBenchConfig
) -> dict[str, float]:
    """``work(0..coroutines-1)`` gathered while a heartbeat records how late it wakes."""
    lateness: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(config.tick)
            lateness.append(time.perf_counter() - start - config.tick)

    pauses: list[float] = []
    began: list[float] = []

    def collecting(phase: str, _info: dict[str, Any]) -> None:
        # The interpreter stops every thread while it collects: a pause the loop shares.
        if phase == "start":
            began.append(time.perf_counter())
        elif began:
            pauses.append(time.perf_counter() - began.pop())

    beat = asyncio.ensure_future(heartbeat())
    await asyncio.sleep(config.tick * 5)  # the heartbeat is running before the first call
    gc.callbacks.append(collecting)
    start = time.perf_counter()
    try:
        await asyncio.gather(*(work(n) for n in range(coroutines)))
    finally:
        elapsed = time.perf_counter() - start
        gc.callbacks.remove(collecting)
        done.set()
        await beat
    stalls = sorted(lateness)
    return {
        "elapsed_s": elapsed,
        "stall_p50_ms": statistics.median(stalls) * 1000,
        "stall_p99_ms": stalls[min(len(stalls) - 1, int(len(stalls) * 0.99))] * 1000,
        "stall_max_ms": stalls[-1] * 1000,
        "wakeups": len(stalls),
        "gc_max_ms": max(pauses, default=0.0) * 1000,
    }


def table(results: dict[str, Any]) -> list[str]:
    """One row per mode."""
    config = results["config"]
    lines = [
        (
            f"{config['concurrency']} coroutines x {config['builds']} builds of "
            f"{config['budget']} tokens, {config['items']:,} items on a SQLite file; "
            "the heartbeat's lateness per "
            f"{config['tick'] * 1000:g} ms sleep:"
        ),
        "",
        "| mode | builds/s | stall p50 ms | stall p99 ms | stall max ms | longest GC ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {mode} | {r['builds_per_s']:.1f} | {r['stall_p50_ms']:.2f} | "
        f"{r['stall_p99_ms']:.2f} | {r['stall_max_ms']:.2f} | {r['gc_max_ms']:.1f} |"
        for mode, r in results["modes"].items()
    ]
    reads = results.get("reads") or {}
    if reads:
        lines += [
            "",
            (
                f"The backend twin's reads ({config['concurrency']} coroutines x "
                f"{config['builds']} rounds of a query, a get_many and a count):"
            ),
            "",
            (
                "| backend, reads on | reads/s | stall p50 ms | stall p99 ms | stall max ms | "
                "longest GC ms |"
            ),
            "|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {mode} | {r['reads_per_s']:.0f} | {r['stall_p50_ms']:.2f} | "
            f"{r['stall_p99_ms']:.2f} | {r['stall_max_ms']:.2f} | {r['gc_max_ms']:.1f} |"
            for mode, r in reads.items()
        ]
    return [*lines, ""]
