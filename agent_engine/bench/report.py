"""Writing benchmark results: a Markdown report, the raw JSON, and PNG plots.

Every quality figure is printed beside the baselines measured in the same run, with the
default policy's ratio to the best baseline, because a recall number alone says little about
a paging policy; ratios to what simpler policies achieve on the same data do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agent_engine.bench import (
    aging,
    deciding,
    dedup,
    forks,
    ingesting,
    loop,
    prefix,
    processes,
    querying,
    redaction,
)
from agent_engine.bench.quality import BASELINES, SUMMARY_SUFFIX

__all__ = ["write_report"]

DEFAULT_POLICY = "hybrid"
HEADLINE_BUDGET = 1024


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _quality_tables(summary: dict[str, Any], budgets: list[int]) -> list[str]:
    lines: list[str] = []
    for split, policies in summary.items():
        lines += [f"### {split}", ""]
        header = " | ".join(f"≤{b}" for b in budgets)
        count = next(iter(policies.values()))["overall"]["n"]
        lines += [
            (
                f"Evidence recall, categories 1-4 (n = {count} questions). Last row: the default "
                "policy over the best baseline at that budget."
            ),
            "",
            f"| policy | {header} | R@5 | R@10 | full@1024 |",
            "|---" * (len(budgets) + 4) + "|",
        ]
        for policy, entry in policies.items():
            recall = entry["overall"]["recall"]
            cells = " | ".join(f"{recall[str(b)]:.3f}" for b in budgets)
            full = entry["overall"]["full"].get("1024")
            full_cell = f"{full:.3f}" if full is not None else "-"
            at5, at10 = recall.get("@5", 0.0), recall.get("@10", 0.0)
            lines.append(f"| {policy} | {cells} | {at5:.3f} | {at10:.3f} | {full_cell} |")
        baselines = [p for p in BASELINES if p in policies]
        if DEFAULT_POLICY in policies and baselines:
            ratios = []
            for b in budgets:
                best = max(policies[p]["overall"]["recall"][str(b)] for p in baselines)
                mine = policies[DEFAULT_POLICY]["overall"]["recall"][str(b)]
                ratios.append(f"{mine / best:.2f}x" if best else "-")
            lines.append(f"| *{DEFAULT_POLICY} / best baseline* | {' | '.join(ratios)} | | | |")
        lines.append("")
        lines += _summary_rows(policies, budgets)
        if DEFAULT_POLICY in policies:
            lines += _category_table(policies, budgets)
    return lines


def _summary_rows(policies: dict[str, Any], budgets: list[int]) -> list[str]:
    """What the rows measured with a summary section count, and what they held whole."""
    summarized = [name for name, entry in policies.items() if "items" in entry["overall"]]
    if not summarized:
        return []
    header = " | ".join(f"≤{b}" for b in budgets)
    lines = [
        (
            "Rows with a summary section credit an evidence turn held whole or shown as a "
            "fragment in the summary (three words or more of its text). Beside them: the "
            "evidence held whole, how much of a credited turn its fragment shows, and how "
            "often the gold answer's text is in the context, with the row without a summary."
        ),
        "",
        f"| row | measure | {header} |",
        "|---" * (len(budgets) + 2) + "|",
    ]
    for name in summarized:
        plain = name.removesuffix(SUMMARY_SUFFIX)
        rows = [
            (name, "whole or fragment", "recall", 3),
            (name, "whole", "items", 3),
            (name, "words a fragment shows", "coverage", 2),
            (name, "answer in the context", "answer", 3),
            (plain, "answer in the context", "answer", 3),
        ]
        for row, measure, key, digits in rows:
            figures = policies.get(row, {}).get("overall", {}).get(key)
            if figures is not None:
                cells = " | ".join(f"{figures[str(b)]:.{digits}f}" for b in budgets)
                lines.append(f"| {row} | {measure} | {cells} |")
    return [*lines, ""]


def _category_table(policies: dict[str, Any], budgets: list[int]) -> list[str]:
    budget = str(HEADLINE_BUDGET if HEADLINE_BUDGET in budgets else budgets[len(budgets) // 2])
    categories = [c for c in policies[DEFAULT_POLICY] if c != "overall"]
    lines = [
        f"Per category, recall within {budget} tokens:",
        "",
        "| policy | " + " | ".join(categories) + " |",
        "|---" * (len(categories) + 1) + "|",
    ]
    for policy, entry in policies.items():
        cells = " | ".join(
            f"{entry[c]['recall'][budget]:.3f} (n={entry[c]['n']})" if c in entry else "-"
            for c in categories
        )
        lines.append(f"| {policy} | {cells} |")
    return [*lines, ""]


def _cost_table(cells: list[dict[str, Any]]) -> list[str]:
    header = (
        "| backend | items | ingest items/s | peak RSS MB | build p50 ms | build p95 ms | "
        "raw searches p95 ms | build/raw p95 | raw reads p95 ms | build/reads p95 | "
        "no widening p50 / p95 ms | no widening/raw p95 | "
        "first build ms | build after a write p50 ms | query embed p50 ms |"
    )
    lines = [header, "|---" * 15 + "|"]
    lines.extend(
        f"| {cell['backend']} | {cell['size']:,} | {cell['ingest_items_per_s']:,.0f} | "
        f"{cell['peak_rss_mb']:.0f} | {cell['build_p50_ms']:.2f} | {cell['build_p95_ms']:.2f} | "
        f"{cell['raw_search_p95_ms']:.2f} | {cell['build_over_raw_p95']:.2f} | "
        f"{cell['raw_reads_p95_ms']:.2f} | {cell['build_over_reads_p95']:.2f} | "
        f"{cell['unwidened_build_p50_ms']:.2f} / {cell['unwidened_build_p95_ms']:.2f} | "
        f"{cell['unwidened_over_raw_p95']:.2f} | "
        f"{cell['first_build_ms']:.0f} | {cell['build_after_write_p50_ms']:.2f} | "
        f"{cell['query_embed_p50_ms']:.2f} |"
        for cell in cells
    )
    return [*lines, ""]


def _currentness_tables(currentness: dict[str, Any]) -> list[str]:
    """Mode x budget rates, then the same per kind of change at the largest budget."""
    stream, summary = currentness["stream"], currentness["summary"]
    lines = [
        (
            f"{stream['changed_slots']} changed facts among {stream['items']:,} memories "
            f"({stream['stable_slots']} facts never change; embedder {stream['embedder']}). "
            "Per question about a changed fact: the current version is in the context "
            "(current in), no older version is (stale out), both."
        ),
        "",
        "| mode | budget | n | current in | stale out | both |",
        "|---" * 6 + "|",
    ]
    for mode, budgets in summary.items():
        for budget, groups in budgets.items():
            rates = groups["overall"]
            lines.append(
                f"| {mode} | {budget} | {rates['n']} | {rates['current_included']:.3f} | "
                f"{rates['stale_excluded']:.3f} | {rates['both']:.3f} |"
            )
    lines.append("")
    largest = max(int(b) for budgets in summary.values() for b in budgets)
    lines += [
        f"By kind of change, within {largest} tokens:",
        "",
        "| mode | change | n | current in | stale out | both |",
        "|---" * 6 + "|",
    ]
    for mode, budgets in summary.items():
        for group, rates in budgets.get(str(largest), {}).items():
            if group == "overall":
                continue
            lines.append(
                f"| {mode} | {group} | {rates['n']} | {rates['current_included']:.3f} | "
                f"{rates['stale_excluded']:.3f} | {rates['both']:.3f} |"
            )
    return [*lines, ""]


def _conflicts_tables(conflicts: dict[str, Any]) -> list[str]:
    """Per backend and mode: what the stores recorded against the labels, and what it cost."""
    labelled, alone = conflicts["set"], conflicts["classifier_only"]
    lines = [
        (
            f"{labelled['memories']} labelled memories ({labelled['positives']} contradicting "
            f"pairs, {labelled['hard_negatives']} hard negatives) among {labelled['written']} "
            f"written one add at a time (embedder {labelled['embedder']}). The pair classifier "
            f"alone, on every pair of one scope's labelled memories: precision "
            f"{alone['precision']:.3f}, recall {alone['recall']:.3f}."
        ),
        "",
        (
            "| backend | mode | recorded | precision | recall | by meaning only "
            "| add cost ratio | ms per add (off, on) |"
        ),
        "|---" * 8 + "|",
    ]
    for row in conflicts["rows"]:
        ratio = "n/a" if row["add_cost_ratio"] is None else f"{row['add_cost_ratio']:.2f}"
        lines.append(
            f"| {row['backend']} | {row['mode']} | {row['recorded']} | "
            f"{row['precision']:.3f} | {row['recall']:.3f} | "
            f"{row['found_by_meaning_only']}/{row['positives_by_meaning_only']} | {ratio} | "
            f"{row['baseline_add_ms']:.2f}, {row['add_ms']:.2f} |"
        )
    return [*lines, ""]


def _plots(results: dict[str, Any], out: Path) -> list[str]:
    try:
        import matplotlib as mpl  # noqa: PLC0415 - optional dependency, only for plots

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return ["(matplotlib is not installed: no plots; install agent-engine[bench])"]
    written = []
    quality = results.get("quality")
    if quality:
        budgets = sorted(quality["config"]["budgets"])
        for split, policies in quality["summary"].items():
            figure, axes = plt.subplots(figsize=(7, 4.5))
            for policy, entry in policies.items():
                values = [entry["overall"]["recall"][str(b)] for b in budgets]
                axes.plot(
                    budgets,
                    values,
                    marker="o",
                    label=policy,
                    linewidth=2.5 if policy == DEFAULT_POLICY else 1.2,
                )
            axes.set_xscale("log", base=2)
            axes.set_xticks(budgets, [str(b) for b in budgets])
            axes.set_xlabel("token budget")
            axes.set_ylabel("evidence recall (categories 1-4)")
            axes.set_title(f"LoCoMo {split}: recall against budget")
            axes.grid(visible=True, alpha=0.3)
            axes.legend()
            name = f"quality-{_slug(split)}.png"
            figure.tight_layout()
            figure.savefig(out / name, dpi=110)
            plt.close(figure)
            written.append(name)
    cost = results.get("cost")
    if cost:
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for backend in dict.fromkeys(cell["backend"] for cell in cost):
            cells = [c for c in cost if c["backend"] == backend]
            axes.plot(
                [c["size"] for c in cells],
                [c["build_p95_ms"] for c in cells],
                marker="o",
                label=f"{backend} p95",
            )
            axes.plot(
                [c["size"] for c in cells],
                [c["build_p50_ms"] for c in cells],
                marker=".",
                linestyle="--",
                label=f"{backend} p50",
            )
        axes.set_xscale("log")
        axes.set_xlabel("items in project memory")
        axes.set_ylabel("build_context latency (ms)")
        axes.set_title("build_context latency against store size")
        axes.grid(visible=True, alpha=0.3)
        axes.legend()
        figure.tight_layout()
        figure.savefig(out / "cost-latency.png", dpi=110)
        plt.close(figure)
        written.append("cost-latency.png")
    return [f"![{name}]({name})" for name in written]


def _write_path_sections(results: dict[str, Any]) -> list[str]:
    """The write path's sections: redaction, the decider, ingestion speed (those measured)."""
    lines: list[str] = []
    if "redaction" in results:
        lines += [
            "## Redaction: secrets found, ordinary text left alone",
            "",
            *redaction.table(results["redaction"]),
            "",
        ]
    if "decider" in results:
        lines += ["## Deciding what to remember", "", *deciding.table(results["decider"])]
    if "ingest" in results:
        lines += [
            "## Ingestion speed: the queue against the embedder",
            "",
            *ingesting.table(results["ingest"]),
        ]
    if "query" in results:
        lines += ["## Query building: history in the query", "", *querying.table(results["query"])]
    if "prefix" in results:
        lines += [
            "## Cache-stable prompts: the prefix each build shares",
            "",
            *prefix.table(results["prefix"]),
        ]
    return lines


