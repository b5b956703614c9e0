"""``agent-engine ingest ...``: the durable ingestion queue from the shell.

``backfill FILE`` queues the events of a JSONL file (``-``: stdin), with a progress bar on
stderr; ``--dry-run`` checks every line and changes nothing. ``worker`` stores what is queued,
in batches, until stopped (SIGINT or SIGTERM finish the batch in hand first) or, with
``--until-idle``, until nothing is due. ``status`` counts the queue and lists the dead
letters; ``retry`` queues dead letters again. The queue lives in the store's database
(``--db``): a SQLite file or PostgreSQL.
"""

from __future__ import annotations

import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import attrs
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from agent_engine import MemoryStores
from agent_engine.cli._errors import CommandError
from agent_engine.cli._memory import Json, Project, User, _json
from agent_engine.cli._output import console, emit_json, err_console
from agent_engine.cli._settings import default_project, default_user, settings
from agent_engine.cli._store import Access, Store, make_embedder, open_store
from agent_engine.ingest import (
    DEFAULT_DECIDER,
    IngestQueue,
    IngestReport,
    IngestWorker,
    check_events,
)
from agent_engine.memory.queue import DeadLetter, QueueCounts

__all__ = ["app"]

app = typer.Typer(
    help="The durable ingestion queue: backfill a JSONL file, run a worker, see the status, "
    "retry dead letters.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_PREVIEW = 60


def _open(
    ctx: typer.Context, access: Access, *, embed: bool = False
) -> tuple[Store, IngestQueue | None]:
    """The store, and its queue (``None`` for a store never written to: reads see it empty)."""
    options = settings(ctx)
    store = open_store(
        options.db,
        embedder=make_embedder(options.embedder) if embed else None,
        access=access,
        statement_timeout=options.statement_timeout,
    )
    ctx.call_on_close(store.backend.close)
    if store.empty:
        return store, None
    return store, IngestQueue.of(store.backend)


@app.command()
def backfill(
    ctx: typer.Context,
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="A JSONL file of events; - reads stdin.")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check every line; queue and record nothing.")
    ] = False,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Queue the events of FILE, one JSON object per line, for a worker to store.

    An object without a project or user takes --project and --user (defaults as for the
    memory commands). A line that is not an event goes to the dead letters with its line
    number and the reason; the rest is queued. Keys already queued are not queued again.
    """
    lines, total = _lines(file)
    defaults = {"project": project or default_project(), "user": user or default_user()}
    origin = "stdin" if file == "-" else Path(file).name
    # What keys the lines without a key of their own: a file's full path (backfilled again,
    # it queues nothing twice), or this one run of stdin.
    source = f"stdin:{uuid.uuid4()}" if file == "-" else str(Path(file).resolve())
    queue = None if dry_run else _open(ctx, Access.CREATE)[1]
    with _progress(total, quiet=_json(ctx, json_output)) as advance:
        if queue is None:  # a dry run needs no store at all
            report = check_events(lines, progress=advance, defaults=defaults)
        else:
            report = queue.backfill(
                lines, origin=origin, source=source, progress=advance, defaults=defaults
            )
    data = {
        "dry_run": report.dry_run,
        "lines": report.lines,
        "queued": report.queued,
        "duplicates": report.duplicates,
        "rejected": [{"line": line, "reason": reason} for line, reason in report.rejected],
    }
    if _json(ctx, json_output):
        emit_json(data)
        return
    verb = "would queue" if dry_run else "queued"
    summary = f"{report.lines} line(s): {verb} {report.queued}"
    if report.duplicates:
        summary += f", {report.duplicates} already queued"
    if report.rejected:
        where = "rejected" if dry_run else "sent to the dead letters"
        summary += f", {len(report.rejected)} {where}"
    out = console()
    out.print(Text(summary))
    for line, reason in report.rejected[:20]:
        out.print(Text(f"  line {line}: {reason}"))


def _lines(file: str) -> tuple[Iterator[str], int | None]:
    """The lines of ``file`` (stdin for ``-``) and, for a file, how many (for the bar)."""
    if file == "-":
        return iter(sys.stdin), None
    path = Path(file)
    try:
        with path.open("rb") as counted:
            total = sum(1 for _ in counted)
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {file}: {exc.strerror or exc}") from exc

    def read() -> Iterator[str]:
        with handle:
            try:
                yield from handle
            except UnicodeDecodeError as exc:
                raise CommandError(f"{file} is not UTF-8 text: {exc}") from exc

    return read(), total


class _progress:  # noqa: N801 - used as a context manager, like a function
    """A progress bar on stderr over ``total`` lines (none under --json or without a TTY)."""

    def __init__(self, total: int | None, *, quiet: bool) -> None:
        self._bar: Progress | None = None
        if not quiet:
            self._bar = Progress(
                TextColumn("backfill"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console(),
                transient=True,
            )
            self._task = self._bar.add_task("lines", total=total)

    def __enter__(self) -> Any:
        if self._bar is None:
            return None
        self._bar.start()
        bar, task = self._bar, self._task
        return lambda done: bar.update(task, completed=done)

    def __exit__(self, *_: object) -> None:
        if self._bar is not None:
            self._bar.stop()


@app.command()
def worker(
    ctx: typer.Context,
    until_idle: Annotated[
        bool,
        typer.Option("--until-idle", help="Stop once nothing is due (else run until stopped)."),
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, metavar="N", help="Events per batch.")
    ] = 64,
    poll: Annotated[
        float, typer.Option("--poll", min=0.01, metavar="SECONDS", help="Wait when idle.")
    ] = 1.0,
    lease: Annotated[
        float,
        typer.Option(
            "--lease",
            min=1,
            metavar="SECONDS",
            help="How long a batch is held before others may take it.",
        ),
    ] = 300.0,
    no_decider: Annotated[
        bool, typer.Option("--no-decider", help="Store every event; drop no small talk.")
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Approve global memory's high-risk writes (else they go to the dead letters).",
        ),
    ] = False,
    json_output: Json = False,
) -> None:
    """Store queued events in batches: embedded, redacted, merged, written once each.

    SIGINT or SIGTERM stop it after the batch in hand. A worker killed outright loses
    nothing: its batch is taken again once its lease runs out, and nothing is stored twice.
    """
    store, queue = _open(ctx, Access.CREATE, embed=True)
    if queue is None:  # pragma: no cover - a store opened to create is never empty
        raise CommandError("the store could not be created")
    approve = yes or settings(ctx).yes
    stores = MemoryStores(store.backend, confirm=(lambda _request: True) if approve else None)
    work = IngestWorker(
        queue,
        stores,
        decider=None if no_decider else DEFAULT_DECIDER,
        batch_size=batch_size,
        lease_s=lease,
    )
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def halt(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    for sig in previous:
        signal.signal(sig, halt)
    quiet = _json(ctx, json_output)
    note = err_console()

    def show(batch: IngestReport) -> None:
        if not quiet:
            note.print(Text(_report_line(batch)))

    try:
        total = work.run(until_idle=until_idle, poll_s=poll, stop=stop, on_batch=show)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if quiet:
        emit_json(_report_json(total))
    else:
        console().print(Text(f"done: {_report_line(total)}"))


def _report_line(report: IngestReport) -> str:
    parts = [f"{report.claimed} claimed", f"{report.stored} stored"]
    for label, count in (
        ("merged", report.merged),
        ("found stored", report.found_stored),
        ("dropped", sum(report.dropped.values())),
        ("retried later", report.retried),
        ("dead", report.dead),
        ("decider errors", len(report.errors)),
    ):
        if count:
            parts.append(f"{count} {label}")
    return ", ".join(parts)


def _report_json(report: IngestReport) -> dict[str, Any]:
    return attrs.asdict(report)


@app.command()
def status(
    ctx: typer.Context,
    dead: Annotated[
        int, typer.Option("--dead", min=0, metavar="N", help="List at most N dead letters.")
    ] = 20,
    json_output: Json = False,
) -> None:
    """Count the queue (pending, leased, done, dropped, dead) and list the dead letters."""
    _, queue = _open(ctx, Access.READ)
    counts = queue.status() if queue is not None else QueueCounts(0, 0, 0, 0, 0)
    letters = queue.dead_letters(limit=dead) if queue is not None else []
    if _json(ctx, json_output):
        emit_json(
            {
                "pending": counts.pending,
                "leased": counts.leased,
                "done": counts.done,
                "dropped": counts.dropped,
                "dead": counts.dead,
                "oldest_pending": counts.oldest_pending.isoformat()
                if counts.oldest_pending
                else None,
                "dead_letters": [_letter_json(letter) for letter in letters],
            }
        )
        return
    out = console()
    line = (
        f"{counts.pending} pending, {counts.leased} leased, {counts.done} done, "
        f"{counts.dropped} dropped, {counts.dead} dead"
    )
    if counts.oldest_pending is not None:
        line += f" (oldest pending since {counts.oldest_pending.isoformat(timespec='seconds')})"
    out.print(Text(line))
    if letters:
        out.print(_dead_table(letters, counts.dead))


def _letter_json(letter: DeadLetter) -> dict[str, Any]:
    data = attrs.asdict(letter)
    data["failed_at"] = letter.failed_at.isoformat() if letter.failed_at else None
    return data


def _dead_table(letters: list[DeadLetter], total: int) -> Table:
    table = Table(
        title="dead letters (ingest retry SEQ... queues them again)", title_justify="left"
    )
    for name in ("seq", "origin", "reason"):
        table.add_column(name, no_wrap=name != "reason")
    table.add_column("event", ratio=1)
    for letter in letters:
        flat = " ".join(letter.event.split())
        preview = flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
        table.add_row(
            Text(str(letter.seq)), Text(letter.origin), Text(letter.reason), Text(preview)
        )
    if total > len(letters):
        table.caption = f"... and {total - len(letters)} more (--dead N, or --json)"
    return table


@app.command()
def retry(
    ctx: typer.Context,
    seqs: Annotated[
        list[int] | None,
        typer.Argument(
            metavar="SEQ...",
            help="The dead letters to queue again (see status).",
            show_default=False,
        ),
    ] = None,
    all_letters: Annotated[
        bool, typer.Option("--all", help="Queue every dead letter that is an event again.")
    ] = False,
    json_output: Json = False,
) -> None:
    """Queue dead letters again, by number (ingest status lists them) or --all.

    Malformed lines stay: fix the file and backfill it again.
    """
    if bool(seqs) == all_letters:
        raise CommandError("name the dead letters to retry (SEQ...), or give --all")
    _, queue = _open(ctx, Access.WRITE)
    revived = queue.retry(None if all_letters else seqs) if queue is not None else []
    if _json(ctx, json_output):
        emit_json({"retried": [letter.seq for letter in revived]})
        return
    left = len(seqs or []) - len(revived) if not all_letters else 0
    line = f"queued {len(revived)} dead letter(s) again"
    if left > 0:
        line += f"; {left} not found or not an event (a malformed line stays: fix and backfill)"
    console().print(Text(line))
