"""``agent-engine memory ...``: look at and manage project, global and task memory by hand.

Every command works on one scope: the project named by ``--project`` (default:
``$AGENT_ENGINE_PROJECT``, else the current directory's name) and the global memory of the
user named by ``--user`` (default: ``$AGENT_ENGINE_USER``, else ``default``). A task's memory
belongs to that project and user too: ``--task`` names the task to list or clear.

Writes that global memory treats as high-risk (adding a preference, promoting into global
memory) ask first; ``--yes`` approves. Forgetting more than one item, and clearing a task's
memory, ask too. Commands that only read never write, and open the store read-only.
"""

from __future__ import annotations

import enum
import re
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import attrs
import typer
from rich.text import Text

from agent_engine import (
    ArchiveReason,
    AuditAction,
    ConfirmationDeclined,
    ConfirmationRequest,
    ContextItem,
    GlobalMemoryStore,
    ItemNotFoundError,
    ProjectMemoryStore,
    SessionMemoryStore,
    Status,
    Task,
    TaskMemoryStore,
    Tier,
    TierStore,
    ValidationError,
    View,
    promote,
)
from agent_engine.cli._confirm import make_confirm
from agent_engine.cli._errors import CommandError
from agent_engine.cli._output import (
    console,
    counts_table,
    emit_json,
    err_console,
    item_json,
    item_table,
    show_item,
)
from agent_engine.cli._settings import default_project, default_user, settings
from agent_engine.cli._store import Access, Store, make_embedder, open_store
from agent_engine.ingest import DEFAULT_DECIDER, decide_safely
from agent_engine.redaction import DEFAULT_REDACTION
from agent_engine.tiers import parse_task_namespace

__all__ = ["app"]

app = typer.Typer(
    help="Add, list, search, show, forget, pin, promote, archive, restore and clear memories; "
    "show their history and the status; export, import, checkpoint and roll them back; edit "
    "a project's aliases.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: see the note in ._app
)


class Which(enum.StrEnum):
    """Tiers a listing can name."""

    PROJECT = "project"
    GLOBAL = "global"
    ALL = "all"


class Into(enum.StrEnum):
    """Tiers memories can be added or promoted to."""

    PROJECT = "project"
    GLOBAL = "global"


_WORD = re.compile(r"\w+")

_NEED_TEXT = "give TEXT, - (stdin) or --file PATH"

Project = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        metavar="NAME",
        help="Project scope (default: $AGENT_ENGINE_PROJECT, else the current directory's name).",
        show_default=False,
    ),
]
User = Annotated[
    str | None,
    typer.Option(
        "--user",
        metavar="NAME",
        help="Whose global memory (default: $AGENT_ENGINE_USER, else 'default').",
        show_default=False,
    ),
]
TierChoice = Annotated[Which, typer.Option("--tier", "-t", help="Which tier.")]
Kind = Annotated[
    str | None, typer.Option("--kind", "-k", metavar="KIND", help="Only items of this kind.")
]
Limit = Annotated[int, typer.Option(metavar="N", help="At most this many.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (same as the global --json).")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Approve confirmations.")]
Archived = Annotated[
    bool,
    typer.Option("--archived", help="Include the archive (what eviction and aging paged out)."),
]
ViewOption = Annotated[
    View | None,
    typer.Option(
        "--view",
        help="Which lifecycle states: working (the default), archived, current (both), "
        "all (superseded versions too).",
        show_default=False,
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="SESSION",
        help="A session's memory (of this project and user) instead of project and global.",
        show_default=False,
    ),
]
AsOf = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="TIME",
        help="What held at this time (ISO 8601 with a UTC offset, e.g. 2026-01-31T09:00+00:00).",
        show_default=False,
    ),
]


