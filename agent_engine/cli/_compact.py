"""``agent-engine memory compact``: move what has aged out of a scope's memory to the archive.

The scope is the one every memory command works on (``--project``, ``--user``, ``--task``).
``--dry-run`` only reads (the store is opened read-only) and lists what would move and why;
without it the same plan is applied and journaled. Nothing is deleted: what moves stays
searchable in the archive and can be restored.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from agent_engine import CompactionReport
from agent_engine.cli._memory import (
    Json,
    Project,
    SessionOption,
    TaskOption,
    TierChoice,
    User,
    Which,
    _json,
    _narrow_or_tiers,
    _one_scope,
    _open,
)
from agent_engine.cli._output import console, emit_json
from agent_engine.cli._store import Access
from agent_engine.tiers import CompactionMove

__all__ = ["compact"]

_PREVIEW = 48


def compact(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would move and why; change nothing.")
    ] = False,
    tier: TierChoice = Which.ALL,
    task: TaskOption = None,
    session: SessionOption = None,
    limit: Annotated[
        int, typer.Option(metavar="N", min=0, help="List at most N moves per store (--json: all).")
    ] = 50,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Archive what has aged out (expired, decayed, stale, over the soft limit); --dry-run lists it.

    Pinned items never move, and nothing is deleted: archived items stay searchable.
    """
    _one_scope(task, session, tier, "compacts")
    access = Access.READ if dry_run else Access.WRITE
    scope = _open(ctx, project, user, access=access, task=task, session=session)
    stores = _narrow_or_tiers(scope, tier)
    reports = [store.compact(dry_run=dry_run) for store in stores]
    if _json(ctx, json_output):
        emit_json({"dry_run": dry_run, "stores": [_report_json(report) for report in reports]})
        return
    out = console()
    for report in reports:
        if report.moves:
            out.print(_table(report, limit))
        out.print(Text(_summary(report)))


def _move_json(move: CompactionMove, report: CompactionReport) -> dict[str, Any]:
    return {
        "id": move.id,
        "kind": move.kind,
        "reason": move.reason.value,
        "why": move.why(report.policy),
        "importance": move.importance,
        "decayed": round(move.decayed, 6),
        "idle_days": round(move.idle_days, 3),
        "age_days": round(move.age_days, 3),
        "ttl_days": move.ttl_days,
        "access_count": move.access_count,
        "expires_at": move.expires_at.isoformat() if move.expires_at else None,
        "text": move.preview,
    }


def _report_json(report: CompactionReport) -> dict[str, Any]:
    return {
        "tier": report.tier.value,
        "namespace": report.namespace,
        **report.summary(),
        "moves": [_move_json(move, report) for move in report.moves],
        "skipped": list(report.skipped),
    }


def _table(report: CompactionReport, limit: int) -> Table:
    """The moves, each with its reason, the numbers behind it, and what the item says."""
    verb = "moved" if report.applied else "would move"
    table = Table(title=f"{report.namespace}: {verb} to the archive", title_justify="left")
    for name in ("id", "reason", "kind"):
        table.add_column(name, no_wrap=True)
    table.add_column("why (and what)", ratio=1)
    for move in report.moves[:limit]:
        what = Text(move.why(report.policy))
        what.append("\n" + _short(move.preview), style="dim")
        table.add_row(Text(move.id), Text(move.reason.value), Text(move.kind), what)
    hidden = len(report.moves) - limit
    if hidden > 0:
        table.caption = f"... and {hidden} more (--limit N, or --json for all)"
    return table


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def _summary(report: CompactionReport) -> str:
    counts = ", ".join(f"{n} {reason}" for reason, n in report.counts().items() if n)
    if not report.moves:
        return f"{report.namespace}: nothing has aged out ({report.working} item(s) stay)"
    verb = f"moved {report.moved}" if report.applied else f"would move {len(report.moves)}"
    text = f"{report.namespace}: {verb} of {report.working} ({counts}); {report.remaining} stay"
    if report.pinned:
        text += f", {report.pinned} pinned"
    if report.skipped:
        text += f"; {len(report.skipped)} skipped (read or changed since planned)"
    if report.short:
        text += f"; {report.short} over the low mark (pinned or read recently)"
    return text
