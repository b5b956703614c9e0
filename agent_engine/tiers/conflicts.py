"""Contradicting memories: found when items are written, listed, and resolved by a choice.

Seed 001 section 11. When a tier store writes items (an add, a promoted copy, a replacement,
a new version), each is set against a few items of the *same scope* that still hold (the
working set and the archive, never superseded versions) and that could be about the same
thing: the newest ones sharing its kind, the newest sharing one of its tags, and its nearest
neighbours by meaning (the store's own vector search, cut at a cosine similarity). The pair
classifier is :func:`~agent_engine.retrieval.contradiction.contradicts`; a pair it flags is
recorded as a ``contradictory`` :class:`~agent_engine.memory.conflicts.Conflict`, journaled
first (``conflict``), in the backend's conflict store.

Detection is bounded (:class:`ConflictDetection`: a handful of reads per written item, at most
``max_items`` items per write) and never costs the write: it runs after the write committed,
and a failure is logged and dropped.

A conflict is *open* while it is unresolved and both items are still what they were when it
was found: stored, not superseded, at the versions it names. An item deleted, superseded or
changed by other means closes it without anyone resolving it (a changed item is checked again
as the new version it is). Resolving keeps one item and supersedes the other by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from agent_engine import _validate
from agent_engine.errors import ConflictNotFoundError, LifecycleStateError, ValidationError
from agent_engine.memory.conflicts import Conflict, ConflictType
from agent_engine.models import AuditAction, ContextItem
from agent_engine.retrieval.contradiction import contradicts
from agent_engine.tiers.views import View

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = [
    "DEFAULT_DETECTION",
    "RECORD_KINDS",
    "ConflictDetection",
    "contested",
    "detect",
    "is_open",
    "kind_set",
    "listed",
    "record",
    "resolve",
]

RECORD_KINDS: Final = frozenset({"turn", "message", "tool_output"})
"""Kinds that record what happened (said, returned) rather than state what memory holds.

Neither compared for contradictions nor merged as duplicates: a thing said twice was said
twice.
"""
_WINDOW: Final = 64
"""Records read per step when listing a scope's conflicts with a limit."""


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _validate.integer(attribute.name, value)


