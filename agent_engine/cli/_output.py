"""What the commands print: rich tables and bars for people, ``--json`` for scripts.

Every text that comes from memory goes into rich as a ``Text`` (never as markup), so an item
saying ``[decision]`` or carrying a terminal's colour codes prints as itself. JSON goes to
stdout as one document; progress, prompts and errors go to stderr, so ``--json`` output can
be piped straight into ``jq``.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from agent_engine import ContextItem, to_dict
from agent_engine.memory import SearchHit
from agent_engine.memory.backend import Progress as ProgressCallback

if TYPE_CHECKING:  # the assembler loads only for the commands that build a context
    from agent_engine import ContextPackage

__all__ = [
    "progress_bar",
    "BAR_WIDTH",
    "console",
    "emit_json",
    "err_console",
    "item_json",
    "item_table",
    "package_json",
    "show_item",
    "show_package",
]

BAR_WIDTH = 24
_TEXT_WIDTH = 70
_OMISSIONS_SHOWN = 8


def console() -> Console:
    """A console on stdout; 120 columns when it is not a terminal (pipes, CI logs)."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out = Console(highlight=False, width=120)
    return out


def err_console() -> Console:
    """A console on stderr, for progress and notes."""
    return Console(stderr=True, highlight=False)


def emit_json(data: Any) -> None:
    """Write ``data`` as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def item_json(item: ContextItem) -> dict[str, Any]:
    """An item as JSON (without its vector: scripts want the memory, not 384 floats)."""
    data = to_dict(item)
    data.pop("embedding", None)
    data["fingerprint"] = item.fingerprint
    return data


def _short(text: str, width: int = _TEXT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def item_table(
    items: Sequence[ContextItem] | Sequence[SearchHit], *, title: str | None = None
) -> Table:
    """Items (or search hits, with their scores) as a table."""
    hits = [hit for hit in items if isinstance(hit, SearchHit)]
    table = Table(title=title, title_justify="left")
    table.add_column("id", no_wrap=True)
    if hits:
        table.add_column("score", justify="right")
    for name in ("tier", "kind", "imp.", "status", "text"):
        table.add_column(name, justify="right" if name == "imp." else "left")
    for entry in items:
        item = entry.item if isinstance(entry, SearchHit) else entry
        score = [f"{entry.score:.3f}"] if isinstance(entry, SearchHit) else []
        table.add_row(
            Text(item.id),
            *score,
            Text(item.tier.value),
            Text(item.kind),
            f"{item.importance:.2f}",
            Text(_state(item)),
            Text(_short(item.text or item.body)),
        )
    return table


def _state(item: ContextItem) -> str:
    """The item's status, and its lifecycle state when it is not in the working set."""
    if item.superseded:
        return f"{item.status.value}, superseded (v{item.version})"
    if item.archived_reason is not None:
        return f"{item.status.value}, archived ({item.archived_reason.value})"
    return item.status.value


