"""Search cost: exact and approximate vector search at 10k-1M items, against the raw floor.

Run from the repository root (about 3 minutes for 10k and 100k on 2 cores; 1M adds the HNSW
build, about 10-20 minutes)::

    HF_HUB_OFFLINE=1 python benchmarks/search_cost.py --sizes 10000 100000 1000000

What it measures, all in one run so ratios compare like with like:

* **Vectors**: all-MiniLM-L6-v2 embeddings of every LoCoMo turn (``locomo10.json``, about
  5.9k texts). Larger stores repeat them with Gaussian noise (``--noise`` per dimension,
  then re-normalized), keeping the neighbourhood structure of real text; random unit
  vectors have none and make HNSW look far worse than it is. Queries are the embeddings of
  LoCoMo questions, so they are real text too.
* **Raw floors** for one query, k = 10: numpy ``X @ q`` + ``argpartition`` (the memory-
  bandwidth floor), FAISS ``IndexFlatIP.search``, and FAISS ``IndexHNSWFlat`` (inner
  product) with its recall@10 against exact search.
* **Our backends** (up to ``--backend-max`` items): ``InMemoryBackend.search`` and
  ``FaissBackend.search`` (flat and HNSW), unscoped and scoped to one of 10 namespaces, as
  ratios of the raw floor of the same kind.
* **Embedding**: throughput of the default model over the LoCoMo turns, one query's latency,
  and ``add_many`` with embedding against the embedder alone on fresh texts (the backend's
  overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agent_engine.bench import locomo
from agent_engine.embeddings import SentenceTransformerEmbedder
from agent_engine.memory.faiss import FaissBackend
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextItem, Tier

K = 10
NAMESPACES = 10


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _latency(fn: Callable[[np.ndarray], Any], queries: np.ndarray) -> dict[str, float]:
    """p50/p95 milliseconds of ``fn`` over single queries (after two warm-up calls)."""
    fn(queries[0])
    fn(queries[1])
    times = []
    for query in queries:
        start = time.perf_counter()
        fn(query)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, int(0.95 * len(times)))],
    }


def _paired(
    floor: Callable[[np.ndarray], Any],
    ours: Callable[[np.ndarray], Any],
    queries: np.ndarray,
) -> tuple[dict[str, float], dict[str, float]]:
    """Latencies of a floor and of our search, query by query in turn.

    Interleaving puts both under the same load (the machine is shared), so their ratio is
    meaningful even when absolute figures move between runs.
    """
    times: tuple[list[float], list[float]] = ([], [])
    for fn in (floor, ours, floor, ours):
        fn(queries[0])
    for query in queries:
        for fn, out in ((floor, times[0]), (ours, times[1])):
            start = time.perf_counter()
            fn(query)
            out.append((time.perf_counter() - start) * 1000)
    return _summary(times[0]), _summary(times[1])


def _summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {
        "p50": statistics.median(times),
        "p95": times[min(len(times) - 1, int(0.95 * len(times)))],
    }


def _numpy_top(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    scores = matrix @ query
    top = np.argpartition(-scores, K - 1)[:K]
    return top[np.argsort(-scores[top])]


def _vectors(
    base: np.ndarray, size: int, noise: float, seed: int = 0, *, mix: float = 0.0
) -> np.ndarray:
    """``size`` rows: the real embeddings first, then noisy copies of them, normalized.

    With ``mix`` > 0 each copy also adds ``mix`` times another random real embedding, so
    copies of one turn spread apart instead of forming a tight, nearly tied cluster.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    real = min(size, len(base))
    out[:real] = base[:real]
    step = 100_000
    for start in range(real, size, step):
        stop = min(size, start + step)
        rows = base[np.arange(start, stop) % len(base)]
        block = rows + rng.normal(0.0, noise, rows.shape).astype(np.float32)
        if mix:
            block += mix * base[rng.integers(0, len(base), stop - start)]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:stop] = block
    return out


