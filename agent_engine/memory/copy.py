"""Moving a whole store to another backend: items, vectors, journal and conflicts.

What a user who outgrows the embedded SQLite default runs to move to PostgreSQL
(``agent-engine db copy``). Everything goes through the :class:`~agent_engine.memory.backend.
MemoryBackend` protocol, so any registered backend is a source or a target:

* **Items** are read with plain backend queries, which see every lifecycle state (the working
  set, the archive and superseded history: a tier store's default view would hide some), in
  id order, ``batch_size`` at a time with a filter on ``id > last`` (keyset paging: each page
  costs the same however deep, and memory stays bounded for any store size). Each batch is
  one ``add_many``: whole items, their vectors as stored, never re-embedded.
* **Conflicts** name two items, so each is recorded with the batch that holds the later of
  its two ids: both items are in the target by then, and no conflict is recorded twice.
* **The journal** is copied next, newest page first; every event keeps its id and time, and
  every journal orders by ``(time, id)``, so the target lists the events in the same order.
* **Aliases**, **checkpoints**, **pool grants** and **forks** last: each term with all its
  expansions in one write, each checkpoint with its saved state, oldest first, each project's
  agents before the grants that name them, each fork's record (detached ones stay detached)
  before the ids it hides.

The copy refuses, before it writes anything, a target that holds items (two memories mixed
are no longer either one), the source itself, and a target whose vectors (or embedder) are
another embedder's. At the end it counts both sides (items per namespace and tier and per
lifecycle state, events, conflicts, alias expansions, checkpoints, agents, grants, forks and
the ids they hide) and raises :class:`~agent_engine.errors.CopyIncompleteError` when they
differ; the source is only read, so it is untouched whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Final

import attrs

from agent_engine._log import get_logger
from agent_engine.embeddings import EmbedderIdentity
from agent_engine.errors import (
    AgentEngineError,
    CopyIncompleteError,
    DimensionMismatchError,
    EmbedderMismatchError,
    StoreNotEmptyError,
    ValidationError,
)
from agent_engine.filters import Condition, Filter, Op, Order
from agent_engine.memory.backend import MemoryBackend, Progress
from agent_engine.models import AuditEvent, ContextItem, Tier

__all__ = ["COPY_BATCH", "CopyReport", "check_vectors_fit", "copy_store", "pages"]

COPY_BATCH: Final = 500
"""Items read and written per step of :func:`copy_store` (each step is one ``add_many``)."""

_ID_ORDER: Final = Order("id", descending=False)
_TICK: Final = timedelta(microseconds=1)
"""The finest time a journal keeps: the events of one instant are ``[t, t + _TICK)``."""

_STATES: Final[Mapping[str, dict[str, object]]] = {
    "working": {"archived_at": None, "valid_to": None},
    "archived": {"archived_at": {"$exists": True}, "valid_to": None},
    "history": {"valid_to": {"$exists": True}},
}
"""The lifecycle states (``docs/lifecycle.md``), each as the filter that selects it."""


@attrs.frozen(kw_only=True)
class CopyReport:
    """What :func:`copy_store` copied, counted again on both sides once it was written.

    ``scopes`` holds the items of each ``(namespace, tier)``, ``states`` those of each
    lifecycle state (``working``, ``archived``, ``history``: superseded versions);
    ``identity`` is the embedder that made the copied vectors (``None``: the source held
    none). ``verified`` is true once the target's counts were found equal to the source's
    (a report is only returned then).
    """

    items: int
    events: int
    conflicts: int
    aliases: int
    """Alias expansions, over every namespace's terms."""
    checkpoints: int
    scopes: Mapping[tuple[str, Tier], int]
    states: Mapping[str, int]
    identity: EmbedderIdentity | None
    verified: bool
    agents: int = 0
    """Registered agents, over every project."""
    grants: int = 0
    """Pool grants, over every pool."""
    forks: int = 0
    """Fork records, attached or detached, over every tier."""