def _time(option: str, text: str | None) -> datetime | None:
    """``text`` as an aware datetime; a time without an offset would be a guess."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{option} takes an ISO 8601 time, got {text!r}") from None
    if moment.tzinfo is None:
        raise CommandError(f"{option} needs a UTC offset (e.g. {text}+00:00), got {text!r}")
    return moment


def _view(archived: bool, view: View | None) -> View:
    """The view a listing asked for: ``--view``, or ``--archived`` for the archive too."""
    if archived and view is not None and view is not View.CURRENT:
        raise CommandError("--archived is --view current; give one of them")
    return view or (View.CURRENT if archived else View.WORKING)


@attrs.frozen
class Scope:
    """The open store and the tier stores a memory command works on."""

    store: Store
    project: ProjectMemoryStore
    user: GlobalMemoryStore
    task: TaskMemoryStore | None = None
    """The memory of the task named by ``--task`` (of this project and user)."""
    session: SessionMemoryStore | None = None
    """The memory of the session named by ``--session`` (of this project and user)."""

    @property
    def narrow(self) -> TierStore | None:
        """The task's or the session's store, when the options name one."""
        return self.task if self.task is not None else self.session

    def stores(self, tier: str = Which.ALL) -> list[TierStore]:
        """The tier stores ``tier`` names (``all``: project, then global)."""
        if tier == "project":
            return [self.project]
        if tier == "global":
            return [self.user]
        return [self.project, self.user]

    def find(self, item_id: str) -> tuple[TierStore, ContextItem]:
        """The store holding ``item_id`` in this scope, and the item."""
        for store in self.stores():
            item = store.get(item_id)
            if item is not None:
                return store, item
        raise ItemNotFoundError(
            item_id, namespace=f"{self.project.namespace} or {self.user.namespace}"
        )


def _open(
    ctx: typer.Context,
    project: str | None,
    user: str | None,
    *,
    access: Access,
    embed: bool = False,
    yes: bool = False,
    task: str | None = None,
    session: str | None = None,
    redact: bool = True,
) -> Scope:
    """The scope's stores; ``redact=False`` opens them without redaction (``memory add``)."""
    if task is not None and session is not None:
        raise CommandError("--task and --session name different scopes; give one")
    options = settings(ctx)
    embedder = make_embedder(options.embedder) if embed else None
    store = open_store(
        options.db,
        embedder=embedder,
        access=access,
        statement_timeout=options.statement_timeout,
    )
    ctx.call_on_close(store.backend.close)
    project_id = project or default_project()
    user_id = user or default_user()
    policy = DEFAULT_REDACTION if redact else None
    confirm = make_confirm(yes or options.yes)
    task_of = Task(id=task, project_id=project_id, user_id=user_id) if task is not None else None
    return Scope(
        store,
        ProjectMemoryStore(project_id, store.backend, redaction=policy),
        GlobalMemoryStore(store.backend, user_id, confirm=confirm, redaction=policy),
        None if task_of is None else TaskMemoryStore(task_of, store.backend, redaction=policy),
        None
        if session is None
        else SessionMemoryStore(
            session, store.backend, project_id=project_id, user_id=user_id, redaction=policy
        ),
    )


def _json(ctx: typer.Context, flag: bool) -> bool:
    return flag or settings(ctx).json


# ---------------------------------------------------------------------------- add


def _read_text(text: str | None, file: str | None) -> str:
    """The memory's text: TEXT, stdin for ``-``, or the file; surrounding blank space dropped."""
    if text is None and file is None:
        raise ValidationError(f"the memory's text is missing; {_NEED_TEXT}", field="text")
    if text is not None and file is not None:
        raise ValidationError(f"TEXT and --file both give the text; {_NEED_TEXT}", field="text")
    if file is not None:
        try:
            raw = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CommandError(f"cannot read {file}: {reason}") from exc
    elif text == "-":
        raw = sys.stdin.read() if sys.stdin is not None else ""
    else:
        raw = text or ""
    body = raw.strip()
    if not body:
        raise ValidationError(f"the memory's text is empty; {_NEED_TEXT}", field="text", value=raw)
    return body


