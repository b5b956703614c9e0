"""``agent-engine db ...``: a store as a whole.

Its schema (alembic migrations, shipped in the wheel) and its embedder: ``reembed`` moves every
stored vector to the embedder chosen with ``--embedder``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from agent_engine import EmbedderIdentity
from agent_engine.cli._errors import CommandError
from agent_engine.cli._output import console, emit_json, err_console
from agent_engine.cli._settings import settings
from agent_engine.cli._store import (
    SQL,
    Access,
    Location,
    locate,
    make_embedder,
    open_store,
    sql_api,
)

__all__ = ["app"]

app = typer.Typer(
    help="The store as a whole: upgrade its schema, show its revision, re-embed it.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: see the note in ._app
)


def _sql(location: Location) -> Location:
    if location.kind != SQL:
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


def _identity_json(identity: EmbedderIdentity | None) -> dict[str, Any] | None:
    return None if identity is None else {"name": identity.name, "dim": identity.dim}


@app.command()
def reembed(
    ctx: typer.Context,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Memories embedded and written per step.")
    ] = 256,
) -> None:
    """Re-embed every memory with --embedder and make it the store's embedder.

    Needed when the store was filled with another embedder (the hashing one, before the
    embeddings extra was installed, say). Each batch is written in its own transaction; an
    interrupted run leaves the store refusing vector search until this command runs again,
    which resumes where the last one stopped.
    """
    options = settings(ctx)
    embedder = make_embedder(options.embedder)
    # Opened without an embedder: a store made by another one must still open.
    store = open_store(options.db, access=Access.WRITE, statement_timeout=options.statement_timeout)
    try:
        before = store.backend.stored_identity()
        if options.json:
            count = store.backend.reembed(embedder, batch_size=batch_size)
        else:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console(),
            ) as progress:
                bar = progress.add_task(f"Re-embedding with {embedder.name}", total=None)
                count = store.backend.reembed(
                    embedder,
                    batch_size=batch_size,
                    progress=lambda done, total: progress.update(bar, completed=done, total=total),
                )
        after = store.backend.stored_identity()
    finally:
        store.backend.close()
    if options.json:
        emit_json(
            {
                "store": store.url,
                "before": _identity_json(before),
                "after": _identity_json(after),
                "reembedded": count,
            }
        )
        return
    was = before.describe() if before is not None else "no embedder recorded"
    now = after.describe() if after is not None else EmbedderIdentity.of(embedder).describe()
    console().print(
        Text(f"{store.url}: re-embedded {count} memories with {now} (was {was})"), soft_wrap=True
    )
