"""Export a scope (or a whole store) to a versioned JSONL file, and import one into any backend.

What a user runs to move one project's memory to another store, to keep a copy of it, or to
hand it to a colleague (``agent-engine memory export/import``). The file is JSON lines:

* a **header**: ``{"format": "agent_engine.export", "version": 2, ...}`` with when it was
  written, the scope it holds (``namespace``/``tier``, ``null`` for the whole store), whether
  vectors are in it and the embedder that made them;
* the **records**, one per line, each ``{"record": <kind>, "data": ...}``: every ``item`` of
  the scope in id order and in every lifecycle state (archive and superseded history too),
  each whole as :func:`~agent_engine.serde.to_dict` writes it (without its vector when
  vectors are left out); the ``conflict`` records between exported items; the journal's
  ``event`` records of the scope; the ``alias`` records of its namespaces; the ``grant``
  records of a pool's grants (every pool's, for the whole store) after the ``agent`` records
  of the agents they name (every project's, for the whole store);
* a **trailer**: ``{"record": "end", "counts": {...}, "sha256": ...}``, the counts of each
  kind and the SHA-256 of every line before it.

The trailer is what makes an import safe: a file cut short has none, and one changed since it
was written (a line edited, lost or swapped) fails its hash. An import reads and checks the
whole file, every record decoded and validated, before it writes anything, and refuses a file
of another format version, truncated or corrupted with :class:`~agent_engine.errors.
ExportFileError` naming the line. Then it is **idempotent**: an item the target holds already,
equal to the file's, is left as it is, so importing a file twice imports it once; an item
the target holds *otherwise* is a conflict between two memories and refuses the import
before anything is written. The new items go in one ``add_many`` (all or none), then their
conflicts, the events the target lacks and the aliases; if one of those later writes fails,
the items this import added are deleted again and :class:`~agent_engine.errors.
CopyIncompleteError` says so (events already appended stay in the journal: a journal is
never rewritten). Vectors left out of a file are made again by the target's embedder, as for
any item stored without one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import attrs

from agent_engine import _validate
from agent_engine._log import get_logger
from agent_engine.embeddings import EmbedderIdentity
from agent_engine.errors import (
    AgentEngineError,
    CopyIncompleteError,
    ExportFileError,
    ValidationError,
)
from agent_engine.filters import Condition, Op
from agent_engine.memory.aliases import check_add
from agent_engine.memory.backend import MemoryBackend
from agent_engine.memory.conflicts import Conflict
from agent_engine.memory.copy import COPY_BATCH, check_vectors_fit, pages
from agent_engine.memory.grants import Grant, check_agent, check_realm
from agent_engine.memory.lineage import Fork, check_hidden, reads_through
from agent_engine.models import AuditAction, AuditEvent, ContextItem, Tier, utcnow
from agent_engine.serde import from_dict, to_dict

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ExportReport",
    "ImportReport",
    "RestorePlan",
    "export_store",
    "import_store",
    "restore_plan",
    "restore_scope",
    "snapshot_items",
]

EXPORT_FORMAT: Final = "agent_engine.export"
"""What the header's ``format`` says: this file is an agent_engine export."""
EXPORT_VERSION: Final = 3
"""The format version this agent_engine writes: 3 since a whole store's file carries its
forks (2: items record their agent and a session tier exists; a reader of an older version
would refuse either). It reads versions 1, 2 and 3."""
READABLE_VERSIONS: Final = frozenset({1, 2, EXPORT_VERSION})
"""The format versions this agent_engine reads: a version 1 file's items have no agent."""

_ITEM, _CONFLICT, _EVENT, _ALIAS, _END = "item", "conflict", "event", "alias", "end"
_AGENT, _GRANT, _FORK = "agent", "grant", "fork"
_KINDS: Final = (_ITEM, _CONFLICT, _EVENT, _ALIAS, _AGENT, _GRANT, _FORK)
_MODELS: Final[dict[str, type[Any]]] = {
    _ITEM: ContextItem,
    _CONFLICT: Conflict,
    _EVENT: AuditEvent,
    _GRANT: Grant,
}
"""The records that are one model each, read as the library reads its own."""

Progress = Callable[[int, int], None]
"""Called with the records done so far and the total."""


@attrs.frozen(kw_only=True)
class ExportReport:
    """What :func:`export_store` wrote: records of each kind, and whether vectors went too."""

    items: int
    conflicts: int
    events: int
    aliases: int
    vectors: bool
    namespace: str | None
    tier: Tier | None
    agents: int = 0
    grants: int = 0
    forks: int = 0
    """Fork records (a whole store's file only: a scope's holds what the scope reads)."""


