"""``agent-engine memory finish-session``: finalise a session from the shell.

An application finalises its sessions itself (``MemoryStores.finish_session``); this is for
the session an agent left open (it crashed, or it was a person's shell session): summarize it
into the project, promote what a preset would, clear it (``docs/sessions.md``).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from agent_engine import MemoryStores, ValidationError, View
from agent_engine.cli._memory import Json, Project, User, _json, _open
from agent_engine.cli._output import console, emit_json
from agent_engine.cli._store import Access
from agent_engine.tiers import extractive_digest

__all__ = ["finish_session"]


def finish_session(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(metavar="SESSION", help="The session to finalise.")],
    preset: Annotated[
        str | None,
        typer.Option(
            "--promote",
            metavar="PRESET",
            help="Promote what this preset would (conservative, balanced, aggressive) into "
            "the project, as quarantined candidates.",
        ),
    ] = None,
    hold: Annotated[
        bool,
        typer.Option("--hold", help="Keep the candidates not promoted in the session."),
    ] = False,
    no_summary: Annotated[
        bool, typer.Option("--no-summary", help="Leave no summary in the project.")
    ] = False,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Finalise a session: its summary into the project, its candidates reported, it cleared."""
    scope = _open(ctx, project, user, access=Access.WRITE, session=session)
    memory = scope.session
    if memory is None:  # pragma: no cover - _open builds it when a session is named
        raise ValidationError("name the session to finalise", field="session")
    if memory.count(view=View.ALL) == 0 and not memory.checkpoints():
        raise ValidationError(
            f"session {session!r} holds no memory ({memory.namespace}): nothing to finalise",
            field="session",
            value=session,
        )
    stores = MemoryStores(scope.store.backend, promotion=preset, hold_candidates=hold)
    end = stores.finish_session(
        session,
        memory.project_id,
        memory.user_id,
        summarizer=None if no_summary else extractive_digest,
    )
    if _json(ctx, json_output):
        emit_json(
            {
                "session": session,
                "namespace": end.namespace,
                "removed": end.removed,
                "summary": end.summary,
                "summary_id": None if end.summary_item is None else end.summary_item.id,
                "candidates": [candidate.item.id for candidate in end.candidates],
                "promoted": [result.item.id for result in end.promoted],
                "held": list(end.held),
                "preset": end.preset,
            }
        )
        return
    out = console()
    if end.summary_item is not None:
        out.print(Text(f"summary kept in {scope.project.namespace} as {end.summary_item.id}:"))
        out.print(Text(end.summary))
    for result in end.promoted:
        out.print(Text(f"promoted {result.item.id}{' (duplicate)' if result.duplicate else ''}"))
    out.print(
        Text(
            f"finalised {end.namespace}: {end.removed} item(s) cleared, "
            f"{len(end.candidates)} candidate(s), {len(end.promoted)} promoted, "
            f"{len(end.held)} held"
        )
    )
