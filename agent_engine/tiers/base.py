"""What every tier store shares: a namespace it cannot leave, and a journal of its changes.

Isolation is enforced here, not by callers. A store reads and writes only items whose
``namespace`` and ``tier`` are its own: every filter it passes to the backend is ANDed with
its scope (a caller's filter naming another namespace simply matches nothing), an id that
belongs to another namespace is "not found", and an item built for another scope is refused.
Ids are unique per scope (:mod:`agent_engine.tiers.scope`): every id a store writes carries
its scope, so whatever id a caller picks, the outcome of a write never depends on what
another scope holds. Many stores can therefore share one physical backend (one SQLite file or
PostgreSQL database for every project) without seeing, or learning anything of, each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from agent_engine import _validate
from agent_engine._log import get_logger
from agent_engine._telemetry import DEFAULT_TELEMETRY, Telemetry, names, operation
from agent_engine.embeddings import EmbedderIdentity
from agent_engine.errors import (
    DuplicateItemError,
    ItemNotFoundError,
    LifecycleStateError,
    ValidationError,
)
from agent_engine.filters import Filter, FilterInput, Order, OrderInput, parse_filter, parse_order
from agent_engine.memory.backend import (
    DEFAULT_LIMIT,
    DEFAULT_ORDER,
    MemoryBackend,
    Query,
    SearchHit,
    item_batch,
)
from agent_engine.memory.checkpoints import Checkpoint
from agent_engine.memory.conflicts import Conflict
from agent_engine.memory.export import RestorePlan
from agent_engine.memory.lineage import Fork
from agent_engine.models import (
    ArchiveReason,
    AuditAction,
    AuditEvent,
    ContextItem,
    Status,
    Tier,
    Vector,
    new_id,
    utcnow,
    with_archive_mark,
)
from agent_engine.redaction import DEFAULT_REDACTION, Redacted, RedactionPolicy
from agent_engine.tiers import checkpoints as _checkpoints
from agent_engine.tiers import conflicts as _conflicts
from agent_engine.tiers import forks as _forks
from agent_engine.tiers._forks import ScopeIO
from agent_engine.tiers._lifecycle import (
    ancestry,
    content_changed,
    history,
    keep_lifecycle,
    local_key,
    previous_version,
    superseded,
    valid_at,
)
from agent_engine.tiers.aging import AgingPolicy, CompactionReport, apply_plan, plan_compaction
from agent_engine.tiers.audit import AuditLog
from agent_engine.tiers.conflicts import DEFAULT_DETECTION, ConflictDetection
from agent_engine.tiers.dedup import (
    DEFAULT_MERGE,
    AddOutcome,
    MergePlan,
    MergePolicy,
    boosted,
    merged_ids,
    plan_merges,
)
from agent_engine.tiers.lexical import LexicalView
from agent_engine.tiers.scope import id_prefix, qualified, scoped_id
from agent_engine.tiers.views import View, as_view, view_filter
from agent_engine.tokens import DEFAULT_COUNTER

if TYPE_CHECKING:
    from agent_engine._telemetry.otel import Operation

__all__ = ["QueryVectors", "TierStore", "by_backend", "record_access"]

QueryVectors = dict[tuple[EmbedderIdentity, str], Vector]
"""Query vectors made during one unit of work (a context build), by embedder and text.

