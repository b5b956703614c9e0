"""Where forks are kept: each forked scope's parent, and what of its ancestors it no longer sees.

A fork (seed 001 section 14) starts a scope from another's memory without copying it
(:mod:`agent_engine.tiers.forks`): the child reads through to its parent, and only what either
side changes is copied. What that rests on is kept here, by every backend beside its items
(tables for SQL, ``ae_forks`` and ``ae_fork_hidden``; hashes and sets for Redis), so every
process sharing the memory reads a fork alike:

* a :class:`Fork` record per child scope: its parent scope (of the same tier), when it was
  forked, the checkpoint it was forked from if any, and whether it is *detached* (holds its
  whole memory itself and reads nothing through; a rolled-back fork, or one whose parent
  ended). The record is the lineage: it stays when the fork detaches or ends (only an
  import that stopped takes back the records it wrote, :meth:`LineageStore.drop`);
* each attached fork's *hidden* ids: items of its ancestors it must not see (it changed or
  deleted them, or they were written after it forked).

Lineage is not memory: clearing a scope's items leaves it, and no build reads it directly.
Erasing items is the exception: an erased item no longer exists, so no fork needs it hidden,
and its id must leave no trace (``BaseBackend.erase`` calls :meth:`LineageStore.unhide`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from agent_engine import _validate
from agent_engine.errors import BackendError, ValidationError
from agent_engine.models import MAX_ITEM_ID_LENGTH, Tier

__all__ = [
    "NO_LINEAGE_STORE",
    "Fork",
    "InMemoryLineageStore",
    "LineageStore",
    "check_hidden",
    "check_record",
    "check_scope",
    "check_unhidden",
    "fork_taken",
    "reads_through",
]


def _namespace(value: object) -> str:
    return _validate.identifier("namespace", value)


def _parent(value: object) -> str:
    return _validate.identifier("parent", value)


def _tier(value: object) -> Tier:
    return _validate.member("tier", Tier, value)


def _forked_at(value: object) -> datetime:
    return _validate.aware("forked_at", value)


def _checkpoint(value: object) -> str:
    return _validate.text("checkpoint", value, max_length=_validate.MAX_ID_LENGTH)


def _detached(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(
            f"detached must be a bool, got {type(value).__name__}", field="detached", value=value
        )
    return value


@attrs.frozen(kw_only=True)
class Fork:
    """One forked scope: its namespace and tier, its parent's namespace, when, and from what.

    ``checkpoint`` names the checkpoint it was forked from (``""``: the parent as it was).
    ``detached``: the fork holds its whole memory itself and reads nothing through its parent.
    """

    namespace: str = attrs.field(converter=_namespace)
    tier: Tier = attrs.field(converter=_tier)
    parent: str = attrs.field(converter=_parent)
    forked_at: datetime = attrs.field(converter=_forked_at)
    checkpoint: str = attrs.field(default="", converter=_checkpoint)
    detached: bool = attrs.field(default=False, converter=_detached)

    def __attrs_post_init__(self) -> None:
        if self.parent == self.namespace:
            raise ValidationError(
                f"scope {self.namespace!r} cannot be its own parent",
                field="parent",
                value=self.parent,
            )


@runtime_checkable
class LineageStore(Protocol):
    """**Protocol:** the forks of a backend's scopes and what each no longer sees (the module).

    ``record`` stores a new fork; a scope recorded already raises
    :class:`~agent_engine.errors.ValidationError` and nothing changes. ``get`` returns a
    scope's fork record or ``None``; ``children`` the attached forks whose parent is the
    scope, by namespace; ``all`` every record, by tier and namespace (what copying a store
    reads). ``detach`` marks a fork detached and forgets its hidden ids; whether it was
    attached. ``hide`` adds ids to an attached fork's hidden ones (unknown or detached:
    nothing; each an item id, up to :data:`~agent_engine.models.MAX_ITEM_ID_LENGTH`
    characters); ``hidden`` returns them. ``unhide`` forgets ids wherever a fork hides them
    and returns how many entries went (what an erase calls: an erased item no longer exists,
    so no fork needs it hidden). ``drop`` forgets a scope's fork record and its hidden ids
    in one write; whether there was one (what an import that stopped takes back, as it
    recorded forks a file carried: lineage is otherwise never deleted). The scope's own
    forks keep their records, naming a parent that is no longer recorded as a fork.
    """

    def record(self, fork: Fork) -> None:
        """Store a new fork record."""
        ...

    def get(self, namespace: str, tier: Tier) -> Fork | None:
        """The scope's fork record, or ``None``."""
        ...

    def children(self, namespace: str, tier: Tier) -> list[Fork]:
        """The attached forks of the scope, by namespace."""
        ...

    def all(self) -> list[Fork]:
        """Every fork record, by tier and namespace."""
        ...

    def detach(self, namespace: str, tier: Tier) -> bool:
        """Mark the fork detached, forgetting its hidden ids; whether it was attached."""
        ...

    def hide(self, namespace: str, tier: Tier, item_ids: Sequence[str]) -> None:
        """Add ``item_ids`` to the attached fork's hidden ids."""
        ...

    def hidden(self, namespace: str, tier: Tier) -> frozenset[str]:
        """The fork's hidden ids (none if it is detached or not a fork)."""
        ...

    def unhide(self, item_ids: Sequence[str]) -> int:
        """Forget ``item_ids`` wherever a fork hides them; how many entries went."""
        ...

    def drop(self, namespace: str, tier: Tier) -> bool:
        """Forget the scope's fork record and its hidden ids; whether there was one."""
        ...


