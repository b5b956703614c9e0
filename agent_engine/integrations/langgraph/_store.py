"""``AgentEngineStore``: agent_engine's tiered memory behind LangGraph's ``BaseStore``.

A LangGraph graph reads and writes long-term memory through a ``BaseStore`` (``get``,
``put``, ``search``, ``delete``, ``list_namespaces`` and their ``a``-prefixed twins, all
derived from ``batch``/``abatch``). This store answers them from the tier stores of a
:class:`~agent_engine.tiers.stores.MemoryStores`, so what a graph remembers is memory the
:class:`~agent_engine.assembler.ContextAssembler` builds contexts from, and every write takes
the path any other caller's takes: redaction, isolation between scopes, the journal, a
project's eviction, the global tier's confirmation of risky kinds.

How a namespace maps onto a scope is :mod:`._namespaces`' business; what is searched and
filtered, :mod:`._values`'. An item is stored as a :class:`~agent_engine.models.ContextItem`
of the store's ``kind`` whose ``source`` is :data:`SOURCE`, whose ``payload`` holds the value
(``{"value": ...}``, with ``"indexed": false`` when nothing of it is to be searched by text)
and whose text is the indexed text (the whole value as JSON by default). A put of a key held
already is an ``update``: a new version when the value changed (the previous one stays as
history, ``docs/lifecycle.md``), nothing when it did not. A delete is a ``forget``: the item
and its history are erased.

A batch is checked whole before it reads or writes anything: a namespace that names no scope,
a value that is not JSON, a global write the store may not make, a filter outside the
language, each raises a typed error and nothing of the batch happens. Reads run before writes
(as in LangGraph's own stores); writes go scope by scope, global memory first (the one whose
confirmation can refuse), each scope's new items in one write.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import attrs
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from agent_engine import _validate
from agent_engine._log import get_logger
from agent_engine.errors import DuplicateItemError, ValidationError
from agent_engine.integrations.langgraph import _values
from agent_engine.integrations.langgraph._namespaces import (
    WILDCARD,
    Address,
    Scope,
    address,
    check_labels,
    decode,
    pattern_scope,
)
from agent_engine.memory.backend import MemoryBackend
from agent_engine.models import ContextItem, Tier
from agent_engine.tiers.base import TierStore
from agent_engine.tiers.stores import MemoryStores
from agent_engine.tiers.views import View

__all__ = ["SOURCE", "AgentEngineStore"]

SOURCE: Final = "langgraph"
"""The ``source`` of every item an :class:`AgentEngineStore` writes: how it tells its own."""
_OWN: Final = {"source": SOURCE}
_WRITE_ORDER: Final = {Tier.GLOBAL: 0, Tier.PROJECT: 1, Tier.SESSION: 2, Tier.TASK: 3}
"""Global memory is written first: its confirmation may refuse, and then nothing else is."""


# ----------------------------------------------------------------------------- checked ops


@attrs.frozen
class _Get:
    at: int
    address: Address


@attrs.frozen
class _Put:
    at: int
    address: Address
    value: dict[str, Any] | None
    """``None``: delete."""
    text: str = ""
    indexed: bool = False

    @property
    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"value": self.value}
        if not self.indexed:
            payload["indexed"] = False
        return payload


@attrs.frozen
class _Search:
    at: int
    prefix: tuple[str, ...]
    filter: dict[str, Any] | None
    limit: int
    offset: int
    query: str | None


@attrs.frozen
class _List:
    at: int
    conditions: tuple[MatchCondition, ...]
    max_depth: int | None
    limit: int
    offset: int


_Step = _Get | _Put | _Search | _List


@attrs.frozen
class _Entry:
    """One item of the adapter's as read from its scope: where it lives, and the item."""

    address: Address
    item: ContextItem
    value: dict[str, Any]

    @property
    def indexed(self) -> bool:
        return self.item.payload.get("indexed") is not False

    def sort_key(self) -> tuple[float, tuple[str, ...], str]:
        """Newest change first, then by namespace and key: a stable order for equal times."""
        return (-self.item.valid_since.timestamp(), self.address.namespace, self.address.key)

    def as_item(self) -> Item:
        return Item(
            value=self.value,
            key=self.address.key,
            namespace=self.address.namespace,
            created_at=self.item.timestamp,
            updated_at=self.item.valid_since,
        )

    def as_search_item(self, score: float | None) -> SearchItem:
        return SearchItem(
            namespace=self.address.namespace,
            key=self.address.key,
            value=self.value,
            created_at=self.item.timestamp,
            updated_at=self.item.valid_since,
            score=score,
        )


