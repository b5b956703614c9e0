"""The embedded default from a fresh process: opening, the first build, a one-shot CLI search.

    HF_HUB_OFFLINE=1 PYTHONPATH=. python benchmarks/embedded_default.py --sizes 10000 100000

What a user of the default store pays before the first answer, per size, in one run:

- a store of synthetic items (:mod:`agent_engine.bench.synthetic`, the hashing embedder the
  command uses) is written through a project store and closed, which saves its index files;
- **first build, new process**: a new process (``spawn``) opens the store and builds one
  context (default settings, 2,048 tokens), timed from the open; against it, the same in a
  new process with the index files deleted first (what every process paid before the files:
  the BM25 index analysed from every item, vectors read from the database);
- **one-shot CLI**: ``agent-engine --db sqlite:///... --embedder hashing memory search QUERY``
  end to end, wall clock, against ``agent-engine --version`` (the interpreter and imports:
  the floor any command pays).

Each figure is the median of ``--repeats`` runs (the first build also its maximum).
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.bench.synthetic import generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.models import ContextRequest, Task
from agent_engine.tiers.stores import MemoryStores

PROJECT = "bench"
QUERY = "retry the flaky deploy pipeline after the cache timeout"


def _stores(url: str) -> tuple[SQLAlchemyBackend, ContextAssembler]:
    embedder = HashingEmbedder()
    backend = SQLAlchemyBackend(url, embedder=embedder)
    stores = MemoryStores(
        backend, task_backend=InMemoryBackend(embedder=embedder), max_project_items=None
    )
    return backend, ContextAssembler(stores, config=AssemblerConfig(track_access=False))


def _fill(url: str, size: int) -> float:
    backend, assembler = _stores(url)
    started = time.perf_counter()
    items = list(generate(size, namespace=f"project:{PROJECT}"))
    store = assembler.project_store(PROJECT)
    for offset in range(0, size, 5000):
        store.add_many(items[offset : offset + 5000])
    task = Task(id="t", project_id=PROJECT, description="fix the flaky deploy pipeline")
    assembler.build_context(task, ContextRequest(budget_tokens=2048, query=QUERY))
    backend.close()
    return time.perf_counter() - started


def _first_build(url: str) -> float:
    """Open the store and build one context (run in a new process)."""
    started = time.perf_counter()
    backend, assembler = _stores(url)
    task = Task(id="t", project_id=PROJECT, description="fix the flaky deploy pipeline")
    assembler.build_context(task, ContextRequest(budget_tokens=2048, query=QUERY))
    elapsed = time.perf_counter() - started
    backend.engine.dispose()  # no save: every run starts from the same files
    return elapsed


def _in_new_process(url: str) -> float:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(_first_build, (url,)))


def _wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)  # noqa: S603 - our own command
    return time.perf_counter() - started


def measure(size: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "memory.db"
        url = f"sqlite:///{path}"
        fill = _fill(url, size)
        files = Path(f"{path}.indexes")
        kept = Path(work) / "kept"
        shutil.copytree(files, kept)
        warm = [_in_new_process(url) for _ in range(repeats)]
        cold = []
        for _ in range(repeats):
            shutil.rmtree(files)
            cold.append(_in_new_process(url))
        shutil.rmtree(files, ignore_errors=True)
        shutil.copytree(kept, files)
        cli = [sys.executable, "-m", "agent_engine.cli", "--db", url, "--embedder", "hashing"]
        search = [*cli, "memory", "search", QUERY, "-p", PROJECT, "-t", "project"]
        floor = [sys.executable, "-m", "agent_engine.cli", "--version"]
        searches = [_wall(search) for _ in range(repeats)]
        floors = [_wall(floor) for _ in range(repeats)]
    return {
        "size": size,
        "fill_s": fill,
        "first_build_ms": statistics.median(warm) * 1000,
        "first_build_max_ms": max(warm) * 1000,
        "first_build_without_files_ms": statistics.median(cold) * 1000,
        "cli_search_ms": statistics.median(searches) * 1000,
        "cli_version_ms": statistics.median(floors) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    print(
        "| items | first build, new process ms (max) | same without index files ms "
        "| CLI memory search ms | CLI --version ms |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size in options.sizes:
        row = measure(size, options.repeats)
        print(
            f"| {size:,} | {row['first_build_ms']:,.0f} ({row['first_build_max_ms']:,.0f}) "
            f"| {row['first_build_without_files_ms']:,.0f} | {row['cli_search_ms']:,.0f} "
            f"| {row['cli_version_ms']:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