def reads_through(lineage: LineageStore, namespace: str, tier: Tier) -> bool:
    """Whether the scope is an attached fork: the backend holds only what it changed.

    What every backend-level write or read of a whole scope (export, import, restore) must
    refuse, since only the scope's store knows what it reads (:mod:`agent_engine.tiers.forks`).
    """
    fork = lineage.get(namespace, tier)
    return fork is not None and not fork.detached


def check_scope(namespace: object, tier: object) -> tuple[str, Tier]:
    """The scope a read, a detach or a drop names."""
    return _namespace(namespace), _tier(tier)


def check_record(fork: object) -> Fork:
    """``record``'s argument, checked."""
    if not isinstance(fork, Fork):
        raise ValidationError(
            f"fork must be a Fork, got {type(fork).__name__}", field="fork", value=fork
        )
    return fork


def check_hidden(item_ids: object) -> list[str]:
    """``hide``'s ids, checked as item ids are (each once, in the order given)."""
    ids = _validate.sequence("item_ids", item_ids)
    return list(
        dict.fromkeys(
            _validate.identifier("item_ids", i, max_length=MAX_ITEM_ID_LENGTH) for i in ids
        )
    )


def check_unhidden(item_ids: object) -> list[str]:
    """``unhide``'s ids, checked (each once, in the order given).

    Any storable text, as ``erase`` takes: an id no fork can hide is hidden nowhere.
    """
    ids = _validate.sequence("item_ids", item_ids)
    return list(dict.fromkeys(_validate.text("item_ids", i) for i in ids))


def fork_taken(fork: Fork) -> ValidationError:
    """The error of recording a scope that has a record already."""
    return ValidationError(
        f"{fork.tier.value} scope {fork.namespace!r} is recorded as a fork already",
        field="namespace",
        value=fork.namespace,
    )