Keyed by the embedder's identity (its name and dimension, which say which model made a
vector), so stores whose backends embed alike share a text's vector: embedding a query with a
model costs as much as the rest of a build.
"""


class TierStore:
    """A view of one namespace of one tier on a backend; the base of the three tier stores.

    ``audit`` defaults to an :class:`~agent_engine.tiers.audit.AuditLog` over the backend's own
    journal. ``clock`` supplies timestamps (tests pass a frozen one). ``aging`` is the policy
    :meth:`compact` applies (:class:`~agent_engine.tiers.aging.AgingPolicy`'s defaults if
    ``None``). ``conflict_detection`` bounds the search for contradictions among what the store
    writes (:class:`~agent_engine.tiers.conflicts.ConflictDetection`; ``None`` turns it off).
    ``merge`` says when an added item is a near-duplicate of one held, merged into it instead
    of stored (:class:`~agent_engine.tiers.dedup.MergePolicy`; ``None`` turns merging off).
    ``redaction`` is applied to every item before anything of it is written or embedded
    (:class:`~agent_engine.redaction.RedactionPolicy`; ``None`` stores items as given).
    ``telemetry`` is where its adds, searches and compactions report as OpenTelemetry spans
    and metrics (:class:`~agent_engine.Telemetry`: the application's global providers by
    default, no text; ``None`` reports nothing; ``docs/telemetry.md``).
    """

    tier: ClassVar[Tier]

    def __init__(
        self,
        backend: MemoryBackend,
        namespace: str,
        *,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = utcnow,
        aging: AgingPolicy | None = None,
        conflict_detection: ConflictDetection | None = DEFAULT_DETECTION,
        merge: MergePolicy | None = DEFAULT_MERGE,
        redaction: RedactionPolicy | None = DEFAULT_REDACTION,
        telemetry: Telemetry | None = DEFAULT_TELEMETRY,
    ) -> None:
        _validate.identifier("namespace", namespace)
        self.telemetry = _validate.optional("telemetry", Telemetry, telemetry)
        self.aging = _validate.optional("aging", AgingPolicy, aging) or AgingPolicy()
        self.merge = _validate.optional("merge", MergePolicy, merge)
        self.redaction = _validate.optional("redaction", RedactionPolicy, redaction)
        self.backend = backend
        self.namespace = namespace
        self.id_prefix = id_prefix(namespace)
        self.audit = audit if audit is not None else AuditLog(backend.audit, clock=clock)
        self.clock = clock
        self.conflict_detection = _validate.optional(
            "conflict_detection", ConflictDetection, conflict_detection
        )
        self.scope = Filter().and_(parse_filter({"namespace": namespace, "tier": self.tier.value}))
        self._io = ScopeIO(backend, namespace, self.tier)
        self._views = {view: self.scope.and_(view_filter(view)) for view in View}
        self._pinned = self._views[View.WORKING].and_(parse_filter({"status": Status.PINNED.value}))
        self._log = get_logger(tier=self.tier.value, namespace=namespace)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(namespace={self.namespace!r}, backend={self.backend!r})"

    # ------------------------------------------------------------------ building items

    def new_item(
        self,
        kind: str,
        text: str,
        *,
        importance: float = 0.5,
        tags: Iterable[str] = (),
        payload: Mapping[str, Any] | None = None,
        source: str | None = None,
        status: Status = Status.CONFIRMED,
        expires_at: datetime | None = None,
        **fields: Any,
    ) -> ContextItem:
        """Build an item in this store's scope (not yet stored): fresh id, now as timestamp.

        ``token_cost`` is filled with the default counter's count of the item's body, which the
        assembler reuses instead of counting on every build.
        """
        item = ContextItem(
            id=self.scoped_id(fields.pop("id", None) or new_id()),
            kind=kind,
            text=text,
            tier=self.tier,
            namespace=self.namespace,
            source=source if source is not None else self.namespace,
            timestamp=fields.pop("timestamp", None) or self.clock(),
            tags=tags,
            importance=importance,
            payload=payload if payload is not None else {},
            status=status,
            expires_at=expires_at,
            **fields,
        )
        if item.token_cost is not None:
            return item
        # Counting once at write time keeps it off the assembler's hot path.
        return attrs.evolve(item, token_cost=DEFAULT_COUNTER.count(item.body))

    def _add_labelled(self, kind: str, text: str, importance: float, **label: str) -> ContextItem:
        """Add ``text`` as a ``kind`` item under one label (a category, a domain, a scope).

        The typed helpers of the tiers (preferences, patterns, conventions) store alike: tagged
        with their kind and label, and a payload naming both, so a filter on either finds them.
        """
        ((name, value),) = label.items()
        return self.add(
            self.new_item(
                kind,
                text,
                importance=importance,
                tags=(kind, value),
                payload={kind: text, name: value},
            )
        )

    def scoped_id(self, item_id: str) -> str:
        """``item_id`` as this store writes it: a local id gets the scope's prefix."""
        whole = qualified(self.id_prefix, _validate.text("id", item_id))
        return whole if whole is not None else scoped_id(self.namespace, item_id)

    def _in_scope(self, item: ContextItem) -> bool:
        return item.namespace == self.namespace and item.tier is self.tier

    def _resolve(self, item_ids: Iterable[str]) -> dict[str, ContextItem]:
        """This store's items behind ``item_ids`` (local or whole ids), keyed by the id asked.

        An id is looked up as this scope writes it and, when that differs, as given: an item
        stored before ids were qualified is found in its own scope. Either way an item of
        another scope is not found, exactly like a missing one, whatever its length. Ids the
        store handed out (what a build's searches return) already carry the prefix and cost
        one lookup each.
        """
        asked = list(
            dict.fromkeys(_validate.text("id", i) for i in _validate.sequence("item_ids", item_ids))
        )
        wanted = {item_id: qualified(self.id_prefix, item_id) for item_id in asked}
        lookups = [q for q in wanted.values() if q is not None]
        lookups += [i for i, q in wanted.items() if q != i]
        found = {item.id: item for item in self._io.get_many(lookups) if self._in_scope(item)}
        resolved: dict[str, ContextItem] = {}
        for item_id, whole in wanted.items():
            item = (found.get(whole) if whole else None) or found.get(item_id)
            if item is not None:
                resolved[item_id] = item
        return resolved

    def _check_scope(self, items: Sequence[ContextItem]) -> None:
        for item in items:
            if not isinstance(item, ContextItem):
                raise ValidationError(
                    f"expected ContextItem, got {type(item).__name__}", field="items", value=item
                )
            if not self._in_scope(item):
                wrong = "tier" if item.tier is not self.tier else "namespace"
                raise ValidationError(
                    f"item {item.id!r} belongs to {item.tier.value}/{item.namespace!r}, not to "
                    f"this store's {self.tier.value}/{self.namespace!r}; build it with new_item()",
                    field=wrong,
                    value=getattr(item, wrong),
                )

    # ------------------------------------------------------------------ reads

    def get(self, item_id: str) -> ContextItem | None:
        """Return the item, or ``None`` if it does not exist *in this store*."""
        return self._resolve([item_id]).get(item_id)

    def require(self, item_id: str) -> ContextItem:
        """Return the item or raise :class:`~agent_engine.errors.ItemNotFoundError`."""
        item = self.get(item_id)
        if item is None:
            raise ItemNotFoundError(item_id, namespace=self.namespace)
        return item

    def get_many(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """Return this store's items among ``item_ids``, in the order asked."""
        found = self._resolve(item_ids)
        return list({item.id: item for item in found.values()}.values())

    def query(
        self,
        filters: FilterInput = None,
        limit: int | None = DEFAULT_LIMIT,
        order_by: OrderInput = DEFAULT_ORDER,
        *,
        view: View | str = View.WORKING,
        as_of: datetime | None = None,
    ) -> list[ContextItem]:
        """Query this store's items (the filter language of ``docs/filters.md``).

        ``view``: which lifecycle states to see (the working set by default; see
        :class:`~agent_engine.tiers.views.View`). ``as_of``: the versions that held at that
        time instead, whatever they became since (archived or not; ``view`` is then unused).
        """
        if as_of is None:
            return self._io.query(self._scoped(filters, view), limit, order_by)
        at = _validate.aware("as_of", as_of)
        if limit is not None:
            _validate.integer("limit", limit)
        order = parse_order(order_by)
        return valid_at(self._read, self._scoped(filters, View.ALL), limit, order, at)

    def _read(self, where: Filter, limit: int | None, order: Order) -> list[ContextItem]:
        return self._io.query(where, limit, order)

    def count(self, filters: FilterInput = None, *, view: View | str = View.WORKING) -> int:
        """Count this store's matching items in ``view`` (the working set by default)."""
        return self._io.count(self._scoped(filters, view))

    def search(
        self,
        query: Query,
        k: int = 10,
        filters: FilterInput = None,
        *,
        view: View | str = View.WORKING,
    ) -> list[SearchHit]:
        """Semantic search within this store's ``view`` (the working set by default)."""
        with self._operation(names.SEARCH_MEMORY, "search") as span:
            hits = self._io.search(query, k, self._scoped(filters, view))
            if span is not None:
                _report_hits(span, query, hits)
            return hits

    def search_many(
        self,
        queries: Sequence[Query],
        k: int = 10,
        filters: FilterInput = None,
        *,
        view: View | str = View.WORKING,
    ) -> list[list[SearchHit]]:
        """:meth:`search` for each of ``queries`` under one filter, answered together."""
        return self._io.search_many(queries, k, self._scoped(filters, view))

    def search_text(
        self,
        text: str,
        k: int = 10,
        *,
        vectors: QueryVectors | None = None,
        view: View | str = View.WORKING,
    ) -> tuple[Vector, list[SearchHit]]:
        """Vector search for ``text`` with this store's embedder: the query vector and the hits.

        The vector is the backend's :meth:`~agent_engine.memory.backend.MemoryBackend.embed_query`
        of ``text`` (L2-normalized), returned so the caller can score other items against
        it. ``vectors``: the query vectors a unit of work made so far; the vector is taken
        from it when an embedder of the same identity made it, and added to it otherwise.
        Raises :class:`~agent_engine.errors.EmbeddingError` when :attr:`query_embedder` is
        ``None``.
        """
        with self._operation(names.SEARCH_MEMORY, "search_text") as span:
            identity = self.query_embedder
            made = vectors.get((identity, text)) if identity is not None and vectors else None
            vector = made if made is not None else self.backend.embed_query(text)
            if identity is not None and vectors is not None:
                vectors[identity, text] = vector  # without an embedder, embed_query raised
            hits = self._io.search(vector, k, self._scoped(None, view))
            if span is not None:
                _report_hits(span, text, hits)
            return vector, hits

    @property
    def query_embedder(self) -> EmbedderIdentity | None:
        """The embedder of this store's text queries (``None``: it searches by vector only)."""
        embedder = self.backend.embedder
        return EmbedderIdentity.of(embedder) if embedder is not None else None

    def lexical(self) -> LexicalView:
        """The full-text index of this store's scope, looked up once (see :class:`LexicalView`).

        It indexes what still holds: the working set and the archive, never superseded
        versions (a build pages the archive in through it).

        Take one view per unit of work and ask it everything: on a persistent store each
        lookup reads the scope's change counter from the database.
        """
        return LexicalView(self._io.lexical_index(self.scope))

    def pinned(self) -> list[ContextItem]:
        """Every pinned item of the working set, most important first (ties by id)."""
        return self._io.query(self._pinned, None, "-importance")

    def list_all(self, *, view: View | str = View.WORKING) -> list[ContextItem]:
        """Every item of this store's ``view`` (the working set by default), newest first."""
        return self.query(None, limit=None, view=view)

    def timeline(self) -> list[ContextItem]:
        """The working set in the order it happened (timestamp, then the time-ordered id)."""
        return self.query(None, limit=None, order_by="+timestamp")

    def _scoped(self, filters: FilterInput, view: View | str = View.WORKING) -> Filter:
        return self._views[as_view(view)].and_(parse_filter(filters))

    def _operation(self, name: str, method: str) -> AbstractContextManager[Operation | None]:
        """The span of one of this store's operations (``name``: the conventions' name)."""
        return operation(
            self.telemetry,
            name,
            {
                names.OPERATION_NAME: name,
                names.METHOD: method,
                names.TIER: self.tier.value,
                names.STORE_ID: self.namespace,
            },
        )

    # ------------------------------------------------------------------ writes

    def add(self, item: ContextItem) -> ContextItem:
        """Store a new item built for this scope; return what the store holds for it.

        That is the item as stored (its id qualified) or, when it was a near-duplicate of an
        item held, that item as the merge left it (:meth:`add_outcomes` says which).
        """
        return self.add_many([item])[0]

    def add_many(self, items: Iterable[ContextItem]) -> list[ContextItem]:
        """Store new items of this scope, all or none, as one journaled write.

        Returns what the store holds for each item, in order: the item as stored, or the held
        item it was merged into (see :meth:`add_outcomes`).
        """
        return [outcome.item for outcome in self.add_outcomes(items)]

    def add_outcomes(self, items: Iterable[ContextItem]) -> list[AddOutcome]:
        """Store new items of this scope, all or none; say of each whether it was a duplicate.

        Each id is written as this scope's (see :meth:`scoped_id`), so an id that some other
        scope holds is no obstacle, and one this scope holds is a
        :class:`~agent_engine.errors.DuplicateItemError` as on any backend. With a
        :attr:`merge` policy, an item that says again what an item of its scope and kind holds
        is merged into that item instead of stored (``docs/dedup.md``): its
        :class:`~agent_engine.tiers.dedup.AddOutcome` names it. New items, merged items and
        the items keyed newcomers supersede are written together, journaled first (``add``,
        ``merge``, ``supersede``).
        """
        with self._operation(names.UPSERT_MEMORY, "add") as span:
            outcomes = self._add_outcomes(items)
            if span is not None:
                _report_added(span, outcomes)
            return outcomes

    def _add_outcomes(self, items: Iterable[ContextItem]) -> list[AddOutcome]:
        batch = item_batch(items)
        self._check_scope(batch)
        if not batch:
            return []
        redacted = [self._as_stored(item) for item in batch]
        batch = [entry.item for entry in redacted]
        self._before_add(batch)
        self._refuse_legacy_duplicates(batch)
        plan = self._plan_merges(batch)
        inserted, displaced = self._take_slots(plan.insert)
        updated = [*plan.held, *displaced]
        with contextlib.ExitStack() as journal:
            kept = {item.id for item in inserted}
            journal.enter_context(
                self._journal_redactions(e for e in redacted if e.item.id in kept)
            )
            if inserted:
                ids = tuple(item.id for item in inserted)
                journal.enter_context(
                    self.audit.journal(AuditAction.ADD, self.tier, self.namespace, ids)
                )
            if plan.merged:
                journal.enter_context(self._journal_merge(plan))
            if displaced:
                journal.enter_context(self._journal_supersession(displaced))
            if updated:
                self._io.write(add=inserted, update=updated)
            else:
                self._io.add_many(inserted)
        self._log.debug(
            "items_added",
            count=len(inserted),
            merged=len(plan.merged),
            superseded=len(displaced),
        )
        self._check_conflicts(inserted)
        self._after_add()
        stored = {item.id: item for item in (*inserted, *plan.held)}
        found = {entry.item.id: dict(entry.found) for entry in redacted if entry.found}
        return [
            attrs.evolve(
                outcome,
                item=stored.get(outcome.item.id, outcome.item),
                redacted=found.get(outcome.given.id, {}),
            )
            for outcome in plan.outcomes
        ]

    def _plan_merges(self, batch: list[ContextItem]) -> MergePlan:
        """What of ``batch`` merges into what this scope holds (nothing, without a policy).

        An id this scope holds, or one given twice, is refused by the write as on any
        backend, journaled (an ``add`` and its ``abort``); a batch holding one is therefore
        written as given, unmerged, so the refusal is the write's.
        """
        unmerged = MergePlan(batch, [], [], [], [AddOutcome(item, item) for item in batch])
        if self.merge is None:
            return unmerged
        plan = plan_merges(self, batch, self.merge, self.clock())
        if not plan.merged:
            return plan
        given = [item.id for item in batch]
        if len(set(given)) < len(given) or self._io.get_many(given):
            return unmerged
        return plan

    def _journal_merge(self, plan: MergePlan) -> AbstractContextManager[AuditEvent]:
        """One ``merge`` event: the items merged into, then the duplicates merged.

        ``detail["merged"]`` pairs each duplicate with what it merged into, and how alike they
        were; ``detail["restored"]`` names the items the merge brought back from the archive.
        """
        targets = dict.fromkeys(entry["into"] for entry in plan.merged)
        ids = (*targets, *(entry["id"] for entry in plan.merged))
        detail = {"merged": plan.merged, "restored": plan.restored}
        return self.audit.journal(AuditAction.MERGE, self.tier, self.namespace, ids, detail)

    def _take_slots(self, batch: list[ContextItem]) -> tuple[list[ContextItem], list[ContextItem]]:
        """Keyed items of ``batch`` take their slots: ``(batch, the items they supersede)``.

        Each new item of a key supersedes the slot's current holder (working or archived)
        and follows on from its version; within one batch, later items of a key supersede
        earlier ones.
        """
        keys = [local_key(item.key, self.id_prefix) for item in batch]
        if not any(keys):
            return batch, []
        batch = [
            item if key == item.key else attrs.evolve(item, key=key)
            for item, key in zip(batch, keys, strict=True)
        ]
        wanted = sorted({key for key in keys if key is not None})
        holders: dict[str, ContextItem] = {}
        for chunk in (wanted[i : i + 500] for i in range(0, len(wanted), 500)):
            for held in self.query({"key": {"$in": chunk}}, limit=None, view=View.CURRENT):
                holders[held.key or ""] = held
        now = self.clock()
        displaced: list[ContextItem] = []
        placed: list[ContextItem] = []
        batch_at: dict[str, int] = {}
        for item in batch:
            key = item.key
            if key is None:
                placed.append(item)
                continue
            taking = item
            if key in batch_at:  # an earlier item of this batch held the slot
                earlier = placed[batch_at[key]]
                placed[batch_at[key]] = superseded(earlier, item.id, now)
                taking = attrs.evolve(item, version=earlier.version + 1)
            elif key in holders:
                held = holders[key]
                displaced.append(superseded(held, item.id, now))
                taking = attrs.evolve(item, version=held.version + 1, valid_from=now)
            batch_at[key] = len(placed)
            placed.append(taking)
        return placed, displaced

    def _journal_supersession(
        self, displaced: list[ContextItem]
    ) -> AbstractContextManager[AuditEvent]:
        """One ``supersede`` event for items a write replaces.

        ``detail["by"]`` lists what replaced each, in the order of the event's ids.
        """
        return self.audit.journal(
            AuditAction.SUPERSEDE,
            self.tier,
            self.namespace,
            tuple(item.id for item in displaced),
            {"by": [item.superseded_by for item in displaced]},
        )

    def _as_stored(self, item: ContextItem) -> Redacted:
        """The item as this store writes it (id qualified, redacted, cost counted); what was found.

        Items built elsewhere arrive without a cost; counting once here keeps the count off
        every later build's hot path, as for items made by ``new_item``. A redacted item is
        counted again, on what is kept. One copy of the item is made for all of it.
        """
        return self._redacted(item, qualified=self.scoped_id(item.id))

    def _redacted(self, item: ContextItem, *, qualified: str | None = None) -> Redacted:
        """``item`` as :attr:`redaction` lets it be stored, its cost counted if it has none.

        ``qualified``: the id it is stored under, when that is not its own.
        """
        redacted = self.redaction.redact(item) if self.redaction is not None else Redacted(item)
        changes: dict[str, Any] = {}
        if qualified is not None and qualified != item.id:
            changes["id"] = qualified
        if redacted.item.token_cost is None:
            changes["token_cost"] = DEFAULT_COUNTER.count(redacted.item.body)
        if not changes:
            return redacted
        return attrs.evolve(redacted, item=attrs.evolve(redacted.item, **changes))

    def _journal_redactions(self, redacted: Iterable[Redacted]) -> AbstractContextManager[Any]:
        """One ``redact`` event naming the items redacted and what of (nothing if none were)."""
        found = [entry for entry in redacted if entry.found]
        if not found:
            return contextlib.nullcontext()
        ids = tuple(entry.item.id for entry in found)
        detail = {"items": [entry.detail() for entry in found]}
        return self.audit.journal(AuditAction.REDACT, self.tier, self.namespace, ids, detail)

    def _refuse_legacy_duplicates(self, batch: list[ContextItem]) -> None:
        """An id this scope holds unqualified (written before ids carried it) is taken too."""
        local = [item.id.removeprefix(self.id_prefix) for item in batch]
        older = [item_id for item_id in local if not item_id.startswith(self.id_prefix)]
        for held in self.backend.get_many(older):
            if self._in_scope(held):
                raise DuplicateItemError(held.id)

    def update(self, item: ContextItem) -> ContextItem:
        """Replace one of this store's items; foreign or unknown ids are not found.

        An item whose body changed but that still carries the stored item's ``token_cost``
        (what ``attrs.evolve(item, text=...)`` gives) has its cost counted again, so the
        assembler never charges new text at an old price.
        """
        self._check_scope([item])
        current = self.require(item.id)
        if current.superseded:
            raise LifecycleStateError(
                f"item {current.id!r} is a superseded version: history is read-only",
                field="valid_to",
                value=current.id,
            )
        item = keep_lifecycle(attrs.evolve(item, id=current.id), current)
        if item.key != current.key:
            item = attrs.evolve(item, key=local_key(item.key, self.id_prefix))
        if item.body != current.body and item.token_cost == current.token_cost:
            item = attrs.evolve(item, token_cost=None)
        redacted = self._redacted(item)
        item = redacted.item
        self._before_update(current, item)
        with self._journal_redactions([redacted]):
            if not content_changed(current, item):
                with self.audit.journal(AuditAction.UPDATE, self.tier, self.namespace, (item.id,)):
                    self._io.update(item)
                return item
            return self._new_version(current, item)

    def _new_version(self, current: ContextItem, item: ContextItem) -> ContextItem:
        """Store ``item`` as the next version of ``current``, keeping ``current`` as history.

        The item keeps its id (what callers hold); the previous version becomes a row of its
        own, superseded by it, written in the same write. A key the new version takes
        supersedes that slot's holder as an add would.
        """
        now = self.clock()
        copy = previous_version(current, self.scoped_id(new_id()), now)
        item = attrs.evolve(item, version=current.version + 1, valid_from=now)
        displaced: list[ContextItem] = []
        if item.key is not None and item.key != current.key:
            holders = self.query({"key": item.key}, limit=None, view=View.CURRENT)
            displaced = [superseded(held, item.id, now) for held in holders if held.id != item.id]
        detail = {"version": item.version, "previous": copy.id}
        with self.audit.journal(
            AuditAction.UPDATE, self.tier, self.namespace, (item.id, copy.id), detail
        ):
            if displaced:
                with self._journal_supersession(displaced):
                    self._io.write(add=[copy], update=[item, *displaced])
            else:
                self._io.write(add=[copy], update=[item])
        self._check_conflicts([item])
        return item

    def delete(self, item_id: str) -> bool:
        """Delete one of this store's items; return whether it existed here."""
        return self.delete_many([item_id]) == 1

    def delete_many(
        self, item_ids: Iterable[str], *, action: AuditAction = AuditAction.DELETE
    ) -> int:
        """Delete several of this store's items in one backend call; return how many were here.

        An item goes with its history (the versions superseded into it): deleting what a
        memory says now deletes what it said before. Foreign and unknown ids are skipped.
        """
        found = self.get_many(item_ids)
        if not found:
            return 0
        mine = self._with_past(found)
        with self.audit.journal(action, self.tier, self.namespace, mine):
            self._io.delete_many(mine)
        return len(found)

    def forget(self, *item_ids: str, erase: bool = True) -> int:
        """Remove this store's items among ``item_ids``; return how many were here.

        The only way anything stored is destroyed (eviction and aging archive). Each item
        goes with its history: the versions its updates kept and the items it superseded.
        With ``erase`` (the default) no trace of them is left: the backend's ``erase`` removes
        their text, vectors and ids from every file it writes before this returns, and the
        journal keeps one ``erase`` event naming each item by a token (a salted digest whose
        salt is discarded), which also replaces the id in the items' earlier events.
        ``erase=False`` is :meth:`delete_many`: cheaper, and it leaves what
        ``docs/backends.md`` lists. Foreign and unknown ids are skipped, never erased.
        """
        if not erase:
            return self.delete_many(item_ids)
        found = self.get_many(item_ids)
        if not found:
            return 0
        past = ancestry(found, self._superseded_by)
        # The duplicates merged into them were never stored, but the journal names them.
        mine = tuple(dict.fromkeys([*past, *merged_ids(past.values())]))
        with self.audit.erasing(self.tier, self.namespace, mine) as tokens:
            self._io.erase(mine, tokens)
        return len(found)

    def _with_past(self, items: list[ContextItem]) -> tuple[str, ...]:
        """The ids of ``items`` and of every version superseded into them."""
        return tuple(ancestry(items, self._superseded_by))

    def _superseded_by(self, item_ids: list[str]) -> list[ContextItem]:
        return self.query({"superseded_by": {"$in": item_ids}}, limit=None, view=View.ALL)

    def clear(self) -> int:
        """Remove every item of this store (and nothing of anyone else's)."""
        with self.audit.journal(AuditAction.CLEAR, self.tier, self.namespace):
            removed = self._io.clear(self.scope)
        self._log.info("store_cleared", removed=removed)
        return removed

    def clear_except(self, item_ids: Iterable[str]) -> int:
        """Remove every item but those of ``item_ids`` (and their history); return how many.

        One journaled ``clear``, whose ``detail["held"]`` names the items kept. Without any
        item to keep this is :meth:`clear`. Foreign and unknown ids keep nothing.
        """
        kept = self.get_many(item_ids)
        if not kept:
            return self.clear()
        spared = set(self._with_past(kept))
        doomed = [item.id for item in self.list_all(view=View.ALL) if item.id not in spared]
        if not doomed:
            return 0
        held = {"held": [item.id for item in kept]}
        with self.audit.journal(AuditAction.CLEAR, self.tier, self.namespace, (), held):
            self._io.delete_all_but(sorted(spared), doomed)
        self._log.info("store_cleared", removed=len(doomed), held=len(kept))
        return len(doomed)

    # ------------------------------------------------------------------ lifecycle

    def archive(
        self, *item_ids: str, reason: ArchiveReason | str = ArchiveReason.MANUAL
    ) -> list[ContextItem]:
        """Move items of the working set to the archive; return those moved.

        Archived items leave every default read and the working-set count but stay searchable
        (``view="archived"``/``"current"``), are paged back in by builds that match them, and
        come back with :meth:`restore`. Items already archived are left as they are. An
        unknown or foreign id raises :class:`~agent_engine.errors.ItemNotFoundError`; a pinned
        item or a superseded version, :class:`~agent_engine.errors.LifecycleStateError`.
        Either way nothing moves.
        """
        why = _validate.member("reason", ArchiveReason, reason)
        items = self._require_all(item_ids)
        for item in items:
            if item.pinned:
                raise LifecycleStateError(
                    f"item {item.id!r} is pinned: unpin it before archiving it",
                    field="status",
                    value=item.id,
                )
            self._refuse_history(item, "archived")
        return self.archive_items([item for item in items if not item.archived], why)

    def archive_items(
        self,
        items: Sequence[ContextItem],
        reason: ArchiveReason,
        detail: Mapping[str, Any] | None = None,
    ) -> list[ContextItem]:
        """Archive ``items`` as just read from this store, in one journaled write.

        The transition eviction and aging use (they chose the items already);
        ``detail`` joins the ``archive`` event's (why each moved, say).
        """
        if not items:
            return []
        self._check_scope(items)
        at = self.clock()
        moved = with_archive_mark(items, at, reason)
        ids = tuple(item.id for item in moved)
        event = {"reason": reason.value, **(detail or {})}
        with self.audit.journal(AuditAction.ARCHIVE, self.tier, self.namespace, ids, event):
            # Only the mark changes: one statement, not a rewrite of every row.
            self._io.set_archived(ids, at, reason)
        self._log.info("archived", count=len(moved), reason=reason.value)
        return moved

    def compact(
        self, *, dry_run: bool = False, policy: AgingPolicy | None = None
    ) -> CompactionReport:
        """Move what has aged out of the working set to the archive; report what and why.

        ``policy`` (this store's :attr:`aging` unless given) says what has aged out: expired
        (its kind's time to live, or its own ``expires_at``), decayed below the floor, stale,
        and, while the working set is over the soft limit, the lowest decayed importance down
        to the low mark (``docs/aging.md``). Pinned items never move. The report names every
        item with its reason and numbers.

        With ``dry_run`` nothing changes and nothing is journaled: the report is the plan.
        Otherwise a ``compact`` event with the plan's summary is journaled first, then the
        items move through :meth:`archive_items` a batch at a time, each batch an ``archive``
        event with its reason and numbers; an item read, pinned or moved by someone else
        since it was planned stays (``skipped``). Compaction runs when called (by a
        scheduler, or ``agent-engine memory compact``), never on its own.
        """
        if not isinstance(dry_run, bool):
            raise ValidationError(
                f"dry_run must be True or False, got {dry_run!r}", field="dry_run", value=dry_run
            )
        chosen = _validate.optional("policy", AgingPolicy, policy) or self.aging
        with self._operation(names.UPDATE_MEMORY, "compact") as span:
            report = self._compact(chosen, dry_run=dry_run)
            if span is not None:
                _report_compaction(span, report, dry_run=dry_run)
            return report

    def _compact(self, policy: AgingPolicy, *, dry_run: bool) -> CompactionReport:
        plan = plan_compaction(self, policy, self.clock())
        if dry_run or not plan.moves:
            return plan
        summary = plan.summary()
        with self.audit.journal(AuditAction.COMPACT, self.tier, self.namespace, (), summary):
            done = apply_plan(self, plan)
        self._log.info("compacted", moved=done.moved, skipped=len(done.skipped), **done.counts())
        return done

    def restore(self, *item_ids: str) -> list[ContextItem]:
        """Bring archived items back to the working set; return those restored.

        Items that are not archived are left as they are. An unknown or foreign id raises
        :class:`~agent_engine.errors.ItemNotFoundError`, a superseded version
        :class:`~agent_engine.errors.LifecycleStateError`; nothing moves.
        """
        items = self._require_all(item_ids)
        for item in items:
            self._refuse_history(item, "restored")
        back = [
            attrs.evolve(item, archived_at=None, archived_reason=None)
            for item in items
            if item.archived
        ]
        if not back:
            return []
        ids = tuple(item.id for item in back)
        with self.audit.journal(AuditAction.RESTORE, self.tier, self.namespace, ids):
            self._io.update_many(back)
        return back

    def supersede(self, old_id: str, new: ContextItem | str) -> ContextItem:
        """Mark ``old_id`` as replaced by ``new``; return ``new`` as stored.

        ``new`` is an item of this store (its id) or a new item built for it (stored here, in
        the same write). The old item becomes history: out of every view but ``all``, never
        selected by a build, listed by :meth:`history`. Superseding an item by itself, a
        superseded version, or by a superseded version raises
        :class:`~agent_engine.errors.LifecycleStateError`; nothing changes.
        """
        old = self.require(old_id)
        self._refuse_history(old, "superseded again")
        adding = isinstance(new, ContextItem)
        if isinstance(new, ContextItem):
            self._check_scope([new])
            redacted = [self._as_stored(new)]
            replacement = redacted[0].item
            self._refuse_legacy_duplicates([replacement])
        else:
            replacement = self.require(new)
            redacted = []
            self._refuse_history(replacement, "a replacement")
        if replacement.id == old.id:
            raise LifecycleStateError(
                f"item {old.id!r} cannot supersede itself", field="superseded_by", value=old.id
            )
        now = self.clock()
        if adding and replacement.version <= old.version:
            replacement = attrs.evolve(replacement, version=old.version + 1, valid_from=now)
        displaced = [superseded(old, replacement.id, now)]
        with self._journal_redactions(redacted), self._journal_supersession(displaced):
            if adding:
                with self.audit.journal(
                    AuditAction.ADD, self.tier, self.namespace, (replacement.id,)
                ):
                    self._io.write(add=[replacement], update=displaced)
            else:
                self._io.update_many(displaced)
        if adding:
            self._check_conflicts([replacement])
            self._after_add()
        return replacement

    def history(self, item_id: str) -> list[ContextItem]:
        """Every version of the item, oldest first: what it replaced, it, and what replaced it.

        Versions its updates kept and items it superseded (explicitly or by key) come before
        it; what superseded it comes after. An unknown or foreign id raises
        :class:`~agent_engine.errors.ItemNotFoundError`.
        """
        return history(self.require(item_id), self.get, self._superseded_by)

    def _require_all(self, item_ids: Iterable[str]) -> list[ContextItem]:
        """This store's items of ``item_ids``, or :class:`ItemNotFoundError` for the first not."""
        asked = [_validate.text("id", i) for i in _validate.sequence("item_ids", item_ids)]
        found = self._resolve(asked)
        for item_id in asked:
            if item_id not in found:
                raise ItemNotFoundError(item_id, namespace=self.namespace)
        return list({found[i].id: found[i] for i in asked}.values())

    @staticmethod
    def _refuse_history(item: ContextItem, what: str) -> None:
        if item.superseded:
            raise LifecycleStateError(
                f"item {item.id!r} is a superseded version (history) and cannot be {what}",
                field="valid_to",
                value=item.id,
            )

    def pin(self, item_id: str) -> ContextItem:
        """Pin an item: always offered to the prompt first and never evicted."""
        return self._set_status(item_id, Status.PINNED, AuditAction.PIN)

    def unpin(self, item_id: str) -> ContextItem:
        """Return a pinned item to confirmed status."""
        return self._set_status(item_id, Status.CONFIRMED, AuditAction.UNPIN)

    def _set_status(self, item_id: str, status: Status, action: AuditAction) -> ContextItem:
        current = self.require(item_id)
        self._refuse_history(current, f"given status {status.value}")
        item = attrs.evolve(current, status=status)
        if status is Status.PINNED and item.archived:
            # Pinned means "in whenever it fits": it cannot stay paged out.
            item = attrs.evolve(item, archived_at=None, archived_reason=None)
        with self.audit.journal(action, self.tier, self.namespace, (item.id,)):
            self._io.update(item)
        return item

    # ------------------------------------------------------------------ conflicts

    def checkpoint(self, label: str = "") -> Checkpoint:
        """Save this scope as it is now (every item in every state, conflicts, aliases).

        Roll back to it with :meth:`rollback`; see :mod:`agent_engine.tiers.checkpoints`.
        """
        return _checkpoints.take_checkpoint(self, label)

    def checkpoints(self) -> list[Checkpoint]:
        """This scope's checkpoints, newest first."""
        return _checkpoints.checkpoints_of(self)

    def rollback(self, checkpoint_id: str) -> RestorePlan:
        """Make this scope what the checkpoint saved; return what was added, replaced, forgotten.

        Another scope's checkpoint, or an unknown id, raises
        :class:`~agent_engine.errors.CheckpointNotFoundError` and changes nothing.
        """
        return _checkpoints.rollback(self, checkpoint_id)

    def lineage(self) -> list[Fork]:
        """This scope's fork record and its ancestors' (empty: it is no fork).

        See :mod:`agent_engine.tiers.forks`; a fork is made by the task or session store's
        ``fork``.
        """
        return _forks.lineage_of(self)

    def _settings(self) -> dict[str, Any]:
        """This store's settings, as keywords: what a fork of it is opened with."""
        return {
            "audit": self.audit,
            "clock": self.clock,
            "aging": self.aging,
            "conflict_detection": self.conflict_detection,
            "merge": self.merge,
            "redaction": self.redaction,
            "telemetry": self.telemetry,
        }

    def reading(self) -> AbstractContextManager[None]:
        """Look this scope's lineage up once for the reads inside: one unit of work.

        Every read of a task or session store looks up whether its scope is a fork, and what
        it must not see, since a fork can be made in any process at any time; a build reads
        its stores a dozen times, so it reads them inside this (the assembler does). Writes
        always look it up afresh. See :mod:`agent_engine.tiers.forks`.
        """
        return self._io.pinned()

    def detach(self) -> None:
        """Make this fork hold a copy of all it reads through its parent, and stop reading through.

        What a rollback does first; it changes nothing this scope reads. The forks of this
        scope are detached first. A scope that is no fork has nothing to detach from.
        """
        self._io.detach()

    def inherited_view(self) -> list[ContextItem] | None:
        """Every item of this fork in every state, as it reads them (``None``: it is no fork).

        What a checkpoint of a fork saves, since the backend holds only what it changed.
        """
        levels = self._io.levels()
        if not levels.forked:
            return None
        return self._io.query(self._views[View.ALL], None, "+id", levels)

    def conflicts(
        self, include_resolved: bool = False, *, limit: int | None = None
    ) -> list[Conflict]:
        """This scope's open conflicts, newest first (never another scope's).

        Open: unresolved, and both items still stored, not superseded and at the versions the
        conflict was found between; one whose item was deleted, superseded or changed by
        other means is not listed. ``include_resolved`` adds the resolved ones. ``limit``:
        at most this many (``None``: all).
        """
        return _conflicts.listed(self, include_resolved=include_resolved, limit=limit)

    def resolve(self, conflict_id: str, *, keep: str) -> Conflict:
        """Resolve an open conflict by keeping ``keep``: the other item is superseded by it.

        Returns the conflict as resolved. Journaled as ``resolve`` (the ``supersede`` inside
        it). Raises, changing nothing: :class:`~agent_engine.errors.ConflictNotFoundError`
        (unknown id, or another scope's), :class:`~agent_engine.errors.LifecycleStateError`
        (resolved already, or no longer open), :class:`~agent_engine.errors.ValidationError`
        (``keep`` names neither item).
        """
        return _conflicts.resolve(self, conflict_id, keep)

    def _check_conflicts(self, written: Sequence[ContextItem]) -> None:
        """Look for contradictions between what was just written and the scope; record them.

        Runs after the write committed and never fails it: an error is logged and dropped.
        """
        settings = self.conflict_detection
        if settings is None or not written:
            return
        try:
            found = _conflicts.detect(self, written, settings)
            _conflicts.record(self, found)
        except Exception as exc:  # noqa: BLE001 - the write stands whatever detection does
            self._log.warning("conflict_detection_failed", error=str(exc), exc_info=True)
            return
        if len(written) > settings.max_items:
            self._log.info(
                "conflict_detection_truncated",
                checked=settings.max_items,
                skipped=len(written) - settings.max_items,
            )
        if found:
            self._log.info("conflicts_found", count=len(found), ids=[c.id for c in found])

    # ------------------------------------------------------------------ receiving promotions

    def confirm_promotion(self, item: ContextItem, source_namespace: str, *, boost: bool) -> None:
        """Approve promoting ``item`` into this store (or boosting its copy here).

        Task and project memory take promotions as they come; global memory asks first.
        """

    def receive(self, item: ContextItem, detail: Mapping[str, Any]) -> ContextItem:
        """Store a copy promoted into this scope, journaled as one ``promote`` event."""
        self._check_scope([item])
        redacted = self._as_stored(item)
        stored = redacted.item
        with (
            self._journal_redactions([redacted]),
            self._journal_promotion(stored.id, detail, duplicate=False),
        ):
            self._io.add_many([stored])
        self._check_conflicts([stored])
        self._after_add()
        return stored

    def reinforce(
        self, current: ContextItem, duplicate: ContextItem, detail: Mapping[str, Any]
    ) -> ContextItem:
        """Merge a promoted ``duplicate`` into ``current``, one of this store's items.

        What a promotion does when this store already holds its content (seed 001 section
        12, as an add's merge does: :func:`~agent_engine.tiers.dedup.boosted`), journaled as a
        ``promote`` event marked as a duplicate. ``current`` is the item as the caller just
        read it from this store; promoted again, it is in use again, so an archived copy
        comes back to the working set.
        """
        self._check_scope([current])
        merged = boosted(current, [duplicate], self.clock())
        with self._journal_promotion(current.id, detail, duplicate=True):
            self._io.update(merged)
        return merged

    def _journal_promotion(
        self, item_id: str, detail: Mapping[str, Any], *, duplicate: bool
    ) -> AbstractContextManager[AuditEvent]:
        """The ``promote`` event of a copy stored here, or of this store's copy reinforced."""
        return self.audit.journal(
            AuditAction.PROMOTE,
            self.tier,
            self.namespace,
            (item_id,),
            {**detail, "duplicate": duplicate},
        )

    def settle_candidates(
        self,
        confirmed: Sequence[ContextItem],
        penalised: Sequence[ContextItem],
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the outcome of a confirmation step in one journaled ``confirm`` write.

        ``confirmed`` and ``penalised`` are this store's candidates as the step changed them
        (:mod:`agent_engine.tiers.quarantine` decides); the event names them all, and its
        ``detail`` says which were confirmed and which penalised. Nothing to settle, nothing
        written.
        """
        items = [*confirmed, *penalised]
        if not items:
            return
        self._check_scope(items)
        event = {
            "confirmed": [item.id for item in confirmed],
            "penalised": [item.id for item in penalised],
            **(detail or {}),
        }
        ids = tuple(item.id for item in items)
        with self.audit.journal(AuditAction.CONFIRM, self.tier, self.namespace, ids, event):
            self._io.update_many(items)
        self._log.info("candidates_settled", confirmed=len(confirmed), penalised=len(penalised))

    def record_access(self, item_ids: Iterable[str], at: datetime) -> int:
        """Count one access at ``at`` of each of ``item_ids`` in one write; return how many exist.

        The ids are those this store's reads returned (a build's chosen items); stores that
        share a backend record theirs together with :func:`record_access`. An id of another
        scope is not counted, exactly like a missing one.
        """
        return record_access({self: list(item_ids)}, at)

    def owned(self, item_ids: Collection[str]) -> list[str]:
        """The stored ids of ``item_ids`` that are this store's.

        Ids this store handed out carry its prefix and are taken as they are (no read); any
        other id is looked up in this scope, so an item stored before ids were qualified is
        still counted and another scope's item never is.
        """
        prefix = self.id_prefix
        mine = [i for i in item_ids if i.startswith(prefix)]
        others = [i for i in item_ids if not i.startswith(prefix)]
        if others:
            mine += [item.id for item in self._resolve(others).values()]
        return mine

    def _before_add(self, batch: list[ContextItem]) -> None:
        """Hook run on an add's items as they will be stored (redacted), before any write.

        Global memory asks for confirmation here; raising stops the add.
        """

    def _before_update(self, current: ContextItem, item: ContextItem) -> None:
        """Hook run on an update's item as it will be stored, before anything is written."""

    def _after_add(self) -> None:
        """Hook run after every successful add (project memory evicts here)."""


def _report_hits(span: Operation, query: object, hits: Sequence[SearchHit]) -> None:
    """A search's span: how many hits; the query and the hits' text when text may be recorded."""
    if not span.recording:
        return
    span.set({names.RECORD_COUNT: len(hits)})
    span.set_query(query)
    if span.captures_text:
        span.set_records(
            {"id": hit.item.id, "content": hit.item.text, "score": hit.score} for hit in hits
        )


def _report_added(span: Operation, outcomes: Sequence[AddOutcome]) -> None:
    """An add's span: how many items, how many merged, the id of a single one; text if allowed.

    The text recorded is each item as the store holds it: after redaction.
    """
    if not span.recording:
        return
    merged = sum(1 for outcome in outcomes if outcome.merged)
    span.set({names.RECORD_COUNT: len(outcomes), "agent_engine.memory.merged": merged})
    if len(outcomes) == 1:
        span.set({names.RECORD_ID: outcomes[0].item.id})
    if span.captures_text:
        span.set_records({"id": o.item.id, "content": o.given.text} for o in outcomes)


def _report_compaction(span: Operation, report: CompactionReport, *, dry_run: bool) -> None:
    """A compaction's span: the records it moved (none on a dry run) and its plan's numbers."""
    if not span.recording:
        return
    span.set(
        {
            names.RECORD_COUNT: report.moved,
            "agent_engine.compaction.dry_run": dry_run,
            "agent_engine.compaction.working": report.working,
            "agent_engine.compaction.planned": len(report.moves),
            "agent_engine.compaction.skipped": len(report.skipped),
            **{f"agent_engine.compaction.{reason}": n for reason, n in report.counts().items()},
        }
    )


def by_backend(stores: Iterable[TierStore]) -> list[list[TierStore]]:
    """``stores`` grouped by the backend object they use, in the order first met.

    One group is one connection (one SQLite file, one PostgreSQL pool): what it is asked
    together it can do in one write.
    """
    groups: list[list[TierStore]] = []
    for store in stores:
        group = next((g for g in groups if g[0].backend is store.backend), None)
        if group is None:
            groups.append([store])
        else:
            group.append(store)
    return groups


def record_access(accesses: Mapping[TierStore, Collection[str]], at: datetime) -> int:
    """Count one access at ``at`` of each store's ids, in one write; return how many exist.

    Every store must use the same backend (group them with :func:`by_backend`): this is the
    assembler's access tracking, one write per backend per build, never one per item or tier.
    """
    stores = list(accesses)
    if not stores:
        return 0
    backend = stores[0].backend
    if any(store.backend is not backend for store in stores):
        raise ValidationError(
            "record_access() takes stores that share one backend; group them with by_backend()",
            field="accesses",
            value=stores,
        )
    return backend.touch([i for store, ids in accesses.items() for i in store.owned(ids)], at)