@attrs.frozen(kw_only=True)
class ImportReport:
    """What :func:`import_store` did: what it added, and what the target held already."""

    items: int
    """Items added."""
    unchanged: int
    """Items the target held already, equal to the file's (left as they were)."""
    conflicts: int
    events: int
    aliases: int
    """Alias terms written (an expansion held already is no change)."""
    agents: int = 0
    """Agents registered (one registered already is no change)."""
    grants: int = 0
    """Grants written (each replaces the agent's access to its pool)."""
    forks: int = 0
    """Fork records written, each with the ids it hides (one held already is no change)."""


def export_store(
    source: MemoryBackend,
    out: IO[str] | Path | str,
    *,
    namespace: str | None = None,
    tier: Tier | None = None,
    vectors: bool = True,
    journal: bool = True,
    batch_size: int = COPY_BATCH,
    progress: Progress | None = None,
    items: Sequence[ContextItem] | None = None,
) -> ExportReport:
    """Write ``source``'s items of one scope (``namespace``/``tier``; all: the whole store).

    ``out`` is a path (written whole, then moved into place, so a failed export leaves no
    half file) or a text stream. ``vectors=False`` leaves the vectors out: a smaller file,
    re-embedded on import. ``journal=False`` leaves the scope's journal out (what a
    checkpoint does: a rollback never reads it). ``progress(done, total)`` follows the items.
    ``items``: the scope's items as its store reads them, written instead of those the
    backend holds under its namespace (a fork's, with those it reads through its parent).
    """
    namespace = None if namespace is None else _validate.identifier("namespace", namespace)
    tier = None if tier is None else _validate.member("tier", Tier, tier)
    batch_size = _validate.integer("batch_size", batch_size, minimum=1, maximum=_validate.MAX_COUNT)
    for flag, value in (("vectors", vectors), ("journal", journal)):
        if not isinstance(value, bool):
            raise ValidationError(f"{flag} must be True or False", field=flag, value=value)
    scope = _scope(namespace, tier)
    if items is None:
        _check_whole(source, namespace, tier)
    identity = source.stored_identity() if vectors else None
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": utcnow().isoformat(),
        "namespace": namespace,
        "tier": None if tier is None else tier.value,
        "vectors": vectors,
        "embedder": None if identity is None else {"name": identity.name, "dim": identity.dim},
    }
    records = itertools.chain(
        _items(
            source,
            scope,
            vectors=vectors,
            batch_size=batch_size,
            progress=progress,
            given=items,
        ),
        (
            (_EVENT, to_dict(event))
            for event in (_events(source, namespace, tier) if journal else ())
        ),
        _aliases(source, namespace),
        _grants(source, namespace, tier),
        _forks(source) if namespace is None and tier is None else (),
    )
    if isinstance(out, (str, Path)):
        path = Path(out)
        partial = path.with_name(f".{path.name}.partial")
        try:
            with partial.open("w", encoding="utf-8") as stream:
                counts = _write(stream, header, records)
            partial.replace(path)
        except OSError as exc:
            raise ExportFileError(
                f"cannot write {path}: {exc.strerror or exc}", field="file", value=str(path)
            ) from exc
        finally:
            partial.unlink(missing_ok=True)
    else:
        counts = _write(out, header, records)
    get_logger(component="export").info(
        "store exported", items=counts[_ITEM], conflicts=counts[_CONFLICT], journal=counts[_EVENT]
    )
    return ExportReport(
        items=counts[_ITEM],
        conflicts=counts[_CONFLICT],
        events=counts[_EVENT],
        aliases=counts[_ALIAS],
        vectors=vectors,
        namespace=namespace,
        tier=tier,
        agents=counts[_AGENT],
        grants=counts[_GRANT],
        forks=counts[_FORK],
    )