def copy_store(
    source: MemoryBackend,
    target: MemoryBackend,
    *,
    batch_size: int = COPY_BATCH,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy everything ``source`` holds into the empty ``target``; return what was copied.

    ``progress(done, total)`` is called with the items written so far, before the first
    batch and after each. Raises :class:`~agent_engine.errors.StoreNotEmptyError` for a
    target that holds items, :class:`~agent_engine.errors.ValidationError` for the source
    itself or a bad ``batch_size``, and :class:`~agent_engine.errors.EmbedderMismatchError`
    (:class:`~agent_engine.errors.DimensionMismatchError` when the sizes differ) for a
    target bound to another embedder: all before anything is written. A failure once the
    writing began (a lost connection, counts that differ at the end) raises
    :class:`~agent_engine.errors.CopyIncompleteError`, with the failure as its cause.
    Items stored without a vector are embedded by the target's embedder if it has one
    (``add_many``'s rule), so a target opened without an embedder keeps them as they are.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(
            f"batch_size must be a positive integer, got {batch_size!r}",
            field="batch_size",
            value=batch_size,
        )
    identity = _check_target(source, target)
    log = get_logger(source=repr(source), target=repr(target))
    total = source.count()
    if progress is not None:
        progress(0, total)
    try:
        scopes = _copy_items(source, target, batch_size, total, progress)
        for page in _journal(source, batch_size):
            for event in page:
                target.audit.append(event)
        _copy_beside(source, target)
    except AgentEngineError as exc:
        raise CopyIncompleteError(
            f"the copy into {target!r} stopped ({exc}): the target is incomplete and should "
            "be dropped; the source is untouched",
            differences=(),
        ) from exc
    report = _verify(source, target, scopes, identity)
    log.info("store copied", items=report.items, events=report.events, conflicts=report.conflicts)
    return report


def _copy_items(
    source: MemoryBackend,
    target: MemoryBackend,
    batch_size: int,
    total: int,
    progress: Progress | None,
) -> set[tuple[str, Tier]]:
    """Write the items batch by batch, each batch's conflicts with it; return their scopes."""
    done = 0
    scopes: set[tuple[str, Tier]] = set()
    for batch in pages(source, batch_size):
        target.add_many(batch)
        ids = {item.id for item in batch}
        later = [
            conflict
            for conflict in source.conflicts.of_items(ids, include_resolved=True)
            if max(conflict.item_ids) in ids
        ]
        if later:
            target.conflicts.record(later)
        scopes.update((item.namespace, item.tier) for item in batch)
        scopes.update((conflict.namespace, conflict.tier) for conflict in later)
        done += len(batch)
        if progress is not None:
            progress(done, max(done, total))
    return scopes


def _check_target(source: MemoryBackend, target: MemoryBackend) -> EmbedderIdentity | None:
    """Refuse a target the copy must not write to; return the identity of the source's vectors."""
    if source is target:
        raise ValidationError("cannot copy a store onto itself", field="target", value=target)
    held = target.count()
    if held:
        raise StoreNotEmptyError(
            f"{target!r} already holds {held} items: copy into a new, empty store (a copy "
            "into a filled one would mix two memories)",
            target=repr(target),
            count=held,
        )
    journal = target.audit.count()
    if journal:
        # Items cleared, history kept: the two journals would still mix.
        raise StoreNotEmptyError(
            f"{target!r} holds no items but {journal} journal events: copy into a new, "
            "empty store (the two journals would mix)",
            target=repr(target),
            count=0,
        )
    saved = len(target.checkpoints.all())
    if saved:
        raise StoreNotEmptyError(
            f"{target!r} holds no items but {saved} checkpoints: copy into a new, empty store",
            target=repr(target),
            count=0,
        )
    if target.grants.realms():
        raise StoreNotEmptyError(
            f"{target!r} holds no items but registered agents: copy into a new, empty store",
            target=repr(target),
            count=0,
        )
    if target.lineage.all():
        # Recording the source's forks would find some scopes taken, half-way through.
        raise StoreNotEmptyError(
            f"{target!r} holds no items but forks: copy into a new, empty store",
            target=repr(target),
            count=0,
        )
    aliased = target.aliases.namespaces()
    if aliased:
        raise StoreNotEmptyError(
            f"{target!r} holds no items but the aliases of {len(aliased)} namespace(s): copy "
            "into a new, empty store (the two sets of aliases would mix)",
            target=repr(target),
            count=0,
        )
    identity = source.stored_identity()
    check_vectors_fit(identity, target)
    return identity


def check_vectors_fit(identity: EmbedderIdentity | None, target: MemoryBackend) -> None:
    """Refuse a ``target`` bound to, or embedding with, another embedder than ``identity``.

    ``identity``: what made the vectors about to be written (``None``: no vectors, nothing to
    refuse). Raises :class:`~agent_engine.errors.DimensionMismatchError` when the sizes differ,
    else :class:`~agent_engine.errors.EmbedderMismatchError`.
    """
    if identity is None:
        return
    bound = target.stored_identity()
    own = None if target.embedder is None else EmbedderIdentity.of(target.embedder)
    for other, what in ((bound, "holds vectors of"), (own, "embeds with")):
        if other is None or identity.matches(other):
            continue
        message = (
            f"the source's vectors were made by {identity.describe()}, but the target {what} "
            f"{other.describe()}: open the target without an embedder, or with the source's"
        )
        if other.dim != identity.dim:
            raise DimensionMismatchError(message, field="target", value=other)
        raise EmbedderMismatchError(message, stored=identity, given=other)


def pages(
    source: MemoryBackend, batch_size: int, scope: tuple[Condition, ...] = ()
) -> Iterator[list[ContextItem]]:
    """The source's items (those meeting ``scope``) in id order, ``batch_size`` at a time.

    Keyset paging on the id: each page costs the same however deep, in every lifecycle state.
    """
    after: str | None = None
    while True:
        # Built, not parsed: filter documents keep $gt for numbers and times, but every
        # evaluator compares ids by code point, as the id order sorts them (keyset paging).
        where = Filter(scope if after is None else (*scope, Condition("id", Op.GT, after)))
        batch = source.query(where, limit=batch_size, order_by=_ID_ORDER)
        if not batch:
            return
        yield batch
        after = batch[-1].id


def _journal(source: MemoryBackend, batch_size: int) -> Iterator[list[AuditEvent]]:
    """The source's journal, newest first, about ``batch_size`` events at a time.

    A journal pages by time only (``until`` is exclusive), so a full page ends at the
    oldest instant it reached; the events of that instant are read whole on their own, and
    the next page starts before it.
    """
    until = None
    while True:
        page = source.audit.events(until=until, limit=batch_size)
        if len(page) < batch_size:
            if page:
                yield page
            return
        oldest = page[-1].at
        newer = [event for event in page if event.at != oldest]
        if newer:
            yield newer
        yield source.audit.events(since=oldest, until=oldest + _TICK, limit=None)
        until = oldest


@attrs.frozen(kw_only=True)
class _Counts:
    """One side's counts, as :func:`_verify` compares them."""

    items: int
    events: int
    conflicts: int
    aliases: int
    checkpoints: int
    agents: int
    grants: int
    forks: int
    hidden: int
    scopes: Mapping[tuple[str, Tier], int]
    states: Mapping[str, int]


def _counts(store: MemoryBackend, scopes: set[tuple[str, Tier]]) -> _Counts:
    forks = store.lineage.all()
    return _Counts(
        items=store.count(),
        events=store.audit.count(),
        conflicts=sum(
            len(store.conflicts.of_scope(namespace, tier, include_resolved=True))
            for namespace, tier in sorted(scopes)
        ),
        aliases=sum(
            len(expansions)
            for namespace in store.aliases.namespaces()
            for expansions in store.aliases.of_namespace(namespace).values()
        ),
        checkpoints=len(store.checkpoints.all()),
        agents=sum(len(store.grants.agents(realm)) for realm in store.grants.realms()),
        grants=sum(len(store.grants.of_pool(pool)) for pool in store.grants.pools()),
        forks=len(forks),
        hidden=sum(len(store.lineage.hidden(fork.namespace, fork.tier)) for fork in forks),
        scopes={
            (namespace, tier): store.count({"namespace": namespace, "tier": tier.value})
            for namespace, tier in sorted(scopes)
        },
        states={state: store.count(where) for state, where in _STATES.items()},
    )


def _copy_beside(source: MemoryBackend, target: MemoryBackend) -> None:
    """What the stores keep beside the items: aliases, checkpoints, agents, grants, forks."""
    for namespace in source.aliases.namespaces():
        for term, expansions in source.aliases.of_namespace(namespace).items():
            target.aliases.add(namespace, term, expansions)
    for checkpoint in reversed(source.checkpoints.all()):
        data = source.checkpoints.data(checkpoint.id)
        if data is not None:  # deleted since it was listed: nothing to copy
            target.checkpoints.save(checkpoint, data)
    for realm in source.grants.realms():
        for agent in source.grants.agents(realm):
            target.grants.register(realm, agent)
    for pool in source.grants.pools():
        for grant in source.grants.of_pool(pool):
            target.grants.grant(grant)
    _copy_forks(source, target)


def _copy_forks(source: MemoryBackend, target: MemoryBackend) -> None:
    """Each fork's record as it is (a detached one stays detached), then the ids it hides."""
    for fork in source.lineage.all():
        target.lineage.record(fork)
        hidden = source.lineage.hidden(fork.namespace, fork.tier)
        if hidden:
            target.lineage.hide(fork.namespace, fork.tier, sorted(hidden))


def _verify(
    source: MemoryBackend,
    target: MemoryBackend,
    scopes: set[tuple[str, Tier]],
    identity: EmbedderIdentity | None,
) -> CopyReport:
    """Count both sides in ``scopes`` (the items' and conflicts'); raise on any difference."""
    before = _counts(source, scopes)
    after = _counts(target, scopes)
    differ = [
        f"{what}: {theirs} in the target, {ours} in the source"
        for what, ours, theirs in (
            ("items", before.items, after.items),
            ("events", before.events, after.events),
            ("conflicts", before.conflicts, after.conflicts),
            ("alias expansions", before.aliases, after.aliases),
            ("checkpoints", before.checkpoints, after.checkpoints),
            ("agents", before.agents, after.agents),
            ("grants", before.grants, after.grants),
            ("forks", before.forks, after.forks),
            ("hidden ids of forks", before.hidden, after.hidden),
            *(
                (f"items of {namespace}/{tier.value}", count, after.scopes[namespace, tier])
                for (namespace, tier), count in before.scopes.items()
            ),
            *(
                (f"{state} items", count, after.states[state])
                for state, count in before.states.items()
            ),
        )
        if ours != theirs
    ]
    if differ:
        raise CopyIncompleteError(
            f"the copy into {target!r} does not match its source ({'; '.join(differ)}): the "
            "target is incomplete and should be dropped; the source is untouched",
            differences=tuple(differ),
        )
    return CopyReport(
        items=after.items,
        events=after.events,
        conflicts=after.conflicts,
        aliases=after.aliases,
        checkpoints=after.checkpoints,
        scopes={scope: count for scope, count in after.scopes.items() if count},
        states=after.states,
        identity=identity,
        verified=True,
        agents=after.agents,
        grants=after.grants,
        forks=after.forks,
    )
