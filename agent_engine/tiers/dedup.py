"""Near-duplicate merge: a memory said again strengthens the one held instead of repeating it.

Seed 001 section 12. When a tier store adds items, each is matched against the items of its
own scope and kind that still hold (the working set and the archive; never superseded
versions, never another scope's): first by fingerprint (the same normalized text), then by
meaning, through the store's own vector search (one search per item for its few nearest of
that kind). A newcomer at least :attr:`MergePolicy.threshold` alike (cosine similarity) to a
held item is not stored again: it is *merged into* that item, which gains
:data:`MERGE_BOOST` importance (capped at 1), counts one access now, keeps the newcomer's
provenance in ``merged_from`` (its id, source, session and time) and, if it was archived,
is back in the working set: said again, so in use again. Duplicates within one write merge
into the first of them. The caller is told (:class:`AddOutcome`). Adding again an item
whose id a held item already lists in ``merged_from`` (a retried add, an ingestion queue's
replay after a crash) reports that merge again and changes nothing: no second boost.

Some pairs look alike to an embedding and must not merge:

* keyed items, on either side: a slot's versions are supersession's business;
* a pinned newcomer: pinning says "keep this, as it is";
* a pair the contradiction classifier flags: "use tabs" and "don't use tabs" are close in
  meaning and opposite in what they say (a conflict, :mod:`agent_engine.tiers.conflicts`);
* a pair that names different values (numbers, names, days, places: capitalized words
  inside a sentence): "Python 3.11" and "Python 3.12" embed at 0.94, "deployed on Wednesday
  mornings" and "deployed on Thursday mornings" at 0.97, and each says something else;
* a newcomer that announces a change the held item does not ("is *now* deployed on ...",
  "no longer", "instead"): an update is not a repeat;
* a held item an open conflict names: it was contradicted since, and saying it again makes
  it the newer side (a new item, in a conflict of its own), not a repeat of the old one;
* items of record kinds (turns, messages, tool outputs): what was said or returned twice
  happened twice, and a timeline needs both.

This module decides; :class:`~agent_engine.tiers.base.TierStore` writes the outcome, the
merged items and the new ones in one write.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import attrs
import numpy as np

from agent_engine import _validate
from agent_engine.embeddings import normalize_rows
from agent_engine.errors import ValidationError
from agent_engine.memory.backend import embedding_text
from agent_engine.models import ContextItem, Origin, bump_count
from agent_engine.retrieval.contradiction import contradicts
from agent_engine.tiers.conflicts import RECORD_KINDS, contested, kind_set
from agent_engine.tiers.views import View

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = [
    "DEFAULT_MERGE",
    "MERGE_BOOST",
    "AddOutcome",
    "MergePlan",
    "MergePolicy",
    "boosted",
    "find_duplicate",
    "merged_ids",
    "plan_merges",
]

MERGE_BOOST: Final = 0.1
"""What a duplicate adds to the importance of the item it merges into (seed 001 section 12)."""
_CHUNK: Final = 500
"""Fingerprints looked up per query."""
_BLOCK: Final = 1024
"""Rows of a batch compared with the rest of it at a time (bounds the similarity matrix)."""
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_SENTENCE_END = re.compile(r"[.!?:;]")
_CHANGE = re.compile(
    r"\b(?:now|no longer|any ?more|instead|switched|changed|from now on|these days|nowadays)\b",
    re.IGNORECASE,
)
"""Words that announce a change: "is now deployed on Thursdays" updates, it does not repeat."""


def _threshold(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    number = _validate.real(attribute.name, value)
    if not 0.0 < number <= 1.0:
        raise ValidationError(
            f"{attribute.name} must be a cosine similarity in (0, 1], got {value!r}",
            field=attribute.name,
            value=value,
        )


def _positive(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if _validate.integer(attribute.name, value) < 1:
        raise ValidationError(
            f"{attribute.name} must be at least 1, got {value!r}",
            field=attribute.name,
            value=value,
        )


@attrs.frozen
class MergePolicy:
    """When an added item merges into one its scope holds.

    ``threshold``: the cosine similarity from which two items of one kind are taken to say the
    same thing (0.92 by default: ``docs/dedup.md`` shows what lies either side of it).
    ``neighbours``: held items of the kind read per added item, nearest first; the nearest may
    be one that must not merge (keyed, contradicting), so a few are read. Items of
    ``ignore_kinds`` are records of what happened and never merge.
    """

    threshold: float = attrs.field(default=0.92, validator=_threshold)
    neighbours: int = attrs.field(default=4, validator=_positive)
    ignore_kinds: frozenset[str] = attrs.field(default=RECORD_KINDS, converter=kind_set)


DEFAULT_MERGE: Final = MergePolicy()
"""The policy of project and global stores given none (task stores merge nothing by default)."""


@attrs.frozen
class AddOutcome:
    """What became of one item given to an add.

    ``item`` is what the store holds for it: the item itself as stored, or the held item it
    was merged into, as the merge left it. ``given`` is the item as given (its id as the store
    writes it, redacted). ``similarity``: the cosine similarity to what it merged into (1.0
    for the same text), ``None`` when it was stored. ``redacted``: what the store's redaction
    policy found in it, by kind (``docs/ingestion.md``), empty when nothing was.
    """

    item: ContextItem
    given: ContextItem
    similarity: float | None = None
    redacted: dict[str, int] = attrs.field(factory=dict)

    @property
    def merged(self) -> bool:
        """Whether the item was a near-duplicate, merged into ``item`` instead of stored."""
        return self.item.id != self.given.id

    @property
    def merged_into(self) -> str | None:
        """The id of the item it was merged into (``None``: it was stored)."""
        return self.item.id if self.merged else None


@attrs.frozen
class MergePlan:
    """How one add is written: what is stored, what is merged into, and each item's outcome.

    ``insert``: the new items to store (vectors filled in, those that absorbed duplicates of
    their own batch already boosted). ``held``: stored items merged into, as they will be
    written. ``merged``: one ``{"id", "into", "similarity"}`` per duplicate, for the journal.
    ``restored``: held items the merge brings back from the archive. ``outcomes``: per item
    given, in order.
    """

    insert: list[ContextItem]
    held: list[ContextItem]
    merged: list[dict[str, Any]]
    restored: list[str]
    outcomes: list[AddOutcome]


def boosted(item: ContextItem, duplicates: Sequence[ContextItem], now: datetime) -> ContextItem:
    """``item`` with ``duplicates`` merged into it (seed 001 section 12).

    Each duplicate adds :data:`MERGE_BOOST` importance (capped at 1) and one access, and its
    origin joins ``merged_from``. A merged item is in use again: it leaves the archive.
    """
    count = item.access_count
    for _ in duplicates:
        count = bump_count(count)
    return attrs.evolve(
        item,
        importance=min(1.0, item.importance + MERGE_BOOST * len(duplicates)),
        access_count=count,
        last_accessed_at=now,
        merged_from=(*item.merged_from, *(Origin.of(dup) for dup in duplicates)),
        archived_at=None,
        archived_reason=None,
    )


def plan_merges(
    store: TierStore, batch: Sequence[ContextItem], policy: MergePolicy, now: datetime
) -> MergePlan:
    """Decide which items of ``batch`` (ids qualified, ready to store) merge, and into what.

    Reads only: one fingerprint lookup per 500 items and one vector search per item that may
    merge, all through ``store``'s scoped reads (the archive included, history not).
    """
    items = _with_vectors(store, list(batch), policy)
    mergeable = [i for i, item in enumerate(items) if _may_merge(item, policy)]
    if not mergeable:
        return MergePlan(items, [], [], [], [AddOutcome(item, item) for item in items])
    targets: dict[int, tuple[ContextItem, float]] = {}
    exact = _held_by_fingerprint(store, [items[i] for i in mergeable])
    searched: list[int] = []
    for i in mergeable:
        held = exact.get((items[i].kind, items[i].fingerprint))
        if held is not None:
            targets[i] = (held, 1.0)
        else:
            searched.append(i)
    targets.update(_nearest_held_many(store, items, searched, policy))
    # A held item an open conflict names was contradicted since it was written: saying it
    # again is news (the newer side of that conflict now), not a repeat.
    disputed = contested(store, [held for held, _ in targets.values()])
    targets = {i: t for i, t in targets.items() if t[0].id not in disputed}
    within = _within_batch(items, mergeable, policy)
    return _assemble(items, targets, within, now)


def find_duplicate(
    store: TierStore, item: ContextItem, policy: MergePolicy | None
) -> tuple[ContextItem, ContextItem | None, float | None]:
    """``item`` as ``store`` would store it, and what it holds that ``item`` duplicates.

    ``(item with its vector, held item or None, similarity)``. The same content (fingerprint)
    is a duplicate whatever ``policy`` says; with a policy, so is a near-duplicate. A held
    item an open conflict names is none (see :func:`plan_merges`). This is how promotion
    avoids storing twice what the target already holds.
    """
    filled = item
    match = _held_by_fingerprint(store, [item]).get((item.kind, item.fingerprint))
    found = None if match is None else (match, 1.0)
    if found is None and policy is not None and _may_merge(item, policy):
        (filled,) = _with_vectors(store, [item], policy)
        found = _nearest_held(store, filled, policy)
    if found is None or contested(store, [found[0]]):
        return filled, None, None
    return filled, found[0], found[1]


def _may_merge(item: ContextItem, policy: MergePolicy) -> bool:
    return item.key is None and not item.pinned and item.kind not in policy.ignore_kinds


def _may_absorb(held: ContextItem, newcomer: ContextItem) -> bool:
    """Whether ``newcomer`` may merge into ``held`` (its likeness aside)."""
    if held.key is not None or held.superseded or held.kind != newcomer.kind:
        return False
    if held.fingerprint == newcomer.fingerprint:
        return True
    if _values(held.text) != _values(newcomer.text):
        return False
    if _CHANGE.search(newcomer.text) and not _CHANGE.search(held.text):
        return False
    return contradicts(held.text, newcomer.text) is None


def _values(text: str) -> set[str]:
    """The words of ``text`` that name a value: numbers, and capitalized words inside a sentence.

    An embedding rates "deployed on Wednesday mornings" and "deployed on Thursday mornings"
    at 0.97 and "Python 3.11" and "Python 3.12" at 0.94: the sentence is the same, the value
    is not. Names, days, places and versions are what such updates change, and a repeat
    keeps them.
    """
    values = set(_NUMBER.findall(text))
    end = None  # where the previous word ended (None: no word yet)
    for match in _WORD.finditer(text):
        word = match.group()
        starts_sentence = end is None or _SENTENCE_END.search(text[end : match.start()])
        if word[0].isupper() and not starts_sentence and word != "I":
            values.add(word.casefold())
        end = match.end()
    return values


def _with_vectors(
    store: TierStore, items: list[ContextItem], policy: MergePolicy
) -> list[ContextItem]:
    """``items`` with the vectors the backend would give them, made now, in one call.

    The backend stores a vector that comes with an item as it is, so embedding here costs
    nothing more: the write reuses it.
    """
    embedder = store.backend.embedder
    missing = [
        i
        for i, item in enumerate(items)
        if item.embedding is None and item.text.strip() and _may_merge(item, policy)
    ]
    if embedder is None or not missing:
        return items
    vectors = embedder.embed([embedding_text(items[i]) for i in missing])
    filled = list(items)
    for i, vector in zip(missing, vectors, strict=True):
        filled[i] = attrs.evolve(items[i], embedding=vector)
    return filled


def _held_by_fingerprint(
    store: TierStore, items: Sequence[ContextItem]
) -> dict[tuple[str, str], ContextItem]:
    """The held item of each ``(kind, fingerprint)`` among ``items``: the oldest that may absorb."""
    wanted = sorted({item.fingerprint for item in items})
    found: dict[tuple[str, str], ContextItem] = {}
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        for held in store.query({"fingerprint": {"$in": chunk}}, limit=None, view=View.CURRENT):
            slot = (held.kind, held.fingerprint)
            first = found.get(slot)
            if held.key is None and (first is None or _older(held, first)):
                found[slot] = held
    return found


def _older(a: ContextItem, b: ContextItem) -> bool:
    return (a.timestamp, a.id) < (b.timestamp, b.id)


def _nearest_held(
    store: TierStore, item: ContextItem, policy: MergePolicy
) -> tuple[ContextItem, float] | None:
    """The nearest held item of ``item``'s kind it may merge into, at the threshold or above."""
    return _nearest_held_many(store, [item], [0], policy).get(0)