def import_store(
    target: MemoryBackend,
    source: IO[str] | Path | str,
    *,
    grants: bool = False,
    progress: Progress | None = None,
) -> ImportReport:
    """Import an export file into ``target``, all or nothing; see the module for the rules.

    The file's pool grants are left out unless ``grants`` asks for them: access rules are
    the target's own, and a file must not give back a grant the target revoked since. With
    ``grants``, the agents the file names are registered, and each grant is added only where
    the target gives that agent nothing on that pool (never replacing one), journaled first
    as a ``grant`` by ``"import"``; a grant whose agent neither the file nor the target
    registered refuses the import before anything is written.
    """
    if not isinstance(grants, bool):
        raise ValidationError("grants must be True or False", field="grants", value=grants)
    parsed = _read(source)
    check_vectors_fit(parsed.identity, target)
    given = _new_grants(target, parsed) if grants else []
    forks = _new_forks(target, parsed)
    new = _new_items(target, parsed)
    _check_not_into_forks(target, new)
    if progress is not None:
        progress(0, len(new))
    _hide_from_forks(target, new)
    if new:
        target.add_many(new)
    written: list[Grant] = []
    recorded: list[Fork] = []
    try:
        conflicts, events, agents = _write_beside(
            target, parsed, given if grants else None, written
        )
        _record_forks(target, forks, recorded)
    except AgentEngineError as exc:
        _take_back(target, new, written, recorded)
        raise CopyIncompleteError(
            f"the import into {target!r} stopped ({exc}); the items and grants it added were "
            "removed",
            differences=(str(exc),),
        ) from exc
    if progress is not None:
        progress(len(new), len(new))
    report = ImportReport(
        items=len(new),
        unchanged=len(parsed.items) - len(new),
        conflicts=conflicts,
        events=events,
        aliases=len(parsed.aliases),
        agents=agents,
        grants=len(given),
        forks=len(forks),
    )
    get_logger(component="import").info(
        "store imported", items=report.items, unchanged=report.unchanged, journal=report.events
    )
    return report


@attrs.frozen(kw_only=True)
class RestorePlan:
    """What restoring a scope's snapshot changes: what it adds, replaces and forgets.

    ``exported_at`` is when the snapshot was taken (its header's time, as written).
    """

    namespace: str
    tier: Tier
    exported_at: str
    add: tuple[ContextItem, ...]
    replace: tuple[ContextItem, ...]
    forget: tuple[str, ...]
    unchanged: int
    aliases: Mapping[str, tuple[str, ...]]
    conflicts: tuple[Conflict, ...]

    @property
    def destructive(self) -> bool:
        """Whether the restore replaces or forgets memories (what a caller should confirm)."""
        return bool(self.replace or self.forget)


def restore_plan(
    target: MemoryBackend,
    source: IO[str] | Path | str,
    *,
    current: Sequence[ContextItem] | None = None,
) -> RestorePlan:
    """Read a scope's snapshot (an export of one namespace and tier) and plan its restore.

    Checks the file as :func:`import_store` does and writes nothing, so a caller can show
    what :func:`restore_scope` would do and ask first. ``current``: the scope's items as its
    store reads them, compared instead of those the backend holds under its namespace (a
    fork's, with those it reads through its parent).
    """
    namespace, tier, parsed = _snapshot(target, source)
    scope = _scope(namespace, tier)
    if current is None:
        now = {item.id: item for batch in pages(target, COPY_BATCH, scope) for item in batch}
    else:
        now = {item.id: item for item in current}
    kept = {item.id for item in parsed.items}
    add = tuple(item for item in parsed.items if item.id not in now)
    replace = tuple(
        item for item in parsed.items if item.id in now and not _same(now[item.id], item)
    )
    return RestorePlan(
        namespace=namespace,
        tier=tier,
        exported_at=parsed.exported_at,
        add=add,
        replace=replace,
        forget=tuple(sorted(item_id for item_id in now if item_id not in kept)),
        unchanged=len(parsed.items) - len(add) - len(replace),
        aliases={
            term: tuple(expansions)
            for held, term, expansions in parsed.aliases
            if held == namespace
        },
        conflicts=tuple(parsed.conflicts),
    )


def snapshot_items(target: MemoryBackend, source: IO[str] | Path | str) -> tuple[ContextItem, ...]:
    """The items a scope's snapshot holds, checked as :func:`restore_plan` checks them.

    What a fork started from a checkpoint copies (:mod:`agent_engine.tiers.forks`).
    """
    return tuple(_snapshot(target, source)[2].items)


