"""``agent-engine memory ...``: look at and manage project and global memory by hand.

Every command works on one scope: the project named by ``--project`` (default:
``$AGENT_ENGINE_PROJECT``, else the current directory's name) and the global memory of the
user named by ``--user`` (default: ``$AGENT_ENGINE_USER``, else ``default``). Task memory
belongs to running tasks; the only way it appears here is as the source of a promotion.

Writes that global memory treats as high-risk (adding a preference, promoting into global
memory) ask first; ``--yes`` approves. Forgetting more than one item asks too.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from typing import Annotated, Any

import attrs
import typer
from rich.text import Text

from agent_engine import (
    ConfirmationDeclined,
    ConfirmationRequest,
    ContextItem,
    GlobalMemoryStore,
    ItemNotFoundError,
    ProjectMemoryStore,
    Status,
    TaskMemoryStore,
    Tier,
    TierStore,
    ValidationError,
    promote,
)
from agent_engine.cli._confirm import make_confirm
from agent_engine.cli._errors import CommandError
from agent_engine.cli._output import (
    console,
    counts_table,
    emit_json,
    item_json,
    item_table,
    show_item,
)
from agent_engine.cli._settings import default_project, default_user, settings
from agent_engine.cli._store import Store, make_embedder, open_store

__all__ = ["app"]

app = typer.Typer(
    help="Add, list, search, show, forget, pin and promote memories; show the store's status.",
    no_args_is_help=True,
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

Project = Annotated[
    str | None,
    typer.Option(
        "--project",
        "-p",
        help="Project scope (default: $AGENT_ENGINE_PROJECT, else the current directory's name).",
        show_default=False,
    ),
]
User = Annotated[
    str | None,
    typer.Option(
        "--user",
        help="Whose global memory (default: $AGENT_ENGINE_USER, else 'default').",
        show_default=False,
    ),
]
TierChoice = Annotated[Which, typer.Option("--tier", "-t", help="Which tier.")]
Kind = Annotated[str | None, typer.Option("--kind", "-k", help="Only items of this kind.")]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (same as the global --json).")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Approve confirmations.")]


@attrs.frozen
class Scope:
    """The open store and the two tier stores a memory command works on."""

    store: Store
    project: ProjectMemoryStore
    user: GlobalMemoryStore

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
    embed: bool = False,
    create: bool = False,
    yes: bool = False,
) -> Scope:
    options = settings(ctx)
    embedder = make_embedder(options.embedder) if embed else None
    store = open_store(
        options.db,
        embedder=embedder,
        create=create,
        statement_timeout=options.statement_timeout,
    )
    ctx.call_on_close(store.backend.close)
    return Scope(
        store,
        ProjectMemoryStore(project or default_project(), store.backend),
        GlobalMemoryStore(
            store.backend, user or default_user(), confirm=make_confirm(yes or options.yes)
        ),
    )


def _json(ctx: typer.Context, flag: bool) -> bool:
    return flag or settings(ctx).json


# ---------------------------------------------------------------------------- add


@app.command()
def add(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What to remember.")],
    kind: Annotated[
        str, typer.Option("--kind", "-k", help="decision, convention, failure, pattern, ...")
    ] = "note",
    tier: Annotated[Into, typer.Option("--tier", "-t", help="Which tier.")] = Into.PROJECT,
    importance: Annotated[float, typer.Option(help="From 0 to 1.")] = 0.5,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    pin: Annotated[bool, typer.Option("--pin", help="Pin it: always offered first.")] = False,
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Remember TEXT in project (default) or global memory; a global preference asks first."""
    scope = _open(ctx, project, user, embed=True, create=True, yes=yes)
    (store,) = scope.stores(tier)
    item = store.new_item(
        kind,
        text,
        importance=importance,
        tags=tag or (),
        status=Status.PINNED if pin else Status.CONFIRMED,
    )
    store.add(item)
    if _json(ctx, json_output):
        emit_json(item_json(item))
    else:
        console().print(Text(f"added {item.id} to {store.namespace} ({item.kind})"))


# ---------------------------------------------------------------------------- reads


