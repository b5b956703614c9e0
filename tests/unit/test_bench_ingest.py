"""The ingestion speed part: every path stores or embeds the same turns, and the table says so."""

from __future__ import annotations

import json

from agent_engine.bench import locomo
from agent_engine.bench.ingesting import IngestBenchConfig, run_ingest, table
from agent_engine.embeddings import HashingEmbedder

from .test_bench import SAMPLE


class CountingEmbedder(HashingEmbedder):
    """Counts the texts each instance embeds (warm-up included)."""

    made: list[CountingEmbedder] = []  # noqa: RUF012 - the instances a run made, in order

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.texts = 0
        CountingEmbedder.made.append(self)

    def embed(self, texts):
        self.texts += len(texts)
        return super().embed(texts)


def test_each_path_embeds_the_same_turns_with_an_embedder_of_its_own(tmp_path):
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([SAMPLE, {**SAMPLE, "sample_id": "conv-y"}]), encoding="utf-8")
    conversations = locomo.load(path)
    CountingEmbedder.made.clear()
    results = run_ingest(conversations, CountingEmbedder, IngestBenchConfig(texts=7, adds=3))
    assert results["texts"] == 7
    assert results["stored"] == 7  # no decider: "Lovely!" is stored as the raw run embeds it
    raw, queue, adds, raw_again = CountingEmbedder.made
    # One warm-up text each, then: every turn raw (twice), every turn through the queue, and
    # the single adds.
    assert (raw.texts, queue.texts, adds.texts, raw_again.texts) == (8, 8, 4, 8)
    assert results["drain_ratio"] > 0
    assert results["adds"] == 3
    lines = table(results)
    assert lines[0].startswith("7 LoCoMo turns, batches of 64")
    assert lines[4].startswith("| raw embedder (batch 64) |")
    assert lines[5].startswith("| queue: worker drain |")
