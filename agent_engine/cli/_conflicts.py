"""``agent-engine memory conflicts``: the contradictions memory recorded, and deciding them.

Without options it lists the open conflicts of the project and the user's global memory
(``--tier`` narrows, ``--all`` adds the resolved ones), each with its two memories, the older
first. ``--resolve ID --keep ITEM`` keeps one memory of a conflict and supersedes the other by
it (``TierStore.resolve``): the other stays as history, out of every context.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from agent_engine import (
    Conflict,
    ConflictNotFoundError,
    ContextItem,
    TierStore,
    ValidationError,
    to_dict,
)
from agent_engine.cli._memory import Json, Limit, Project, TierChoice, User, Which, _json, _open
from agent_engine.cli._output import console, emit_json, item_json
from agent_engine.cli._store import Access

__all__ = ["conflicts"]

_TEXT_WIDTH = 50


def conflicts(
    ctx: typer.Context,
    tier: TierChoice = Which.ALL,
    include_resolved: Annotated[
        bool, typer.Option("--all", help="Also list the conflicts already resolved.")
    ] = False,
    resolve: Annotated[
        str | None,
        typer.Option(
            "--resolve",
            metavar="ID",
            help="Resolve this conflict (with --keep): the other memory is superseded.",
            show_default=False,
        ),
    ] = None,
    keep: Annotated[
        str | None,
        typer.Option(
            "--keep",
            metavar="ITEM",
            help="The memory that holds (one of the conflict's two).",
            show_default=False,
        ),
    ] = None,
    limit: Limit = 50,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """List the conflicts between memories, newest first, or resolve one (--resolve ID --keep ITEM).

    A conflict is two memories of one scope that likely contradict, found when the second was
    written; it is open while neither changed. Resolving keeps one and supersedes the other.
    """
    if (resolve is None) != (keep is None):
        raise ValidationError(
            "--resolve ID and --keep ITEM go together",
            field="keep" if keep is None else "resolve",
        )
    if resolve is not None and keep is not None:
        _resolve(ctx, resolve, keep, tier, project, user, json_output=json_output)
        return
    scope = _open(ctx, project, user, access=Access.READ)
    found: list[tuple[Conflict, dict[str, ContextItem]]] = []
    for store in scope.stores(tier):
        listed = store.conflicts(include_resolved, limit=limit)
        items = {item.id: item for item in store.get_many(i for c in listed for i in c.item_ids)}
        found.extend((conflict, items) for conflict in listed)
    found.sort(key=lambda pair: (pair[0].detected_at, pair[0].id), reverse=True)
    found = found[:limit]
    if _json(ctx, json_output):
        emit_json([conflict_json(conflict, items) for conflict, items in found])
        return
    names = ", ".join(store.namespace for store in scope.stores(tier))
    state = "" if include_resolved else "open "
    title = f"{len(found)} {state}conflict(s) in {names}"
    console().print(conflict_table(found, title=title, resolved=include_resolved))


def _resolve(
    ctx: typer.Context,
    conflict_id: str,
    keep: str,
    tier: str,
    project: str | None,
    user: str | None,
    *,
    json_output: bool,
) -> None:
    """Resolve ``conflict_id`` in whichever of the scope's stores holds it."""
    scope = _open(ctx, project, user, access=Access.WRITE)
    stores: list[TierStore] = scope.stores(tier)
    for store in stores:
        try:
            resolved = store.resolve(conflict_id, keep=keep)
        except ConflictNotFoundError:
            continue
        items = {item.id: item for item in store.get_many(resolved.item_ids)}
        if _json(ctx, json_output):
            emit_json(conflict_json(resolved, items))
        else:
            other = resolved.other(resolved.kept or "")
            console().print(
                Text(f"resolved {resolved.id}: kept {resolved.kept}, superseded {other}")
            )
        return
    raise ConflictNotFoundError(
        conflict_id, namespace=" or ".join(store.namespace for store in stores)
    )


def conflict_json(conflict: Conflict, items: dict[str, ContextItem]) -> dict[str, Any]:
    """A conflict as JSON, with its two memories (as stored now) when they are still there."""
    return {
        **to_dict(conflict),
        "items": [item_json(items[i]) for i in conflict.item_ids if i in items],
    }


def _when(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d}"


def _in_order(conflict: Conflict, items: dict[str, ContextItem]) -> tuple[str, str]:
    """The conflict's items, the older statement first (as the package marks them)."""
    a, b = (items.get(i) for i in conflict.item_ids)
    if a is not None and b is not None:
        first, second = sorted((a, b), key=lambda i: (i.valid_since, i.timestamp, i.id))
        return first.id, second.id
    return conflict.item_a, conflict.item_b


def _side(item_id: str, items: dict[str, ContextItem], kept: str | None) -> Text:
    """One memory of a conflict: its kind and text, then its id (and whether it was kept)."""
    item = items.get(item_id)
    text = Text()
    if item is not None:
        flat = " ".join(item.body.split())
        short = flat if len(flat) <= _TEXT_WIDTH else flat[: _TEXT_WIDTH - 1] + "…"
        text.append(f"[{item.kind}] {short}\n")
    text.append(item_id + (" (kept)" if kept == item_id else ""), style="dim")
    return text


def conflict_table(
    found: list[tuple[Conflict, dict[str, ContextItem]]], *, title: str, resolved: bool
) -> Table:
    """Conflicts as a table: id, tier, why, when, and both memories (the older first)."""
    table = Table(title=title, title_justify="left")
    columns = [
        "id",
        "tier",
        "why",
        "detected",
        *(["resolved"] if resolved else []),
        "older",
        "newer",
    ]
    for name in columns:
        side = name in {"older", "newer"}
        # Item ids are folded, never cut: they are what --keep takes.
        table.add_column(name, no_wrap=not side, overflow="fold" if side else "ellipsis")
    for conflict, items in found:
        older, newer = _in_order(conflict, items)
        table.add_row(
            Text(conflict.id),
            Text(conflict.tier.value),
            Text(conflict.reason or conflict.type.value),
            _when(conflict.detected_at),
            *([_when(conflict.resolved_at)] if resolved else []),
            _side(older, items, conflict.kept),
            _side(newer, items, conflict.kept),
        )
    return table