def _nearest_held_many(
    store: TierStore, items: Sequence[ContextItem], wanted: Sequence[int], policy: MergePolicy
) -> dict[int, tuple[ContextItem, float]]:
    """For ``items[i]`` (``i`` in ``wanted``): the nearest held item it may merge into.

    One search per kind, of all the kind's items at once: a batch costs the store's index
    about what one item does.
    """
    by_kind: dict[str, list[int]] = {}
    for i in wanted:
        item = items[i]
        if item.embedding is not None and item.text.strip():
            by_kind.setdefault(item.kind, []).append(i)
    found: dict[int, tuple[ContextItem, float]] = {}
    for kind, group in by_kind.items():
        vectors = [items[i].embedding for i in group]
        answers = store.search_many(
            [v for v in vectors if v is not None],
            policy.neighbours,
            {"kind": kind},
            view=View.CURRENT,
        )
        for i, hits in zip(group, answers, strict=True):
            for hit in hits:
                if hit.score < policy.threshold:
                    break
                if _may_absorb(hit.item, items[i]):
                    found[i] = (hit.item, min(1.0, hit.score))
                    break
    return found


def _within_batch(
    items: list[ContextItem], mergeable: list[int], policy: MergePolicy
) -> dict[int, tuple[int, float]]:
    """For items of the batch that repeat an earlier one: ``{index: (earlier index, similarity)}``.

    The same text always counts; otherwise vectors are compared, a block of rows at a time.
    The earlier item may be any of the batch's but a keyed one.
    """
    found: dict[int, tuple[int, float]] = {}
    first_of: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        key = (item.kind, item.fingerprint)
        if i in mergeable and key in first_of and items[first_of[key]].key is None:
            found[i] = (first_of[key], 1.0)
        first_of.setdefault(key, i)
    by_kind: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        if item.embedding is not None and item.text.strip() and item.key is None:
            by_kind.setdefault(item.kind, []).append(i)
    wanted = set(mergeable) - set(found)
    for rows in by_kind.values():
        if wanted.intersection(rows):
            found.update(_alike(items, rows, wanted, policy.threshold))
    return found


