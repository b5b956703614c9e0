"""``agent-engine memory pool ...``: a project's shared pools, their agents and grants.

What an operator does by hand (``docs/sessions.md``, "Shared pools"): register the project's
agents, grant or revoke their access to a pool (journaled, with who did it: ``--by``), see
who holds what, and read or post as an agent would, its grant checked as the library checks
it.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from agent_engine import Pools, to_dict
from agent_engine.cli._memory import Json, Project, _json, _open, _read_text
from agent_engine.cli._output import console, emit_json, item_json, item_table
from agent_engine.cli._store import Access
from agent_engine.memory import Access as Grants

__all__ = ["app"]

app = typer.Typer(
    help="A project's shared pools: register agents, grant and revoke access, read and post.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: see the note in ._app
)

Pool = Annotated[str, typer.Argument(metavar="POOL", help="The pool's name (of the project).")]
Agent = Annotated[str, typer.Argument(metavar="AGENT", help="The agent's id.")]
AsAgent = Annotated[
    str, typer.Option("--agent", "-a", metavar="AGENT", help="Who reads or posts (checked).")
]
By = Annotated[str, typer.Option("--by", metavar="WHO", help="Who grants or revokes (journaled).")]


def _pools(ctx: typer.Context, project: str | None, access: Access) -> Pools:
    scope = _open(ctx, project, None, access=access, embed=access is not Access.READ)
    return Pools(scope.store.backend, scope.project.project_id)


@app.command()
def register(
    ctx: typer.Context, agent: Agent, project: Project = None, json_output: Json = False
) -> None:
    """Make AGENT one of the project's agents, so it can be granted access to its pools."""
    pools = _pools(ctx, project, Access.CREATE)
    new = pools.register(agent)
    if _json(ctx, json_output):
        emit_json({"agent": agent, "new": new, "agents": pools.agents()})
        return
    said = "registered" if new else "already registered"
    console().print(Text(f"{said}: {agent} in project {pools.project_id!r}"))


@app.command()
def agents(ctx: typer.Context, project: Project = None, json_output: Json = False) -> None:
    """The project's registered agents."""
    pools = _pools(ctx, project, Access.READ)
    found = pools.agents()
    if _json(ctx, json_output):
        emit_json(found)
        return
    console().print(Text("\n".join(found) or f"no agents in project {pools.project_id!r}"))


@app.command()
def grant(
    ctx: typer.Context,
    pool: Pool,
    agent: Agent,
    write: Annotated[
        bool, typer.Option("--write", help="Let it write too (default: read only).")
    ] = False,
    by: By = "cli",
    project: Project = None,
    json_output: Json = False,
) -> None:
    """Let AGENT read POOL (with --write: read and write it); replaces its earlier grant."""
    pools = _pools(ctx, project, Access.CREATE)
    given = pools.grant(pool, agent, Grants.WRITE if write else Grants.READ, by=by)
    if _json(ctx, json_output):
        emit_json(to_dict(given))
        return
    console().print(Text(f"granted {given.access.value} on {pool} to {agent}"))


@app.command()
def revoke(
    ctx: typer.Context,
    pool: Pool,
    agent: Agent,
    by: By = "cli",
    project: Project = None,
    json_output: Json = False,
) -> None:
    """Take AGENT's access to POOL away."""
    pools = _pools(ctx, project, Access.WRITE)
    revoked = pools.revoke(pool, agent, by=by)
    if _json(ctx, json_output):
        emit_json({"pool": pool, "agent": agent, "revoked": revoked})
        return
    said = f"revoked {agent}'s access to {pool}" if revoked else f"{agent} had no access to {pool}"
    console().print(Text(said))


@app.command()
def grants(
    ctx: typer.Context, pool: Pool, project: Project = None, json_output: Json = False
) -> None:
    """Who may read or write POOL, granted by whom and when."""
    pools = _pools(ctx, project, Access.READ)
    found = pools.grants(pool)
    if _json(ctx, json_output):
        emit_json([to_dict(g) for g in found])
        return
    table = Table(title=f"{len(found)} grant(s) on {pool}", title_justify="left")
    for name in ("agent", "access", "granted by", "at"):
        table.add_column(name)
    for held in found:
        at = held.granted_at.isoformat(timespec="seconds")
        table.add_row(Text(held.agent), held.access.value, Text(held.granted_by), at)
    console().print(table)


@app.command(name="list")
def list_(
    ctx: typer.Context,
    pool: Pool,
    agent: AsAgent,
    limit: Annotated[int, typer.Option(metavar="N", help="At most this many.")] = 50,
    project: Project = None,
    json_output: Json = False,
) -> None:
    """POOL's memories, newest first, as AGENT reads them (its grant is checked)."""
    view = _pools(ctx, project, Access.READ).open(pool, agent)
    items = view.query(None, limit=limit)
    if _json(ctx, json_output):
        emit_json([item_json(item) for item in items])
        return
    console().print(item_table(items, title=f"{len(items)} item(s) in {view.namespace}"))


@app.command()
def post(
    ctx: typer.Context,
    pool: Pool,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="What to post (- for stdin).")],
    agent: AsAgent,
    project: Project = None,
    json_output: Json = False,
) -> None:
    """Post TEXT to POOL as AGENT (it needs a write grant)."""
    body = _read_text(text, None)
    view = _pools(ctx, project, Access.CREATE).open(pool, agent)
    item = view.post(body)
    if _json(ctx, json_output):
        emit_json(item_json(item))
        return
    console().print(Text(f"posted {item.id} to {view.namespace} as {agent}"))
