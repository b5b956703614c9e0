"""``agent-engine db ...``: a store as a whole.

Its schema (alembic migrations, shipped in the wheel), its embedder (``reembed`` moves every
stored vector to the embedder chosen with ``--embedder``) and its backend (``copy`` moves
everything it holds into a new store, SQLite to PostgreSQL, say).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import attrs
import numpy as np
import typer
from rich.text import Text

from agent_engine import EmbedderIdentity, EmbeddingError
from agent_engine.cli._errors import CommandError
from agent_engine.cli._output import console, emit_json, progress_bar
from agent_engine.cli._settings import settings
from agent_engine.cli._store import (
    SQL,
    Access,
    Location,
    locate,
    make_embedder,
    open_store,
    scheme_of,
    sql_api,
    sqlite_path,
)
from agent_engine.embeddings import Matrix
from agent_engine.memory import COPY_BATCH, CopyReport, copy_store

__all__ = ["app"]

app = typer.Typer(
    help="The store as a whole: upgrade its schema, show its revision, re-embed it, copy it.",
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
        with progress_bar(f"Re-embedding with {embedder.name}", shown=not options.json) as progress:
            count = store.backend.reembed(embedder, batch_size=batch_size, progress=progress)
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


@attrs.frozen
class _RecordedEmbedder:
    """The identity of the source's vectors, for the target to record; it never embeds.

    A target opened without an embedder would record only the vectors' size, and then take
    any embedder of that size. Opened with this, it records the name too. ``db copy`` copies
    vectors as they are stored, so embedding anything is a mistake it refuses.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Refuse: the source holds a memory without a vector, which a copy cannot make."""
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        raise EmbeddingError(
            f"the source holds memories without a vector, which `db copy` does not make "
            f"(the store's vectors are {self.name}'s): copy it with "
            "agent_engine.memory.copy_store into a target opened with that embedder"
        )


def _same_store(source: str, target: str) -> bool:
    """Whether two URLs name one store: the same text, or the same SQLite file."""
    if source == target:
        return True
    if scheme_of(source) != "sqlite" or scheme_of(target) != "sqlite":
        return False
    ours, theirs = sqlite_path(source), sqlite_path(target)
    return ours is not None and theirs is not None and ours.resolve() == theirs.resolve()


def _report_json(source: str, target: str, report: CopyReport) -> dict[str, Any]:
    return {
        "source": source,
        "target": target,
        "items": report.items,
        "events": report.events,
        "conflicts": report.conflicts,
        "aliases": report.aliases,
        "checkpoints": report.checkpoints,
        "scopes": [
            {"namespace": namespace, "tier": tier.value, "items": count}
            for (namespace, tier), count in sorted(report.scopes.items())
        ],
        "states": dict(report.states),
        "embedder": _identity_json(report.identity),
        "verified": report.verified,
    }


@app.command()
def copy(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="The store to copy (a URL, as for --db).")],
    target: Annotated[
        str, typer.Argument(help="A new, empty store to copy it into (created if needed).")
    ],
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Memories read and written per step.")
    ] = COPY_BATCH,
) -> None:
    """Copy everything a store holds into a new, empty one (SQLite to PostgreSQL, say).

    Every memory in every tier and state (archived, superseded history), its vector as
    stored, the journal and the recorded conflicts; then both sides are counted. The target
    is created and migrated if needed and must hold no memories; the source is only read.
    """
    options = settings(ctx)
    if _same_store(source, target):
        raise CommandError(f"{source} and {target} are the same store; copy into another one")
    origin = open_store(source, statement_timeout=options.statement_timeout)
    try:
        identity = origin.backend.stored_identity()
        recorded = (
            None
            if identity is None or identity.name is None
            else _RecordedEmbedder(identity.name, identity.dim)
        )
        copied = open_store(
            target,
            embedder=recorded,
            access=Access.CREATE,
            statement_timeout=options.statement_timeout,
        )
        try:
            with progress_bar(f"Copying to {copied.url}", shown=not options.json) as progress:
                report = copy_store(
                    origin.backend, copied.backend, batch_size=batch_size, progress=progress
                )
        finally:
            copied.backend.close()
    finally:
        origin.backend.close()
    if options.json:
        emit_json(_report_json(origin.url, copied.url, report))
        return
    console().print(
        Text(
            f"{origin.url} -> {copied.url}: copied {report.items} memories, "
            f"{report.events} journal events, {report.conflicts} conflicts, "
            f"{report.aliases} alias expansions and {report.checkpoints} checkpoints; verified"
        ),
        soft_wrap=True,
    )