@app.command(name="list")
def list_(
    ctx: typer.Context,
    tier: TierChoice = Which.ALL,
    kind: Kind = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 50,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """List memories, newest first."""
    scope = _open(ctx, project, user)
    filters: dict[str, Any] = {"kind": kind} if kind else {}
    items = [item for store in scope.stores(tier) for item in store.query(filters, limit=limit)]
    items.sort(key=lambda item: item.timestamp, reverse=True)
    items = items[:limit]
    if _json(ctx, json_output):
        emit_json([item_json(item) for item in items])
        return
    title = f"{len(items)} item(s) in {', '.join(s.namespace for s in scope.stores(tier))}"
    console().print(item_table(items, title=title))


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What you are looking for.")],
    tier: TierChoice = Which.ALL,
    kind: Kind = None,
    limit: Annotated[int, typer.Option(help="Best this many.")] = 10,
    project: Project = None,
    user: User = None,
    json_output: Json = False,
) -> None:
    """Search memories by meaning (cosine similarity of embeddings), best first."""
    scope = _open(ctx, project, user, embed=True)
    filters: dict[str, Any] = {"kind": kind} if kind else {}
    hits = [hit for store in scope.stores(tier) for hit in store.search(query, limit, filters)]
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
    _, item = _open(ctx, project, user).find(item_id)
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
    item_id: Annotated[str | None, typer.Argument(metavar="[ID]", show_default=False)] = None,
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Forget every item containing all these words."),
    ] = None,
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Delete one memory by ID, or those matching --query (asks before deleting more than one)."""
    if (item_id is None) == (query is None):
        raise CommandError("give either an ID or --query WORDS (not both)")
    scope = _open(ctx, project, user)
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
    for store in scope.stores():  # one journaled batch per store
        store.delete_many(item.id for owner, item in victims if owner is store)
    if _json(ctx, json_output):
        emit_json({"forgotten": [item.id for _, item in victims]})
    else:
        for _, item in victims:
            console().print(Text(f"forgot {item.id} ({item.kind}: {item.text[:60]})"))


# ---------------------------------------------------------------------------- pin / promote


@app.command()
def pin(
    ctx: typer.Context,
    item_id: Annotated[str, typer.Argument(metavar="ID")],
    project: Project = None,
    user: User = None,
) -> None:
    """Pin a memory: offered to every prompt first, never evicted."""
    scope = _open(ctx, project, user)
    store, _ = scope.find(item_id)
    store.pin(item_id)
    console().print(Text(f"pinned {item_id}"))


@app.command()
def unpin(
    ctx: typer.Context,
    item_id: Annotated[str, typer.Argument(metavar="ID")],
    project: Project = None,
    user: User = None,
) -> None:
    """Unpin a memory."""
    scope = _open(ctx, project, user)
    store, _ = scope.find(item_id)
    store.unpin(item_id)
    console().print(Text(f"unpinned {item_id}"))


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
    reason: Annotated[str, typer.Option(help="Why it deserves to outlive its tier.")] = "",
    project: Project = None,
    user: User = None,
    yes: Yes = False,
    json_output: Json = False,
) -> None:
    """Copy a memory one tier up (task -> project -> global); global asks first."""
    scope = _open(ctx, project, user, embed=True, yes=yes)
    source: TierStore
    target: TierStore
    if to is Into.GLOBAL:
        source, target = scope.project, scope.user
    else:
        item = scope.store.backend.get(item_id)
        if item is None or item.tier is not Tier.TASK:
            raise ValidationError(
                f"--to project promotes a task's item; {item_id!r} is not in any task memory "
                "(promote a project item --to global)",
                field="id",
                value=item_id,
            )
        source = TaskMemoryStore(item.namespace.removeprefix("task:"), scope.store.backend)
        target = scope.project
    result = promote(source, target, item_id, reason=reason)
    if _json(ctx, json_output):
        emit_json({**item_json(result.item), "duplicate": result.duplicate})
        return
    verb = "boosted the existing copy" if result.duplicate else "promoted"
    console().print(Text(f"{verb}: {result.item.id} in {target.namespace}"))


# ---------------------------------------------------------------------------- status


@app.command()
def status(
    ctx: typer.Context, project: Project = None, user: User = None, json_output: Json = False
) -> None:
    """Counts per tier and kind, store size and schema revision."""
    scope = _open(ctx, project, user)
    counts: list[tuple[str, str, int]] = []
    for store in scope.stores():
        kinds = Counter(item.kind for item in store.query(None, limit=None))
        counts.extend((store.namespace, kind, n) for kind, n in sorted(kinds.items()))
    backend = scope.store.backend
    size = scope.store.size_bytes()
    revision = scope.store.revision()
    totals = {tier.value: backend.count({"tier": tier.value}) for tier in Tier}
    if _json(ctx, json_output):
        emit_json(
            {
                "store": scope.store.url,
                "backend": type(backend).__name__,
                "size_bytes": size,
                "schema_revision": revision,
                "project": scope.project.project_id,
                "user": scope.user.user_id,
                "counts": [{"namespace": ns, "kind": kind, "items": n} for ns, kind, n in counts],
                "totals": totals,
            }
        )
        return
    out = console()
    out.print(Text(f"store: {scope.store.url} ({type(backend).__name__})"))
    out.print(Text(f"size: {'n/a' if size is None else f'{size:,} bytes'}"))
    out.print(Text(f"schema revision: {revision or 'n/a'}"))
    out.print(Text("items in the store: " + ", ".join(f"{n} {t}" for t, n in totals.items())))
    out.print(Text(f"scope: {scope.project.namespace} and {scope.user.namespace}"))
    out.print(counts_table("Items in this scope", counts))