def _entry(scope: Scope, item: ContextItem, namespace: str) -> _Entry | None:
    """``item`` as one of the adapter's, or ``None`` when it is not one."""
    if item.source != SOURCE:
        return None
    found = decode(scope, item.id, namespace)
    value = item.payload.get("value")
    if found is None or not isinstance(value, dict):
        return None
    return _Entry(found, item, value)


@attrs.frozen
class _ScopeWrite:
    """What a batch writes in one scope, built (and checked) before anything is written."""

    store: TierStore
    add: list[ContextItem]
    update: list[ContextItem]
    forget: list[str]


# ----------------------------------------------------------------------------- the store


class AgentEngineStore(BaseStore):
    """agent_engine's task, project and global memory as a LangGraph ``BaseStore``.

    ``stores`` opens the tier stores (share the assembler's, ``assembler.stores``, so a graph
    writes the memory its contexts are built from); a backend stands for
    ``MemoryStores(backend)``. Namespaces map onto scopes as ``docs/langgraph.md`` shows
    (``("project", <id>, ...)``, ``("global", <user>, ...)``, ``("task", <project>, <user>,
    <task>, ...)``); any other is refused with
    :class:`~agent_engine.integrations.langgraph.UnmappedNamespaceError`.

    ``fields``: the JSON paths of a value whose text is indexed (searched by a query), as in
    LangGraph's index configuration; ``["$"]`` (the default) is the whole value. A put's own
    ``index`` overrides it, ``index=False`` leaves the item out of a query's ranking.
    Embedding is the backend's: a backend with an embedder ranks a query by cosine
    similarity, one without by BM25. ``kind`` is the kind of every item written (what the
    assembler's policies, aging and redaction go by). ``allow_global``: whether puts and
    deletes may reach global memory (off: a user's global memory outlives every project and
    graph; refused with a :class:`~agent_engine.errors.ValidationError`, nothing written);
    on, the global store's confirmation still applies to its risky kinds.

    ``batch`` runs on the calling thread; ``abatch`` runs the same batch on a worker thread
    of this store's own, and never blocks the event loop: one thread, so concurrent calls
    run in the order they were made. One batch of a store runs at a time, whichever thread
    calls. A cancelled ``abatch`` either ran whole or never started; :meth:`close` stops the
    worker.
    """

    supports_ttl = False

    def __init__(
        self,
        stores: MemoryStores | MemoryBackend,
        *,
        fields: Sequence[str] = ("$",),
        kind: str = "note",
        allow_global: bool = False,
    ) -> None:
        if isinstance(stores, MemoryStores):
            self.stores = stores
        elif isinstance(stores, MemoryBackend):
            self.stores = MemoryStores(stores)
        else:
            raise ValidationError(
                f"stores must be MemoryStores or a backend, got {type(stores).__name__}",
                field="stores",
                value=stores,
            )
        if not isinstance(allow_global, bool):
            raise ValidationError(
                f"allow_global must be True or False, got {allow_global!r}",
                field="allow_global",
                value=allow_global,
            )
        self._fields = _values.fields(fields)
        self.fields = tuple(path for path, _ in self._fields)
        self.kind = _validate.identifier("kind", kind)
        self.allow_global = allow_global
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"AgentEngineStore(fields={list(self.fields)!r}, kind={self.kind!r}, "
            f"allow_global={self.allow_global})"
        )

    # ------------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order of kind (reads, then writes); one result per op, in order.

        Every op is checked before anything is read or written (see the module docstring).
        """
        steps = [self._check(at, op) for at, op in enumerate(_validate.sequence("ops", ops))]
        with self._lock:
            results: list[Result] = [None] * len(steps)
            self._get([step for step in steps if isinstance(step, _Get)], results)
            for step in steps:
                if isinstance(step, _Search):
                    results[step.at] = self._search(step)
                elif isinstance(step, _List):
                    results[step.at] = self._list(step)
            self._write([step for step in steps if isinstance(step, _Put)])
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on this store's worker thread, so the event loop is never blocked."""
        listed = list(ops)
        loop = asyncio.get_running_loop()
        run = functools.partial(contextvars.copy_context().run, self.batch, listed)
        return await loop.run_in_executor(self._worker(), run)

    def close(self) -> None:
        """Stop the worker thread of ``abatch`` once its batches are done (one starts on use)."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _worker(self) -> ThreadPoolExecutor:
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="agent-engine-langgraph"
                )
            return self._executor

    # ------------------------------------------------------------------ checks

    def _check(self, at: int, op: object) -> _Step:
        if isinstance(op, GetOp):
            return _Get(at, address(op.namespace, op.key))
        if isinstance(op, PutOp):
            return self._check_put(at, op)
        if isinstance(op, SearchOp):
            prefix = check_labels(op.namespace_prefix)
            pattern_scope(prefix)
            query = None if op.query is None else _validate.text("query", op.query)
            return _Search(
                at,
                prefix,
                _values.check_filter(op.filter),
                _validate.integer("limit", op.limit),
                _validate.integer("offset", op.offset),
                query or None,  # an empty query ranks nothing, as in LangGraph's stores
            )
        if isinstance(op, ListNamespacesOp):
            return self._check_list(at, op)
        raise ValidationError(
            f"no store operation {type(op).__name__}; there are GetOp, PutOp, SearchOp and "
            "ListNamespacesOp",
            field="ops",
            value=op,
        )

    def _check_put(self, at: int, op: PutOp) -> _Put:
        where = address(op.namespace, op.key)
        if where.scope.tier is Tier.GLOBAL and not self.allow_global:
            raise ValidationError(
                f"this store may not write global memory ({where.namespace!r}): a user's global "
                "memory outlives every project and graph; build it with allow_global=True",
                field="namespace",
                value=where.namespace,
            )
        if op.ttl is not None:
            raise ValidationError(
                "this store keeps no time to live (supports_ttl is False); age items with "
                "compact() instead (docs/aging.md)",
                field="ttl",
                value=op.ttl,
            )
        if op.value is None:
            return _Put(at, where, None)
        if not isinstance(op.value, Mapping):
            raise ValidationError(
                f"a value is a mapping, got {type(op.value).__name__}",
                field="value",
                value=op.value,
            )
        value = _json_value(op.value)
        if op.index is False:
            paths: _values.Fields = ()
        elif op.index is None:
            paths = self._fields
        else:
            paths = _values.fields(op.index, field="index")
        text = _values.text_of(value, paths) if paths else None
        if text is None or not text.strip():
            return _Put(at, where, value, _values.json_text(value), indexed=False)
        return _Put(at, where, value, text, indexed=True)

    def _check_list(self, at: int, op: ListNamespacesOp) -> _List:
        conditions: list[MatchCondition] = []
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise ValidationError(
                    f"a match condition is 'prefix' or 'suffix', got {condition.match_type!r}",
                    field="match_conditions",
                    value=condition,
                )
            path = check_labels(condition.path)
            if condition.match_type == "prefix":
                pattern_scope(path)
            conditions.append(MatchCondition(condition.match_type, path))
        depth = op.max_depth
        return _List(
            at,
            tuple(conditions),
            None if depth is None else _validate.integer("max_depth", depth, minimum=1),
            _validate.integer("limit", op.limit),
            _validate.integer("offset", op.offset),
        )

    # ------------------------------------------------------------------ reads

    def _get(self, gets: list[_Get], results: list[Result]) -> None:
        """Answer the gets with one read per scope."""
        by_scope: dict[Scope, list[_Get]] = {}
        for get in gets:
            by_scope.setdefault(get.address.scope, []).append(get)
        for scope, asked in by_scope.items():
            store = scope.store(self.stores)
            found: dict[str, _Entry] = {}
            for item in store.get_many([get.address.local_id for get in asked]):
                entry = _entry(scope, item, store.namespace)
                if entry is not None:
                    found[entry.address.local_id] = entry
            for get in asked:
                held = found.get(get.address.local_id)
                results[get.at] = held.as_item() if held is not None else None

    def _gather(self, pattern: tuple[str, ...]) -> tuple[list[_Entry], dict[Scope, int]]:
        """The adapter's items under the scope part of ``pattern``; how many each scope holds.

        A pattern naming one scope reads its store; a wider one (``()``, ``("project",)``,
        a wildcard) reads the adapter's items of the tiers it reaches from each backend, in
        one query per backend, and finds their scopes from their namespaces.
        """
        tiers, scope = pattern_scope(pattern)
        read: list[tuple[Scope, ContextItem, str]] = []
        if scope is not None:
            store = scope.store(self.stores)
            items = store.query(_OWN, limit=None, view=View.CURRENT)
            read = [(scope, item, store.namespace) for item in items]
        else:
            for backend, group in self._backends(tiers):
                where = {**_OWN, "tier": {"$in": [tier.value for tier in group]}, "valid_to": None}
                for item in backend.query(where, limit=None):
                    found = Scope.of(item.tier, item.namespace)
                    if found is not None:
                        read.append((found, item, item.namespace))
        totals: dict[Scope, int] = {}
        entries: list[_Entry] = []
        for found, item, namespace in read:
            totals[found] = totals.get(found, 0) + 1
            entry = _entry(found, item, namespace)
            if entry is not None:
                entries.append(entry)
        return entries, totals

    def _backends(self, tiers: Iterable[Tier]) -> list[tuple[MemoryBackend, list[Tier]]]:
        """The backends holding ``tiers``, each once, with the tiers it holds."""
        groups: list[tuple[MemoryBackend, list[Tier]]] = []
        for tier in tiers:
            backend = self.stores.backends[tier]
            group = next((g for g in groups if g[0] is backend), None)
            if group is None:
                groups.append((backend, [tier]))
            else:
                group[1].append(tier)
        return groups

    def _search(self, step: _Search) -> list[SearchItem]:
        entries, totals = self._gather(step.prefix)
        size = len(step.prefix)
        chosen = [
            entry
            for entry in entries
            if entry.address.namespace[:size] == step.prefix
            and _values.matches(entry.value, step.filter)
        ]
        window = slice(step.offset, step.offset + step.limit)
        if step.query is None:
            chosen.sort(key=_Entry.sort_key)
            return [entry.as_search_item(None) for entry in chosen[window]]
        scores = self._scores(chosen, step.query, totals)

        def ranked(entry: _Entry) -> tuple[bool, float, tuple[float, tuple[str, ...], str]]:
            score = scores.get((entry.address.scope, entry.item.id))
            return (score is None, -(score or 0.0), entry.sort_key())

        chosen.sort(key=ranked)
        return [
            entry.as_search_item(scores.get((entry.address.scope, entry.item.id)))
            for entry in chosen[window]
        ]

    def _scores(
        self, entries: list[_Entry], query: str, totals: Mapping[Scope, int]
    ) -> dict[tuple[Scope, str], float]:
        """Each indexed entry's score for ``query`` by its scope's search; unmatched: none.

        A scope whose backend embeds ranks by cosine similarity over all of the adapter's
        items in it (the scope's vector search, asked for as many as it holds); one without
        an embedder by the scope's BM25 index, where an item sharing no term has no score.
        """
        by_scope: dict[Scope, list[_Entry]] = {}
        for entry in entries:
            if entry.indexed:
                by_scope.setdefault(entry.address.scope, []).append(entry)
        scores: dict[tuple[Scope, str], float] = {}
        for scope, group in by_scope.items():
            store = scope.store(self.stores)
            wanted = {entry.item.id for entry in group}
            if store.query_embedder is not None:
                hits = store.search(query, totals[scope], _OWN, view=View.CURRENT)
                found = {hit.item.id: hit.score for hit in hits if hit.item.id in wanted}
            else:
                matched = store.lexical().hits(query).of(wanted)
                found = {item_id: score for item_id, score in matched.items() if score > 0}
            scores.update(((scope, item_id), score) for item_id, score in found.items())
        return scores

    def _list(self, step: _List) -> list[tuple[str, ...]]:
        prefixes = [c.path for c in step.conditions if c.match_type == "prefix"]
        entries, _ = self._gather(prefixes[0] if prefixes else ())
        namespaces = {
            entry.address.namespace
            for entry in entries
            if all(_does_match(condition, entry.address.namespace) for condition in step.conditions)
        }
        if step.max_depth is not None:
            namespaces = {namespace[: step.max_depth] for namespace in namespaces}
        return sorted(namespaces)[step.offset : step.offset + step.limit]

    # ------------------------------------------------------------------ writes

    def _write(self, puts: list[_Put]) -> None:
        """Apply the puts and deletes: the last op of each item counts, scope by scope.

        Every scope's write is planned (read and built, so checked) before the first is made.
        """
        if not puts:
            return
        latest: dict[tuple[Scope, str], _Put] = {}
        for put in puts:
            latest[put.address.scope, put.address.local_id] = put
        by_scope: dict[Scope, list[_Put]] = {}
        for (scope, _), put in latest.items():
            by_scope.setdefault(scope, []).append(put)
        order = sorted(by_scope, key=lambda scope: _WRITE_ORDER[scope.tier])
        planned = [(scope, self._plan(scope, by_scope[scope])) for scope in order]
        for scope, plan in planned:
            self._apply(plan, functools.partial(self._plan, scope, by_scope[scope]))
        get_logger(component="langgraph").debug(
            "langgraph_store_written",
            scopes=len(planned),
            added=sum(len(plan.add) for _, plan in planned),
            updated=sum(len(plan.update) for _, plan in planned),
            forgotten=sum(len(plan.forget) for _, plan in planned),
        )

    def _plan(self, scope: Scope, puts: list[_Put]) -> _ScopeWrite:
        store = scope.store(self.stores)
        held: dict[str, ContextItem] = {}
        for item in store.get_many([put.address.local_id for put in puts]):
            entry = _entry(scope, item, store.namespace)
            if entry is None:
                raise ValidationError(
                    f"scope {store.namespace!r} holds item {item.id!r}, which this store did not "
                    "write; a put or delete may not replace it",
                    field="key",
                    value=item.id,
                )
            held[entry.address.local_id] = item
        plan = _ScopeWrite(store, [], [], [])
        for put in puts:
            local = put.address.local_id
            current = held.get(local)
            if put.value is None:
                if current is not None:
                    plan.forget.append(current.id)
            elif current is None:
                plan.add.append(
                    store.new_item(
                        self.kind, put.text, id=local, key=local, payload=put.payload, source=SOURCE
                    )
                )
            else:
                changed = attrs.evolve(current, text=put.text, payload=put.payload)
                # Compared as the store would keep it: a value redaction changes is the same
                # value when it comes again, and writing it again would only journal noise.
                kept = store.redaction.redact(changed).item if store.redaction else changed
                if kept.text != current.text or kept.payload != current.payload:
                    plan.update.append(changed)
        return plan

    @staticmethod
    def _apply(plan: _ScopeWrite, replan: Callable[[], _ScopeWrite]) -> None:
        """Write one scope's plan: its new items in one add, then its updates and forgets.

        Another writer (a process on the same database) may have added one of the new keys
        since the plan read them; the add, all-or-none and the scope's first write, is then
        refused (as a duplicate id, or as a slot taken) with nothing written, and the scope
        is planned again from what it holds now.
        """
        if plan.add:
            try:
                plan.store.add_many(plan.add)
            except (DuplicateItemError, ValidationError):
                if not plan.store.get_many([item.id for item in plan.add]):
                    raise
                plan = replan()
                if plan.add:
                    plan.store.add_many(plan.add)
        for item in plan.update:
            plan.store.update(item)
        if plan.forget:
            plan.store.forget(*plan.forget)


def _json_value(given: Mapping[str, Any]) -> dict[str, Any]:
    """A put's value as stored: a detached JSON copy whose every string is storable text.

    It is stored one level down in the payload, so it may nest one level less; a NUL
    character, which JSON holds and databases do not, is refused here rather than by the
    database (PostgreSQL's JSON) or, naming the wrong field, by the item's text.
    """
    value: dict[str, Any] = _validate.json_value(
        "value", dict(given), max_depth=_validate.MAX_JSON_DEPTH - 1
    )
    pending: list[Any] = [value]
    while pending:
        current = pending.pop()
        if isinstance(current, dict):
            pending.extend(current)
            pending.extend(current.values())
        elif isinstance(current, list):
            pending.extend(current)
        elif isinstance(current, str) and "\x00" in current:
            raise ValidationError(
                "a value holds a NUL character, which databases cannot store",
                field="value",
                value=given,
            )
    return value


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) as the condition's path.

    A ``*`` label of the path matches any one label.
    """
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(wanted in (WILDCARD, label) for label, wanted in pairs)
