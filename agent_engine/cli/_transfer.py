"""``agent-engine memory export/import/checkpoint/rollback/fork``: a scope's memory saved, and back.

``memory export FILE`` writes the project's memory (``--tier global``: the user's, ``--task``:
a task's, ``--store``: everything the store holds) to a versioned JSONL file (``-``: stdout),
with every memory in every state, the conflicts between them, their journal and the project's
aliases (:mod:`agent_engine.memory.export`). ``memory import FILE`` checks the whole file and
then adds what the store lacks: a file cut short or damaged is refused with the line at fault,
and importing a file twice imports it once. ``memory rollback FILE`` makes a scope what its
export (a snapshot) held, or ``--checkpoint ID`` what a ``memory checkpoint`` saved in the
store: what changed since is replaced or forgotten, after asking. ``memory fork NEW --task ID``
starts task NEW from task ID's memory, copy-on-write (``--checkpoint``: from one of its
checkpoints; ``--lineage``: what the scope was forked from).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from agent_engine import (
    ConfirmationDeclined,
    ConfirmationRequest,
    SessionMemoryStore,
    TaskMemoryStore,
    TierStore,
    ValidationError,
    to_dict,
)
from agent_engine.cli._confirm import make_confirm
from agent_engine.cli._errors import CommandError
from agent_engine.cli._memory import (
    Into,
    Json,
    Project,
    Scope,
    SessionOption,
    TaskOption,
    User,
    Yes,
    _json,
    _narrow_or_tiers,
    _open,
)
from agent_engine.cli._output import console, emit_json, progress_bar
from agent_engine.cli._settings import settings
from agent_engine.cli._store import Access
from agent_engine.memory import export_store, import_store
from agent_engine.tiers.checkpoints import plan_restore, restore, rollback_plan

__all__ = ["checkpoint", "export", "fork", "import_", "rollback"]

File = Annotated[str, typer.Argument(metavar="FILE", help="The export file (- for stdout/stdin).")]


def export(
    ctx: typer.Context,
    file: File,
    tier: Annotated[
        Into | None, typer.Option("--tier", "-t", help="Which scope (default: project).")
    ] = None,
    task: TaskOption = None,
    session: SessionOption = None,
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
    _one_scope(task, session, tier)
    if whole and (task is not None or session is not None):
        option = "task" if task is not None else "session"
        raise ValidationError(
            f"--store and --{option} name different scopes; give one", field=option
        )
    scope = _open(ctx, project, user, access=Access.READ, task=task, session=session)
    store = None if whole else _chosen(scope, tier)
    namespace, which = (None, None) if store is None else (store.namespace, store.tier)
    vectors = not no_vectors
    # A fork's export holds what it reads, its parent's items included: the file stands alone.
    items = None if store is None else store.inherited_view()
    if file == "-":
        export_store(
            scope.store.backend,
            sys.stdout,
            namespace=namespace,
            tier=which,
            vectors=vectors,
            items=items,
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
            items=items,
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


def import_(
    ctx: typer.Context,
    file: File,
    grants: Annotated[
        bool,
        typer.Option(
            "--grants",
            help="Also register the file's agents and add its pool grants where the store "
            "gives that agent nothing on that pool (never replacing one).",
        ),
    ] = False,
    json_output: Json = False,
) -> None:
    """Add what FILE holds and the store lacks (checked whole first; twice is once)."""
    scope = _open(ctx, None, None, access=Access.CREATE, embed=True)
    source = sys.stdin if file == "-" else file
    with progress_bar(f"Importing {file}", shown=not _json(ctx, json_output)) as progress:
        report = import_store(scope.store.backend, source, grants=grants, progress=progress)
    if _json(ctx, json_output):
        emit_json(
            {
                "file": file,
                "items": report.items,
                "unchanged": report.unchanged,
                "conflicts": report.conflicts,
                "events": report.events,
                "aliases": report.aliases,
                "agents": report.agents,
                "grants": report.grants,
            }
        )
        return
    console().print(
        f"imported {report.items} memories from {file} ({report.unchanged} held already, "
        f"{report.conflicts} conflicts, {report.events} journal events, {report.aliases} alias "
        f"terms, {report.grants} pool grants)",
        markup=False,
        highlight=False,
    )


def rollback(
    ctx: typer.Context,
    file: Annotated[
        str | None,
        typer.Argument(
            metavar="[FILE]", help="A `memory export` of the scope.", show_default=False
        ),
    ] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", metavar="ID", help="A checkpoint (`memory checkpoint`)."),
    ] = None,
    tier: Annotated[
        Into | None, typer.Option("--tier", "-t", help="Which scope (default: project).")
    ] = None,
    task: TaskOption = None,
    session: SessionOption = None,
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Roll a scope back to FILE (its export) or to a checkpoint; asks before destroying."""
    _one_scope(task, session, tier)
    if (file is None) == (checkpoint is None):
        raise ValidationError("give either FILE or --checkpoint ID (one of them)", field="file")
    # A checkpoint holds its vectors; a file may not, and its items are embedded then.
    scope = _open(
        ctx,
        project,
        user,
        access=Access.CREATE,
        embed=file is not None,
        task=task,
        session=session,
    )
    store = _chosen(scope, tier)
    if checkpoint is not None:
        plan = rollback_plan(store, checkpoint)
    else:
        plan = plan_restore(store, file or "")
        if (plan.namespace, plan.tier) != (store.namespace, store.tier):
            raise ValidationError(
                f"{file} is a snapshot of {plan.namespace}, not of {store.namespace}: name its "
                "scope (--project, --tier, --task, --session)",
                field="file",
                value=file,
            )
    summary = (
        f"{plan.namespace} as of {plan.exported_at}: {len(plan.add)} to add back, "
        f"{len(plan.replace)} to replace, {len(plan.forget)} to forget"
    )
    if plan.destructive:
        confirm = make_confirm(yes or settings(ctx).yes)
        if not confirm(ConfirmationRequest("rollback", f"Roll back {summary}?", ())):
            raise ConfirmationDeclined("rollback", f"rolling back {plan.namespace}")
    restore(store, plan)
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