def _alike(
    items: list[ContextItem], rows: list[int], wanted: set[int], threshold: float
) -> dict[int, tuple[int, float]]:
    """Among ``items[rows]`` (one kind, with vectors): each wanted item's nearest earlier one."""
    found: dict[int, tuple[int, float]] = {}
    vectors = [items[i].embedding for i in rows]
    matrix = normalize_rows(np.vstack([v for v in vectors if v is not None]))
    for start in range(0, len(rows), _BLOCK):
        block = matrix[start : start + _BLOCK] @ matrix.T
        for offset, scores in enumerate(block):
            at = start + offset
            if rows[at] not in wanted:
                continue
            earlier = np.flatnonzero(scores[:at] >= threshold)
            for j in sorted(earlier, key=lambda c: (-scores[c], c)):
                if _may_absorb(items[rows[j]], items[rows[at]]):
                    found[rows[at]] = (rows[j], min(1.0, float(scores[j])))
                    break
    return found


def _assemble(
    items: list[ContextItem],
    held_targets: dict[int, tuple[ContextItem, float]],
    batch_targets: dict[int, tuple[int, float]],
    now: datetime,
) -> MergePlan:
    """The plan: each duplicate to its final target (a held item, or the batch's first)."""
    into: dict[int, tuple[str, float]] = {}  # index -> (target id, similarity)
    held: dict[str, ContextItem] = {}
    for i in range(len(items)):
        stored = held_targets.get(i)
        earlier = batch_targets.get(i)
        if earlier is not None and (stored is None or earlier[1] > stored[1]):
            j, score = earlier
            into[i] = (into[j][0] if j in into else items[j].id, score)
        elif stored is not None:
            target, score = stored
            held.setdefault(target.id, target)
            into[i] = (target.id, score)
    # An id a held item already lists as merged into it is that same add again (a queue's
    # replay after a crash, a client's retry): it changes nothing a second time.
    repeats = {
        i
        for i, (target_id, _) in into.items()
        if target_id in held and items[i].id in {o.id for o in held[target_id].merged_from}
    }
    duplicates: dict[str, list[ContextItem]] = {}
    for i, (target_id, _) in into.items():
        if i not in repeats:
            duplicates.setdefault(target_id, []).append(items[i])
    insert = [
        boosted(item, duplicates[item.id], now) if item.id in duplicates else item
        for i, item in enumerate(items)
        if i not in into
    ]
    changed = [
        boosted(item, duplicates[item_id], now)
        for item_id, item in held.items()
        if item_id in duplicates
    ]
    final = {item.id: item for item in (*held.values(), *insert, *changed)}
    outcomes = [
        AddOutcome(final[into[i][0]], item, into[i][1])
        if i in into
        else AddOutcome(final[item.id], item)
        for i, item in enumerate(items)
    ]
    merged = [
        {"id": items[i].id, "into": target_id, "similarity": round(score, 4)}
        for i, (target_id, score) in sorted(into.items())
        if i not in repeats
    ]
    restored = [item.id for item in held.values() if item.archived and item.id in duplicates]
    return MergePlan(insert, changed, merged, restored, outcomes)


def merged_ids(items: Iterable[ContextItem]) -> list[str]:
    """The ids of every duplicate merged into ``items`` (what forgetting them erases too)."""
    return [origin.id for item in items for origin in item.merged_from]
