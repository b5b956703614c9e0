"""``agent-engine db ...``: the schema of a SQL store (alembic migrations, shipped in the wheel)."""

from __future__ import annotations

import typer
from rich.text import Text

from agent_engine.cli._errors import CommandError
from agent_engine.cli._output import console, emit_json
from agent_engine.cli._settings import settings
from agent_engine.cli._store import Location, locate, sql_api

__all__ = ["app"]

app = typer.Typer(
    help="Database schema: upgrade it, or show its revision.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: see the note in ._app
)


def _sql(location: Location) -> Location:
    if location.scheme == "memory":
        raise CommandError(f"{location.url} has no schema to migrate; use a SQL URL with --db")
    return location


@app.command()
def upgrade(ctx: typer.Context) -> None:
    """Create the database if needed and bring its schema to the current revision."""
    location = _sql(locate(settings(ctx).db, create=True))
    api = sql_api()
    before = api.revision(location.url)
    api.upgrade(location.url)
    after = api.revision(location.url)
    if settings(ctx).json:
        emit_json({"store": location.url, "before": before, "after": after})
        return
    if before == after:
        console().print(Text(f"{location.url}: already at revision {after}"))
    else:
        console().print(Text(f"{location.url}: upgraded from {before or 'empty'} to {after}"))


@app.command()
def current(ctx: typer.Context) -> None:
    """Show the database's schema revision (empty: no schema yet)."""
    location = _sql(locate(settings(ctx).db))
    revision = sql_api().revision(location.url)
    if settings(ctx).json:
        emit_json({"store": location.url, "revision": revision})
        return
    console().print(Text(f"{location.url}: {revision or 'empty (no schema yet)'}"))
