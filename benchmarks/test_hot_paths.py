"""Micro-benchmarks of the hot functions, each beside the baseline it should be read against.

Run: ``pytest benchmarks/test_hot_paths.py`` (pytest-benchmark groups each function with its
baseline, so the table reads as ratios measured in the same run). They live outside ``tests/``
because the test suite makes no timing claims.
"""

from __future__ import annotations

import numpy as np
import pytest

from agent_engine.assembler.assembler import AssemblerConfig, ContextAssembler
from agent_engine.bench.synthetic import generate
from agent_engine.embeddings import HashingEmbedder
from agent_engine.filters import parse_filter
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextRequest, Task
from agent_engine.retrieval.bm25 import LexicalIndex
from agent_engine.retrieval.fusion import rrf
from agent_engine.retrieval.text import analyze
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tokens import DEFAULT_COUNTER

SIZE = 10_000
QUERY = "why did the deploy pipeline retry the flaky migration"


@pytest.fixture(scope="module")
def items():
    return list(generate(SIZE, namespace="project:bench"))


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder(dim=384)


@pytest.fixture(scope="module")
def backend(items, embedder):
    store = InMemoryBackend(embedder=embedder)
    store.add_many(items)
    return store


@pytest.mark.benchmark(group="tokenize")
def test_analyze(benchmark, items):
    texts = [item.text for item in items[:1000]]
    benchmark(lambda: [analyze(text) for text in texts])


@pytest.mark.benchmark(group="tokenize")
def test_baseline_split(benchmark, items):
    texts = [item.text for item in items[:1000]]
    benchmark(lambda: [text.lower().split() for text in texts])


@pytest.mark.benchmark(group="count tokens")
def test_heuristic_count(benchmark, items):
    texts = [item.text for item in items[:1000]]
    benchmark(lambda: [DEFAULT_COUNTER.count(text) for text in texts])


@pytest.mark.benchmark(group="count tokens")
def test_baseline_len(benchmark, items):
    texts = [item.text for item in items[:1000]]
    benchmark(lambda: [len(text) // 4 for text in texts])


@pytest.mark.benchmark(group="bm25 at 10k")
def test_bm25_scores(benchmark, items):
    index = LexicalIndex()
    index.upsert(items)
    index.scores(QUERY)  # build the postings once, as a warm store would have
    benchmark(index.scores, QUERY)


@pytest.mark.benchmark(group="vector search at 10k")
def test_backend_search(benchmark, backend, embedder):
    vector = embedder.embed([QUERY])[0]
    benchmark(backend.search, vector, 100, {"namespace": "project:bench"})


@pytest.mark.benchmark(group="vector search at 10k")
def test_baseline_matrix_product(benchmark, items, embedder):
    matrix = embedder.embed([item.text for item in items])
    vector = embedder.embed([QUERY])[0]

    def floor():
        scores = matrix @ vector
        return np.argpartition(scores, -100)[-100:]

    benchmark(floor)


@pytest.mark.benchmark(group="filter")
def test_filter_matches(benchmark, items):
    where = parse_filter({"namespace": "project:bench", "tags": ["deploy", "cache"]})
    benchmark(lambda: sum(1 for item in items if where.matches(item)))


@pytest.mark.benchmark(group="filter")
def test_baseline_attribute_check(benchmark, items):
    benchmark(lambda: sum(1 for item in items if item.namespace == "project:bench"))


@pytest.mark.benchmark(group="fusion")
def test_rrf(benchmark):
    dense = [f"d{n}" for n in range(200)]
    lexical = [f"d{n}" for n in range(100, 300)]
    benchmark(rrf, [dense, lexical])


@pytest.mark.benchmark(group="build_context at 10k")
def test_build_context(benchmark, backend, embedder):
    assembler = ContextAssembler(
        MemoryStores(backend, task_backend=InMemoryBackend(embedder=embedder)),
        config=AssemblerConfig(track_access=False),
    )
    task = Task(id="t", project_id="bench", description="fix the flaky deploy pipeline")
    steps = assembler.task_store(task)
    for n in range(20):
        steps.add_reasoning(f"step {n}: looked at the deploy logs and retry config", "work")
    request = ContextRequest(budget_tokens=2048, query=QUERY)
    assembler.build_context(task, request)
    benchmark(assembler.build_context, task, request)


@pytest.mark.benchmark(group="build_context at 10k")
def test_baseline_raw_searches(benchmark, backend, embedder):
    vector = embedder.embed([QUERY])[0]
    index = backend.lexical_index({"namespace": "project:bench"})
    index.scores(QUERY)

    def raw():
        backend.search(vector, 100, {"namespace": "project:bench"})
        index.scores(QUERY)

    benchmark(raw)
