"""``agent-engine memory alias add/list/remove``: the words a project's people use.

An alias lets a query's term mean its expansions too (``memory alias add Mel Melanie``, ``memory
alias add k8s kubernetes``): the term then names who an expansion names, and its expansions
join the keyword match (:mod:`agent_engine.retrieval.aliases`). Aliases are kept per project
with its memory; every build of the project's tasks reads them.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from agent_engine.cli._memory import Json, Project, _json, _open
from agent_engine.cli._output import console, emit_json
from agent_engine.cli._store import Access

__all__ = ["app"]

app = typer.Typer(
    help="A project's aliases: a term a query writes also means its expansions.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: see the note in ._app
)

Term = Annotated[str, typer.Argument(metavar="TERM", help="The word people write (any case).")]


@app.command()
def add(
    ctx: typer.Context,
    term: Term,
    expansions: Annotated[
        list[str],
        typer.Argument(metavar="EXPANSION...", help="What the term means too (one or more)."),
    ],
    project: Project = None,
    json_output: Json = False,
) -> None:
    """Let TERM mean each EXPANSION too ("alias add Mel Melanie", "alias add k8s kubernetes")."""
    # The first write to a new store may be an alias: it creates the store, as `memory add` does.
    scope = _open(ctx, project, None, access=Access.CREATE)
    result = scope.project.add_alias(term, expansions)
    if _json(ctx, json_output):
        emit_json({"term": term, "expansions": list(result)})
        return
    console().print(f"{term} -> {', '.join(result)}", markup=False, highlight=False)


@app.command(name="list")
def list_(ctx: typer.Context, project: Project = None, json_output: Json = False) -> None:
    """The project's aliases, by term."""
    scope = _open(ctx, project, None, access=Access.READ)
    terms = scope.project.aliases().terms
    if _json(ctx, json_output):
        emit_json({term: list(expansions) for term, expansions in terms.items()})
        return
    if not terms:
        console().print(f"no aliases in project {scope.project.project_id!r}", markup=False)
        return
    table = Table(title=f"{len(terms)} alias term(s)")
    table.add_column("term")
    table.add_column("means too")
    for term, expansions in terms.items():
        table.add_row(term, ", ".join(expansions))
    console().print(table)


@app.command()
def remove(
    ctx: typer.Context,
    term: Term,
    expansions: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[EXPANSION...]", help="Only these (default: the term and all it means)."
        ),
    ] = None,
    project: Project = None,
    json_output: Json = False,
) -> None:
    """Forget some of TERM's expansions, or the term; says how many were removed."""
    scope = _open(ctx, project, None, access=Access.WRITE)
    removed = scope.project.remove_alias(term, expansions or None)
    if _json(ctx, json_output):
        emit_json({"term": term, "removed": removed})
        return
    console().print(f"removed {removed} expansion(s) of {term}", markup=False, highlight=False)