@app.command()
def add(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT", help="What to remember; - reads it from stdin.", show_default=False
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", metavar="PATH", help="Read what to remember from a file."),
    ] = None,
    kind: Annotated[
        str,
        typer.Option(
            "--kind", "-k", metavar="KIND", help="decision, convention, failure, pattern, ..."
        ),
    ] = "note",
    tier: Annotated[
        Into | None, typer.Option("--tier", "-t", help="Which tier (default: project).")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            metavar="SESSION",
            help="Remember it in this session's memory (of this project and user) instead.",
            show_default=False,
        ),
    ] = None,
    importance: Annotated[float, typer.Option(metavar="0..1", help="From 0 to 1.")] = 0.5,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", metavar="TAG", help="A tag (repeatable).")
    ] = None,
    pin: Annotated[bool, typer.Option("--pin", help="Pin it: always offered first.")] = False,
    source: Annotated[
        str | None,
        typer.Option("--source", metavar="WHO", help="Who said it (a turn's speaker, a tool)."),
    ] = None,
    no_redaction: Annotated[
        bool,
        typer.Option("--no-redaction", help="Store the text as given: no secret is masked."),
    ] = False,
    no_decider: Annotated[
        bool,
        typer.Option("--no-decider", help="Store it even if it is only small talk."),
    ] = False,
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Remember TEXT (- for stdin, or --file PATH) in project, global or a session's memory.

    It takes the write path (docs/ingestion.md): secrets and personal data are masked
    (--no-redaction stores the text as given), and a conversation turn (--kind turn) that is
    only small talk is not stored (--no-decider stores it). A global preference asks first.
    What the memory already holds (the same kind, nearly the same meaning) is not stored
    twice: the held memory is strengthened, and the output says which it was.
    """
    if session is not None and tier is not None:
        raise CommandError("--session and --tier name different scopes; give one")
    body = _read_text(text, file)  # before opening: bad input creates no store
    scope = _open(
        ctx,
        project,
        user,
        access=Access.CREATE,
        embed=True,
        yes=yes,
        session=session,
        redact=not no_redaction,
    )
    store = scope.session if scope.session is not None else scope.stores(tier or Into.PROJECT)[0]
    item = store.new_item(
        kind,
        body,
        importance=importance,
        tags=tag or (),
        source=source,
        status=Status.PINNED if pin else Status.CONFIRMED,
        session=session or "",
    )
    verdict, trouble = decide_safely(None if no_decider else DEFAULT_DECIDER, item)
    if trouble is not None:  # pragma: no cover - the default decider does not fail
        err_console().print(Text(f"note: {trouble}; stored anyway"))
    if not verdict.keep:
        _report_dropped(ctx, json_output, store, item, verdict.reason)
        return
    (outcome,) = store.add_outcomes([item])
    if outcome.redacted and not _json(ctx, json_output):
        found = ", ".join(f"{kind} x{n}" for kind, n in sorted(outcome.redacted.items()))
        err_console().print(Text(f"redacted before storing: {found}"))
    if _json(ctx, json_output):
        data = item_json(outcome.item)
        data["merged_into"] = outcome.merged_into
        data["similarity"] = outcome.similarity
        data["redacted"] = outcome.redacted
        data["dropped"] = None
        emit_json(data)
    elif outcome.merged:
        console().print(
            Text(
                f"merged into {outcome.merged_into} in {store.namespace} (similarity "
                f"{outcome.similarity:.2f}): already remembered as {outcome.item.text!r}"
            )
        )
    else:
        console().print(Text(f"added {item.id} to {store.namespace} ({item.kind})"))


def _report_dropped(
    ctx: typer.Context, json_output: bool, store: TierStore, item: ContextItem, reason: str
) -> None:
    """Say that the decider judged ``item`` not worth a memory, and how to store it anyway."""
    if _json(ctx, json_output):
        emit_json({"id": None, "namespace": store.namespace, "dropped": reason})
        return
    console().print(
        Text(
            f"not stored: the decider drops this {item.kind} as {reason.replace('_', '-')} "
            "(--no-decider stores it)"
        )
    )


# ---------------------------------------------------------------------------- reads


TaskOption = Annotated[
    str | None,
    typer.Option(
        "--task",
        metavar="TASK",
        help="A task's memory (of this project and user) instead of project and global.",
        show_default=False,
    ),
]


def _narrow_or_tiers(scope: Scope, tier: str) -> list[TierStore]:
    """The task's or session's store the options name, else the stores ``--tier`` names."""
    return [scope.narrow] if scope.narrow is not None else scope.stores(tier)


def _one_scope(task: str | None, session: str | None, tier: str, what: str) -> None:
    if (task is not None or session is not None) and tier != Which.ALL:
        option = "--task" if task is not None else "--session"
        raise CommandError(f"{option} {what} one scope's memory; leave out --tier")


@app.command(name="list")
def list_(
    ctx: typer.Context,
    tier: TierChoice = Which.ALL,
    task: TaskOption = None,
    session: SessionOption = None,
    kind: Kind = None,
    limit: Limit = 50,
    archived: Archived = False,
    view: ViewOption = None,
    as_of: AsOf = None,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """List memories, newest first: project and global, or one task's (--task) or session's."""
    _one_scope(task, session, tier, "lists")
    seen = _view(archived, view)
    at = _time("--as-of", as_of)
    if at is not None and (archived or view is not None):
        raise CommandError("--as-of lists what held then, whatever its state now; drop --view")
    scope = _open(ctx, project, user, access=Access.READ, task=task, session=session)
    stores = _narrow_or_tiers(scope, tier)
    filters: dict[str, Any] = {"kind": kind} if kind else {}
    items = [
        item for store in stores for item in store.query(filters, limit=limit, view=seen, as_of=at)
    ]
    items.sort(key=lambda item: item.timestamp, reverse=True)
    items = items[:limit]
    if _json(ctx, json_output):
        emit_json([item_json(item) for item in items])
        return
    title = f"{len(items)} item(s) in {', '.join(s.namespace for s in stores)}"
    console().print(item_table(items, title=title))


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What you are looking for.")],
    tier: TierChoice = Which.ALL,
    kind: Kind = None,
    limit: Limit = 10,
    archived: Archived = False,
    view: ViewOption = None,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Search memories by meaning (cosine similarity of embeddings), best first."""
    seen = _view(archived, view)
    scope = _open(ctx, project, user, access=Access.READ, embed=True)
    filters: dict[str, Any] = {"kind": kind} if kind else {}
    hits = [
        hit
        for store in scope.stores(tier)
        for hit in store.search(query, limit, filters, view=seen)
    ]
    hits.sort(key=lambda hit: hit.score, reverse=True)
    hits = hits[:limit]
    if _json(ctx, json_output):
        emit_json([{**item_json(hit.item), "score": round(hit.score, 4)} for hit in hits])
        return
    console().print(item_table(hits, title=f"{len(hits)} match(es) for {query!r}"))


