"""``agent-engine memory candidates`` and ``memory confirm``: promotion candidates by hand.

A task's promotion candidates are the items of its memory that its contexts used most; an
application that ends its tasks with ``hold_candidates`` leaves them in the store for a person
to look at here, promote (``memory promote ID --to project``) or dismiss (``memory clear
--task``). A project's candidates are what an auto-promotion preset brought in, quarantined
until the confirmation step reviews them: ``memory candidates`` shows what the step would do
now, ``memory confirm`` runs it.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from agent_engine import (
    ContextItem,
    PromotionCandidate,
    TierStore,
    ValidationError,
    confirm_candidates,
    promotion_candidates,
)
from agent_engine.cli._memory import (
    Json,
    Project,
    SessionOption,
    TaskOption,
    User,
    _json,
    _open,
)
from agent_engine.cli._output import _short, console, emit_json, item_json
from agent_engine.cli._store import Access
from agent_engine.tiers import quarantine_ends, review_candidates

__all__ = ["candidates", "confirm"]

Window = Annotated[
    float,
    typer.Option(
        "--window",
        metavar="HOURS",
        help="How long a project candidate stays in quarantine before it is reviewed.",
    ),
]


def candidates(
    ctx: typer.Context,
    task: TaskOption = None,
    session: SessionOption = None,
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            metavar="NAME",
            help="With --task or --session: score as this preset would (conservative, "
            "balanced, aggressive).",
        ),
    ] = None,
    window: Window = 24.0,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Show promotion candidates: a task's or session's, else the project's quarantined ones."""
    length = _window(window)
    if task is None and session is None and preset is not None:
        raise ValidationError(
            "--preset scores a task's or session's items; name it with --task or --session"
        )
    scope = _open(ctx, project, user, access=Access.READ, task=task, session=session)
    if scope.narrow is not None:
        found = promotion_candidates(scope.narrow, preset)
        if _json(ctx, json_output):
            emit_json([_candidate_json(candidate) for candidate in found])
            return
        title = f"{len(found)} promotion candidate(s) in {scope.narrow.namespace}"
        console().print(_candidate_table(found, title))
        return
    rows = _outcomes(scope.project, length)
    if _json(ctx, json_output):
        emit_json(
            [
                {**item_json(item), "outcome": outcome, "review_due": due.isoformat()}
                for outcome, item, due in rows
            ]
        )
        return
    table = Table(
        title=f"{len(rows)} candidate(s) in {scope.project.namespace}", title_justify="left"
    )
    for name in ("id", "if reviewed now", "review due", "imp.", "text"):
        table.add_column(name, justify="right" if name == "imp." else "left")
    for outcome, item, due in rows:
        table.add_row(
            Text(item.id),
            outcome,
            due.isoformat(timespec="minutes"),
            f"{item.importance:.2f}",
            Text(_short(item.body)),
        )
    console().print(table)


def confirm(
    ctx: typer.Context,
    window: Window = 24.0,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Run the confirmation step on the project's quarantined candidates.

    Those whose window ended are confirmed if something used them, else penalised (importance
    x 0.8); the others wait.
    """
    length = _window(window)
    scope = _open(ctx, project, user, access=Access.WRITE)
    review = confirm_candidates(scope.project, window=length)
    if _json(ctx, json_output):
        emit_json(
            {
                "namespace": scope.project.namespace,
                "window_hours": window,
                "confirmed": [item.id for item in review.confirmed],
                "penalised": [item.id for item in review.penalised],
                "waiting": [item.id for item in review.waiting],
            }
        )
        return
    out = console()
    for item in review.confirmed:
        out.print(Text(f"confirmed {item.id}"))
    for item in review.penalised:
        out.print(Text(f"penalised {item.id} (importance now {item.importance:.2f})"))
    out.print(
        Text(
            f"{len(review.confirmed)} confirmed, {len(review.penalised)} penalised, "
            f"{len(review.waiting)} waiting in {scope.project.namespace}"
        )
    )


def _window(hours: float) -> timedelta:
    """``--window HOURS`` as a duration; what no duration can be is refused by name."""
    if not math.isfinite(hours) or abs(hours) > timedelta.max.days * 24:
        raise ValidationError(
            f"--window must be a number of hours, got {hours!r}", field="window", value=hours
        )
    return timedelta(hours=hours)


def _outcomes(store: TierStore, window: timedelta) -> list[tuple[str, ContextItem, datetime]]:
    """Each candidate of ``store`` as stored, what the step would do with it now, when due."""
    review = review_candidates(store, window=window)
    verdicts = {
        **dict.fromkeys((item.id for item in review.confirmed), "confirm"),
        **dict.fromkeys((item.id for item in review.penalised), "penalise"),
        **dict.fromkeys((item.id for item in review.waiting), "wait"),
    }
    stored = store.get_many(verdicts)
    return [(verdicts[item.id], item, quarantine_ends(item, window)) for item in stored]


def _candidate_json(candidate: PromotionCandidate) -> dict[str, Any]:
    return {
        **item_json(candidate.item),
        "signals": [signal.value for signal in candidate.signals],
        "why": candidate.why,
        "score": candidate.score,
        "qualifies": candidate.qualifies,
        "filtered": candidate.filtered,
    }


def _candidate_table(found: list[PromotionCandidate], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("id", "kind", "used", "score", "why", "text"):
        table.add_column(name, justify="right" if name in {"used", "score"} else "left")
    for candidate in found:
        item = candidate.item
        table.add_row(
            Text(item.id),
            Text(item.kind),
            str(item.access_count),
            f"{candidate.score:g}",
            Text(candidate.why),
            Text(_short(item.body)),
        )
    return table