def _snapshot(target: MemoryBackend, source: IO[str] | Path | str) -> tuple[str, Tier, _Parsed]:
    """A scope's snapshot read whole: one scope, vectors that fit ``target``, items its own."""
    parsed = _read(source)
    if parsed.namespace is None or parsed.tier is None:
        raise ExportFileError(
            "line 1: a snapshot holds one scope (a namespace and a tier); this file holds "
            f"{'a whole store' if parsed.namespace is None else 'every tier of a namespace'}",
            field="line",
            line=1,
        )
    check_vectors_fit(parsed.identity, target)
    for item in parsed.items:
        if (item.namespace, item.tier) != (parsed.namespace, parsed.tier):
            raise ExportFileError(
                f"line {parsed.lines[item.id]}: item {item.id!r} is of "
                f"{item.namespace}/{item.tier.value}, not of the snapshot's scope "
                f"{parsed.namespace}/{parsed.tier.value}",
                field="line",
                line=parsed.lines[item.id],
            )
    return parsed.namespace, parsed.tier, parsed


def restore_scope(target: MemoryBackend, plan: RestorePlan) -> RestorePlan:
    """Make the plan's scope what its snapshot held; return the plan carried out.

    Its items become the snapshot's, whole: the ones added or changed since are replaced or
    forgotten, the ones the snapshot holds and the scope lost come back, and the scope's
    aliases become the snapshot's. Added and replaced items are one write; the forgotten
    ones are deleted after it (and their conflicts with them); each is journaled, with the
    snapshot's time. Restoring again converges: a restore cut short is finished by running
    it again.

    A scope that reads through a parent, or that has forks reading through it, is refused
    (:class:`~agent_engine.errors.ValidationError`, nothing written): restoring it would
    change what its forks read. Restore through its store
    (:func:`agent_engine.tiers.checkpoints.restore`), which detaches them first.
    """
    _check_unshared(target, plan)
    if plan.add or plan.replace:
        target.write(add=plan.add, update=plan.replace)
    if plan.forget:
        target.delete_many(plan.forget)
    conflicts = [c for c in plan.conflicts if target.conflicts.get(c.id) is None]
    if conflicts:
        target.conflicts.record(conflicts)
    held = target.aliases.of_namespace(plan.namespace)
    for term in held:
        if term not in plan.aliases:
            target.aliases.remove(plan.namespace, term)
    for term, expansions in plan.aliases.items():
        extra = [e for e in held.get(term, ()) if e not in expansions]
        if extra:
            target.aliases.remove(plan.namespace, term, extra)
        target.aliases.add(plan.namespace, term, expansions)
    detail = {"snapshot": plan.exported_at}
    written = [item.id for item in (*plan.add, *plan.replace)]
    for action, ids in ((AuditAction.UPDATE, written), (AuditAction.DELETE, list(plan.forget))):
        if ids:
            target.audit.append(
                AuditEvent(
                    action=action,
                    tier=plan.tier,
                    namespace=plan.namespace,
                    item_ids=tuple(ids),
                    detail=detail,
                )
            )
    get_logger(component="restore").info(
        "scope restored",
        namespace=plan.namespace,
        added=len(plan.add),
        replaced=len(plan.replace),
        forgotten=len(plan.forget),
    )
    return plan


# ---------------------------------------------------------------------------- writing


def _check_whole(source: MemoryBackend, namespace: str | None, tier: Tier | None) -> None:
    """Refuse to export a fork from what the backend holds of it: that is only what it changed.

    A fork reads the rest through its parent (:mod:`agent_engine.tiers.forks`); its export
    is made from what its store reads (``items=store.inherited_view()``).
    """
    if namespace is None or tier is None:
        return
    if reads_through(source.lineage, namespace, tier):
        raise ValidationError(
            f"{tier.value} scope {namespace!r} is a fork that reads through its parent: export "
            "what its store reads (items=store.inherited_view())",
            field="namespace",
            value=namespace,
        )


def _check_unshared(target: MemoryBackend, plan: RestorePlan) -> None:
    """Refuse to restore a scope that shares memory with a fork (see :func:`restore_scope`)."""
    if reads_through(target.lineage, plan.namespace, plan.tier) or target.lineage.children(
        plan.namespace, plan.tier
    ):
        raise ValidationError(
            f"{plan.tier.value} scope {plan.namespace!r} shares memory with its forks or its "
            "parent: restore it through its store, which detaches them first",
            field="plan",
            value=plan.namespace,
        )


def _line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "\n"


def _write(
    stream: IO[str], header: Mapping[str, Any], records: Iterable[tuple[str, Any]]
) -> dict[str, int]:
    """The header, each record and the trailer (counts and hash of every line before it)."""
    counts = dict.fromkeys(_KINDS, 0)
    digest = hashlib.sha256()
    first = _line(header)
    digest.update(first.encode("utf-8"))
    stream.write(first)
    for kind, data in records:
        line = _line({"record": kind, "data": data})
        digest.update(line.encode("utf-8"))
        stream.write(line)
        counts[kind] += 1
    stream.write(_line({"record": _END, "counts": counts, "sha256": digest.hexdigest()}))
    return counts


