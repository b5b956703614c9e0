"""Cache-stable prompts: how much of each step's render a provider's prompt cache can reuse.

Providers cache a prompt's unchanged prefix and charge a fraction for it on the next call. The
render orders its sections from most to least stable (global, project, then the task, its
latest steps last), so the measure is, for each build after the first, the share of its
rendered tokens that lie in the prefix it shares with the previous build's render. The
shared prefix is cut back to a line boundary: a cache matches whole tokens, and both renders
certainly tokenize alike up to the end of the last line they share.

Each run goes twice, with the default fill and with ``AssemblerConfig(stable_prefix=True)``
(:mod:`agent_engine.assembler.allocation`):

- **demo**: the demo's sample project and task (:mod:`.sample`). The executor asks for a
  context before each model call of a step, its reasoning and then its tool call, and
  records each in task memory; so consecutive builds either share the step's query (only
  task memory changed) or move on to the next step's query.
- **locomo**: per conversation, every session but the last is project memory, and the last
  session's turns arrive in task memory one per step while the agent works on one question
  (a run for each of the conversation's first ``questions`` questions of categories 1-4):
  only task memory changes between steps. Beside the share, the run reports the tokens each
  build used and the question's evidence recall at each step: what leaving the task's unused
  room empty costs.

Run it with ``agent-engine bench prefix`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from agent_engine.assembler.assembler import ContextAssembler
from agent_engine.assembler.config import AssemblerConfig
from agent_engine.bench.locomo import Conversation
from agent_engine.bench.quality import OVERALL, split_of, turn_id
from agent_engine.bench.sample import SampleProject, ingest
from agent_engine.embeddings import Embedder
from agent_engine.memory.inmemory import InMemoryBackend
from agent_engine.models import ContextRequest, Task, Tier, utcnow
from agent_engine.tiers.global_ import GlobalMemoryStore
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tokens import DEFAULT_COUNTER, TokenCounter

__all__ = ["FILLS", "PrefixBenchConfig", "prefix_share", "run_prefix", "table"]

FILLS = {"default": False, "stable_prefix": True}
"""The fills compared, by name: ``AssemblerConfig.stable_prefix`` off and on."""


@attrs.frozen
class PrefixBenchConfig:
    """The budgets of each run and how many questions each conversation is worked on."""

    demo_budgets: tuple[int, ...] = (320, 1024)
    budgets: tuple[int, ...] = (512, 1024, 2048)
    questions: int = 3


def prefix_share(previous: str, current: str, counter: TokenCounter = DEFAULT_COUNTER) -> float:
    """The share of ``current``'s tokens in the lines it starts with as ``previous`` did."""
    total = counter.count(current)
    if not total:
        return 1.0
    same = 0
    for before, now in zip(previous, current, strict=False):
        if before != now:
            break
        same += 1
    if same < len(current):  # cut back to the last line both renders end alike
        same = max(current.rfind("\n", 0, same + 1), 0)
    return counter.count(current[:same]) / total


