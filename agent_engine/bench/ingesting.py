"""How fast the ingestion queue stores memories, against the embedder's own batch speed.

Embedding is what a memory costs to store; the queue's claim, the decision, the checks, the
write and the acknowledgement should add little to it. Measured side by side in one run, on
the same texts (LoCoMo turns, each conversation a project), with the same embedder:

- **raw**: the embedder alone, ``embed()`` on batches of ``batch`` texts; run before and after
  the queue, and the faster of the two runs is the baseline (the ratio is not flattered by a
  cold start);
- **queue**: every text enqueued (timed apart), then an
  :class:`~agent_engine.ingest.worker.IngestWorker` drains the queue into a new SQLite store
  in batches of ``batch``, without a decider, so it embeds exactly the raw run's texts; the
  target is a drain at 90% of the raw throughput or more;
- **add**: the first ``adds`` texts added one ``add`` at a time to another new store: the
  per-item cost an application pays without the queue.

Each path gets an embedder of its own, so none is served from another's cache.

Run it with ``agent-engine bench ingest`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agent_engine.bench.locomo import Conversation
from agent_engine.embeddings import Embedder
from agent_engine.ingest import IngestQueue, IngestWorker
from agent_engine.memory.sql import SQLAlchemyBackend
from agent_engine.tiers.stores import MemoryStores

__all__ = ["IngestBenchConfig", "run_ingest", "table"]


@attrs.frozen
class IngestBenchConfig:
    """Turns to store, the batch size, and how many single adds to time."""

    texts: int = 2000
    batch: int = 64
    adds: int = 200


def _events(conversations: Sequence[Conversation], limit: int) -> list[dict[str, Any]]:
    events = [
        {
            "text": item.text,
            "kind": "turn",
            "source": item.source,
            "session": item.session,
            "project": f"locomo-{conversation.index}",
            "idempotency_key": item.id,
        }
        for conversation in conversations
        for item in conversation.items
    ]
    return events[:limit]


def _raw(embedder: Embedder, texts: list[str], batch: int) -> float:
    started = time.perf_counter()
    for at in range(0, len(texts), batch):
        embedder.embed(texts[at : at + batch])
    return time.perf_counter() - started


def run_ingest(
    conversations: Sequence[Conversation],
    make_embedder: Callable[[], Embedder],
    config: IngestBenchConfig = IngestBenchConfig(),
) -> dict[str, Any]:
    """Seconds and throughput of the raw embedder, the queue and single adds (see above)."""
    events = _events(conversations, config.texts)
    texts = [str(event["text"]) for event in events]
    first = _warm(make_embedder)
    raw_first = _raw(first, texts, config.batch)
    with tempfile.TemporaryDirectory(prefix="ae-bench-ingest-") as work:
        queued = _queue(Path(work) / "queue.db", events, _warm(make_embedder), config.batch)
        adds = _adds(Path(work) / "adds.db", events[: config.adds], _warm(make_embedder))
    raw_second = _raw(_warm(make_embedder), texts, config.batch)
    raw = min(raw_first, raw_second)
    total = queued["enqueue_s"] + queued["drain_s"]
    return {
        "texts": len(texts),
        "batch": config.batch,
        "embedder": first.name,
        "raw_s": [raw_first, raw_second],
        "raw_per_s": len(texts) / raw if raw else 0.0,
        **queued,
        "drain_ratio": raw / queued["drain_s"] if queued["drain_s"] else 0.0,
        "end_to_end_ratio": raw / total if total else 0.0,
        **adds,
    }


def _warm(make_embedder: Callable[[], Embedder]) -> Embedder:
    """A new embedder (an empty cache), its model loaded and run once, off the clock."""
    embedder = make_embedder()
    embedder.embed(["a warm-up text, not one of the measured ones"])
    return embedder


def _queue(
    path: Path, events: list[dict[str, Any]], embedder: Embedder, batch: int
) -> dict[str, Any]:
    backend = SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder)
    try:
        queue = IngestQueue.of(backend)
        started = time.perf_counter()
        for at in range(0, len(events), 500):
            queue.enqueue_many(events[at : at + 500])
        enqueue_s = time.perf_counter() - started
        worker = IngestWorker(queue, MemoryStores(backend), decider=None, batch_size=batch)
        started = time.perf_counter()
        report = worker.run(until_idle=True)
        drain_s = time.perf_counter() - started
    finally:
        backend.close()
    return {
        "enqueue_s": enqueue_s,
        "drain_s": drain_s,
        "queue_per_s": report.stored / drain_s if drain_s else 0.0,
        "stored": report.stored,
    }


def _adds(path: Path, events: list[dict[str, Any]], embedder: Embedder) -> dict[str, Any]:
    backend = SQLAlchemyBackend(f"sqlite:///{path}", embedder=embedder)
    try:
        stores = MemoryStores(backend)
        times = []
        for event in events:
            store = stores.project_store(str(event["project"]))
            item = store.new_item(
                "turn", str(event["text"]), source=str(event["source"]), session=event["session"]
            )
            started = time.perf_counter()
            store.add(item)
            times.append(time.perf_counter() - started)
    finally:
        backend.close()
    if not times:
        return {"adds": 0, "add_ms_mean": 0.0, "add_ms_p50": 0.0, "add_per_s": 0.0}
    return {
        "adds": len(times),
        "add_ms_mean": 1000 * statistics.fmean(times),
        "add_ms_p50": 1000 * statistics.median(times),
        "add_per_s": len(times) / sum(times),
    }


def table(results: dict[str, Any]) -> list[str]:
    """A Markdown table of :func:`run_ingest`'s results."""
    raw = results["raw_per_s"]
    both = results["enqueue_s"] + results["drain_s"]
    seconds = " and ".join(f"{s:.2f}" for s in results["raw_s"])
    rows = [
        (
            f"raw embedder (batch {results['batch']})",
            raw,
            1.0,
            f"{seconds} (the faster is the baseline)",
        ),
        (
            "queue: worker drain",
            results["queue_per_s"],
            results["drain_ratio"],
            f"{results['drain_s']:.2f}",
        ),
        (
            "queue: enqueue + drain",
            results["stored"] / both if both else 0.0,
            results["end_to_end_ratio"],
            f"enqueue {results['enqueue_s']:.2f}",
        ),
        (
            f"one `add` per item ({results['adds']} items)",
            results["add_per_s"],
            results["add_per_s"] / raw if raw else 0.0,
            f"{results['add_ms_mean']:.1f} ms mean, {results['add_ms_p50']:.1f} ms median per item",
        ),
    ]
    title = (
        f"{results['texts']} LoCoMo turns, batches of {results['batch']}, "
        f"embedder {results['embedder']}; texts per second:"
    )
    return [
        title,
        "",
        "| path | texts/s | vs raw | seconds |",
        "|---|---:|---:|---|",
        *(f"| {path} | {rate:.1f} | {ratio:.2f} | {note} |" for path, rate, ratio, note in rows),
        "",
    ]