def show_item(out: Console, item: ContextItem) -> None:
    """Every field of one item."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for key, value in item_json(item).items():
        if value in (None, [], {}, ""):
            continue
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        table.add_row(key, Text(str(shown)))
    out.print(table)


def bar(used: int, allocated: int, width: int = BAR_WIDTH) -> Text:
    """``used`` of ``allocated`` as a bar; use beyond the share (spill-over) shows in yellow."""
    scale = max(used, allocated, 1)
    within = min(used, allocated)
    filled = round(width * within / scale)
    extra = round(width * (used - within) / scale)
    text = Text()
    text.append("█" * filled, style="green")
    text.append("█" * extra, style="yellow")
    text.append("░" * max(0, width - filled - extra), style="dim")
    return text


def package_json(
    package: ContextPackage, omitted_items: Mapping[str, ContextItem] | None = None
) -> dict[str, Any]:
    """A package as JSON: what was chosen and why, budget use, what was left out and why."""
    omitted_items = omitted_items or {}
    return {
        "budget_tokens": package.budget_tokens,
        "tokens_used": package.tokens_used,
        "policy": package.policy,
        "compression_ratio": round(package.compression_ratio, 4),
        "usage": [
            {
                "tier": usage.tier.value,
                "allocated": usage.allocated,
                "used": usage.used,
                "candidates": usage.candidates,
                "selected": usage.selected,
            }
            for usage in package.usage
        ],
        "selections": [
            {
                "id": selection.item.id,
                "tier": selection.tier.value,
                "kind": selection.item.kind,
                "reason": selection.reason.value,
                "from_archive": selection.from_archive,
                "score": round(selection.score, 4),
                "tokens": selection.tokens,
                "truncated": selection.truncated,
                "text": selection.body,
            }
            for selection in package.selections
        ],
        "omissions": [
            {
                "id": omission.item_id,
                "tier": omission.tier.value,
                "reason": omission.reason.value,
                "tokens": omission.tokens,
                "score": None if omission.score is None else round(omission.score, 4),
                "text": (
                    omitted_items[omission.item_id].body
                    if omission.item_id in omitted_items
                    else None
                ),
            }
            for omission in package.omissions
        ],
        "failures": [
            {"tier": failure.tier.value, "error": failure.error} for failure in package.failures
        ],
        "conflicts": [
            {
                "number": marked.number,
                "id": marked.conflict.id,
                "newer": marked.newer,
                "older": marked.older,
                "reason": marked.conflict.reason,
            }
            for marked in package.conflicts
        ],
        "prompt": package.render(),
    }


def _selections(package: ContextPackage) -> Table:
    table = Table(title="Selected items (prompt order)", title_justify="left")
    for name, justify in (
        ("tier", "left"),
        ("why", "left"),
        ("score", "right"),
        ("tokens", "right"),
        ("kind", "left"),
        ("text", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for selection in package.selections:
        table.add_row(
            Text(selection.tier.value),
            Text(selection.reason.value + (" (archive)" if selection.from_archive else "")),
            f"{selection.score:.3f}",
            str(selection.tokens),
            Text(selection.item.kind),
            Text(_short(selection.body, 60) + (" (truncated)" if selection.truncated else "")),
        )
    return table


def _budget(package: ContextPackage) -> Table:
    table = Table(
        title=f"Budget: {package.tokens_used} of {package.budget_tokens} tokens",
        title_justify="left",
    )
    for name in ("tier", "use", "used/share", "items"):
        table.add_column(name, justify="left" if name in {"use", "tier"} else "right")
    for usage in package.usage:
        spill = usage.used - usage.allocated
        shown = f"{usage.used}/{usage.allocated}" + (f" (+{spill} spill-over)" if spill > 0 else "")
        table.add_row(
            usage.tier.value,
            bar(usage.used, usage.allocated),
            shown,
            f"{usage.selected} of {usage.candidates}",
        )
    return table


def _omissions(package: ContextPackage, items: Mapping[str, ContextItem]) -> Table:
    reasons = Counter(omission.reason.value for omission in package.omissions)
    summary = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    table = Table(
        title=f"Left out: {len(package.omissions)} ({summary or 'nothing'})",
        title_justify="left",
    )
    for name in ("tier", "why", "tokens", "text"):
        table.add_column(name, justify="right" if name == "tokens" else "left")
    for omission in package.omissions[:_OMISSIONS_SHOWN]:
        item = items.get(omission.item_id)
        table.add_row(
            omission.tier.value,
            omission.reason.value,
            str(omission.tokens),
            Text(_short(item.body, 60) if item is not None else omission.item_id),
        )
    hidden = len(package.omissions) - _OMISSIONS_SHOWN
    if hidden > 0:
        table.add_row("", "", "", Text(f"… and {hidden} more"))
    return table


def show_package(
    out: Console, package: ContextPackage, omitted_items: Mapping[str, ContextItem]
) -> None:
    """A package for people: selections, budget bars, omissions, the prompt block."""
    out.print(_selections(package))
    out.print(_budget(package))
    if package.omissions:
        out.print(_omissions(package, omitted_items))
    for failure in package.failures:
        out.print(Text(f"tier {failure.tier.value} failed: {failure.error}", style="red"))
    out.print(Panel(Text(package.render()), title="Prompt block", title_align="left"))


def counts_table(title: str, counts: Iterable[tuple[str, str, int]]) -> Table:
    """Rows of (tier, kind, count)."""
    table = Table(title=title, title_justify="left")
    table.add_column("tier")
    table.add_column("kind")
    table.add_column("items", justify="right")
    for tier, kind, count in counts:
        table.add_row(tier, Text(kind), str(count))
    return table


@contextmanager
def progress_bar(description: str, *, shown: bool) -> Iterator[ProgressCallback | None]:
    """A progress bar on stderr fed by ``progress(done, total)`` (none for ``--json``).

    The bar appears with the first report, so a command refused before it starts (a copy
    into a filled store, say) prints its error alone.
    """
    if not shown:
        yield None
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console(),
    )
    bars: list[TaskID] = []

    def report(done: int, total: int) -> None:
        if not bars:
            progress.start()
            bars.append(progress.add_task(description, total=None))
        progress.update(bars[0], completed=done, total=total)

    try:
        yield report
    finally:
        if bars:
            progress.stop()