def run_prefix(
    conversations: Sequence[Conversation],
    embedder: Embedder,
    *,
    counter: TokenCounter = DEFAULT_COUNTER,
    config: PrefixBenchConfig = PrefixBenchConfig(),
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Both runs with both fills (see the module)."""
    demo = {
        fill: {
            str(budget): _demo(embedder, counter, budget, stable=stable)
            for budget in config.demo_budgets
        }
        for fill, stable in FILLS.items()
    }
    locomo: dict[str, Any] = {}
    for fill, stable in FILLS.items():
        for budget in config.budgets:
            records: dict[str, list[dict[str, float]]] = {}
            for conversation in conversations:
                for record in _locomo(
                    conversation, embedder, counter, config, budget=budget, stable=stable
                ):
                    records.setdefault(split_of(conversation.index), []).append(record)
                if progress is not None:
                    progress(1)
            for split, found in records.items():
                locomo.setdefault(split, {}).setdefault(fill, {})[str(budget)] = _summary(found)
    return {"config": attrs.asdict(config), "demo": demo, "locomo": locomo}


def _assembler(
    backend: InMemoryBackend,
    counter: TokenCounter,
    *,
    stable: bool,
    clock: Callable[[], datetime] = utcnow,
) -> ContextAssembler:
    return ContextAssembler(
        MemoryStores(backend, clock=clock),
        config=AssemblerConfig(stable_prefix=stable),
        counter=counter,
    )


def _demo(embedder: Embedder, counter: TokenCounter, budget: int, *, stable: bool) -> Any:
    """Shares of the demo's builds, by whether the query stayed or moved on."""
    sample = SampleProject.load()
    backend = InMemoryBackend(embedder=embedder)
    assembler = _assembler(backend, counter, stable=stable)
    user = GlobalMemoryStore(backend, sample.user, allow_unconfirmed=True)
    ingest(sample, assembler.project_store(sample.project), user, now=assembler.clock())
    memory = assembler.task_store(sample.task)
    memory.add_instruction(sample.task.description)
    shares: dict[str, list[float]] = {"same query": [], "next query": []}
    previous: tuple[str, str] | None = None
    for step in sample.steps:
        for call in ("reasoning", "tool"):
            request = ContextRequest(budget_tokens=budget, query=step.query)
            render = assembler.build_context(sample.task, request).render()
            if previous is not None:
                kind = "same query" if previous[0] == step.query else "next query"
                shares[kind].append(prefix_share(previous[1], render, counter))
            previous = (step.query, render)
            if call == "reasoning":
                memory.add_reasoning(step.reasoning, step.stage)
            else:
                memory.add_tool_output(step.tool, step.output, stage_id=step.stage)
    return {
        kind: {"n": len(found), "share": statistics.fmean(found)} for kind, found in shares.items()
    }


def _locomo(
    conversation: Conversation,
    embedder: Embedder,
    counter: TokenCounter,
    config: PrefixBenchConfig,
    *,
    budget: int,
    stable: bool,
) -> Iterable[dict[str, float]]:
    """One record per step of each question's run (see the module)."""
    last = conversation.items[-1].session
    history = [item for item in conversation.items if item.session != last]
    live = [item for item in conversation.items if item.session == last]
    end = conversation.ends_at + timedelta(days=1)
    questions = [q for q in conversation.questions if q.category in OVERALL][: config.questions]
    for number, question in enumerate(questions):
        backend = InMemoryBackend(embedder=embedder)
        assembler = _assembler(backend, counter, stable=stable, clock=lambda: end)
        task = Task(id=f"{conversation.sample_id}-{number}", project_id=conversation.sample_id)
        assembler.project_store(task.project_id).add_many(history)
        timeline = assembler.task_store(task)
        evidence = set(question.evidence)
        previous: str | None = None
        for turn in live:
            timeline.add(attrs.evolve(turn, tier=Tier.TASK, namespace=timeline.namespace))
            package = assembler.build_context(
                task, ContextRequest(budget_tokens=budget, query=question.text)
            )
            render = package.render()
            if previous is not None:
                yield {
                    "share": prefix_share(previous, render, counter),
                    "used": package.tokens_used / budget,
                    "recall": len(evidence & {turn_id(s) for s in package.selections})
                    / len(evidence),
                }
            previous = render


def _summary(records: Sequence[dict[str, float]]) -> dict[str, float]:
    shares = sorted(record["share"] for record in records)
    return {
        "n": len(records),
        "share": statistics.fmean(shares),
        "share_p10": shares[len(shares) // 10],
        "used": statistics.fmean(record["used"] for record in records),
        "recall": statistics.fmean(record["recall"] for record in records),
    }


def table(results: dict[str, Any]) -> list[str]:
    """The demo's shares, then LoCoMo's per split, fill and budget."""
    lines = [
        "Share of each build's rendered tokens in the prefix it shares with the previous build's:",
        "",
        "| run | fill | budget | builds | prefix share |",
        "|---|---|---:|---:|---:|",
    ]
    for fill, by_budget in results["demo"].items():
        for budget, kinds in by_budget.items():
            lines += [
                f"| demo, {kind} | {fill} | {budget} | {entry['n']} | {entry['share']:.3f} |"
                for kind, entry in kinds.items()
            ]
    lines += [
        "",
        "LoCoMo, one question worked on while the last session's turns arrive in task memory:",
        "",
        "| split | fill | budget | builds | prefix share | p10 | budget used | evidence recall |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for split, by_fill in sorted(results["locomo"].items()):
        for fill, by_budget in by_fill.items():
            lines += [
                f"| {split} | {fill} | {budget} | {e['n']} | {e['share']:.3f} | "
                f"{e['share_p10']:.3f} | {e['used']:.3f} | {e['recall']:.3f} |"
                for budget, e in by_budget.items()
            ]
    return [*lines, ""]