class InMemoryLineageStore:
    """Implements :class:`LineageStore` in the process, for items that live there too."""

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._forks: dict[tuple[str, Tier], Fork] = {}
        self._hidden: dict[tuple[str, Tier], set[str]] = {}

    def record(self, fork: Fork) -> None:
        """Store a new fork record."""
        fork = check_record(fork)
        with self._lock:
            if (fork.namespace, fork.tier) in self._forks:
                raise fork_taken(fork)
            self._forks[fork.namespace, fork.tier] = fork

    def get(self, namespace: str, tier: Tier) -> Fork | None:
        """The scope's fork record, or ``None``."""
        return self._forks.get(check_scope(namespace, tier))

    def children(self, namespace: str, tier: Tier) -> list[Fork]:
        """The attached forks of the scope, by namespace."""
        namespace, tier = check_scope(namespace, tier)
        with self._lock:
            found = [
                f
                for f in self._forks.values()
                if f.parent == namespace and f.tier is tier and not f.detached
            ]
        return sorted(found, key=lambda f: f.namespace)

    def all(self) -> list[Fork]:
        """Every fork record, by tier and namespace."""
        with self._lock:
            return sorted(self._forks.values(), key=lambda f: (f.tier.value, f.namespace))

    def detach(self, namespace: str, tier: Tier) -> bool:
        """Mark the fork detached, forgetting its hidden ids; whether it was attached."""
        key = check_scope(namespace, tier)
        with self._lock:
            fork = self._forks.get(key)
            if fork is None or fork.detached:
                return False
            self._forks[key] = attrs.evolve(fork, detached=True)
            self._hidden.pop(key, None)
            return True

    def hide(self, namespace: str, tier: Tier, item_ids: Sequence[str]) -> None:
        """Add ``item_ids`` to the attached fork's hidden ids."""
        key = check_scope(namespace, tier)
        ids = check_hidden(item_ids)
        with self._lock:
            fork = self._forks.get(key)
            if fork is not None and not fork.detached:
                self._hidden.setdefault(key, set()).update(ids)

    def hidden(self, namespace: str, tier: Tier) -> frozenset[str]:
        """The fork's hidden ids (none if it is detached or not a fork)."""
        key = check_scope(namespace, tier)
        with self._lock:
            return frozenset(self._hidden.get(key, ()))

    def unhide(self, item_ids: Sequence[str]) -> int:
        """Forget ``item_ids`` wherever a fork hides them; how many entries went."""
        ids = set(check_unhidden(item_ids))
        removed = 0
        with self._lock:
            for hidden in self._hidden.values():
                gone = hidden & ids
                hidden.difference_update(gone)
                removed += len(gone)
        return removed

    def drop(self, namespace: str, tier: Tier) -> bool:
        """Forget the scope's fork record and its hidden ids; whether there was one."""
        key = check_scope(namespace, tier)
        with self._lock:
            self._hidden.pop(key, None)
            return self._forks.pop(key, None) is not None


class _NoLineageStore:
    """The lineage of a backend that keeps none: no forks, and recording one is refused."""

    def record(self, fork: Fork) -> None:
        """Refused: nothing would keep it."""
        check_record(fork)
        raise BackendError("this backend keeps no forks", backend="lineage")

    def get(self, namespace: str, tier: Tier) -> Fork | None:
        """None."""
        check_scope(namespace, tier)
        return None

    def children(self, namespace: str, tier: Tier) -> list[Fork]:
        """None."""
        check_scope(namespace, tier)
        return []

    def all(self) -> list[Fork]:
        """None."""
        return []

    def detach(self, namespace: str, tier: Tier) -> bool:
        """Nothing to detach."""
        check_scope(namespace, tier)
        return False

    def hide(self, namespace: str, tier: Tier, item_ids: Sequence[str]) -> None:
        """Nothing to hide from."""
        check_scope(namespace, tier)
        check_hidden(item_ids)

    def hidden(self, namespace: str, tier: Tier) -> frozenset[str]:
        """None."""
        check_scope(namespace, tier)
        return frozenset()

    def unhide(self, item_ids: Sequence[str]) -> int:
        """Nothing is hidden."""
        check_unhidden(item_ids)
        return 0

    def drop(self, namespace: str, tier: Tier) -> bool:
        """Nothing to drop."""
        check_scope(namespace, tier)
        return False


NO_LINEAGE_STORE: LineageStore = _NoLineageStore()
"""What ``BaseBackend.lineage`` gives when a backend set no lineage store."""