def _items(vectors: np.ndarray, texts: list[str]) -> list[ContextItem]:
    return [
        ContextItem(
            id=f"v{n:07d}",
            kind="turn",
            text=texts[n % len(texts)],
            tier=Tier.PROJECT,
            namespace=f"ns-{n % NAMESPACES}",
            embedding=vectors[n],
        )
        for n in range(len(vectors))
    ]


def _recall(approx: list[np.ndarray], exact: list[np.ndarray]) -> float:
    hits = sum(len(set(a.tolist()) & set(e.tolist())) for a, e in zip(approx, exact, strict=True))
    return hits / (K * len(exact))


def measure_size(
    size: int,
    base: np.ndarray,
    texts: list[str],
    queries: np.ndarray,
    args: argparse.Namespace,
) -> dict[str, Any]:
    import faiss  # noqa: PLC0415 - the optional dependency this benchmark is about.

    matrix = _vectors(base, size, args.noise, mix=args.mix)
    row: dict[str, Any] = {"size": size}
    row["numpy"] = _latency(lambda q: _numpy_top(matrix, q), queries)
    exact = [_numpy_top(matrix, q) for q in queries]

    flat = faiss.IndexFlatIP(matrix.shape[1])
    flat.add(matrix)
    row["faiss_flat"] = _latency(lambda q: flat.search(q.reshape(1, -1), K), queries)

    hnsw = faiss.IndexHNSWFlat(matrix.shape[1], args.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = args.ef_construction
    row["hnsw_build_s"], _ = _timed(lambda: hnsw.add(matrix))
    row["hnsw"] = {}
    for ef in args.ef_search:
        params = faiss.SearchParametersHNSW(efSearch=ef)

        def search(q: np.ndarray, params: Any = params) -> Any:
            return hnsw.search(q.reshape(1, -1), K, params=params)

        found = [search(q)[1][0] for q in queries]
        row["hnsw"][ef] = {**_latency(search, queries), "recall": _recall(found, exact)}

    if size <= args.backend_max:
        row["backends"] = _backends(matrix, texts, queries, exact, args)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def _backends(
    matrix: np.ndarray,
    texts: list[str],
    queries: np.ndarray,
    exact: list[np.ndarray],
    args: argparse.Namespace,
) -> dict[str, Any]:
    items = _items(matrix, texts)
    dim = matrix.shape[1]
    scoped = {"namespace": "ns-3"}
    scoped_rows = np.arange(3, len(matrix), NAMESPACES)
    scoped_matrix = np.ascontiguousarray(matrix[scoped_rows])
    floor = lambda q: _numpy_top(matrix, q)  # noqa: E731
    scoped_floor = lambda q: _numpy_top(scoped_matrix, q)  # noqa: E731
    out: dict[str, Any] = {}
    memory = InMemoryBackend(dim=dim)
    memory.add_many(items)
    out["inmemory_floor"], out["inmemory"] = _paired(
        floor, lambda q: memory.search(q, k=K), queries
    )
    out["inmemory_scoped_floor"], out["inmemory_scoped"] = _paired(
        scoped_floor, lambda q: memory.search(q, k=K, filters=scoped), queries
    )

    flat = FaissBackend(dim=dim)
    out["faiss_flat_add_s"], _ = _timed(lambda: flat.add_many(items))
    out["faiss_flat_floor"], out["faiss_flat"] = _paired(
        floor, lambda q: flat.search(q, k=K), queries
    )
    out["faiss_flat_scoped_floor"], out["faiss_flat_scoped"] = _paired(
        scoped_floor, lambda q: flat.search(q, k=K, filters=scoped), queries
    )

    ef = args.ef_search[0]  # the backend's own default comes first
    hnsw = FaissBackend(
        dim=dim,
        index="hnsw",
        hnsw_m=args.hnsw_m,
        ef_construction=args.ef_construction,
        ef_search=ef,
    )
    out["faiss_hnsw_add_s"], _ = _timed(lambda: hnsw.add_many(items))
    rows = hnsw._rows  # noqa: SLF001 - the raw index under the backend is the floor.
    assert rows is not None
    import faiss  # noqa: PLC0415

    params = faiss.SearchParametersHNSW(efSearch=ef)
    out["faiss_hnsw_floor"], out["faiss_hnsw"] = _paired(
        lambda q: rows.index.search(q.reshape(1, -1), K, params=params),
        lambda q: hnsw.search(q, k=K),
        queries,
    )
    found = [np.array([int(hit.item.id[1:]) for hit in hnsw.search(q, k=K)]) for q in queries]
    out["faiss_hnsw_recall"] = _recall(found, exact)
    out["faiss_hnsw_scoped_floor"], out["faiss_hnsw_scoped"] = _paired(
        scoped_floor, lambda q: hnsw.search(q, k=K, filters=scoped), queries
    )
    return out


def measure_embedding(texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Throughput of the default model, and add_many's overhead on top of it."""
    out: dict[str, Any] = {}
    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up the model"])
    seconds, vectors = _timed(lambda: embedder.embed(texts))
    out["corpus_texts"] = len(texts)
    out["corpus_texts_per_s"] = len(texts) / seconds
    out["query_ms"] = _latency(
        lambda q: embedder.embed([f"what did they say about {q[0]:.6f}?"]),
        np.random.default_rng(3).standard_normal((50, 1)),
    )
    # Fresh texts for each contender so no cache serves them; same lengths across contenders.
    n = args.add_texts
    pool = texts[: 3 * n]
    rows: dict[str, float] = {}
    for round_ in range(2):
        for name, chunk in (
            ("embedder", pool[:n]),
            ("faiss_add_many", pool[n : 2 * n]),
            ("inmemory_add_many", pool[2 * n : 3 * n]),
        ):
            fresh = SentenceTransformerEmbedder()
            fresh.embed(["warm up the model"])
            suffix = f" #{round_}"
            batch = [text + suffix for text in chunk]
            if name == "embedder":
                seconds, _ = _timed(lambda fresh=fresh, batch=batch: fresh.embed(batch))
            else:
                backend = (
                    FaissBackend(embedder=fresh)
                    if name == "faiss_add_many"
                    else InMemoryBackend(embedder=fresh)
                )
                items = [
                    ContextItem(id=f"t{i}", kind="turn", text=t, namespace="ns")
                    for i, t in enumerate(batch)
                ]
                seconds, _ = _timed(lambda backend=backend, items=items: backend.add_many(items))
            rows[name] = min(rows.get(name, float("inf")), seconds)
    out["add_texts"] = n
    out["texts_per_s"] = {name: n / seconds for name, seconds in rows.items()}
    out["vectors_shape"] = list(vectors.shape)
    return out


def report(results: dict[str, Any]) -> str:
    """The markdown tables docs/benchmarks.md quotes."""
    lines = [
        "| items | numpy floor p50 / p95 | FAISS flat p50 / p95 | "
        + " | ".join(f"HNSW ef={ef} p50 / p95 (recall@10)" for ef in results["ef_search"])
        + " | HNSW build |",
        "|---:|---:|---:|" + "---:|" * len(results["ef_search"]) + "---:|",
    ]
    for row in results["sizes"]:
        cells = [
            f"{row['size']:,}",
            f"{row['numpy']['p50']:.2f} / {row['numpy']['p95']:.2f} ms",
            f"{row['faiss_flat']['p50']:.2f} / {row['faiss_flat']['p95']:.2f} ms",
        ]
        for ef in results["ef_search"]:
            h = row["hnsw"][ef]
            cells.append(f"{h['p50']:.2f} / {h['p95']:.2f} ms ({h['recall']:.3f})")
        cells.append(f"{row['hnsw_build_s']:.0f} s")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| items | search | p50 / p95 | its floor, same queries | ratio p50 / p95 |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in results["sizes"]:
        b = row.get("backends")
        if not b:
            continue
        for name, key in (
            ("InMemoryBackend", "inmemory"),
            ("InMemoryBackend, one namespace", "inmemory_scoped"),
            ("FaissBackend flat", "faiss_flat"),
            ("FaissBackend flat, one namespace", "faiss_flat_scoped"),
            ("FaissBackend HNSW", "faiss_hnsw"),
            ("FaissBackend HNSW, one namespace", "faiss_hnsw_scoped"),
        ):
            value, floor = b[key], b[f"{key}_floor"]
            lines.append(
                f"| {row['size']:,} | {name} | {value['p50']:.2f} / {value['p95']:.2f} ms "
                f"| {floor['p50']:.2f} / {floor['p95']:.2f} ms "
                f"| {value['p50'] / floor['p50']:.2f}x / {value['p95'] / floor['p95']:.2f}x |"
            )
        lines.append(
            f"| {row['size']:,} | FaissBackend HNSW recall@10 | {b['faiss_hnsw_recall']:.3f} | | |"
        )
    emb = results.get("embedding")
    if emb:
        rates = emb["texts_per_s"]
        lines += [
            "",
            (
                f"Embedding (all-MiniLM-L6-v2, CPU): {emb['corpus_texts_per_s']:.0f} texts/s "
                f"over {emb['corpus_texts']} LoCoMo turns; one query "
                f"{emb['query_ms']['p50']:.1f} ms p50."
            ),
            "",
            f"| {emb['add_texts']} fresh turns | texts/s | share of the embedder |",
            "|---|---:|---:|",
        ]
        for name in ("embedder", "inmemory_add_many", "faiss_add_many"):
            lines.append(f"| {name} | {rates[name]:.0f} | {rates[name] / rates['embedder']:.0%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.025)
    parser.add_argument("--mix", type=float, default=0.0, help="see _vectors")
    parser.add_argument("--hnsw-m", type=int, default=48)
    parser.add_argument("--ef-construction", type=int, default=200)
    parser.add_argument(
        "--ef-search",
        type=int,
        nargs="+",
        default=[128, 256],
        help="raw HNSW runs at each; FaissBackend rows use the first",
    )
    parser.add_argument("--backend-max", type=int, default=100_000)
    parser.add_argument("--add-texts", type=int, default=1000)
    parser.add_argument("--skip-embedding", action="store_true")
    parser.add_argument("--data", type=Path, default=None, help="locomo10.json")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "agent_engine_search_cost_vectors.npz",
        help="embeddings of the LoCoMo turns and questions, reused across runs",
    )
    parser.add_argument("--json", type=Path, default=None, help="write raw results here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    conversations = locomo.load(args.data)
    texts = [item.text for c in conversations for item in c.items]
    questions = [q.text for c in conversations for q in c.questions]
    results: dict[str, Any] = {
        "ef_search": args.ef_search,
        "noise": args.noise,
        "mix": args.mix,
    }
    if not args.skip_embedding:
        results["embedding"] = measure_embedding(texts, args)
        print(json.dumps(results["embedding"]), file=sys.stderr, flush=True)
    if args.cache.exists():
        with np.load(args.cache) as cached:
            base, query_vectors = cached["turns"], cached["questions"]
    else:
        embedder = SentenceTransformerEmbedder()
        base, query_vectors = embedder.embed(texts), embedder.embed(questions)
        np.savez(args.cache, turns=base, questions=query_vectors)
    rng = np.random.default_rng(7)
    queries = query_vectors[rng.choice(len(query_vectors), args.queries, replace=False)]
    results["sizes"] = [
        measure_size(size, base, texts, queries, args) for size in sorted(args.sizes)
    ]
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
