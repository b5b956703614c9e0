"""What the default decider drops of a real conversation, and what of that questions needed.

Every turn of the LoCoMo conversations goes through
:data:`~agent_engine.ingest.decide.DEFAULT_DECIDER`. Reported: the share of turns dropped, by
reason, and the share of the turns LoCoMo's questions cite as evidence that were dropped (the
target: under 1%), with the dropped evidence itself, so a reader can judge each loss.

Run it with ``agent-engine bench decider`` (``docs/benchmarks.md``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from agent_engine.bench.locomo import Conversation
from agent_engine.ingest.decide import DEFAULT_DECIDER, MemoryDecider

__all__ = ["run_deciding", "table"]


def run_deciding(
    conversations: Iterable[Conversation], decider: MemoryDecider = DEFAULT_DECIDER
) -> dict[str, Any]:
    """Turns dropped by reason; evidence turns dropped, with their text."""
    turns, reasons = 0, Counter[str]()
    evidence_turns, evidence_dropped = 0, []
    for conversation in conversations:
        evidence = {turn for question in conversation.questions for turn in question.evidence}
        for item in conversation.items:
            turns += 1
            cited = item.id in evidence
            evidence_turns += cited
            decision = decider.decide(item)
            if not decision.keep:
                reasons[decision.reason] += 1
                if cited:
                    evidence_dropped.append(item.text)
    return {
        "turns": turns,
        "dropped": dict(reasons),
        "evidence_turns": evidence_turns,
        "evidence_dropped": evidence_dropped,
    }


def table(results: dict[str, Any]) -> list[str]:
    """A Markdown table of :func:`run_deciding`'s results, and the evidence it dropped."""
    turns = max(results["turns"], 1)
    dropped = sum(results["dropped"].values())
    evidence = max(results["evidence_turns"], 1)
    lost = results["evidence_dropped"]
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(results["dropped"].items())) or "-"
    lines = [
        "| turns | dropped | share | by reason | evidence turns | evidence dropped | share |",
        "|---:|---:|---:|---|---:|---:|---:|",
        (
            f"| {results['turns']} | {dropped} | {dropped / turns:.4f} | {reasons} "
            f"| {results['evidence_turns']} | {len(lost)} | {len(lost) / evidence:.4f} |"
        ),
        "",
    ]
    lines += [f"- dropped evidence: {text!r}" for text in lost]
    return [*lines, ""] if lost else lines