@app.command()
def show(
    ctx: typer.Context,
    item_id: Annotated[str, typer.Argument(metavar="ID")],
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Show every field of one memory."""
    _, item = _open(ctx, project, user, access=Access.READ).find(item_id)
    if _json(ctx, json_output):
        emit_json(item_json(item))
    else:
        show_item(console(), item)


# ---------------------------------------------------------------------------- forget


def _keyword_matches(scope: Scope, query: str) -> list[tuple[TierStore, ContextItem]]:
    """Items containing every word of ``query``: BM25 finds candidates, words decide."""
    words = {word.casefold() for word in _WORD.findall(query)}
    if not words:
        raise ValidationError("--query needs at least one word", field="query", value=query)
    found = [
        (store, hit.item)
        for store in scope.stores()
        for hit in store.backend.lexical_search(query, 1000, store.scope)
        if words <= {word.casefold() for word in _WORD.findall(hit.item.body)}
    ]
    if not found:
        raise CommandError(f"no memory contains every word of {query!r}")
    return found


@app.command()
def forget(
    ctx: typer.Context,
    item_id: Annotated[str | None, typer.Argument(metavar="ID", show_default=False)] = None,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            "-q",
            metavar="WORDS",
            help="Forget every item containing all these words.",
        ),
    ] = None,
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Erase one memory by ID, or those matching --query (asks before erasing more than one).

    Erasing leaves no copy of the memory's text, vector or id in the store's files
    (docs/backends.md says what a PostgreSQL server may still keep).
    """
    if (item_id is None) == (query is None):
        raise CommandError("give either an ID or --query WORDS (not both)")
    scope = _open(ctx, project, user, access=Access.WRITE)
    victims = [scope.find(item_id)] if item_id is not None else _keyword_matches(scope, query or "")
    if len(victims) > 1:
        if not _json(ctx, json_output):
            console().print(item_table([item for _, item in victims], title="Would forget"))
        confirm = make_confirm(yes or settings(ctx).yes)
        items = tuple(item for _, item in victims)
        if not confirm(
            ConfirmationRequest("forget", f"Forget these {len(items)} memories?", items)
        ):
            raise ConfirmationDeclined("forget", f"forgetting {len(items)} memories")
    for store in scope.stores():  # one journaled erase per store
        store.forget(*(item.id for owner, item in victims if owner is store))
    if _json(ctx, json_output):
        emit_json({"forgotten": [item.id for _, item in victims]})
    else:
        for _, item in victims:
            console().print(Text(f"forgot {item.id} ({item.kind}: {item.text[:60]})"))


# ---------------------------------------------------------------------------- pin / promote


def _pin_command(name: str, summary: str, *, pinned: bool) -> None:
    """Register ``pin`` or ``unpin``: the same lookup, the opposite status."""

    @app.command(name=name, help=summary)
    def command(
        ctx: typer.Context,
        item_id: Annotated[str, typer.Argument(metavar="ID")],
        project: Project = None,
        user: User = None,
    ) -> None:
        scope = _open(ctx, project, user, access=Access.WRITE)
        store, _ = scope.find(item_id)
        if pinned:
            store.pin(item_id)
        else:
            store.unpin(item_id)
        console().print(Text(f"{name}ned {item_id}"))


_pin_command("pin", "Pin a memory: offered to every prompt first, never evicted.", pinned=True)
_pin_command("unpin", "Unpin a memory.", pinned=False)


@app.command(name="promote")
def promote_(
    ctx: typer.Context,
    item_id: Annotated[str, typer.Argument(metavar="ID")],
    to: Annotated[
        Into,
        typer.Option(
            "--to",
            help="project: a task's item into the project; global: a project item, after asking.",
        ),
    ],
    reason: Annotated[
        str, typer.Option(metavar="TEXT", help="Why it deserves to outlive its tier.")
    ] = "",
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Copy a memory one tier up (task -> project -> global); global asks first."""
    scope = _open(ctx, project, user, access=Access.WRITE, embed=True, yes=yes)
    source: TierStore
    target: TierStore
    if to is Into.GLOBAL:
        source, target = scope.project, scope.user
    else:
        source = _task_of(scope, item_id)
        target = scope.project
    result = promote(source, target, item_id, reason=reason)
    if _json(ctx, json_output):
        emit_json({**item_json(result.item), "duplicate": result.duplicate})
        return
    verb = "boosted the existing copy" if result.duplicate else "promoted"
    console().print(Text(f"{verb}: {result.item.id} in {target.namespace}"))


def _task_of(scope: Scope, item_id: str) -> TaskMemoryStore:
    """The memory of the task, of this scope's project and user, that holds ``item_id``."""
    item = scope.store.backend.get(item_id)
    parsed = parse_task_namespace(item.namespace) if item is not None else None
    mine = (scope.project.project_id, scope.user.user_id)
    if parsed is None or parsed[:2] != mine or item is None or item.tier is not Tier.TASK:
        raise ValidationError(
            f"--to project promotes a task's item; {item_id!r} is not in a task memory of "
            f"project {mine[0]!r} (promote a project item --to global)",
            field="id",
            value=item_id,
        )
    return TaskMemoryStore(parsed[2], scope.store.backend, project_id=mine[0], user_id=mine[1])


# ---------------------------------------------------------------------------- lifecycle


def _owned(scope: Scope, item_ids: list[str]) -> list[tuple[TierStore, list[str]]]:
    """``item_ids`` grouped by the store of the scope that holds each (unknown ids raise)."""
    groups: dict[str, tuple[TierStore, list[str]]] = {}
    for item_id in item_ids:
        store, _ = scope.find(item_id)
        groups.setdefault(store.namespace, (store, []))[1].append(item_id)
    return list(groups.values())


Ids = Annotated[list[str], typer.Argument(metavar="ID...", help="The memories.")]


def _move_command(
    name: str, summary: str, move: Callable[[TierStore, list[str]], list[ContextItem]]
) -> None:
    """Register ``archive`` or ``restore``: the same lookup, a move in one direction."""
    verb = f"{name}d"

    @app.command(name=name, help=summary)
    def command(
        ctx: typer.Context,
        item_ids: Ids,
        project: Project = None,
        user: User = None,
        json_output: Json = False,
    ) -> None:
        scope = _open(ctx, project, user, access=Access.WRITE)
        moved = [item for store, ids in _owned(scope, item_ids) for item in move(store, ids)]
        _report_moves(ctx, json_output, moved, verb)


_move_command(
    "archive",
    "Page memories out to the archive: out of prompts unless a query matches them.",
    lambda store, ids: store.archive(*ids, reason=ArchiveReason.MANUAL),
)
_move_command(
    "restore",
    "Bring archived memories back to the working set.",
    lambda store, ids: store.restore(*ids),
)


def _report_moves(
    ctx: typer.Context, json_output: bool, items: list[ContextItem], verb: str
) -> None:
    if _json(ctx, json_output):
        emit_json({verb: [item.id for item in items]})
        return
    if not items:
        console().print(Text(f"nothing {verb}: every item was {verb} already"))
    for item in items:
        console().print(Text(f"{verb} {item.id} ({item.kind}: {item.text[:60]})"))


@app.command()
def history(
    ctx: typer.Context,
    item_id: Annotated[str, typer.Argument(metavar="ID")],
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Every version of a memory, oldest first: what it replaced and what replaced it."""
    scope = _open(ctx, project, user, access=Access.READ)
    store, _ = scope.find(item_id)
    versions = store.history(item_id)
    if _json(ctx, json_output):
        emit_json([item_json(item) for item in versions])
        return
    console().print(item_table(versions, title=f"{len(versions)} version(s), oldest first"))


# ---------------------------------------------------------------------------- status


@app.command()
def status(
    ctx: typer.Context, project: Project = None, user: User = None, json_output: Json = False
) -> None:
    """Counts per tier and kind, store size and schema revision."""
    scope = _open(ctx, project, user, access=Access.READ)
    counts: list[tuple[str, str, int]] = []
    states: dict[str, dict[str, int]] = {}
    for store in scope.stores():
        kinds = Counter(item.kind for item in store.query(None, limit=None))
        counts.extend((store.namespace, kind, n) for kind, n in sorted(kinds.items()))
        working = sum(kinds.values())
        archive = store.count(view=View.ARCHIVED)
        history = store.count(view=View.ALL) - working - archive
        states[store.namespace] = {"working": working, "archived": archive, "history": history}
    backend = scope.store.backend
    size = scope.store.size_bytes()
    revision = scope.store.revision()
    totals = {tier.value: backend.count({"tier": tier.value}) for tier in Tier}
    if _json(ctx, json_output):
        emit_json(
            {
                "store": scope.store.url,
                "backend": scope.store.backend_name,
                "empty": scope.store.empty,
                "size_bytes": size,
                "schema_revision": revision,
                "project": scope.project.project_id,
                "user": scope.user.user_id,
                "counts": [{"namespace": ns, "kind": kind, "items": n} for ns, kind, n in counts],
                "states": states,
                "totals": totals,
            }
        )
        return
    out = console()
    out.print(Text(f"store: {scope.store.url} ({scope.store.backend_name})"))
    out.print(Text(f"size: {'n/a' if size is None else f'{size:,} bytes'}"))
    if scope.store.empty:
        out.print(Text("schema revision: none (no agent_engine schema yet: nothing stored)"))
    else:
        out.print(Text(f"schema revision: {revision or 'n/a'}"))
    out.print(Text("items in the store: " + ", ".join(f"{n} {t}" for t, n in totals.items())))
    out.print(Text(f"scope: {scope.project.namespace} and {scope.user.namespace}"))
    for namespace, state in states.items():
        out.print(
            Text(
                f"{namespace}: {state['working']} in the working set, {state['archived']} "
                f"archived, {state['history']} superseded version(s)"
            )
        )
    out.print(counts_table("Items in the working set of this scope", counts))


# ---------------------------------------------------------------------------- clear


@app.command()
def clear(
    ctx: typer.Context,
    task: Annotated[
        str,
        typer.Option("--task", metavar="TASK", help="The task whose memory to clear."),
    ],
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Delete every item of one task's memory (asks first)."""
    scope = _open(ctx, project, user, access=Access.WRITE, task=task)
    store = scope.task
    if store is None:  # pragma: no cover - _open builds it when a task is named
        raise CommandError("--task names the task whose memory to clear")
    items = tuple(store.list_all(view=View.ALL))
    if not items:
        raise CommandError(
            f"no items in the task memory of {task!r} ({store.namespace}): nothing to clear"
        )
    if not _json(ctx, json_output):
        console().print(item_table(list(items), title="Would clear"))
    confirm = make_confirm(yes or settings(ctx).yes)
    question = f"Clear the {len(items)} item(s) of task {task!r}?"
    if not confirm(ConfirmationRequest("clear_task", question, items)):
        raise ConfirmationDeclined("clear_task", f"clearing task {task!r}")
    store.delete_many((item.id for item in items), action=AuditAction.CLEAR)
    if _json(ctx, json_output):
        emit_json({"task": task, "namespace": store.namespace, "cleared": [i.id for i in items]})
    else:
        console().print(Text(f"cleared {len(items)} item(s) of task {task!r} ({store.namespace})"))
