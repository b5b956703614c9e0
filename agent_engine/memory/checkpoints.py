"""Where checkpoints are kept: a scope's memory as it was, saved in the backend that holds it.

A checkpoint (seed 001 sections 2 and 14: a session checkpointed for crash recovery, rolled
back to) is one scope's memory at an instant, whole: every item in every state, its
conflicts and its aliases, in the versioned export format of :mod:`agent_engine.memory.export`
(so what restores a snapshot file restores a checkpoint, with the same checks). Every backend
keeps its checkpoints beside its items (a table for SQL, ``ae_checkpoints``; a hash per
namespace for Redis), so a process that crashed finds them, and every process sharing the
memory sees them.

A checkpoint is not memory: no build reads it, and removing items leaves it. Only deleting it
(or its scope's checkpoints) forgets it. What a tier store does with checkpoints (take one, list
them, roll back) is :meth:`agent_engine.tiers.base.TierStore.checkpoint` and its neighbours.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

import attrs

from agent_engine import _validate
from agent_engine.errors import BackendError, ValidationError
from agent_engine.models import Tier, new_id, utcnow

__all__ = [
    "Checkpoint",
    "CheckpointStore",
    "NO_CHECKPOINT_STORE",
    "InMemoryCheckpointStore",
    "check_checkpoint_id",
    "check_save",
    "check_scope",
    "mentions",
    "newest_first",
]


def _label(value: object) -> str:
    return _validate.text("label", value, max_length=_validate.MAX_ID_LENGTH)


def _namespace(value: object) -> str:
    return _validate.identifier("namespace", value)


def _tier(value: object) -> Tier:
    return _validate.member("tier", Tier, value)


def _items(value: object) -> int:
    return _validate.integer("items", value, minimum=0, maximum=_validate.MAX_COUNT)


def _created_at(value: object) -> datetime:
    return _validate.aware("created_at", value)


def _id(value: object) -> str:
    return _validate.identifier("id", value)


@attrs.frozen(kw_only=True)
class Checkpoint:
    """One saved state of a scope: which scope, when, under what label, how many items."""

    namespace: str = attrs.field(converter=_namespace)
    tier: Tier = attrs.field(converter=_tier)
    label: str = attrs.field(default="", converter=_label)
    items: int = attrs.field(default=0, converter=_items)
    created_at: datetime = attrs.field(factory=utcnow, converter=_created_at)
    id: str = attrs.field(factory=new_id, converter=_id)


@runtime_checkable
class CheckpointStore(Protocol):
    """**Protocol:** the checkpoints a backend keeps, each with its saved memory (``data``).

    ``save`` stores a new checkpoint and its data (an export's text); an id saved already
    raises :class:`~agent_engine.errors.ValidationError`. ``get`` returns a checkpoint by id
    or ``None``; ``data`` its saved text, or ``None``. ``of_scope`` lists one scope's
    checkpoints newest first (ties by id, newest first), ``all`` every scope's. ``delete``
    forgets a checkpoint and returns whether there was one. ``drop_holding`` deletes every
    checkpoint whose saved state names any of ``item_ids`` (as a JSON string anywhere in it)
    and returns how many: what an erase calls, since a checkpoint would otherwise keep an
    erased memory's text.
    """

    def save(self, checkpoint: Checkpoint, data: str) -> None:
        """Store a new checkpoint with its data."""
        ...

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""
        ...

    def data(self, checkpoint_id: str) -> str | None:
        """The saved memory of a checkpoint, or ``None``."""
        ...

    def of_scope(self, namespace: str, tier: Tier) -> list[Checkpoint]:
        """One scope's checkpoints, newest first."""
        ...

    def all(self) -> list[Checkpoint]:
        """Every scope's checkpoints, newest first (what a copy of the store takes along)."""
        ...

    def delete(self, checkpoint_id: str) -> bool:
        """Forget a checkpoint; whether there was one."""
        ...

    def drop_holding(self, item_ids: Sequence[str]) -> int:
        """Delete the checkpoints naming any of ``item_ids``; how many."""
        ...


def check_checkpoint_id(checkpoint_id: object) -> str:
    """A checkpoint id as given to ``get``, ``data`` or ``delete``."""
    return _validate.identifier("checkpoint_id", checkpoint_id)


def check_scope(namespace: object, tier: object) -> tuple[str, Tier]:
    """The scope ``of_scope`` lists."""
    return _validate.identifier("namespace", namespace), _validate.member("tier", Tier, tier)


def check_save(checkpoint: object, data: object) -> tuple[Checkpoint, str]:
    """``save``'s arguments, checked."""
    if not isinstance(checkpoint, Checkpoint):
        raise ValidationError(
            f"checkpoint must be a Checkpoint, got {type(checkpoint).__name__}",
            field="checkpoint",
            value=checkpoint,
        )
    return checkpoint, _validate.text("data", data)


def mentions(item_ids: Sequence[str]) -> list[str]:
    """How each id appears in a saved state: as a JSON string (what ``drop_holding`` seeks)."""
    return [json.dumps(item_id, ensure_ascii=False) for item_id in item_ids]


def newest_first(checkpoints: list[Checkpoint]) -> list[Checkpoint]:
    """Newest first, ties by id newest first: the order every store lists them in."""
    return sorted(checkpoints, key=lambda c: (c.created_at, c.id), reverse=True)


class InMemoryCheckpointStore:
    """Implements :class:`CheckpointStore` in the process, for items that live there too."""

    def __init__(self, lock: threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.RLock()
        self._held: dict[str, tuple[Checkpoint, str]] = {}

    def save(self, checkpoint: Checkpoint, data: str) -> None:
        """Store a new checkpoint with its data."""
        checkpoint, data = check_save(checkpoint, data)
        with self._lock:
            if checkpoint.id in self._held:
                raise ValidationError(
                    f"a checkpoint with id {checkpoint.id!r} is saved already",
                    field="id",
                    value=checkpoint.id,
                )
            self._held[checkpoint.id] = (checkpoint, data)

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``."""
        found = self._held.get(check_checkpoint_id(checkpoint_id))
        return None if found is None else found[0]

    def data(self, checkpoint_id: str) -> str | None:
        """The saved memory of a checkpoint, or ``None``."""
        found = self._held.get(check_checkpoint_id(checkpoint_id))
        return None if found is None else found[1]

    def of_scope(self, namespace: str, tier: Tier) -> list[Checkpoint]:
        """One scope's checkpoints, newest first."""
        namespace, tier = check_scope(namespace, tier)
        with self._lock:
            return newest_first(
                [c for c, _ in self._held.values() if (c.namespace, c.tier) == (namespace, tier)]
            )

    def all(self) -> list[Checkpoint]:
        """Every scope's checkpoints, newest first."""
        with self._lock:
            return newest_first([c for c, _ in self._held.values()])

    def delete(self, checkpoint_id: str) -> bool:
        """Forget a checkpoint; whether there was one."""
        with self._lock:
            return self._held.pop(check_checkpoint_id(checkpoint_id), None) is not None

    def drop_holding(self, item_ids: Sequence[str]) -> int:
        """Delete the checkpoints naming any of ``item_ids``; how many."""
        sought = mentions(item_ids)
        with self._lock:
            doomed = [i for i, (_, data) in self._held.items() if any(m in data for m in sought)]
            for checkpoint_id in doomed:
                del self._held[checkpoint_id]
            return len(doomed)


class _NoCheckpointStore:
    """The checkpoints of a backend that keeps none: none to read, and saving one is refused."""

    def save(self, checkpoint: Checkpoint, data: str) -> None:
        """Refused: nothing would keep it."""
        check_save(checkpoint, data)
        raise BackendError("this backend keeps no checkpoints", backend="checkpoints")

    def get(self, checkpoint_id: str) -> Checkpoint | None:
        """None."""
        check_checkpoint_id(checkpoint_id)
        return None

    def data(self, checkpoint_id: str) -> str | None:
        """None."""
        check_checkpoint_id(checkpoint_id)
        return None

    def of_scope(self, namespace: str, tier: Tier) -> list[Checkpoint]:
        """None."""
        check_scope(namespace, tier)
        return []

    def all(self) -> list[Checkpoint]:
        """None."""
        return []

    def delete(self, checkpoint_id: str) -> bool:
        """Nothing to delete."""
        check_checkpoint_id(checkpoint_id)
        return False

    def drop_holding(self, item_ids: Sequence[str]) -> int:  # noqa: ARG002 - the protocol's
        """Nothing holds them."""
        return 0


NO_CHECKPOINT_STORE: CheckpointStore = _NoCheckpointStore()
"""What ``BaseBackend.checkpoints`` gives when a backend set no checkpoint store."""
