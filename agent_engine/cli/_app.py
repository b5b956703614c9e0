"""The command tree: global options here, each group of commands in its own module."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

import agent_engine
from agent_engine.cli import (
    _aliases,
    _bench,
    _candidates,
    _compact,
    _conflicts,
    _db,
    _demo,
    _ingest,
    _mcp,
    _memory,
    _pools,
    _sessions,
    _transfer,
)
from agent_engine.cli._settings import EMBEDDER_ENV, EmbedderName, Settings
from agent_engine.cli._store import url_forms

__all__ = ["app"]

app = typer.Typer(
    name="agent-engine",
    help="Tiered memory and context assembly for LLM agents: the demo, memory, migrations.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain help, as click writes it, here and in every group: typer's rich layout puts a
    # `<bool>` placeholder beside every flag (even `--help <bool>`) as if each took a value.
    rich_markup_mode=None,
)


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"agent-engine {agent_engine.__version__}\n")
        raise typer.Exit


@app.callback()
def root(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help=(
                f"Store to use: {url_forms()}. "
                "Default: $AGENT_ENGINE_DB, else an SQLite file in your data directory."
            ),
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON document for scripts.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and debug logs on stderr.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every confirmation (global writes).")
    ] = False,
    embedder: Annotated[
        EmbedderName,
        typer.Option(
            "--embedder",
            envvar=EMBEDDER_ENV,
            help="auto: MiniLM when installed, else hashing (fast, no model).",
        ),
    ] = EmbedderName.AUTO,
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            expose_value=False,
            help="Print the version and exit.",
        ),
    ] = False,
    statement_timeout: Annotated[
        float | None,
        typer.Option(
            "--statement-timeout",
            metavar="SECONDS",
            min=0,
            help=(
                "Cancel any SQL statement that runs longer (0: no limit). "
                "Default: $AGENT_ENGINE_STATEMENT_TIMEOUT, else 30."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Tiered memory and context assembly for LLM agents."""
    found = ctx.find_object(Settings)
    settings = found if found is not None else ctx.ensure_object(Settings)
    settings.db = db
    settings.json = json_output
    settings.debug = debug
    settings.yes = yes
    settings.embedder = embedder.value
    settings.statement_timeout = statement_timeout
    if debug:
        # The command is the application, so configuring logging is its call (never the
        # library's): agent_engine's debug events go to stderr, other libraries stay quiet.
        logger = logging.getLogger("agent_engine")
        logger.setLevel(logging.DEBUG)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


app.command(name="demo", short_help="Run the demo: an agent's task on a sample project.")(
    _demo.demo
)
app.command(
    name="bench",
    short_help="Run the benchmark suite (`bench --help` lists its options).",
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)(_bench.bench)
_memory.app.command(
    name="conflicts", short_help="List contradicting memories, or resolve one by keeping it."
)(_conflicts.conflicts)
_memory.app.command(name="candidates")(_candidates.candidates)
_memory.app.command(name="confirm")(_candidates.confirm)
_memory.app.command(name="compact")(_compact.compact)
_memory.app.command(name="export")(_transfer.export)
_memory.app.command(name="import")(_transfer.import_)
_memory.app.command(name="checkpoint")(_transfer.checkpoint)
_memory.app.command(name="rollback")(_transfer.rollback)
_memory.app.command(name="fork")(_transfer.fork)
_memory.app.command(name="finish-session")(_sessions.finish_session)
_memory.app.add_typer(
    _aliases.app, name="alias", short_help="A project's aliases: add, list or remove them."
)
_memory.app.add_typer(
    _pools.app, name="pool", short_help="Shared pools: register agents, grant access, read, post."
)
app.command(name="mcp", short_help="Serve a project's memory to an MCP client over stdio.")(
    _mcp.mcp
)
app.add_typer(
    _memory.app, name="memory", short_help="Manage project, global, session and task memory."
)
app.add_typer(_db.app, name="db", short_help="Upgrade the database schema, or show it.")
app.add_typer(
    _ingest.app, name="ingest", short_help="Queue memories for a worker to store; run it."
)