def _items(
    source: MemoryBackend,
    scope: tuple[Condition, ...],
    *,
    vectors: bool,
    batch_size: int,
    progress: Progress | None,
    given: Sequence[ContextItem] | None = None,
) -> Iterator[tuple[str, Any]]:
    """The scope's items in id order, each page's conflicts after it (once both are out)."""
    if given is None:
        total = source.count(_scope_filter(scope))
        batches: Iterable[list[ContextItem]] = pages(source, batch_size, scope)
    else:
        ordered = sorted(given, key=lambda item: item.id)
        total = len(ordered)
        batches = (ordered[i : i + batch_size] for i in range(0, total, batch_size))
    exported: set[str] = set()
    if progress is not None:
        progress(0, total)
    for batch in batches:
        for item in batch:
            yield _ITEM, to_dict(item if vectors else attrs.evolve(item, embedding=None))
        ids = {item.id for item in batch}
        exported |= ids
        if progress is not None:
            progress(len(exported), max(len(exported), total))
        for conflict in source.conflicts.of_items(ids, include_resolved=True):
            # Written with the later of its two items, and only when both are exported.
            if max(conflict.item_ids) in ids and min(conflict.item_ids) in exported:
                yield _CONFLICT, to_dict(conflict)


def _aliases(source: MemoryBackend, namespace: str | None) -> Iterator[tuple[str, Any]]:
    """The aliases of the exported namespace (of every namespace, for the whole store)."""
    for name in source.aliases.namespaces() if namespace is None else [namespace]:
        for term, expansions in source.aliases.of_namespace(name).items():
            yield _ALIAS, {"namespace": name, "term": term, "expansions": list(expansions)}


def _grants(
    source: MemoryBackend, namespace: str | None, tier: Tier | None
) -> Iterator[tuple[str, Any]]:
    """The exported pool's grants (every pool's, for the whole store), after their agents.

    Agents first, so an import registers each before a grant names it; the whole store gives
    every project's agents, a pool the agents its grants name.
    """
    pools = source.grants.pools() if namespace is None else [namespace]
    if namespace is None and tier is not None:
        return  # a tier of every namespace: no pool's, and not the whole store's either
    grants = [grant for pool in pools for grant in source.grants.of_pool(pool)]
    if namespace is None:
        agents = [
            (realm, agent)
            for realm in source.grants.realms()
            for agent in source.grants.agents(realm)
        ]
    else:
        agents = sorted({(grant.realm, grant.agent) for grant in grants})
    for realm, agent in agents:
        yield _AGENT, {"realm": realm, "agent": agent}
    for grant in grants:
        yield _GRANT, to_dict(grant)


def _forks(source: MemoryBackend) -> Iterator[tuple[str, Any]]:
    """Every fork record with the ids it hides: a whole store's forks, to read through again.

    A scope's file holds no lineage: it holds what the scope reads, its parent's items
    included (``items=``), and stands alone.
    """
    for fork in source.lineage.all():
        hidden = sorted(source.lineage.hidden(fork.namespace, fork.tier))
        yield _FORK, {"fork": to_dict(fork), "hidden": hidden}


def _scope(namespace: str | None, tier: Tier | None) -> tuple[Condition, ...]:
    conditions: list[Condition] = []
    if namespace is not None:
        conditions.append(Condition("namespace", Op.EQ, namespace))
    if tier is not None:
        conditions.append(Condition("tier", Op.EQ, tier.value))
    return tuple(conditions)


def _scope_filter(scope: tuple[Condition, ...]) -> dict[str, Any]:
    return {condition.field: condition.value for condition in scope}


def _events(source: MemoryBackend, namespace: str | None, tier: Tier | None) -> list[AuditEvent]:
    """The journal's events of the scope, oldest first (the order they are appended in)."""
    events = source.audit.events(namespace=namespace, limit=None)
    return [event for event in reversed(events) if tier is None or event.tier is tier]


# ---------------------------------------------------------------------------- reading