def _similarity(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    number = _validate.real(attribute.name, value)
    if not -1.0 <= number <= 1.0:
        raise ValidationError(
            f"{attribute.name} must be a cosine similarity in [-1, 1], got {value!r}",
            field=attribute.name,
            value=value,
        )


def kind_set(value: object) -> frozenset[str]:
    """``value`` (kinds a setting leaves out) as a set of valid kind identifiers."""
    return frozenset(
        _validate.identifier("ignore_kinds", kind)
        for kind in _validate.sequence("ignore_kinds", value)
    )


@attrs.frozen
class ConflictDetection:
    """How many items a written item is set against, and what counts as a conflict.

    Per written item: the ``related`` newest items of the scope sharing its kind, the
    ``related`` newest sharing one of its tags, and its ``neighbours`` nearest items by
    meaning whose cosine similarity is at least ``min_similarity``: at most three reads,
    whatever the scope's size. A write of more than ``max_items`` items checks its first
    ``max_items`` (a bulk import is not a conversation; the skipped count is logged).
    ``neighbours=0`` turns the search by meaning off, ``related=0`` the other two reads.

    A pair the classifier flags is recorded when the two share at least ``min_shared``
    content terms: one shared word ("Gina: ;)" against any negated line naming Gina) is too
    thin a subject. Items of ``ignore_kinds`` (conversation turns, tool outputs: records of
    what was said or returned, not statements memory holds) are neither checked nor compared.
    """

    neighbours: int = attrs.field(default=5, validator=_non_negative)
    min_similarity: float = attrs.field(default=0.25, validator=_similarity)
    related: int = attrs.field(default=20, validator=_non_negative)
    max_items: int = attrs.field(default=32, validator=_non_negative)
    min_shared: int = attrs.field(default=2, validator=_non_negative)
    ignore_kinds: frozenset[str] = attrs.field(default=RECORD_KINDS, converter=kind_set)


DEFAULT_DETECTION: Final = ConflictDetection()
"""The settings of every tier store given none (``docs/conflicts.md`` says how they were chosen)."""


def detect(
    store: TierStore, written: Sequence[ContextItem], settings: ConflictDetection
) -> list[Conflict]:
    """The likely contradictions between ``written`` (just stored) and the rest of the scope.

    Reads only: the items as stored (for their vectors), then for each of the first
    ``settings.max_items`` its candidates (see :class:`ConflictDetection`), all through
    ``store``'s scoped reads. Each pair is reported once, the item stored first as ``item_a``
    (within one write, the earlier item of the batch).
    """
    ignored = settings.ignore_kinds
    checked = [
        item
        for item in written[: settings.max_items]
        if item.text.strip() and item.kind not in ignored
    ]
    if not checked:
        return []
    stored = {item.id: item for item in store.get_many([item.id for item in checked])}
    order = {item.id: at for at, item in enumerate(written)}
    now = store.clock()
    by_kind: dict[str, list[ContextItem]] = {}
    by_tags: dict[tuple[str, ...], list[ContextItem]] = {}
    seen: set[frozenset[str]] = set()
    found: list[Conflict] = []
    for item in checked:
        current = stored.get(item.id)
        if current is None or current.superseded:
            continue  # replaced within the same write (a later item took its slot)
        for other in _candidates(store, current, settings, by_kind, by_tags):
            pair = frozenset((current.id, other.id))
            if other.id == current.id or pair in seen or not other.text.strip():
                continue
            seen.add(pair)
            if other.kind in ignored:
                continue
            why = contradicts(other.text, current.text)
            if why is None or len(why.shared) < settings.min_shared:
                continue
            first, second = (
                (current, other)
                if order.get(other.id, -1) > order.get(current.id, -1)
                else (other, current)
            )
            found.append(
                Conflict(
                    item_a=first.id,
                    item_b=second.id,
                    tier=store.tier,
                    namespace=store.namespace,
                    version_a=first.version,
                    version_b=second.version,
                    type=ConflictType.CONTRADICTORY,
                    reason=why.cue,
                    detected_at=now,
                )
            )
    return found


def _candidates(
    store: TierStore,
    item: ContextItem,
    settings: ConflictDetection,
    by_kind: dict[str, list[ContextItem]],
    by_tags: dict[tuple[str, ...], list[ContextItem]],
) -> Iterable[ContextItem]:
    """What ``item`` is set against: related by kind, by tag, then by meaning (may repeat)."""
    if settings.related:
        if item.kind not in by_kind:
            by_kind[item.kind] = store.query(
                {"kind": item.kind}, limit=settings.related, view=View.CURRENT
            )
        yield from by_kind[item.kind]
        if item.tags:
            if item.tags not in by_tags:
                by_tags[item.tags] = store.query(
                    {"tags": list(item.tags)}, limit=settings.related, view=View.CURRENT
                )
            yield from by_tags[item.tags]
    if settings.neighbours and item.embedding is not None:
        hits = store.search(item.embedding, k=settings.neighbours + 1, view=View.CURRENT)
        yield from (hit.item for hit in hits if hit.score >= settings.min_similarity)


def record(store: TierStore, conflicts: Sequence[Conflict]) -> None:
    """Store ``conflicts`` in the backend's conflict store, each journaled first."""
    for conflict in conflicts:
        detail = {
            "conflict": conflict.id,
            "type": conflict.type.value,
            "reason": conflict.reason,
        }
        with store.audit.journal(
            AuditAction.CONFLICT, store.tier, store.namespace, conflict.item_ids, detail
        ):
            store.backend.conflicts.record([conflict])


def is_open(conflict: Conflict, items: Mapping[str, ContextItem]) -> bool:
    """Whether ``conflict`` is open, given its items as stored (by id; missing: deleted).

    Unresolved, and both items stored, not superseded, at the versions it was found at.
    """
    if conflict.resolved:
        return False
    for item_id, version in (
        (conflict.item_a, conflict.version_a),
        (conflict.item_b, conflict.version_b),
    ):
        item = items.get(item_id)
        if item is None or item.superseded or item.version != version:
            return False
    return True


def contested(store: TierStore, items: Sequence[ContextItem]) -> set[str]:
    """The ids of ``items`` (this store's, as just read) that an open conflict names."""
    if not items:
        return set()
    records = store.backend.conflicts.of_items([item.id for item in items])
    if not records:
        return set()
    named = {i for c in records for i in c.item_ids}
    known = {item.id: item for item in items}
    others = [i for i in named if i not in known]
    known.update((item.id, item) for item in store.get_many(others))
    mine = {item.id for item in items}
    return {i for c in records if is_open(c, known) for i in c.item_ids if i in mine}


def listed(
    store: TierStore, *, include_resolved: bool = False, limit: int | None = None
) -> list[Conflict]:
    """``store``'s open conflicts (and resolved ones with ``include_resolved``), newest first.

    The scope's records are read newest first in windows, widened until ``limit`` are kept
    or the records run out; unresolved ones are kept only while open (:func:`is_open`).
    """
    if limit is not None:
        _validate.integer("limit", limit)
        if limit == 0:
            return []
    window = None if limit is None else max(limit, _WINDOW)
    while True:
        records = store.backend.conflicts.of_scope(
            store.namespace, store.tier, include_resolved=include_resolved, limit=window
        )
        pending = {i for c in records if not c.resolved for i in c.item_ids}
        items = {item.id: item for item in store.get_many(pending)}
        kept = [c for c in records if c.resolved or is_open(c, items)]
        if window is None or len(records) < window or len(kept) >= (limit or 0):
            return kept[:limit]
        window *= 4


def resolve(store: TierStore, conflict_id: str, keep: str) -> Conflict:
    """Keep ``keep``, supersede the conflict's other item by it, and mark the conflict resolved.

    Journaled first as one ``resolve`` event (the ``supersede`` it causes inside it). Raises,
    changing nothing: :class:`~agent_engine.errors.ConflictNotFoundError` for an unknown id or
    another scope's conflict, :class:`~agent_engine.errors.LifecycleStateError` for one
    resolved already or no longer open (an item deleted, superseded or changed since),
    :class:`~agent_engine.errors.ValidationError` when ``keep`` names neither of its items.
    """
    _validate.text("conflict_id", conflict_id)
    _validate.text("keep", keep)
    conflict = store.backend.conflicts.get(conflict_id)
    if conflict is None or conflict.namespace != store.namespace or conflict.tier is not store.tier:
        raise ConflictNotFoundError(conflict_id, namespace=store.namespace)
    if conflict.resolved:
        raise LifecycleStateError(
            f"conflict {conflict_id!r} was resolved already, keeping {conflict.kept!r}",
            field="resolved_at",
            value=conflict_id,
        )
    kept = keep if keep in conflict.item_ids else store.scoped_id(keep)
    if kept not in conflict.item_ids:
        raise ValidationError(
            f"keep must name one of conflict {conflict_id!r}'s items "
            f"({conflict.item_a!r} or {conflict.item_b!r}), got {keep!r}",
            field="keep",
            value=keep,
        )
    items = {item.id: item for item in store.get_many(conflict.item_ids)}
    if not is_open(conflict, items):
        raise LifecycleStateError(
            f"conflict {conflict_id!r} is no longer open: {_why_closed(conflict, items)}",
            field="valid_to",
            value=conflict_id,
        )
    other = conflict.other(kept)
    detail = {"conflict": conflict.id, "keep": kept}
    with store.audit.journal(
        AuditAction.RESOLVE, store.tier, store.namespace, (kept, other), detail
    ):
        store.supersede(other, kept)
        resolved = store.backend.conflicts.resolve(conflict.id, kept=kept, at=store.clock())
        if resolved is None:
            raise LifecycleStateError(
                f"conflict {conflict_id!r} was resolved by another writer meanwhile",
                field="resolved_at",
                value=conflict_id,
            )
    return resolved


def _why_closed(conflict: Conflict, items: Mapping[str, ContextItem]) -> str:
    for item_id in conflict.item_ids:
        item = items.get(item_id)
        if item is None:
            return f"item {item_id!r} is gone"
        if item.superseded:
            return f"item {item_id!r} was superseded by {item.superseded_by!r}"
        if item.version != conflict.version_of(item_id):
            return f"item {item_id!r} changed since (now version {item.version})"
    return "it is resolved"  # pragma: no cover - is_open said it is not open
