"""``agent-engine memory export/import/rollback``: a scope's memory to a file, and back.

``memory export FILE`` writes the project's memory (``--tier global``: the user's, ``--task``:
a task's, ``--store``: everything the store holds) to a versioned JSONL file (``-``: stdout),
with every memory in every state, the conflicts between them, their journal and the project's
aliases (:mod:`agent_engine.memory.export`). ``memory import FILE`` checks the whole file and
then adds what the store lacks: a file cut short or damaged is refused with the line at fault,
and importing a file twice imports it once. ``memory rollback FILE`` makes a scope what its
export (a snapshot) held: what changed since is replaced or forgotten, after asking.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from agent_engine import ConfirmationDeclined, ConfirmationRequest, ValidationError
from agent_engine.cli._confirm import make_confirm
from agent_engine.cli._memory import Into, Json, Project, TaskOption, User, Yes, _json, _open
from agent_engine.cli._output import console, emit_json, progress_bar
from agent_engine.cli._settings import settings
from agent_engine.cli._store import Access
from agent_engine.memory import export_store, import_store, restore_plan, restore_scope

__all__ = ["export", "import_", "rollback"]

File = Annotated[str, typer.Argument(metavar="FILE", help="The export file (- for stdout/stdin).")]


def export(
    ctx: typer.Context,
    file: File,
    tier: Annotated[Into, typer.Option("--tier", "-t", help="Which scope.")] = Into.PROJECT,
    task: TaskOption = None,
    whole: Annotated[
        bool, typer.Option("--store", help="Everything the store holds, every scope.")
    ] = False,
    no_vectors: Annotated[
        bool, typer.Option("--no-vectors", help="Leave vectors out (re-embedded on import).")
    ] = False,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Write a scope's memory (default: the project's) to FILE, for `memory import`."""
    if whole and task is not None:
        raise ValidationError("--store and --task name different scopes; give one", field="task")
    scope = _open(ctx, project, user, access=Access.READ, task=task)
    store = scope.task if scope.task is not None else scope.stores(tier)[0]
    namespace, which = (None, None) if whole else (store.namespace, store.tier)
    vectors = not no_vectors
    if file == "-":
        export_store(
            scope.store.backend, sys.stdout, namespace=namespace, tier=which, vectors=vectors
        )
        return
    with progress_bar(f"Exporting to {file}", shown=not _json(ctx, json_output)) as progress:
        report = export_store(
            scope.store.backend,
            file,
            namespace=namespace,
            tier=which,
            vectors=vectors,
            progress=progress,
        )
    if _json(ctx, json_output):
        emit_json(
            {
                "file": file,
                "scope": namespace,
                "items": report.items,
                "conflicts": report.conflicts,
                "events": report.events,
                "aliases": report.aliases,
                "vectors": report.vectors,
            }
        )
        return
    console().print(
        f"exported {report.items} memories of {namespace or 'every scope'} to {file} "
        f"({report.conflicts} conflicts, {report.events} journal events, {report.aliases} alias "
        f"terms{'' if report.vectors else ', no vectors'})",
        markup=False,
        highlight=False,
    )


def import_(ctx: typer.Context, file: File, json_output: Json = False) -> None:
    """Add what FILE holds and the store lacks (checked whole first; twice is once)."""
    scope = _open(ctx, None, None, access=Access.CREATE, embed=True)
    source = sys.stdin if file == "-" else file
    with progress_bar(f"Importing {file}", shown=not _json(ctx, json_output)) as progress:
        report = import_store(scope.store.backend, source, progress=progress)
    if _json(ctx, json_output):
        emit_json(
            {
                "file": file,
                "items": report.items,
                "unchanged": report.unchanged,
                "conflicts": report.conflicts,
                "events": report.events,
                "aliases": report.aliases,
            }
        )
        return
    console().print(
        f"imported {report.items} memories from {file} ({report.unchanged} held already, "
        f"{report.conflicts} conflicts, {report.events} journal events, {report.aliases} alias "
        "terms)",
        markup=False,
        highlight=False,
    )


def rollback(ctx: typer.Context, file: File, yes: Yes = False, json_output: Json = False) -> None:
    """Roll a scope back to FILE, its `memory export`; asks before replacing or forgetting."""
    scope = _open(ctx, None, None, access=Access.CREATE, embed=True)
    backend = scope.store.backend
    plan = restore_plan(backend, file)
    summary = (
        f"{plan.namespace} as of {plan.exported_at}: {len(plan.add)} to add back, "
        f"{len(plan.replace)} to replace, {len(plan.forget)} to forget"
    )
    if plan.destructive:
        confirm = make_confirm(yes or settings(ctx).yes)
        if not confirm(ConfirmationRequest("rollback", f"Roll back {summary}?", ())):
            raise ConfirmationDeclined("rollback", f"rolling back {plan.namespace}")
    restore_scope(backend, plan)
    if _json(ctx, json_output):
        emit_json(
            {
                "scope": plan.namespace,
                "snapshot": plan.exported_at,
                "added": [item.id for item in plan.add],
                "replaced": [item.id for item in plan.replace],
                "forgotten": list(plan.forget),
                "unchanged": plan.unchanged,
            }
        )
        return
    console().print(f"rolled back {summary}", markup=False, highlight=False)