@attrs.frozen
class _Parsed:
    namespace: str | None
    tier: Tier | None
    exported_at: str
    identity: EmbedderIdentity | None
    items: list[ContextItem]
    conflicts: list[Conflict]
    events: list[AuditEvent]
    aliases: list[tuple[str, str, list[str]]]
    agents: list[tuple[str, str]]
    grants: list[Grant]
    forks: list[tuple[Fork, list[str]]]
    lines: dict[str, int]
    """The line each item was read from."""


def _read(source: IO[str] | Path | str) -> _Parsed:
    """Every record of the file, checked: the header, each line, the counts and the hash."""
    if isinstance(source, (str, Path)):
        try:
            with Path(source).open(encoding="utf-8") as stream:
                return _parse(stream)
        except OSError as exc:
            raise ExportFileError(
                f"cannot read {source}: {exc.strerror or exc}", field="file", value=str(source)
            ) from exc
        except UnicodeDecodeError as exc:
            raise ExportFileError(
                f"{source} is not UTF-8 text ({exc.reason}): not an agent_engine export",
                field="file",
                value=str(source),
            ) from exc
    return _parse(source)


def _parse(stream: Iterable[str]) -> _Parsed:
    digest = hashlib.sha256()
    lines = iter(enumerate(stream, 1))
    header = _header(next(lines, None), digest)
    found: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
    where: dict[str, int] = {}
    for number, line in lines:
        record = _json(number, line)
        kind = record.get("record")
        if kind == _END:
            _check_end(number, record, digest, {k: len(v) for k, v in found.items()})
            if next(lines, None) is not None:
                raise ExportFileError(
                    f"line {number + 1}: text after the end record", field="line", line=number + 1
                )
            items: list[ContextItem] = found[_ITEM]
            if not header["vectors"]:
                items = [attrs.evolve(item, embedding=None) for item in items]
            return _Parsed(
                namespace=header.get("namespace"),
                tier=None if header.get("tier") is None else Tier(header["tier"]),
                exported_at=str(header.get("exported_at", "")),
                identity=_identity(header),
                items=items,
                conflicts=found[_CONFLICT],
                events=found[_EVENT],
                aliases=found[_ALIAS],
                agents=found[_AGENT],
                grants=found[_GRANT],
                forks=found[_FORK],
                lines=where,
            )
        digest.update(line.encode("utf-8"))
        value = _decode(number, kind, record.get("data"))
        if isinstance(value, ContextItem):
            if value.id in where:
                raise ExportFileError(
                    f"line {number}: item {value.id!r} again (first on line {where[value.id]})",
                    field="line",
                    line=number,
                )
            where[value.id] = number
        found[str(kind)].append(value)
    raise ExportFileError(
        "the file ends without its end record: it was cut short (an export interrupted, a "
        "partial download); nothing was imported",
        field="file",
    )


def _header(first: tuple[int, str] | None, digest: Any) -> dict[str, Any]:
    if first is None:
        raise ExportFileError("the file is empty: not an agent_engine export", field="file")
    number, line = first
    header = _json(number, line)
    if header.get("format") != EXPORT_FORMAT:
        raise ExportFileError(
            "line 1: not an agent_engine export (no format header)", field="line", line=1
        )
    version = header.get("version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise ExportFileError(
            f"the file is export format version {version!r}; this agent_engine reads versions "
            f"{', '.join(map(str, sorted(READABLE_VERSIONS)))} (upgrade agent_engine to read "
            "newer files)",
            field="version",
            value=version,
            line=1,
        )
    if not isinstance(header.get("vectors"), bool):
        raise ExportFileError("line 1: the header says nothing of vectors", field="line", line=1)
    namespace, tier = header.get("namespace"), header.get("tier")
    if not (namespace is None or isinstance(namespace, str)) or tier not in (
        None,
        *(t.value for t in Tier),
    ):
        raise ExportFileError(
            f"line 1: the header's scope is not one (namespace {namespace!r}, tier {tier!r})",
            field="line",
            line=1,
        )
    digest.update(line.encode("utf-8"))
    return header


