"""Forking a task's or a session's memory (seed 001 section 14), with its lineage recorded.

An agent that wants to try two approaches forks its task: the fork starts from everything the
task remembers and goes its own way, and neither sees what the other does afterwards. A fork
costs one record, whatever the parent holds: nothing is copied until one side changes an
item the other still sees (:mod:`agent_engine.tiers._forks` says what is copied when). Both
may promote what they learnt; the dedup rules keep what both promote single in the project.

A fork may also start from one of the parent's checkpoints instead of the parent as it is
now. A checkpoint is a saved copy already, so that fork copies its items (as a rollback
would) and reads nothing through.

The child is a new scope: forking into a scope that holds memory, or that is a fork or has
forks already, is refused. Its lineage (:class:`~agent_engine.memory.lineage.Fork`, kept by
the backend) names its parent, when it was forked, from which checkpoint, and whether it
still reads through. Both journals get a ``fork`` event.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, TypeVar

from agent_engine.errors import ValidationError
from agent_engine.memory.export import snapshot_items
from agent_engine.memory.lineage import Fork
from agent_engine.models import AuditAction, ContextItem
from agent_engine.tiers._forks import FORKABLE, renamed
from agent_engine.tiers.checkpoints import saved_state

if TYPE_CHECKING:
    from agent_engine.tiers.base import TierStore

__all__ = ["fork_scope", "lineage_of"]

_S = TypeVar("_S", bound="TierStore")


def fork_scope(parent: TierStore, child: _S, *, checkpoint: str | None = None) -> _S:
    """Start ``child``'s scope from ``parent``'s memory (or from its checkpoint); return it.

    Raises :class:`~agent_engine.errors.ValidationError` (nothing recorded) when the scope
    cannot be forked or ``child`` is not a new scope of the same kind on the same backend,
    and :class:`~agent_engine.errors.CheckpointNotFoundError` for a checkpoint that is not
    the parent's.
    """
    _check(parent, child)
    now = parent.clock()
    items: list[ContextItem] = []
    if checkpoint is not None:
        data = saved_state(parent, checkpoint)
        saved = snapshot_items(parent.backend, io.StringIO(data))
        items = renamed(saved, parent.namespace, child.namespace)
    fork = Fork(
        namespace=child.namespace,
        tier=child.tier,
        parent=parent.namespace,
        forked_at=now,
        checkpoint=checkpoint or "",
        detached=checkpoint is not None,
    )
    tier = parent.tier
    with (
        parent.audit.journal(
            AuditAction.FORK,
            tier,
            parent.namespace,
            (),
            {"child": child.namespace, "checkpoint": fork.checkpoint},
        ),
        child.audit.journal(
            AuditAction.FORK,
            tier,
            child.namespace,
            tuple(item.id for item in items),
            {"parent": parent.namespace, "checkpoint": fork.checkpoint},
        ),
    ):
        if items:
            parent.backend.add_many(items)
        try:
            parent.backend.lineage.record(fork)
        except BaseException:
            if items:  # another process took the scope first: what was copied goes
                parent.backend.delete_many([item.id for item in items])
            raise
    return child


def lineage_of(store: TierStore) -> list[Fork]:
    """The fork records from ``store``'s scope up: its own, its parent's, and so on.

    Empty for a scope that is no fork. Detached forks are listed too: lineage is history.
    """
    records: list[Fork] = []
    record = store.backend.lineage.get(store.namespace, store.tier)
    while record is not None and all(r.namespace != record.namespace for r in records):
        records.append(record)
        record = store.backend.lineage.get(record.parent, store.tier)
    return records


def _check(parent: TierStore, child: TierStore) -> None:
    if parent.tier not in FORKABLE:
        raise ValidationError(
            f"only task and session memory can be forked, not {parent.tier.value} memory",
            field="tier",
            value=parent.tier.value,
        )
    if type(child) is not type(parent) or child.backend is not parent.backend:
        raise ValidationError(
            "a fork is a store of the same kind on the same backend as its parent",
            field="child",
            value=child,
        )
    if child.namespace == parent.namespace:
        raise ValidationError(
            f"scope {parent.namespace!r} cannot be forked into itself",
            field="namespace",
            value=child.namespace,
        )
    lineage = parent.backend.lineage
    if (
        parent.backend.count(child.scope)
        or lineage.get(child.namespace, child.tier) is not None
        or lineage.children(child.namespace, child.tier)
    ):
        raise ValidationError(
            f"{child.tier.value} scope {child.namespace!r} has memory or lineage already: "
            "a fork starts a new scope",
            field="namespace",
            value=child.namespace,
        )
