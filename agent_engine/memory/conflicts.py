"""Where recorded conflicts are kept: beside the items they name, in the same backend.

A conflict says that two items of one scope likely disagree (seed 001 sections 4.4 and 11):
which two, at which of their versions, since when, and, once someone decided, which one was
kept. Every backend exposes a ``conflicts`` store the way it exposes its ``audit`` journal,
so the records live exactly as long as the memory they describe and every process sharing
the memory sees them (a table for SQL, ``ae_conflicts``).

A record never outlives its items: a backend removes every conflict naming an item in the
same write that deletes, clears or erases the item (the SQL table's foreign keys cascade), so
erasing an item leaves no record naming it. What is *open* (unresolved, and both items still
as they were when it was found) is the tier store's reading of these records
(:meth:`agent_engine.tiers.base.TierStore.conflicts`); a store only keeps them.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from agent_engine import _validate
from agent_engine.errors import ItemNotFoundError, ValidationError
from agent_engine.models import MAX_ITEM_ID_LENGTH, Tier, new_id, utcnow

__all__ = [
    "Conflict",
    "ConflictStore",
    "ConflictType",
    "InMemoryConflictStore",
    "check_id",
    "check_item_ids",
    "check_record",
    "check_resolve",
    "check_scope_read",
    "newest_first",
]


class ConflictType(enum.StrEnum):
    """What kind of disagreement a conflict records (the seed's three)."""

    CONTRADICTORY = "contradictory"
    """The two say opposite things; what detection on add records."""
    SUPERSEDED = "superseded"
    """One looks like a newer statement of the other."""
    AMBIGUOUS = "ambiguous"
    """They may or may not disagree; someone should look."""


def _item_a(value: object) -> str:
    return _validate.identifier("item_a", value, max_length=MAX_ITEM_ID_LENGTH)


def _item_b(value: object) -> str:
    return _validate.identifier("item_b", value, max_length=MAX_ITEM_ID_LENGTH)


def _kept(value: object) -> str | None:
    return (
        None
        if value is None
        else _validate.identifier("kept", value, max_length=MAX_ITEM_ID_LENGTH)
    )


def _namespace(value: object) -> str:
    return _validate.identifier("namespace", value)


def _version_a(value: object) -> int:
    return _validate.integer("version_a", value, minimum=1, maximum=_validate.MAX_COUNT)


def _version_b(value: object) -> int:
    return _validate.integer("version_b", value, minimum=1, maximum=_validate.MAX_COUNT)


def _reason(value: object) -> str:
    return _validate.text("reason", value, max_length=_validate.MAX_ID_LENGTH)


def _detected_at(value: object) -> datetime:
    return _validate.aware("detected_at", value)


def _resolved_at(value: object) -> datetime | None:
    return None if value is None else _validate.aware("resolved_at", value)


def _id(value: object) -> str:
    return _validate.identifier("id", value)


def _type(value: object) -> ConflictType:
    return _validate.member("type", ConflictType, value)


def _tier(value: object) -> Tier:
    return _validate.member("tier", Tier, value)


@attrs.frozen(kw_only=True)
class Conflict:
    """Two items of one scope that likely disagree, and what became of it.

    ``item_a`` was stored first; ``item_b`` is the item whose write found the conflict.
    ``version_a``/``version_b`` are the versions the conflict was found between: a newer
    version of either is another statement, checked again when it is written. ``reason``
    says why (for detection, the cue of
    :func:`~agent_engine.retrieval.contradiction.contradicts`: ``always/never``,
    ``negation``, ...; never the items' words). ``resolved_at`` and ``kept`` are set together,
    when someone decided which item holds.
    """

    item_a: str = attrs.field(converter=_item_a)
    item_b: str = attrs.field(converter=_item_b)
    tier: Tier = attrs.field(converter=_tier)
    namespace: str = attrs.field(converter=_namespace)
    version_a: int = attrs.field(default=1, converter=_version_a)
    version_b: int = attrs.field(default=1, converter=_version_b)
    type: ConflictType = attrs.field(default=ConflictType.CONTRADICTORY, converter=_type)
    reason: str = attrs.field(default="", converter=_reason)
    detected_at: datetime = attrs.field(factory=utcnow, converter=_detected_at)
    resolved_at: datetime | None = attrs.field(default=None, converter=_resolved_at)
    kept: str | None = attrs.field(default=None, converter=_kept)
    id: str = attrs.field(factory=new_id, converter=_id)

    def __attrs_post_init__(self) -> None:
        if self.item_a == self.item_b:
            raise ValidationError(
                f"a conflict names two items, got {self.item_a!r} twice",
                field="item_b",
                value=self.item_b,
            )
        if (self.resolved_at is None) != (self.kept is None):
            raise ValidationError(
                "resolved_at and kept are set together (when the conflict is resolved)",
                field="kept",
                value=self.kept,
            )
        if self.kept is not None and self.kept not in (self.item_a, self.item_b):
            raise ValidationError(
                f"kept must name one of the conflict's items, got {self.kept!r}",
                field="kept",
                value=self.kept,
            )

    @property
    def item_ids(self) -> tuple[str, str]:
        """Both items, the one stored first first."""
        return (self.item_a, self.item_b)

    @property
    def resolved(self) -> bool:
        """Whether someone decided which item holds."""
        return self.resolved_at is not None

    def other(self, item_id: str) -> str:
        """The item the conflict sets against ``item_id`` (one of its two)."""
        if item_id == self.item_a:
            return self.item_b
        if item_id == self.item_b:
            return self.item_a
        raise ValidationError(
            f"{item_id!r} is not one of the conflict's items", field="item_id", value=item_id
        )

    def version_of(self, item_id: str) -> int:
        """The version of ``item_id`` (one of its two) the conflict was found at."""
        self.other(item_id)
        return self.version_a if item_id == self.item_a else self.version_b


@runtime_checkable
class ConflictStore(Protocol):
    """**Protocol:** the conflicts recorded between a backend's items.

    ``record`` stores new conflicts, all or none; one naming an item the backend does not
    hold raises :class:`~agent_engine.errors.ItemNotFoundError` and stores nothing.
    ``get`` returns a conflict by id or ``None``. ``of_scope`` lists one namespace/tier
    scope's conflicts, newest first (ties by id, newest first), the unresolved ones only
    unless ``include_resolved``. ``resolve`` marks an unresolved conflict resolved with the
    item ``kept`` (one of its two) at ``at``, atomically, and returns it as stored; it
    returns ``None`` and changes nothing when the conflict is unknown, already resolved or
    ``kept`` is neither of its items, so two processes can never both resolve one conflict.

    The backend keeps the records in step with its items: deleting, clearing or erasing an
    item removes every conflict naming it in the same write.
    """

    def record(self, conflicts: Sequence[Conflict]) -> None:
        """Store new conflicts, all or none."""
        ...

    def get(self, conflict_id: str) -> Conflict | None:
        """The conflict with this id, or ``None``."""
        ...

    def of_scope(
        self,
        namespace: str,
        tier: Tier,
        *,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[Conflict]:
        """One scope's conflicts, newest first."""
        ...

    def of_items(
        self, item_ids: Iterable[str], *, include_resolved: bool = False
    ) -> list[Conflict]:
        """The conflicts naming any of ``item_ids``, newest first (unresolved unless asked)."""
        ...

    def resolve(self, conflict_id: str, *, kept: str, at: datetime) -> Conflict | None:
        """Mark an unresolved conflict resolved; ``None`` if it was not (see above)."""
        ...


def check_record(conflicts: Iterable[Conflict]) -> list[Conflict]:
    """``conflicts`` as a list of :class:`Conflict` with distinct ids (shared by every store)."""
    batch = list(_validate.sequence("conflicts", conflicts))
    seen: set[str] = set()
    for conflict in batch:
        if not isinstance(conflict, Conflict):
            raise ValidationError(
                f"expected Conflict, got {type(conflict).__name__}",
                field="conflicts",
                value=conflict,
            )
        if conflict.id in seen:
            raise ValidationError(
                f"conflict {conflict.id!r} is twice in one record()", field="id", value=conflict.id
            )
        seen.add(conflict.id)
    return batch


def check_scope_read(namespace: str, tier: Tier, limit: int | None) -> Tier:
    """Validate the arguments of ``of_scope`` (shared by every store); return the tier."""
    _validate.text("namespace", namespace)
    if limit is not None:
        _validate.integer("limit", limit)
    return _tier(tier)


def check_item_ids(item_ids: Iterable[str]) -> list[str]:
    """``item_ids`` (a collection of ids), each checked, duplicates dropped, in order."""
    return list(
        dict.fromkeys(
            _validate.text("item_ids", item_id)
            for item_id in _validate.sequence("item_ids", item_ids)
        )
    )


def check_id(conflict_id: str) -> str:
    """``conflict_id`` if it is storable text (shared by every store's ``get``)."""
    return _validate.text("conflict_id", conflict_id)


def check_resolve(conflict_id: str, kept: str, at: datetime) -> None:
    """Validate the arguments of ``resolve`` (shared by every store)."""
    check_id(conflict_id)
    _validate.text("kept", kept)
    _validate.aware("at", at)


def newest_first(conflicts: Iterable[Conflict]) -> list[Conflict]:
    """``conflicts`` in the order every store lists them: newest first, ties by id."""
    return sorted(conflicts, key=lambda c: (c.detected_at, c.id), reverse=True)


class InMemoryConflictStore:
    """Conflicts in a dict guarded by a lock, with an index from each item to its conflicts.

    ``holds(ids)`` tells which of ``ids`` the backend holds (its items' foreign key);
    :meth:`discard` is how the backend removes the conflicts of items it deletes. ``lock``
    is the backend's own (re-entrant) lock: a record checks the items and stores the conflict
    under it, so a delete cannot come between, and taking one lock in one order cannot
    deadlock with the backend's writes.
    """

    def __init__(
        self,
        holds: Callable[[list[str]], set[str]],
        lock: threading.RLock | None = None,
    ) -> None:
        self._holds = holds
        self._conflicts: dict[str, Conflict] = {}
        self._by_item: dict[str, set[str]] = {}
        self._lock = lock if lock is not None else threading.RLock()

    def record(self, conflicts: Sequence[Conflict]) -> None:
        """Store new conflicts, all or none."""
        batch = check_record(conflicts)
        named = list(dict.fromkeys(i for c in batch for i in c.item_ids))
        with self._lock:
            held = self._holds(named)
            missing = next((i for i in named if i not in held), None)
            if missing is not None:
                raise ItemNotFoundError(missing)
            taken = next((c.id for c in batch if c.id in self._conflicts), None)
            if taken is not None:
                raise ValidationError(
                    f"a conflict with id {taken!r} is already recorded", field="id", value=taken
                )
            for conflict in batch:
                self._conflicts[conflict.id] = conflict
                for item_id in conflict.item_ids:
                    self._by_item.setdefault(item_id, set()).add(conflict.id)

    def get(self, conflict_id: str) -> Conflict | None:
        """The conflict with this id, or ``None``."""
        check_id(conflict_id)
        with self._lock:
            return self._conflicts.get(conflict_id)

    def of_scope(
        self,
        namespace: str,
        tier: Tier,
        *,
        include_resolved: bool = False,
        limit: int | None = None,
    ) -> list[Conflict]:
        """One scope's conflicts, newest first (ties by id, newest first)."""
        wanted = check_scope_read(namespace, tier, limit)
        with self._lock:
            found = [
                c
                for c in self._conflicts.values()
                if c.namespace == namespace
                and c.tier is wanted
                and (include_resolved or not c.resolved)
            ]
        return newest_first(found)[:limit]

    def of_items(
        self, item_ids: Iterable[str], *, include_resolved: bool = False
    ) -> list[Conflict]:
        """The conflicts naming any of ``item_ids``, newest first (unresolved unless asked)."""
        ids = check_item_ids(item_ids)
        with self._lock:
            named = {c for i in ids for c in self._by_item.get(i, ())}
            found = [self._conflicts[c] for c in named]
        return newest_first(c for c in found if include_resolved or not c.resolved)

    def resolve(self, conflict_id: str, *, kept: str, at: datetime) -> Conflict | None:
        """Mark an unresolved conflict resolved with ``kept``; ``None`` if it was not."""
        check_resolve(conflict_id, kept, at)
        with self._lock:
            conflict = self._conflicts.get(conflict_id)
            if conflict is None or conflict.resolved or kept not in conflict.item_ids:
                return None
            resolved = attrs.evolve(conflict, resolved_at=at, kept=kept)
            self._conflicts[conflict_id] = resolved
            return resolved

    def discard(self, item_ids: Iterable[str]) -> int:
        """Remove every conflict naming one of ``item_ids``; return how many went."""
        with self._lock:
            doomed = {c for item_id in item_ids for c in self._by_item.pop(item_id, ())}
            for conflict_id in doomed:
                conflict = self._conflicts.pop(conflict_id)
                for item_id in conflict.item_ids:
                    left = self._by_item.get(item_id)
                    if left is not None:
                        left.discard(conflict_id)
                        if not left:
                            del self._by_item[item_id]
            return len(doomed)
