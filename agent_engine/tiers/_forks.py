"""Copy-on-write forks: what a tier store reads and writes through, once, for every operation.

A fork (seed 001 section 14) is a task or session scope started from another's memory
without copying it. The child reads through to its parent (and the parent's parent, while
each is an attached fork): its memory is its own items, then each ancestor's, nearest first,
less what it must not see. Only what changes is copied, on whichever side changes it:

* **the child writes** an item it sees through (updates, archives, pins, merges into it):
  the item is first copied into the child, under the child's id for it (the same local id),
  and every ancestor's version of it is hidden from the child; deleting one only hides it;
* **the parent writes** an item a child still sees through: the child gets its copy of the
  item as it saw it first, so the parent's change never reaches it; an item the parent adds
  after the fork is hidden from the child;
* **the parent ends or rolls back** (its scope is cleared or restored): each child is
  *detached* first, taking a copy of all it sees and reading nothing through from then on.

Erasing (``forget``) is the one write that follows the lineage down instead: a scope that
erases an item erases the copies its forks made of it, since erasing is for what must leave
no trace. A fork never erases its parent's item: it hides it.

The child sees each item as its own: the item's id, ``namespace`` and ``superseded_by`` are
rewritten to the child's, so everything above (merges, versions, promotion, the assembler)
reads a fork exactly like a scope that was copied whole. What lineage rests on (the fork
records, the hidden ids) is the backend's: :mod:`agent_engine.memory.lineage`.

Two approximations are documented in ``docs/sessions.md``: full-text scores and session
neighbours come from each level's own index, and a fork's access counts are counted only on
the items it holds itself.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Final

import attrs

from agent_engine.errors import DuplicateItemError, FilterTooLargeError
from agent_engine.filters import (
    MAX_LIST_VALUES,
    Condition,
    Filter,
    Op,
    OrderInput,
    parse_filter,
    parse_order,
)
from agent_engine.memory.backend import MemoryBackend, Query, SearchHit
from agent_engine.memory.lineage import Fork
from agent_engine.models import ArchiveReason, ContextItem, Tier, rescoped
from agent_engine.retrieval.lexical import LexicalMatches, LexicalScope, Neighbourhoods
from agent_engine.tiers.scope import id_prefix

__all__ = ["FORKABLE", "ScopeIO", "renamed"]

FORKABLE: Final = frozenset({Tier.TASK, Tier.SESSION})
"""The tiers whose scopes can be forked: a task's or a session's working memory."""

_ID_FIELDS: Final = frozenset({"id", "superseded_by"})


@attrs.frozen
class _Levels:
    """A scope and the ancestors it reads through, nearest first, and what it must not see."""

    namespaces: tuple[str, ...]
    prefixes: tuple[str, ...]
    hidden: frozenset[str]
    hidden_by: tuple[tuple[str, ...], ...] = attrs.field(init=False)
    """The hidden ids of each level, sorted."""

    def __attrs_post_init__(self) -> None:
        by: list[list[str]] = [[] for _ in self.prefixes]
        for item_id in self.hidden:
            level, _ = self.local(item_id)
            if level >= 0:
                by[level].append(item_id)
        object.__setattr__(self, "hidden_by", tuple(tuple(sorted(ids)) for ids in by))

    @property
    def hidden_at(self) -> tuple[int, ...]:
        """How many of the hidden ids each level holds."""
        return tuple(len(ids) for ids in self.hidden_by)

    def reading(self, where: Filter, level: int) -> tuple[Filter, int]:
        """How to read level ``level`` for ``where``: the filter, and how many more to fetch.

        The level's hidden ids are left out by the filter itself while they fit in one
        (``$nin``, :data:`~agent_engine.filters.MAX_LIST_VALUES`); past that, the read
        fetches as many more as it hides, and :meth:`visible` drops them.
        """
        at, hidden = self.at(where, level), self.hidden_by[level]
        if not hidden:
            return at, 0
        if len(hidden) <= MAX_LIST_VALUES:
            with contextlib.suppress(FilterTooLargeError):
                return Filter((*at.conditions, Condition("id", Op.NIN, hidden))), 0
        return at, len(hidden)

    @property
    def forked(self) -> bool:
        return len(self.namespaces) > 1

    def local(self, item_id: str) -> tuple[int, str]:
        """The level an id was written at and its local part (``-1``: no level's prefix)."""
        for level, prefix in enumerate(self.prefixes):
            if item_id.startswith(prefix):
                return level, item_id[len(prefix) :]
        return -1, item_id

    def own_id(self, item_id: str) -> str:
        """``item_id`` as the scope itself names it (ids of no level are left as they are)."""
        level, local = self.local(item_id)
        return item_id if level <= 0 else self.prefixes[0] + local

    def variants(self, local: str, *, start: int = 0) -> list[str]:
        """The ids ``local`` has at each level from ``start`` on."""
        return [prefix + local for prefix in self.prefixes[start:]]

    def adopt(self, item: ContextItem) -> ContextItem:
        """An ancestor's item as the scope sees it: its own id, namespace and successor."""
        if item.namespace == self.namespaces[0]:
            return item
        after = item.superseded_by
        return rescoped(
            item,
            self.own_id(item.id),
            self.namespaces[0],
            None if after is None else self.own_id(after),
        )

    def at(self, where: Filter, level: int) -> Filter:
        """``where`` as it reads level ``level``: that level's namespace and ids.

        The scope's own namespace, and ids (``id``, ``superseded_by``) as the scope names
        them, become the level's; every other condition is kept as given.
        """
        if level == 0:
            return where
        conditions: list[Condition] = []
        for given in where.conditions:
            condition = given
            if given.field == "namespace" and given.op is Op.EQ:
                if given.value == self.namespaces[0]:
                    condition = Condition("namespace", Op.EQ, self.namespaces[level])
            elif given.field in _ID_FIELDS and given.op in (Op.IN, Op.NIN):
                named = tuple(dict.fromkeys(self._named_at(v, level) for v in given.value))
                condition = Condition(given.field, given.op, named)
            elif given.field in _ID_FIELDS and given.op is not Op.EXISTS:
                # Order within a level is the order of local ids: bounds move with the prefix.
                condition = Condition(given.field, given.op, self._named_at(given.value, level))
            conditions.append(condition)
        return Filter(tuple(conditions))

    def _named_at(self, value: object, level: int) -> object:
        """An id as the scope names it, as level ``level`` names it.

        An id of another level is not the scope's (a deep copy would not know it): it is
        given the scope's own prefix, which no item of level ``level`` has.
        """
        if isinstance(value, str):
            at, local = self.local(value)
            if at == 0:
                return self.prefixes[level] + local
            if at > 0:
                return self.prefixes[0] + value
        return value

    def visible(self, items: Iterable[ContextItem]) -> list[ContextItem]:
        """``items`` read over every level, as the scope sees them, in the order read.

        Hidden ones are dropped, and each local id is kept once: the nearest level's.
        """
        seen: dict[str, tuple[int, ContextItem]] = {}
        for item in items:
            if item.id in self.hidden:
                continue
            level, _ = self.local(item.id)
            adopted = self.adopt(item)
            held = seen.get(adopted.id)
            if held is None or 0 <= level < held[0]:
                seen[adopted.id] = (level if level >= 0 else len(self.prefixes), adopted)
        return [item for _, item in seen.values()]


class ScopeIO:
    """One scope's reads and writes on its backend, through to its ancestors when it is a fork.

    Project, global and pool scopes are never forks and pass straight through. A task or
    session scope that is no fork and has none costs one lookup of its own record per read
    (one per unit of work inside :meth:`pinned`: a build looks once) and one of its forks
    per write, since a fork may be made of it, or into it, by any process at any time.
    """

    def __init__(self, backend: MemoryBackend, namespace: str, tier: Tier) -> None:
        self.backend = backend
        self.namespace = namespace
        self.tier = tier
        self._forkable = tier in FORKABLE
        self._lock = threading.Lock()
        self._pins = 0
        self._pinned: _Levels | None = None

    # ------------------------------------------------------------------ lineage

    def fork_record(self) -> Fork | None:
        """The scope's fork record (``None``: it is no fork)."""
        if not self._forkable:
            return None
        return self.backend.lineage.get(self.namespace, self.tier)

    def levels(self) -> _Levels:
        """What reads see: the scope and its ancestors now, or as :meth:`pinned` took them."""
        if self._pins:
            with self._lock:
                if self._pins:
                    if self._pinned is None:
                        self._pinned = self._fresh()
                    return self._pinned
        return self._fresh()

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """Read the scope's lineage once for the reads inside (a unit of work: a build).

        Without it every read looks the lineage up (a fork may be made, or a parent write
        hide something, in any process at any time): a round trip or three on a database.
        Writes always look it up, and a write through this scope drops the pinned lineage;
        so does one through another store object only when the next unit of work begins.
        """
        fresh = self._fresh()
        with self._lock:
            # Each unit of work starts from the lineage as it is, even while others overlap it
            # (a busy assembler's builds may never all end): a pin is never older than the
            # newest unit of work reading through it.
            self._pins += 1
            self._pinned = fresh
        try:
            yield
        finally:
            with self._lock:
                self._pins -= 1
                if not self._pins:
                    self._pinned = None

    def _fresh(self) -> _Levels:
        """The scope and the ancestors it reads through now, with the ids it must not see."""
        own = _Levels((self.namespace,), (id_prefix(self.namespace),), frozenset())
        if not self._forkable:
            return own
        lineage = self.backend.lineage
        namespaces = [self.namespace]
        hidden: set[str] = set()
        record = lineage.get(self.namespace, self.tier)
        while record is not None and not record.detached:
            hidden |= lineage.hidden(record.namespace, self.tier)
            namespaces.append(record.parent)
            record = lineage.get(record.parent, self.tier)
        if len(namespaces) == 1:
            return own
        return _Levels(
            tuple(namespaces), tuple(id_prefix(n) for n in namespaces), frozenset(hidden)
        )

    def _wrote(self) -> None:
        """Drop the pinned lineage after a write: the write may have changed it."""
        self._pinned = None

    def children(self) -> list[Fork]:
        """The attached forks of this scope."""
        if self.tier not in FORKABLE:
            return []
        return self.backend.lineage.children(self.namespace, self.tier)

    # ------------------------------------------------------------------ reads

    def query(
        self,
        where: Filter,
        limit: int | None,
        order_by: OrderInput,
        levels: _Levels | None = None,
    ) -> list[ContextItem]:
        """Each level read on its own (its scope's own index), merged as the scope sees it.

        ``levels``: the lineage to read by (a write's, looked up afresh); else :meth:`levels`.
        """
        levels = levels or self.levels()
        if not levels.forked:
            return self.backend.query(where, limit, order_by)
        order = parse_order(order_by)
        rows: list[ContextItem] = []
        for level in range(len(levels.namespaces)):
            read, more = levels.reading(where, level)
            rows += self.backend.query(read, None if limit is None else limit + more, order)
        return order.sort(levels.visible(rows))[:limit]

    def count(self, where: Filter, levels: _Levels | None = None) -> int:
        """Each level's count, less the hidden items that match: no read of the items."""
        levels = levels or self.levels()
        if not levels.forked:
            return self.backend.count(where)
        total = 0
        for level in range(len(levels.namespaces)):
            read, more = levels.reading(where, level)
            total += self.backend.count(read)
            if more:  # too many hidden to leave out by the filter: those that match come off
                held = self.backend.get_many(list(levels.hidden_by[level]))
                total -= sum(1 for item in held if read.matches(item))
        return total

    def search(self, query: Query, k: int, where: Filter) -> list[SearchHit]:
        levels = self.levels()
        if not levels.forked:
            return self.backend.search(query, k, where)
        return self.search_many([query], k, where, levels)[0]

    def search_many(
        self,
        queries: Sequence[Query],
        k: int,
        where: Filter,
        levels: _Levels | None = None,
    ) -> list[list[SearchHit]]:
        levels = levels or self.levels()
        if not levels.forked:
            return self.backend.search_many(queries, k, where)
        found = []
        for level in range(len(levels.namespaces)):
            read, more = levels.reading(where, level)
            found.append(self.backend.search_many(queries, k + more, read))
        return [
            _visible_hits(levels, [hit for level in found for hit in level[asked]])[:k]
            for asked in range(len(queries))
        ]

    def get_many(self, item_ids: Sequence[str], levels: _Levels | None = None) -> list[ContextItem]:
        """The items behind ``item_ids`` as the scope sees them (ids of any form, as asked)."""
        levels = levels or self.levels()
        if not levels.forked:
            return self.backend.get_many(item_ids)
        lookups: dict[str, None] = {}
        for item_id in item_ids:
            lookups[item_id] = None
            level, local = levels.local(item_id)
            if level == 0:
                lookups.update(dict.fromkeys(levels.variants(local, start=1)))
        return levels.visible(self.backend.get_many(list(lookups)))

    def lexical_index(self, scope: Filter) -> LexicalScope:
        levels = self.levels()
        if not levels.forked:
            return self.backend.lexical_index(scope)
        parts = [
            self.backend.lexical_index(
                parse_filter({"namespace": namespace, "tier": self.tier.value})
            )
            for namespace in levels.namespaces
        ]
        return _ForkLexical(levels, tuple(parts))

    # ------------------------------------------------------------------ writes

    def add_many(self, items: Sequence[ContextItem]) -> None:
        self.write(add=items)

    def update(self, item: ContextItem) -> None:
        self.write(update=[item])

    def update_many(self, items: Sequence[ContextItem]) -> None:
        self.write(update=items)

    def write(self, *, add: Sequence[ContextItem] = (), update: Sequence[ContextItem] = ()) -> None:
        """Add and replace items in one write, copying first what a fork of either side needs.

        An added id the scope sees through is taken, as one it holds would be.
        """
        levels = self._fresh()
        if add and levels.forked:
            taken = self.get_many([item.id for item in add], levels)
            if taken:
                raise DuplicateItemError(taken[0].id)
        self._protect(levels, [i.id for i in update], added=[i.id for i in add])
        self._own(levels, [i.id for i in update])
        self._wrote()
        if update:
            self.backend.write(add=add, update=update)
        else:
            self.backend.add_many(add)

    def set_archived(
        self, item_ids: Sequence[str], at: datetime | None, reason: ArchiveReason | None
    ) -> None:
        levels = self._fresh()
        self._protect(levels, item_ids)
        self._own(levels, item_ids)
        self._wrote()
        self.backend.set_archived(item_ids, at, reason)

    def delete_many(self, item_ids: Sequence[str]) -> None:
        """Delete the scope's own items among ``item_ids``; hide those it sees through."""
        levels = self._fresh()
        self._protect(levels, item_ids)
        mine = self._hide_through(levels, item_ids)
        self._wrote()
        self.backend.delete_many(mine)

    def delete_all_but(self, kept: Sequence[str], doomed: Sequence[str]) -> None:
        """Delete ``doomed``, every item the scope sees but ``kept``: a fork stops reading through.

        What a task's end that holds some candidates does. A fork copies in what it keeps and
        detaches, rather than hiding each of its parent's items one by one.
        """
        levels = self._fresh()
        if not levels.forked:
            self.delete_many(doomed)
            return
        self._protect(levels, doomed)
        self._own(levels, kept)
        self.detach(copy=False)
        self.backend.delete_many(doomed)

    def erase(self, item_ids: Sequence[str], tokens: Mapping[str, str]) -> None:
        """Erase the scope's own items of ``item_ids``; hide those it reads through.

        The forks are not protected first: a fork that reads an erased item through loses
        it with the scope, and so do its checkpoints that saved it (erasing is for what must
        leave no trace). A fork that holds its own copy keeps it: it is that fork's memory,
        forgotten there. The scope's own checkpoints naming what it hid go as well.
        """
        levels = self._fresh()
        mine = self._hide_through(levels, item_ids)
        self._wrote()
        self._forget_saved_through([levels.local(i)[1] for i in item_ids])
        through = [i for i in item_ids if i not in mine]
        if through:
            self.backend.checkpoints.drop_holding(through)
        self.backend.erase(mine, tokens=tokens)

    def _forget_saved_through(self, names: Sequence[str]) -> None:
        """Drop the checkpoints of every fork below this scope that reads ``names`` through."""
        for child in self.children():
            prefix = id_prefix(child.namespace)
            wanted = [prefix + name for name in names]
            held = {item.id for item in self.backend.get_many(wanted)}
            reading = [i for i in wanted if i not in held]
            if reading:
                self.backend.checkpoints.drop_holding(reading)
                io = ScopeIO(self.backend, child.namespace, self.tier)
                io._forget_saved_through([n for n in names if prefix + n not in held])

    def clear(self, scope: Filter) -> int:
        """Remove every item the scope sees: its forks detach first, it stops reading through."""
        levels = self._fresh()
        seen = self.count(scope, levels) if levels.forked else None
        self.detach(copy=False)  # its forks first
        removed = self.backend.clear(scope)
        return removed if seen is None else seen

    def detach_children(self) -> None:
        """Give each attached fork a copy of all it sees, and stop it reading through."""
        for child in self.children():
            ScopeIO(self.backend, child.namespace, self.tier).detach()

    def detach(self, *, copy: bool = True) -> None:
        """Stop reading through, keeping (``copy``) a copy of all the scope sees through now.

        The scope's own forks are detached first: what they see through it is about to change.
        """
        self.detach_children()
        if self.fork_record() is None:
            return
        levels = self._fresh()
        if copy and levels.forked:
            scope = parse_filter({"namespace": self.namespace, "tier": self.tier.value})
            seen = self.query(scope, None, "+id", levels)
            held = {item.id for item in self.backend.get_many([item.id for item in seen])}
            self._copy_in(levels, [item for item in seen if item.id not in held])
        self._wrote()
        self.backend.lineage.detach(self.namespace, self.tier)

    # ------------------------------------------------------------------ copying

    def _own(self, levels: _Levels, item_ids: Sequence[str]) -> None:
        """Copy into the scope the items of ``item_ids`` it sees through, before it changes them."""
        if not levels.forked or not item_ids:
            return
        held = {item.id for item in self.backend.get_many(list(item_ids))}
        wanted = [i for i in item_ids if i not in held and levels.local(i)[0] == 0]
        if wanted:
            self._copy_in(levels, self.get_many(wanted, levels))

    def _copy_in(self, levels: _Levels, items: Sequence[ContextItem]) -> None:
        """Store ``items`` (seen through, adopted) as the scope's own; hide their originals."""
        if not items:
            return
        originals = [
            v for item in items for v in levels.variants(levels.local(item.id)[1], start=1)
        ]
        # The copy first: until the originals are hidden the nearest level (the copy) wins,
        # so a failure between the two loses nothing.
        self.backend.add_many(list(items))
        self.backend.lineage.hide(self.namespace, self.tier, originals)

    def _hide_through(self, levels: _Levels, item_ids: Sequence[str]) -> list[str]:
        """Hide the items of ``item_ids`` the scope sees through; return those it holds."""
        if not levels.forked:
            return list(item_ids)
        held = [item.id for item in self.backend.get_many(list(item_ids))]
        through = [
            v
            for i in item_ids
            if i not in held and levels.local(i)[0] == 0
            for v in levels.variants(levels.local(i)[1], start=1)
        ]
        if through:
            self.backend.lineage.hide(self.namespace, self.tier, through)
        return held

    def _protect(
        self, levels: _Levels, changed: Sequence[str], *, added: Sequence[str] = ()
    ) -> None:
        """Before this scope changes ``changed`` and adds ``added``, keep its forks as they are.

        A fork that sees one of the changed items through gets its copy as it sees it now;
        every written id of this scope is then hidden from each fork.
        """
        if not changed and not added:
            return
        children = self.children()
        if not children:
            return
        local = levels.local
        names = [local(i)[1] for i in (*changed, *added)]
        mine = id_prefix(self.namespace)
        for child in children:
            io = ScopeIO(self.backend, child.namespace, self.tier)
            prefix = id_prefix(child.namespace)
            # Added ids too: an add that fails (an id held already) must not hide what the
            # fork reads.
            io._own(io._fresh(), [prefix + local(i)[1] for i in (*changed, *added)])
            self.backend.lineage.hide(child.namespace, self.tier, [mine + n for n in names])


def renamed(items: Iterable[ContextItem], source: str, target: str) -> list[ContextItem]:
    """``items`` of scope ``source`` as scope ``target`` holds them: its ids, its namespace."""
    levels = _Levels((target, source), (id_prefix(target), id_prefix(source)), frozenset())
    return [levels.adopt(item) for item in items]


def _visible_hits(levels: _Levels, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` over every level as the scope sees them: best first, ties by the scope's id."""
    shown = [hit for hit in hits if hit.item.id not in levels.hidden]
    kept = {item.id: item for item in levels.visible(hit.item for hit in shown)}
    out: list[SearchHit] = []
    for hit in shown:
        item = kept.pop(levels.own_id(hit.item.id), None)
        if item is not None:
            out.append(SearchHit(item, hit.score))
    return sorted(out, key=lambda hit: (-hit.score, hit.item.id))


@attrs.frozen
class _ForkMatches:
    """One query's full-text scores over a fork: each level's, as the fork names them.

    Lazy like each level's own: ``best`` asks each level for as many more as the fork hides.
    """

    levels: _Levels
    parts: tuple[LexicalMatches, ...]

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def best(self, k: int) -> list[str]:
        nearest: dict[str, tuple[int, float]] = {}
        for level, part in enumerate(self.parts):
            wanted = k + self.levels.hidden_at[level]
            found = [i for i in part.best(wanted) if i not in self.levels.hidden]
            for item_id, score in part.of(found).items():
                nearest.setdefault(self.levels.own_id(item_id), (level, score))
        ranked = sorted(nearest.items(), key=lambda pair: (-pair[1][1], pair[0]))
        return [item_id for item_id, _ in ranked[:k]]

    def of(self, item_ids: Iterable[str]) -> dict[str, float]:
        scores = dict.fromkeys(item_ids, 0.0)
        asked: list[dict[str, str]] = [{} for _ in self.parts]
        for item_id in scores:
            level, local = self.levels.local(item_id)
            if level == 0:
                for at, variant in enumerate(self.levels.variants(local)):
                    if variant not in self.levels.hidden:
                        asked[at][variant] = item_id
        for at, part in enumerate(self.parts):
            for physical, score in part.of(asked[at]).items():
                own = asked[at][physical]
                if score > 0 and scores[own] == 0.0:
                    scores[own] = score
        return scores


@attrs.frozen
class _ForkLexical:
    """A fork's full-text index: each level's index, less what the fork must not see.

    Each level scores with its own statistics, and session neighbours are each level's: a
    fork that has changed little reads exactly its parent's index.
    """

    levels: _Levels
    parts: tuple[LexicalScope, ...]

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def hits(self, query: str) -> LexicalMatches:
        return _ForkMatches(self.levels, tuple(part.hits(query) for part in self.parts))

    def sources(self) -> frozenset[str]:
        return frozenset().union(*(part.sources() for part in self.parts))

    def neighbourhoods(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        """Each item's neighbours in the nearest level that holds it, one call per level."""
        wanted = list(dict.fromkeys(item_ids))
        found: dict[str, list[tuple[str, int]]] = {}
        for level, part in enumerate(self.parts):
            asked = {
                self.levels.prefixes[level] + local: item_id
                for item_id in wanted
                if item_id not in found
                for at, local in [self.levels.local(item_id)]
                if at == 0 and self.levels.prefixes[level] + local not in self.levels.hidden
            }
            if not asked:
                continue
            # A level's index holds that level's items only: each id is renamed by its prefix.
            own, prefix = self.levels.prefixes[0], self.levels.prefixes[level]
            cut, hidden = len(prefix), self.levels.hidden
            for physical, near in part.neighbourhoods(list(asked), radius).items():
                found[asked[physical]] = [
                    (own + other[cut:] if other.startswith(prefix) else other, offset)
                    for other, offset in near
                    if other not in hidden
                ]
        return {item_id: found[item_id] for item_id in wanted if item_id in found}

    def links(self, item_ids: Iterable[str], radius: int) -> Neighbourhoods:
        wanted = list(dict.fromkeys(item_ids))
        among = set(wanted)
        linked: Neighbourhoods = {}
        for item_id, near in self.neighbourhoods(wanted, radius).items():
            kept = [(other, offset) for other, offset in near if other in among]
            if kept:
                linked[item_id] = kept
        return linked
