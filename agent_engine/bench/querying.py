"""Query building on LoCoMo: evidence recall with and without the task's last turns in the query.

The quality part's set-up (``bench/quality.py``): each conversation's turns are project
memory but the last few, which are the task's timeline, and each question asks for a
context. Run once per way of building the query, on the same stores and budget:

- ``request``: the question as asked (no query builder);
- ``history``: the default :class:`~agent_engine.assembler.query.HistoryQuery`, which puts the
  last turn before a *vague* question (one that names next to nothing, as "How much?") and
  leaves the rest as asked;
- ``history-always``: the last turn before every question.

LoCoMo's questions are self-contained, and the conversation's last turns are rarely about
what a question asks: the measurement says what history costs such questions, and what the
default's vagueness rule saves of that.

The **follow-up** run asks what LoCoMo never does: each question is put in the task's
timeline as the user's last turn, and the request is "What about that?". Searched as given,
it finds nothing; with the history, it finds what the question would. Tune on conversations
0-4; report 5-9.

Run it with ``agent-engine bench query`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agent_engine.assembler.policies import DEFAULT_POLICIES
from agent_engine.assembler.query import DEFAULT_QUERY_BUILDER, HistoryQuery, QueryBuilder
from agent_engine.bench.locomo import Conversation
from agent_engine.bench.quality import (
    OVERALL,
    QualityConfig,
    conversation_stores,
    run_quality,
    split_of,
    turn_id,
)
from agent_engine.embeddings import Embedder
from agent_engine.models import ContextRequest
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["MODES", "QueryBenchConfig", "run_query_building", "table"]

MODES: dict[str, QueryBuilder | None] = {
    "request": None,
    "history": DEFAULT_QUERY_BUILDER,
    "history-always": HistoryQuery(always=True),
}
"""The ways of building the query compared, by name."""


@attrs.frozen
class QueryBenchConfig:
    """The budget and policy each mode is measured at, and the recall depths."""

    budget: int = 1024
    policy: str = "hybrid"
    recall_at: tuple[int, ...] = (5, 10)


def run_query_building(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    *,
    counter: TokenCounter = DEFAULT_COUNTER,
    config: QueryBenchConfig = QueryBenchConfig(),
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Overall evidence recall per split and mode (categories 1-4, as the quality part)."""
    results: dict[str, Any] = {"budget": config.budget, "policy": config.policy, "modes": {}}
    for name, builder in MODES.items():
        quality = run_quality(
            conversations,
            embedder,
            counter=counter,
            config=QualityConfig(
                budgets=(config.budget,),
                policies=(config.policy,),
                recall_at=config.recall_at,
                query_builder=builder,
            ),
            progress=progress,
        )
        results["modes"][name] = {
            split: entry[config.policy]["overall"]
            for split, entry in quality["summary"].items()
            if config.policy in entry
        }
    results["follow_up"] = {
        name: _follow_ups(
            conversations, embedder, counter, config, builder=MODES[name], progress=progress
        )
        for name in ("request", "history")
    }
    return results


FOLLOW_UP = "What about that?"
"""The vague request of the follow-up run."""


def _follow_ups(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    counter: TokenCounter,
    config: QueryBenchConfig,
    *,
    builder: QueryBuilder | None,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    """Recall per split of "What about that?" after each question (see the module)."""
    setup = QualityConfig(query_builder=builder)
    budget = str(config.budget)
    by_split: dict[str, list[dict[str, float]]] = {}
    for conversation in conversations:
        assembler, task = conversation_stores(
            conversation, embedder, counter, setup, DEFAULT_POLICIES
        )
        timeline = assembler.task_store(task)
        for question in conversation.questions:
            if progress is not None:
                progress(1)
            if question.category not in OVERALL:
                continue
            asked = timeline.add(timeline.new_item("turn", question.text, source="user"))
            request = ContextRequest(
                budget_tokens=config.budget, query=FOLLOW_UP, policy=config.policy
            )
            package = assembler.build_context(task, request)
            timeline.delete(asked.id)
            evidence = set(question.evidence)
            ranked = sorted(package.selections, key=lambda s: (-s.score, turn_id(s)))
            recall = {budget: len(evidence & {turn_id(s) for s in ranked}) / len(evidence)}
            for k in config.recall_at:
                recall[f"@{k}"] = len(evidence & {turn_id(s) for s in ranked[:k]}) / len(evidence)
            by_split.setdefault(split_of(conversation.index), []).append(recall)
    return {
        split: {
            "n": len(records),
            "recall": {key: statistics.fmean(r[key] for r in records) for key in records[0]},
        }
        for split, records in by_split.items()
    }


def table(results: dict[str, Any]) -> list[str]:
    """One row per split and mode: questions, recall at the budget and at each depth."""
    budget = str(results["budget"])
    lines = [
        f"Policy {results['policy']}, budget {budget} tokens; evidence recall (categories 1-4):",
        "",
        "| split | query | questions | recall | recall@5 | recall@10 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    lines += _rows(results["modes"], budget)
    if "follow_up" in results:
        lines += [
            "",
            f'Follow-ups: "{FOLLOW_UP}" after each question:',
            "",
            "| split | query | questions | recall | recall@5 | recall@10 |",
            "|---|---|---:|---:|---:|---:|",
            *_rows(results["follow_up"], budget),
        ]
    return [*lines, ""]


def _rows(modes: dict[str, Any], budget: str) -> list[str]:
    rows = []
    for split in sorted({split for by_split in modes.values() for split in by_split}):
        for mode, by_split in modes.items():
            entry = by_split.get(split)
            if entry is None:
                continue
            recall = entry["recall"]
            rows.append(
                f"| {split} | {mode} | {entry['n']} | {recall[budget]:.3f} | "
                f"{recall.get('@5', 0.0):.3f} | {recall.get('@10', 0.0):.3f} |"
            )
    return rows