def checkpoint(
    ctx: typer.Context,
    label: Annotated[str, typer.Option("--label", "-l", help="What it is before.")] = "",
    listing: Annotated[
        bool, typer.Option("--list", help="List the scope's checkpoints instead, newest first.")
    ] = False,
    tier: Annotated[
        Into | None, typer.Option("--tier", "-t", help="Which scope (default: project).")
    ] = None,
    task: TaskOption = None,
    session: SessionOption = None,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Save a scope as it is now (default: the project's), to roll back to; or --list them."""
    _one_scope(task, session, tier)
    access = Access.READ if listing else Access.CREATE
    scope = _open(ctx, project, user, access=access, task=task, session=session)
    store = _chosen(scope, tier)
    found = store.checkpoints() if listing else [store.checkpoint(label)]
    if _json(ctx, json_output):
        emit_json([to_dict(c) for c in found] if listing else to_dict(found[0]))
        return
    for saved in found:
        console().print(
            f"{saved.id}  {saved.created_at.isoformat(timespec='seconds')}  {saved.items} "
            f"memories of {saved.namespace}{f'  ({saved.label})' if saved.label else ''}",
            markup=False,
            highlight=False,
        )
    if listing and not found:
        console().print(f"no checkpoints of {store.namespace}", markup=False)


def fork(
    ctx: typer.Context,
    new: Annotated[
        str | None,
        typer.Argument(
            metavar="[NEW]",
            help="The new task's (or session's) id.",
            show_default=False,
        ),
    ] = None,
    task: TaskOption = None,
    session: SessionOption = None,
    checkpoint: Annotated[
        str | None,
        typer.Option("--checkpoint", metavar="ID", help="Start from this checkpoint instead."),
    ] = None,
    lineage: Annotated[
        bool, typer.Option("--lineage", help="List the scope's lineage instead, itself first.")
    ] = False,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Fork a --task's or --session's memory into NEW, copy-on-write; or show its --lineage."""
    if (task is None) == (session is None):
        raise CommandError("name the scope to fork: --task ID or --session ID (one of them)")
    if lineage == (new is not None):
        raise CommandError("give NEW (the fork's id) or --lineage (one of them)")
    access = Access.READ if lineage else Access.CREATE
    scope = _open(ctx, project, user, access=access, task=task, session=session)
    store = _chosen(scope, None)
    if not isinstance(store, (TaskMemoryStore, SessionMemoryStore)):  # the options chose it
        raise CommandError("name the scope to fork: --task ID or --session ID (one of them)")
    records = store.lineage() if lineage else store.fork(new or "", checkpoint=checkpoint).lineage()
    if _json(ctx, json_output):
        emit_json([to_dict(r) for r in records] if lineage else to_dict(records[0]))
        return
    for record in records if lineage else records[:1]:
        console().print(
            f"{record.namespace}  forked from {record.parent}  "
            f"{record.forked_at.isoformat(timespec='seconds')}"
            f"{f'  checkpoint {record.checkpoint}' if record.checkpoint else ''}"
            f"{'  (detached)' if record.detached else ''}",
            markup=False,
            highlight=False,
        )
    if lineage and not records:
        console().print(f"{store.namespace} is no fork", markup=False)


def _chosen(scope: Scope, tier: Into | None) -> TierStore:
    """The store the options name: the ``--task``'s or ``--session``'s, else the ``--tier``'s."""
    return _narrow_or_tiers(scope, tier or Into.PROJECT)[0]


def _one_scope(task: str | None, session: str | None, tier: Into | None) -> None:
    """Refuse, before anything opens, options that name two scopes."""
    if tier is not None and (task is not None or session is not None):
        option = "--task" if task is not None else "--session"
        raise CommandError(f"{option} and --tier name different scopes; give one")