def _json(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ExportFileError(
            f"line {number}: not JSON ({exc.msg}): the file is corrupted",
            field="line",
            line=number,
        ) from exc
    if not isinstance(value, dict):
        raise ExportFileError(f"line {number}: not a record", field="line", line=number)
    return value


def _decode(number: int, kind: object, data: object) -> Any:
    """One record's value, validated as the library validates its own."""
    try:
        model = _MODELS.get(str(kind))
        if model is not None:
            return from_dict(model, data)
        if kind == _ALIAS and isinstance(data, dict):
            # The alias store's own checks: a file cannot hold what an add would refuse.
            namespace, term, expansions = check_add(
                data["namespace"], data["term"], data["expansions"]
            )
            return (namespace, term, list(expansions))
        if kind == _AGENT and isinstance(data, dict):
            return (check_realm(data["realm"]), check_agent(data["agent"]))
        if kind == _FORK and isinstance(data, dict):
            return (from_dict(Fork, data["fork"]), check_hidden(data["hidden"]))
    except (AgentEngineError, KeyError, TypeError, ValueError) as exc:
        raise ExportFileError(
            f"line {number}: not a valid {kind} record ({exc})", field="line", line=number
        ) from exc
    raise ExportFileError(f"line {number}: unknown record {kind!r}", field="line", line=number)


def _check_end(number: int, end: dict[str, Any], digest: Any, counts: dict[str, int]) -> None:
    if end.get("sha256") != digest.hexdigest():
        raise ExportFileError(
            f"line {number}: the file's hash does not match its records: it was changed or "
            "damaged since it was written; nothing was imported",
            field="line",
            line=number,
        )
    said = end.get("counts")
    # A kind the end record does not name was not in the format yet (a version 1 file).
    if (
        not isinstance(said, dict)
        or set(said) - set(counts)
        or any(said.get(kind, 0) != found for kind, found in counts.items())
    ):
        raise ExportFileError(
            f"line {number}: the file holds {counts}, its end record says {said}",
            field="line",
            line=number,
        )


def _identity(header: Mapping[str, Any]) -> EmbedderIdentity | None:
    embedder = header.get("embedder")
    if not header["vectors"] or embedder is None:
        return None
    try:
        return EmbedderIdentity(name=embedder.get("name"), dim=embedder.get("dim"))
    except (AgentEngineError, AttributeError, TypeError, ValueError) as exc:
        raise ExportFileError(
            f"line 1: the header's embedder is not one ({exc})", field="line", line=1
        ) from exc


# ---------------------------------------------------------------------------- the target


def _new_items(target: MemoryBackend, parsed: _Parsed) -> list[ContextItem]:
    """The file's items the target lacks; one it holds otherwise refuses the import."""
    ids = [item.id for item in parsed.items]
    held: dict[str, ContextItem] = {}
    for start in range(0, len(ids), COPY_BATCH):
        held.update((i.id, i) for i in target.get_many(ids[start : start + COPY_BATCH]))
    new: list[ContextItem] = []
    for item in parsed.items:
        there = held.get(item.id)
        if there is None:
            new.append(item)
        elif not _same(there, item):
            raise ExportFileError(
                f"the target holds item {item.id!r} with other content than the file's: two "
                "memories under one id; nothing was imported",
                field="item",
                value=item.id,
                line=parsed.lines[item.id],
            )
    return new


def _check_not_into_forks(target: MemoryBackend, items: Sequence[ContextItem]) -> None:
    """Refuse items for a scope that reads through a parent: the backend holds only part of it.

    Whether an imported id is one the fork reads through, and which version wins, is the
    fork's store to say (:mod:`agent_engine.tiers.forks`); an import cannot.
    """
    for namespace, tier in {(item.namespace, item.tier) for item in items}:
        if reads_through(target.lineage, namespace, tier):
            raise ExportFileError(
                f"{tier.value} scope {namespace!r} is a fork that reads through its parent: "
                "an import cannot tell what it reads; detach it first (its store's detach()) "
                "or import into another scope; nothing was imported",
                field="namespace",
                value=namespace,
            )


def _record_forks(
    target: MemoryBackend, forks: list[tuple[Fork, list[str]]], recorded: list[Fork]
) -> None:
    """Record the file's new forks, each with the ids it hides; each joins ``recorded``."""
    for fork, hidden in forks:
        target.lineage.record(fork)
        recorded.append(fork)
        if hidden:
            target.lineage.hide(fork.namespace, fork.tier, hidden)


def _take_back(
    target: MemoryBackend, new: list[ContextItem], written: list[Grant], recorded: list[Fork]
) -> None:
    """Undo what an import that stopped wrote: its items, its grants, its forks."""
    if new:
        target.delete_many([item.id for item in new])
    for grant in written:
        target.grants.revoke(grant.pool, grant.agent)
    for fork in recorded:
        target.lineage.drop(fork.namespace, fork.tier)


def _hide_from_forks(target: MemoryBackend, items: Sequence[ContextItem]) -> None:
    """Hide ``items`` from the forks of their scopes: a fork never sees what came after it.

    Their ids are new to the target, so hiding them is all copy-on-write asks
    (:mod:`agent_engine.tiers.forks`).
    """
    scopes: dict[tuple[str, Tier], list[str]] = {}
    for item in items:
        scopes.setdefault((item.namespace, item.tier), []).append(item.id)
    for (namespace, tier), ids in scopes.items():
        for fork in target.lineage.children(namespace, tier):
            target.lineage.hide(fork.namespace, tier, ids)


def _write_beside(
    target: MemoryBackend, parsed: _Parsed, given: list[Grant] | None, written: list[Grant]
) -> tuple[int, int, int]:
    """What an import writes after the items: conflicts, events, aliases, agents and grants.

    ``given``: the grants to add (``None``: none, and no agents); each one written joins
    ``written``, so a failure can take it back. Returns the conflicts, events and agents added.
    """
    conflicts = [c for c in parsed.conflicts if target.conflicts.get(c.id) is None]
    if conflicts:
        target.conflicts.record(conflicts)
    events = _missing_events(target, parsed.events)
    for event in events:
        target.audit.append(event)
    for namespace, term, expansions in parsed.aliases:
        target.aliases.add(namespace, term, expansions)
    if given is None:
        return len(conflicts), len(events), 0
    agents = sum(target.grants.register(realm, agent) for realm, agent in parsed.agents)
    for grant in given:
        target.audit.append(_granted(grant))
        target.grants.grant(grant)
        written.append(grant)
    return len(conflicts), len(events), agents


def _new_forks(target: MemoryBackend, parsed: _Parsed) -> list[tuple[Fork, list[str]]]:
    """The file's forks the target lacks; one it records otherwise refuses the import.

    A scope recorded as the same fork already is no change (importing twice imports once).
    """
    new: list[tuple[Fork, list[str]]] = []
    for fork, hidden in parsed.forks:
        there = target.lineage.get(fork.namespace, fork.tier)
        if there is None:
            new.append((fork, hidden))
        elif (there.parent, there.forked_at, there.checkpoint) != (
            fork.parent,
            fork.forked_at,
            fork.checkpoint,
        ):
            raise ExportFileError(
                f"the target records {fork.tier.value} scope {fork.namespace!r} as a fork of "
                f"{there.parent!r} already, the file as one of {fork.parent!r}; nothing was "
                "imported",
                field="fork",
                value=fork.namespace,
            )
    return new


def _new_grants(target: MemoryBackend, parsed: _Parsed) -> list[Grant]:
    """The file's grants where the target gives the agent nothing on the pool, checked first.

    A grant's agent must be registered in its realm by the file or by the target already.
    """
    registered = set(parsed.agents)
    realms = {grant.realm for grant in parsed.grants}
    registered |= {(realm, agent) for realm in realms for agent in target.grants.agents(realm)}
    held = {
        pool: {grant.agent for grant in target.grants.of_pool(pool)}
        for pool in {grant.pool for grant in parsed.grants}
    }
    new: list[Grant] = []
    for grant in parsed.grants:
        if (grant.realm, grant.agent) not in registered:
            raise ExportFileError(
                f"a grant on {grant.pool} names agent {grant.agent!r}, whom neither the file nor "
                f"the target registered in {grant.realm}; nothing was imported",
                field="grant",
                value=grant.agent,
            )
        if grant.agent not in held[grant.pool]:
            new.append(grant)
    return new


def _granted(grant: Grant) -> AuditEvent:
    """The journal's record of a grant an import adds (pools are project-tier scopes)."""
    detail = {
        "agent": grant.agent,
        "access": grant.access.value,
        "by": "import",
        "granted_by": grant.granted_by,
        "replaced": None,
    }
    return AuditEvent(
        action=AuditAction.GRANT, tier=Tier.PROJECT, namespace=grant.pool, detail=detail
    )


def _same(there: ContextItem, item: ContextItem) -> bool:
    """Whether the target's item is the file's (its vector aside when the file has none)."""
    if item.embedding is None:
        there = attrs.evolve(there, embedding=None)
    return to_dict(there) == to_dict(item)


def _missing_events(target: MemoryBackend, events: list[AuditEvent]) -> list[AuditEvent]:
    """The file's events the target's journal does not hold (by id), oldest first."""
    known: set[str] = set()
    for namespace in {event.namespace for event in events}:
        known.update(e.id for e in target.audit.events(namespace=namespace, limit=None))
    return [event for event in events if event.id not in known]