def write_report(results: dict[str, Any], out: Path) -> Path:
    """Write ``report.md``, ``results.json`` and plots into ``out``; return the report path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    meta = results.get("meta", {})
    lines = ["# agent_engine benchmark report", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines.append("")
    if "quality" in results:
        budgets = sorted(results["quality"]["config"]["budgets"])
        lines += [
            "## Quality: LoCoMo evidence recall",
            "",
            *_quality_tables(results["quality"]["summary"], budgets),
        ]
    if "cost" in results:
        lines += ["## Cost", "", *_cost_table(results["cost"])]
    if "currentness" in results:
        lines += [
            "## Currentness: changed facts",
            "",
            *_currentness_tables(results["currentness"]),
        ]
    if "aging" in results:
        lines += [
            "## Aging: compaction against one full read",
            "",
            *aging.table(results["aging"]),
        ]
    if "forks" in results:
        lines += [
            "## Forks: a fork against a deep copy, a build over it against its parent",
            "",
            *forks.table(results["forks"]),
        ]
    if "conflicts" in results:
        lines += [
            "## Conflicts: detection on add",
            "",
            *_conflicts_tables(results["conflicts"]),
        ]
    if "dedup" in results:
        lines += [
            "## Near-duplicate check: add cost with and without it",
            "",
            *dedup.table(results["dedup"]),
        ]
    lines += _write_path_sections(results)
    if "loop" in results:
        lines += ["## The event loop under concurrent builds", "", *loop.table(results["loop"])]
    if "processes" in results:
        lines += [
            "## Many executors, one store",
            "",
            *processes.table(results["processes"]),
        ]
    lines += ["## Plots", "", *_plots(results, out), ""]
    report = out / "report.md"
    report.write_text("\n".join(lines), encoding="utf-8")
    return report
